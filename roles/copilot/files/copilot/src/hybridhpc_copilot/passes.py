"""Passes: observe (the caches and a fresh Slurm read), decide (``core``, pure), act (the executor), repeat.

A pass repeats its rounds until nothing changes (a reservation needs two:
lower the GRES, then see Slurm took it). A *full* pass lists every kind
again first and looks at every GenericNode: the periodic resync that catches
lost watch events. An *event* pass looks only at what changed since the last
pass (:class:`Changes`), so its cost follows the changes, not the number of
nodes; what changes while it runs joins its next round, which looks again
only at what the round before left unsettled.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import cast

from . import core, logs, names, placeholder
from .backoff import Backoff
from .compaction import compact_status
from .executor import Error, Executor
from .informers import Informer
from .kube import GENERICNODES, NODES, PODS, Gone, Kube, KubeError, PermanentError
from .ledger import JsonObject
from .metrics import LedgerRow, Metrics
from .model import GenericNode, KubeNode, Pod
from .poller import SlurmPoller
from .slurm import Slurm, SlurmError
from .units import cpu_millis, memory_bytes

log = logs.get("loop")  # the working loop's logger, as before it had modules of its own: log filters read its name


def _decided(observed: core.Observed) -> Iterator[list[core.Action]]:
    """Each GenericNode's actions as soon as it is decided (statuses compacted), then those tied to none.

    A decided GenericNode leaves the observed snapshot at once: its actions
    may be carried out while the rest are decided, and each write replaces
    its GenericNode in the cache; the object it replaced can then go at once
    (a first start writes every ledger).
    """
    snapshot = cast(dict[str, GenericNode], observed.generic_nodes)  # observe() built it for this round alone
    for name, actions in core.decide(observed, functools.partial(compact_status, cached=snapshot)):
        if name is not None:
            snapshot.pop(name, None)
        yield actions




@dataclass
class PassResult:
    rounds: int = 0
    actions: list[core.Action] = field(default_factory=list)
    errors: list[Error] = field(default_factory=list)
    conflicts: int = 0

    @property
    def ok(self) -> bool:
        return not self.errors


class Changes:
    """What changed since the last pass: noted by the watch and poll threads, taken by the next pass.

    ``everything`` (at the start, after a relist or a failed pass): the next pass
    looks at every GenericNode. Otherwise the GenericNodes (by name) whose object,
    Kubernetes Node (same name) or admitted pods changed, and the Slurm nodes
    the poller saw change.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.everything = True
        self.generic_nodes: set[str] = set()
        self.slurm_nodes: set[str] = set()
        self._pod_users: dict[str, set[str]] = {}  # "namespace/name" -> GenericNodes whose decisions read the pod

    def note(self, generic_nodes: Collection[str] = (), slurm_nodes: Collection[str] = (), everything: bool = False) -> None:
        with self._lock:
            self.everything = self.everything or everything
            self.generic_nodes.update(generic_nodes)
            self.slurm_nodes.update(slurm_nodes)

    def note_pod(self, key: str) -> bool:
        """Note the GenericNodes that read this pod; False when none does (the event is not worth a pass)."""
        with self._lock:
            users = self._pod_users.get(key)
            if users:
                self.generic_nodes.update(users)
            return bool(users)

    def take(self) -> tuple[bool, set[str], set[str]]:
        with self._lock:
            taken = (self.everything, self.generic_nodes, self.slurm_nodes)
            self.everything, self.generic_nodes, self.slurm_nodes = False, set(), set()
        return taken

    def take_some(self) -> tuple[set[str], set[str]] | None:
        """The GenericNodes and Slurm nodes that changed, unless ``everything`` must be looked at (then nothing
        is taken: that is the next pass's)."""
        with self._lock:
            if self.everything:
                return None
            taken = (self.generic_nodes, self.slurm_nodes)
            self.generic_nodes, self.slurm_nodes = set(), set()
        return taken

    def set_pods_read(self, reads: dict[str, set[str]], everything: bool = False) -> None:
        """``reads``: GenericNode -> "namespace/name" of the pods its decisions read (replacing what it read)."""
        with self._lock:
            users: dict[str, set[str]] = {} if everything else self._pod_users
            for readers in users.values():
                readers.difference_update(reads)
            for generic_node, pods in reads.items():
                for pod in pods:
                    users.setdefault(pod, set()).add(generic_node)
            self._pod_users = {pod: readers for pod, readers in users.items() if readers}


@dataclass
class Scope:
    """What an event pass looks at: GenericNodes by name (those gone included), and the Slurm nodes it reads."""

    generic_nodes: set[str]
    slurm_nodes: set[str]


# A GET of one Slurm node costs about what a hundred nodes' share of GET /nodes does
# (slurmrestd's per-request work against its per-node work): an event pass reads
# its nodes one by one only when they are fewer than a hundredth of the shared ones.
SINGLE_READS_PER_NODE = 100


class Copilot:
    """One copilot: caches, a Slurm poller, the executor, and passes over them.

    An event pass hands ``core.reconcile`` only the GenericNodes in its
    :class:`Scope`, every GenericNode sharing a Slurm node with one of them,
    their Slurm nodes and placeholder jobs: each node's decisions read only its
    own objects. The decisions over all nodes (configured Slurm nodes no
    GenericNode shares, placeholder jobs of GenericNodes that share nothing)
    see the Slurm nodes a GenericNode stopped sharing and the jobs whose
    GenericNode shares nothing, as in a full pass.
    """

    def __init__(self, kube: Kube, slurm: Slurm, settings: core.Settings, cluster_name: str,
                 cluster_namespace: str | None = None, metrics: Metrics | None = None, dry_run: bool = False,
                 clock: Callable[[], float] = time.time, max_rounds: int = 6, on_change: Callable[[str], None] | None = None,
                 backoff: Backoff | None = None):
        selector = "%s=%s" % (names.LABEL_CLUSTER_NAME, cluster_name)
        if cluster_namespace:
            selector += ",%s=%s" % (names.LABEL_CLUSTER_NAMESPACE, cluster_namespace)
        self.kube, self.slurm, self.settings, self.metrics = kube, slurm, settings, metrics
        self.dry_run, self.clock, self.max_rounds = dry_run, clock, max_rounds
        self.wake = on_change
        self.changes = Changes()
        self._alias_of: dict[str, str] = {}  # GenericNode of type Slurm -> the Slurm node it shares
        self._sharers: dict[str, tuple[str, ...]] = {}  # Slurm node -> the GenericNodes sharing it (mostly one: a tuple, not a set)
        self._reserving: set[str] = set()  # GenericNodes with Reserved admissions: every pass looks at them
        # Each informer keeps what the decisions read of its kind (informers.keep_generic_node, ...).
        self.generic_nodes: Informer[GenericNode] = Informer(kube, GENERICNODES, selector, self._changed)
        self.pods: Informer[Pod] = Informer(kube, PODS, None, self._changed)
        self.nodes: Informer[KubeNode] = Informer(kube, NODES, None, self._changed)
        self.informers = (self.generic_nodes, self.pods, self.nodes)
        self.poller = SlurmPoller(slurm, on_change=self._slurm_changed)
        self.executor = Executor(kube, slurm, self.generic_nodes, metrics, dry_run, self.nodes, backoff)
        if metrics is not None:
            metrics.ledger.source = self.ledger_rows  # the per-node gauges, read from the cache at each scrape

    def _changed(self, kind: str, key: str | None) -> None:
        if key is None:
            self.changes.note(everything=True)
        elif kind == PODS:
            if not self.changes.note_pod(key):
                return
        else:  # a GenericNode, or a Kubernetes Node: it has its GenericNode's name
            self.changes.note(generic_nodes=(key,))
        if self.wake is not None:
            self.wake(kind)

    def _slurm_changed(self, slurm_nodes: set[str]) -> None:
        self.changes.note(slurm_nodes=slurm_nodes)
        if self.wake is not None:
            self.wake("slurm")

    def relist(self) -> None:
        for informer in self.informers:
            informer.relist()

    def pump(self, drop: Callable[[str, JsonObject], bool] | None = None) -> None:
        """Apply what the watches bring, in this thread (tests: the API server double in memory ends a watch
        once it sent what happened); 410 -> list again."""
        for informer in self.informers:
            try:
                informer.watch(0, drop)
            except Gone:
                informer.relist()

    def observe(self, slurm_nodes: dict[str, core.SlurmNode] | None, slurm_jobs: tuple[placeholder.PlaceholderJob, ...] | None = (),
                scope: Scope | None = None) -> core.Observed:
        """What ``core.reconcile`` decides from: every GenericNode, or those of ``scope``."""
        kube_nodes: dict[str, KubeNode]
        if scope is None:
            generic_nodes = self.generic_nodes.snapshot()
            kube_nodes = self.nodes.snapshot()
        else:
            generic_nodes = {name: node for name in sorted(scope.generic_nodes)
                             if (node := self.generic_nodes.get(name)) is not None}
            kube_nodes = {name: kube for name in scope.generic_nodes if (kube := self.nodes.get(name)) is not None}
        reads = {name: core.pods_needed(node) for name, node in generic_nodes.items()}
        if scope is not None:
            reads.update((name, set()) for name in scope.generic_nodes - set(generic_nodes))
        self.changes.set_pods_read({name: {"%s/%s" % key for key in keys} for name, keys in reads.items()},
                                   everything=scope is None)
        pods = self._pods(set().union(*reads.values()))
        return core.Observed(generic_nodes, pods, kube_nodes, slurm_nodes, self.clock(), self.settings, slurm_jobs,
                             dict(self.executor.refusals))

    def _pods(self, needed: set[tuple[str, str]]) -> dict[tuple[str, str], Pod]:
        """The pods of ``needed`` that exist, by (namespace, name)."""
        pods = {}
        for namespace, name in sorted(needed):
            pod = self.pods.get("%s/%s" % (namespace, name))
            if pod is None:  # a cache miss is not "gone" until the API server says so
                obj = self.kube.get_object(PODS, name, namespace)
                if obj is not None:
                    pod = self.pods.put(obj)
            if pod is not None:
                pods[(namespace, name)] = pod
        return pods

    def sync(self, full: bool = False) -> PassResult:
        """One pass; ``full`` lists everything first. Raises PermanentError for what retrying cannot fix."""
        started = time.monotonic()
        result = PassResult()
        scope: Scope | None = None
        taken = None
        try:
            if full or not all(i.synced for i in self.informers):
                self.relist()
            taken = self.changes.take()
            scope = self._scope_of(full, *taken)
            # A scope without a Slurm node holds only Kubernetes Nodes and GenericNodes that share none: nothing to decide.
            if scope is None or scope.slurm_nodes:
                self._rounds(scope, result)
        except PermanentError:
            self._count_error("PermanentError")
            raise
        except (KubeError, SlurmError) as err:
            result.errors.append(("kubernetes", str(err), True))
            self._count_error(type(err).__name__)
        finally:
            if result.errors and taken is not None:  # look again at what this pass could not settle
                self._note_again(scope)
            self._note_reservations(scope)
            self._count_pass(full, result, time.monotonic() - started)
        return result

    def _scope_of(self, full: bool, everything: bool, changed_generic_nodes: set[str], changed_slurm_nodes: set[str]) -> Scope | None:
        """What this pass looks at: everything (``None``), or the scope of what changed."""
        if full or everything:
            self._index_all()
            return None
        return self._scope(changed_generic_nodes, changed_slurm_nodes)

    def _rounds(self, scope: Scope | None, result: PassResult) -> None:
        """Decide and act until nothing changes (a reservation needs two rounds), at most ``max_rounds``.

        An event pass's next round looks at what it must look at again, and at
        what changed meanwhile (:meth:`_next_round`); ``scope`` grows to hold
        everything the pass looked at.
        """
        looking = scope
        for _ in range(self.max_rounds):
            result.rounds += 1
            again = self._round(looking, result)
            if again is None or result.rounds == self.max_rounds:  # what changed meanwhile is the next pass's
                break
            if scope is not None:
                looking = self._next_round(scope, again)

    def _next_round(self, scope: Scope, again: set[str | None]) -> Scope:
        """What an event pass's next round looks at: the GenericNodes of ``again`` (all of ``scope`` for an action
        tied to none), with those that changed since the pass took its changes; ``scope`` takes them in.

        In a burst, admissions keep coming while a pass runs. Left to the next
        pass, each batch waited for the pass before to end, then took two
        rounds of its own (reserve, then grant), each beginning with a read of
        every Slurm node. Taken in here, the round that grants one batch
        reserves the next on the same fresh read, and what a round settled is
        not decided again.
        """
        if None in again:
            looking = Scope(set(scope.generic_nodes), set(scope.slurm_nodes))
        else:
            looking = self._scope(cast(set[str], again), set())
        taken = self.changes.take_some()
        if taken is not None and (taken[0] or taken[1]):
            more = self._scope(*taken)
            looking.generic_nodes |= more.generic_nodes
            looking.slurm_nodes |= more.slurm_nodes
        scope.generic_nodes |= looking.generic_nodes
        scope.slurm_nodes |= looking.slurm_nodes
        return looking

    def _round(self, scope: Scope | None, result: PassResult) -> set[str | None] | None:
        """Observe, decide, act once; the GenericNodes another round may find more to do for (None: settled)."""
        slurm_nodes = self._read_slurm_or_none(scope, result)
        wanted = None if scope is None else self._owner_in(scope)
        slurm_jobs = self._placeholder_jobs(result, wanted) if slurm_nodes is not None else None
        if wanted is not None and slurm_jobs:
            slurm_jobs = tuple(job for job in slurm_jobs if job.owner is not None and wanted(job.owner[0]))
        # Each GenericNode's actions go to the executor as soon as it is decided, and it
        # leaves the observed snapshot then (_decided). The statuses to write are compacted
        # as the cache holds them, node by node as they are decided: a written one is then
        # shared by the action and the cache (a first start writes every ledger).
        observed = self.observe(slurm_nodes, slurm_jobs, scope)
        outcome = self.executor.run_groups(_decided(observed))
        del observed
        result.actions.extend(outcome.applied)
        result.errors.extend(outcome.errors)
        result.conflicts += outcome.conflicts
        settled = self.dry_run or slurm_nodes is None or slurm_jobs is None or bool(outcome.errors) or not outcome.unsettled
        return None if settled else outcome.unsettled

    def _read_slurm_or_none(self, scope: Scope | None, result: PassResult) -> dict[str, core.SlurmNode] | None:
        """Fresh Slurm nodes, or ``None`` (the error noted) when Slurm cannot be read."""
        try:
            return self._read_slurm(scope)
        except SlurmError as err:
            result.errors.append(("slurm", str(err), err.temporary))
            if self.metrics is not None:
                self.metrics.errors.labels(type(err).__name__).inc()
            log.warning("cannot read Slurm: deciding nothing that depends on it", extra={"fields": {"error": str(err)}})
            return None

    def _note_again(self, scope: Scope | None) -> None:
        if scope is None:
            self.changes.note(everything=True)
        else:
            self.changes.note(scope.generic_nodes, scope.slurm_nodes)

    def _count_pass(self, full: bool, result: PassResult, seconds: float) -> None:
        if self.metrics is not None:
            self.metrics.reconciles.labels("full" if full else "event").inc()
            self.metrics.latency.observe(seconds)
            if not result.errors:
                self.metrics.last_success.set(time.time())

    # -- what an event pass looks at ---------------------------------------------------------
    def _index(self, name: str, node: GenericNode | None) -> str | None:
        """Note the Slurm node a GenericNode shares now; returns the one it shared before if that changed."""
        alias = node.alias if node is not None and node.shares else None
        before = self._alias_of.get(name)
        if before == alias:
            return None
        if before is not None:
            del self._alias_of[name]
            others = tuple(n for n in self._sharers[before] if n != name)
            if others:
                self._sharers[before] = others
            else:
                del self._sharers[before]
        if alias is not None:
            self._alias_of[name] = alias
            self._sharers[alias] = self._sharers.get(alias, ()) + (name,)
        return before

    def _index_all(self) -> None:
        self._alias_of, self._sharers = {}, {}
        for name, obj in self.generic_nodes.snapshot().items():
            self._index(name, obj)

    def _scope(self, changed_generic_nodes: set[str], changed_slurm_nodes: set[str]) -> Scope:
        generic_nodes = set(changed_generic_nodes) | self._reserving
        left: set[str] = set()  # Slurm nodes a GenericNode stopped sharing
        for name in generic_nodes:
            before = self._index(name, self.generic_nodes.get(name))
            if before is not None:
                left.add(before)
        touched = set(changed_slurm_nodes) | left
        for slurm_node in touched:
            generic_nodes.update(self._sharers.get(slurm_node, ()))
        # The first GenericNode by name owns a Slurm node several share: decide for all of them together.
        for name in list(generic_nodes):
            if name in self._alias_of:
                generic_nodes.update(self._sharers[self._alias_of[name]])
        slurm_nodes = {self._alias_of[name] for name in generic_nodes if name in self._alias_of}
        slurm_nodes |= {slurm_node for slurm_node in touched if slurm_node not in self._sharers}
        return Scope(generic_nodes, slurm_nodes)

    def _read_slurm(self, scope: Scope | None) -> dict[str, core.SlurmNode]:
        """Fresh Slurm nodes: all of them, or the scope's (only theirs reach the decisions)."""
        if scope is None:
            # This pass decides on what the poll shows: a wake-up for it would only repeat the pass.
            return self.poller.poll(notify=False)
        if len(scope.slurm_nodes) * SINGLE_READS_PER_NODE <= len(self._alias_of):
            return self.poller.poll_nodes(scope.slurm_nodes)
        every = self.poller.poll(handled=scope.slurm_nodes)  # changes elsewhere wait for the next pass
        return {name: every[name] for name in scope.slurm_nodes if name in every}

    def _owner_in(self, scope: Scope) -> Callable[[str], bool]:
        """Whether a placeholder job's GenericNode is the scope's business: one of its GenericNodes, or one that shares nothing now."""
        return lambda generic_node: generic_node in scope.generic_nodes or generic_node not in self._alias_of

    def _note_reservations(self, scope: Scope | None) -> None:
        """Remember which GenericNodes wait for Slurm: a grant or a timeout may come on any pass."""
        nodes: dict[str, GenericNode | None]
        if scope is None:
            self._reserving = set()
            nodes = dict(self.generic_nodes.snapshot())
        else:
            nodes = {name: self.generic_nodes.get(name) for name in scope.generic_nodes}
        for name, node in nodes.items():
            if node is not None and any(entry.get("state") == names.RESERVED for entry in node.ledger.values()):
                self._reserving.add(name)
            else:
                self._reserving.discard(name)

    def _placeholder_jobs(self, result: PassResult, wanted: Callable[[str], bool] | None) -> tuple[placeholder.PlaceholderJob, ...] | None:
        """The placeholder jobs (those of ``wanted`` GenericNodes read afresh), when some node uses them
        (``None``: Slurm could not list them)."""
        if not self.settings.uses_placeholders:
            return ()
        try:
            return tuple(self.slurm.placeholder_jobs(wanted))
        except SlurmError as err:
            result.errors.append(("slurm", str(err), err.temporary))
            self._count_error(type(err).__name__)
            log.warning("cannot list the placeholder jobs: deciding nothing that depends on them",
                        extra={"fields": {"error": str(err)}})
            return None

    def _count_error(self, kind: str) -> None:
        if self.metrics is not None:
            self.metrics.errors.labels(kind).inc()

    def ledger_rows(self) -> Iterator[LedgerRow]:
        """Per GenericNode sharing a Slurm node, from the cache: what /metrics shows of its ledger (computed per scrape).

        Rows of (name, {(allocation type, resource): cores or bytes}, {admission state: count}, overcommitted).
        """
        for name, node in self.generic_nodes.snapshot().items():
            if node.shares:
                yield ledger_row(name, node)


def ledger_row(name: str, node: GenericNode) -> LedgerRow:
    """What /metrics shows of one GenericNode's ledger (:meth:`Copilot.ledger_rows`), read from its status."""
    status = node.status
    allocations: dict[tuple[str, str], float] = {}
    for item in status.get(names.STATUS_ALLOCATED) or []:
        if not isinstance(item, dict) or not isinstance(item.get("allocated"), dict):
            continue
        allocated = item["allocated"]
        try:
            allocations[(str(item.get("type")), "cpu")] = cpu_millis(allocated.get("cpu", 0)) / 1000
            allocations[(str(item.get("type")), "memory")] = memory_bytes(allocated.get("memory", 0))
        except ValueError:
            continue
    states: dict[str, int] = {}
    for entry in node.ledger.values():
        states[str(entry.get("state"))] = states.get(str(entry.get("state")), 0) + 1
    over = any(c.get("type") == names.CONDITION_OVERCOMMITTED and c.get("status") == "True"
               for c in status.get(names.STATUS_CONDITIONS) or [] if isinstance(c, dict))
    return name, allocations, states, over
