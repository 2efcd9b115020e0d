"""The working loop: caches fed by list + watch, passes of ``core.reconcile``, and their execution.

* :class:`Informer` keeps one kind's objects, from a list and then a watch;
  a 410 Gone means list again. Our own writes go into it at once.
* :class:`Executor` carries actions out, in order, per GenericNode: a 409 on
  the ledger (someone wrote in between) re-reads that GenericNode and stops
  its remaining actions for this round; the next round decides again.
* :class:`Copilot` runs passes: observe (caches + a fresh Slurm poll), decide
  (pure), act, and repeat until nothing changes (a reservation needs two
  rounds: lower the GRES, then see Slurm took it). A *full* pass lists every
  kind again first: the periodic resync that catches lost watch events.
* :class:`Runner` is the daemon: threads that watch and poll and wake the
  loop, a periodic full resync, backoff on temporary errors, systemd
  notifications and a watchdog ping every turn of the working loop.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from . import core, logs, names
from .kube import GENERICNODES, NODES, PODS, Conflict, Gone, KubeError, PermanentError, TemporaryError, object_key
from .poller import SlurmPoller
from .slurm import SlurmError, SlurmRefused
from .units import cpu_millis, memory_bytes

log = logs.get("loop")


def _rv_newer(new: dict, old: dict | None) -> bool:
    """Whether ``new`` is not older than ``old`` (resourceVersions compared as numbers when both are)."""
    if old is None:
        return True
    a = (new.get("metadata") or {}).get("resourceVersion")
    b = (old.get("metadata") or {}).get("resourceVersion")
    if isinstance(a, str) and isinstance(b, str) and a.isdigit() and b.isdigit():
        return int(a) >= int(b)
    return True


class Informer:
    """One kind's objects, kept current by list + watch."""

    def __init__(self, kube, kind: str, label_selector: str | None = None, on_change: Callable | None = None):
        self.kube, self.kind, self.label_selector, self.on_change = kube, kind, label_selector, on_change
        self.store: dict[str, dict] = {}
        self.resource_version: str | None = None
        self._lock = threading.Lock()

    @property
    def synced(self) -> bool:
        return self.resource_version is not None

    def relist(self) -> None:
        items, rv = self.kube.list_objects(self.kind, self.label_selector)
        with self._lock:
            self.store = {object_key(obj): obj for obj in items}
            self.resource_version = rv
        self._changed()

    def apply(self, event: str, obj: dict) -> None:
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        with self._lock:
            if event in ("ADDED", "MODIFIED"):
                key = object_key(obj)
                if _rv_newer(obj, self.store.get(key)):
                    self.store[key] = obj
            elif event == "DELETED":
                self.store.pop(object_key(obj), None)
            if rv:
                self.resource_version = rv
        if event != "BOOKMARK":
            self._changed(object_key(obj))

    def put(self, obj: dict) -> None:
        """An object we wrote or read ourselves (newer than, or as new as, what the watch said)."""
        with self._lock:
            key = object_key(obj)
            if _rv_newer(obj, self.store.get(key)):
                self.store[key] = obj

    def forget(self, key: str) -> None:
        with self._lock:
            self.store.pop(key, None)

    def get(self, key: str) -> dict | None:
        with self._lock:
            return self.store.get(key)

    def snapshot(self) -> dict[str, dict]:
        with self._lock:
            return dict(self.store)

    def watch(self, timeout_seconds: int = 300, drop: Callable | None = None) -> int:
        """Apply watch events from the last resourceVersion; returns how many arrived.

        Raises :class:`Gone` (the caller lists again) and the other KubeErrors.
        ``drop(event, obj)`` (tests) loses events on purpose.
        """
        count = 0
        for event, obj in self.kube.watch_objects(self.kind, self.resource_version or "0", timeout_seconds,
                                                  self.label_selector):
            count += 1
            if drop is not None and drop(event, obj):
                continue
            self.apply(event, obj)
        return count

    def _changed(self, key: str | None = None) -> None:
        if self.on_change is not None:
            self.on_change(self.kind, key)


# -- carrying actions out --------------------------------------------------------------


@dataclass
class Outcome:
    """What one round of actions did."""

    wrote: int = 0
    conflicts: int = 0
    errors: list = field(default_factory=list)  # (kind, message, temporary)
    applied: list = field(default_factory=list)  # actions carried out (or, in dry-run, planned)


class Executor:
    def __init__(self, kube, slurm, informer: Informer, metrics=None, dry_run: bool = False, nodes: Informer | None = None):
        self.kube, self.slurm, self.informer, self.metrics, self.dry_run = kube, slurm, informer, metrics, dry_run
        self.nodes = nodes

    def run(self, actions: list) -> Outcome:
        outcome = Outcome()
        blocked: set = set()
        latest: dict[str, dict] = {}  # GenericNode -> the object after our last write to it
        pending: dict[str, list] = {}  # decisions waiting for their node's ledger write
        for action in actions:
            node = action.node
            if isinstance(action, core.Decision):
                pending.setdefault(node, []).append(action)
                continue
            if node is not None and node in blocked:
                continue
            try:
                self._apply(action, latest)
            except Conflict as err:
                outcome.conflicts += 1
                if self.metrics is not None:
                    self.metrics.conflicts.inc()
                log.info("ledger changed under us: re-reading", extra={"fields": {"node": node, "error": str(err)}})
                blocked.add(node)
                self._reread(node, outcome)
                continue
            except (KubeError, SlurmError) as err:
                temporary = isinstance(err, (TemporaryError, Gone)) or getattr(err, "temporary", False)
                outcome.errors.append((action.kind, str(err), temporary))
                if self.metrics is not None:
                    self.metrics.errors.labels(type(err).__name__).inc()
                log.warning("action failed", extra={"fields": {
                    "node": node, "action": action.kind, "error": str(err), "temporary": temporary}})
                if node is not None:
                    blocked.add(node)
                continue
            outcome.applied.append(action)
            if self.metrics is not None:
                self.metrics.actions.labels(action.kind).inc()
            if not self.dry_run:
                outcome.wrote += 1
            if isinstance(action, core.WriteStatus):
                for decision in pending.pop(node, []):
                    self._record(decision, outcome)
        return outcome

    def _record(self, decision, outcome: Outcome) -> None:
        outcome.applied.append(decision)
        if self.metrics is not None:
            self.metrics.actions.labels(decision.kind).inc()
        log.info(decision.kind, extra={"fields": {
            "node": decision.node, "uid": decision.uid, "reason": decision.reason, "dry_run": self.dry_run}})

    def _describe(self, action) -> dict:
        fields = {"node": action.node, "action": action.kind, "dry_run": self.dry_run}
        for name in ("slurm_node", "gres", "reason", "kube_node", "key", "value", "resource_version"):
            if hasattr(action, name):
                fields[name] = getattr(action, name)
        return fields

    def _apply(self, action, latest: dict) -> None:
        log.info("would " + action.kind if self.dry_run else action.kind, extra={"fields": self._describe(action)})
        if self.dry_run:
            return
        if isinstance(action, core.WriteStatus):
            body = self._object(action.node, latest, action.resource_version)
            body["status"] = action.status
            self._wrote(self.kube.replace_status(body), latest)
        elif isinstance(action, (core.AddFinalizer, core.RemoveFinalizer)):
            body = self._object(action.node, latest, action.resource_version)
            finalizers = [f for f in body["metadata"].get("finalizers") or [] if f != names.FINALIZER]
            if isinstance(action, core.AddFinalizer):
                finalizers.append(names.FINALIZER)
            body["metadata"]["finalizers"] = finalizers
            body.pop("status", None)
            self._wrote(self.kube.replace_object(body), latest)
        elif isinstance(action, core.SetGres):
            try:
                self.slurm.set_node_gres(action.slurm_node, action.gres)
            except SlurmRefused as err:
                if not action.fallback:
                    raise
                log.warning("Slurm refused the count, setting the fallback", extra={"fields": {
                    "slurm_node": action.slurm_node, "gres": action.gres, "fallback": action.fallback, "error": str(err)}})
                self.slurm.set_node_gres(action.slurm_node, action.fallback)
        elif isinstance(action, core.DrainNode):
            self.slurm.drain_node(action.slurm_node, action.reason)
        elif isinstance(action, core.ResumeNode):
            self.slurm.resume_node(action.slurm_node)
        elif isinstance(action, core.AnnotateNode):
            result = self.kube.annotate_node(action.kube_node, action.key, action.value)
            if self.nodes is not None and isinstance(result, dict):
                self.nodes.put(result)
        else:
            raise TypeError("no executor for %r" % (action,))

    def _object(self, name: str, latest: dict, resource_version: str) -> dict:
        source = latest.get(name) or self.informer.get(name)
        if source is None:
            raise Conflict("GenericNode %s is no longer cached" % name, 409)
        body = {k: v for k, v in source.items() if k != "status"}
        body["metadata"] = dict(source.get("metadata") or {})
        if name not in latest:
            body["metadata"]["resourceVersion"] = resource_version
        body.setdefault("apiVersion", names.API_VERSION)
        body.setdefault("kind", names.KIND)
        return body

    def _wrote(self, result: dict, latest: dict) -> None:
        name = (result.get("metadata") or {}).get("name")
        latest[name] = result
        if (result.get("metadata") or {}).get("deletionTimestamp") and not result["metadata"].get("finalizers"):
            self.informer.forget(name)
        else:
            self.informer.put(result)

    def _reread(self, name: str, outcome: Outcome) -> None:
        try:
            fresh = self.kube.get_object(GENERICNODES, name)
        except KubeError as err:
            outcome.errors.append(("reread", str(err), True))
            return
        if fresh is None:
            self.informer.forget(name)
        else:
            self.informer.put(fresh)


# -- passes ---------------------------------------------------------------------------------


def pod_view(obj: dict) -> core.Pod:
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    return core.Pod(namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
                    uid=str(meta.get("uid") or ""), phase=str(status.get("phase") or "Pending"),
                    terminating=bool(meta.get("deletionTimestamp")))


def node_view(obj: dict) -> core.KubeNode:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return core.KubeNode(name=str(meta.get("name") or ""), unschedulable=bool(spec.get("unschedulable")),
                         annotations=dict(meta.get("annotations") or {}))


@dataclass
class PassResult:
    rounds: int = 0
    actions: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    conflicts: int = 0

    @property
    def ok(self) -> bool:
        return not self.errors


class Copilot:
    """One copilot: caches, a Slurm poller, the executor, and passes over them."""

    def __init__(self, kube, slurm, settings: core.Settings, cluster_name: str, cluster_namespace: str | None = None,
                 metrics=None, dry_run: bool = False, clock: Callable = time.time, max_rounds: int = 6,
                 on_change: Callable | None = None):
        selector = "%s=%s" % (names.LABEL_CLUSTER_NAME, cluster_name)
        if cluster_namespace:
            selector += ",%s=%s" % (names.LABEL_CLUSTER_NAMESPACE, cluster_namespace)
        self.kube, self.slurm, self.settings, self.metrics = kube, slurm, settings, metrics
        self.dry_run, self.clock, self.max_rounds = dry_run, clock, max_rounds
        self.wake = on_change
        self.needed_pods: set = set()  # pods whose events are worth a pass
        self.generic_nodes = Informer(kube, GENERICNODES, selector, self._changed)
        self.pods = Informer(kube, PODS, None, self._changed)
        self.nodes = Informer(kube, NODES, None, self._changed)
        self.informers = (self.generic_nodes, self.pods, self.nodes)
        self.poller = SlurmPoller(slurm, on_change=lambda changed: self._changed("slurm", None))
        self.executor = Executor(kube, slurm, self.generic_nodes, metrics, dry_run, self.nodes)

    def _changed(self, kind: str, key: str | None) -> None:
        if self.wake is None or (kind == PODS and key is not None and key not in self.needed_pods):
            return
        self.wake(kind)

    def relist(self) -> None:
        for informer in self.informers:
            informer.relist()

    def pump(self, drop: Callable | None = None) -> None:
        """Apply what the watches have (the fake's watches do not block); 410 -> list again."""
        for informer in self.informers:
            try:
                informer.watch(0, drop)
            except Gone:
                informer.relist()

    def observe(self, slurm_nodes) -> core.Observed:
        generic_nodes = self.generic_nodes.snapshot()
        pods = {}
        needed = core.pods_needed(generic_nodes)
        self.needed_pods = {"%s/%s" % key for key in needed}
        for namespace, name in sorted(needed):
            obj = self.pods.get("%s/%s" % (namespace, name))
            if obj is None:  # a cache miss is not "gone" until the API server says so
                obj = self.kube.get_object(PODS, name, namespace)
                if obj is not None:
                    self.pods.put(obj)
            if obj is not None:
                pods[(namespace, name)] = pod_view(obj)
        kube_nodes = {key: node_view(obj) for key, obj in self.nodes.snapshot().items()}
        return core.Observed(generic_nodes, pods, kube_nodes, slurm_nodes, self.clock(), self.settings)

    def sync(self, full: bool = False) -> PassResult:
        """One pass; ``full`` lists everything first. Raises PermanentError for what retrying cannot fix."""
        started = time.monotonic()
        result = PassResult()
        try:
            if full or not all(i.synced for i in self.informers):
                self.relist()
            for _ in range(self.max_rounds):
                result.rounds += 1
                try:
                    slurm_nodes = self.poller.poll()
                except SlurmError as err:
                    slurm_nodes = None
                    result.errors.append(("slurm", str(err), err.temporary))
                    if self.metrics is not None:
                        self.metrics.errors.labels(type(err).__name__).inc()
                    log.warning("cannot read Slurm: deciding nothing that depends on it",
                                extra={"fields": {"error": str(err)}})
                observed = self.observe(slurm_nodes)
                outcome = self.executor.run(core.reconcile(observed))
                result.actions.extend(outcome.applied)
                result.errors.extend(outcome.errors)
                result.conflicts += outcome.conflicts
                if self.dry_run or slurm_nodes is None or outcome.errors or not (outcome.wrote or outcome.conflicts):
                    break
        except PermanentError:
            self._count_error("PermanentError")
            raise
        except (KubeError, SlurmError) as err:
            result.errors.append(("kubernetes", str(err), True))
            self._count_error(type(err).__name__)
        finally:
            if self.metrics is not None:
                self.metrics.reconciles.labels("full" if full else "event").inc()
                self.metrics.latency.observe(time.monotonic() - started)
                self._ledger_metrics()
                if not result.errors:
                    self.metrics.last_success.set(time.time())
        return result

    def _count_error(self, kind: str) -> None:
        if self.metrics is not None:
            self.metrics.errors.labels(kind).inc()

    def _ledger_metrics(self) -> None:
        seen = set()
        for name, obj in self.generic_nodes.snapshot().items():
            if not core.is_slurm_node(obj):
                continue
            seen.add(name)
            status = obj.get("status") or {}
            allocations = {}
            for item in status.get(names.STATUS_ALLOCATED) or []:
                if not isinstance(item, dict) or not isinstance(item.get("allocated"), dict):
                    continue
                allocated = item["allocated"]
                try:
                    allocations[(item.get("type"), "cpu")] = cpu_millis(allocated.get("cpu", 0)) / 1000
                    allocations[(item.get("type"), "memory")] = memory_bytes(allocated.get("memory", 0))
                except ValueError:
                    continue
            states: dict = {}
            for entry in core.ledger_of(obj).values():
                states[entry.get("state")] = states.get(entry.get("state"), 0) + 1
            over = any(c.get("type") == names.CONDITION_OVERCOMMITTED and c.get("status") == "True"
                       for c in status.get(names.STATUS_CONDITIONS) or [] if isinstance(c, dict))
            self.metrics.set_ledger(name, allocations, states, over)
        self.metrics.forget_nodes(seen)


# -- the daemon -----------------------------------------------------------------------------


class Runner:
    """Threads that watch and poll, and the working loop they wake."""

    def __init__(self, copilot: Copilot, notifier, resync_interval: float = 60.0, poll_interval: float = 5.0,
                 watch_timeout: int = 300, debounce: float = 0.2, max_backoff: float = 60.0):
        self.copilot, self.notifier = copilot, notifier
        self.resync_interval, self.poll_interval, self.watch_timeout = resync_interval, poll_interval, watch_timeout
        self.debounce, self.max_backoff = debounce, max_backoff
        self.stop = threading.Event()
        self.wake = threading.Event()
        self.threads: list[threading.Thread] = []

    def request_stop(self, *_args) -> None:
        self.stop.set()
        self.wake.set()

    def changed(self, _what=None) -> None:
        self.wake.set()

    def _watch_loop(self, informer: Informer) -> None:
        failures = 0
        while not self.stop.is_set():
            try:
                if not informer.synced:
                    informer.relist()
                informer.watch(self.watch_timeout)
                failures = 0
            except Gone:
                log.info("watch expired (410): listing again", extra={"fields": {"kind": informer.kind}})
                try:
                    informer.relist()
                except KubeError as err:
                    failures += 1
                    log.warning("list failed", extra={"fields": {"kind": informer.kind, "error": str(err)}})
            except KubeError as err:
                failures += 1
                self.copilot._count_error(type(err).__name__)
                log.warning("watch failed", extra={"fields": {"kind": informer.kind, "error": str(err)}})
            except Exception as err:  # noqa: BLE001 - a watch thread must not die silently
                failures += 1
                log.error("watch crashed", extra={"fields": {"kind": informer.kind, "error": repr(err)}})
            if failures:
                self.stop.wait(min(self.max_backoff, 2 ** min(failures, 6)))

    def _start(self, name: str, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self.threads.append(thread)

    def first_sync(self) -> bool:
        """Sync fully until it works (temporary errors back off); False when stopped first."""
        failures = 0
        while not self.stop.is_set():
            self.notifier.watchdog()
            result = self.copilot.sync(full=True)  # PermanentError propagates: bad config, missing CRD, RBAC
            if all(i.synced for i in self.copilot.informers) and not any(
                    kind == "kubernetes" for kind, _m, _t in result.errors):
                return True
            failures += 1
            delay = min(self.max_backoff, 2 ** min(failures, 6))
            log.warning("first sync incomplete: retrying", extra={"fields": {"errors": result.errors, "in": delay}})
            self.stop.wait(delay)
        return False

    def run(self) -> int:
        if not self.first_sync():
            return 0
        if self.copilot.metrics is not None:
            self.copilot.metrics.ready.set(1)
        self.notifier.ready("synced %d GenericNodes" % len(self.copilot.generic_nodes.store))
        log.info("ready", extra={"fields": {"generic_nodes": len(self.copilot.generic_nodes.store)}})
        for informer in self.copilot.informers:
            self._start("watch-" + informer.kind, self._watch_loop, informer)
        self._start("poll-slurm", self.copilot.poller.run, self.poll_interval, self.stop,
                    lambda err: log.warning("Slurm poll failed", extra={"fields": {"error": str(err)}}))
        next_full = time.monotonic() + self.resync_interval
        failures = 0
        tick = min(self.resync_interval, (self.notifier.watchdog_seconds or 60) / 2)
        while not self.stop.is_set():
            self.notifier.watchdog()
            woken = self.wake.wait(max(0.0, min(tick, next_full - time.monotonic())))
            if self.stop.is_set():
                break
            full = time.monotonic() >= next_full
            if not (woken or full):
                continue
            if woken and not full:
                self.stop.wait(self.debounce)  # let a burst of events settle
            self.wake.clear()
            try:
                result = self.copilot.sync(full=full)
            except PermanentError as err:
                log.error("permanent error: fix it and the next resync retries", extra={"fields": {"error": str(err)}})
                self.notifier.status("error: %s" % err)
                result = PassResult(errors=[("permanent", str(err), False)])
            if full:
                next_full = time.monotonic() + self.resync_interval
            if result.errors:
                failures += 1
                next_full = min(next_full, time.monotonic() + min(self.max_backoff, 2 ** min(failures, 6)))
            else:
                failures = 0
        self.notifier.stopping()
        log.info("stopping")
        return 0
