"""The working loop: caches fed by list + watch, passes of ``core.reconcile``, and their execution.

* :class:`Informer` keeps one kind's objects, from a list and then a watch;
  a 410 Gone means list again. Our own writes go into it at once.
* :class:`Executor` carries actions out, in order, per GenericNode: a 409 on
  the ledger (someone wrote in between) re-reads that GenericNode and stops
  its remaining actions for this round; the next round decides again. A
  Slurm action that failed waits out a backoff before it goes again, and
  Slurm's refusal of a placeholder job is kept for the decisions.
* :class:`Copilot` runs passes: observe (caches + a fresh Slurm read), decide
  (pure), act, and repeat until nothing changes (a reservation needs two
  rounds: lower the GRES, then see Slurm took it). A *full* pass lists every
  kind again first and looks at every GenericNode: the periodic resync that
  catches lost watch events. An *event* pass looks only at what changed since
  the last pass (:class:`Changes`), so its cost follows the changes, not the
  number of nodes; what changes while it runs joins its next round, which
  looks again only at what the round before left unsettled.
* :class:`Runner` is the daemon: threads that watch and poll and wake the
  loop, a periodic full resync, backoff on temporary errors, systemd
  notifications and a watchdog ping every turn of the working loop.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import logging
import queue
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from . import core, logs, names, placeholder
from .backoff import Backoff
from .kube import GENERICNODES, NODES, PODS, Conflict, Gone, Kube, KubeError, PermanentError, TemporaryError, object_key
from .ledger import JsonObject
from .metrics import LedgerRow, Metrics
from .poller import SlurmPoller
from .slurm import Slurm, SlurmError, SlurmRefused
from .systemd import Notifier
from .units import cpu_millis, memory_bytes

_J = TypeVar("_J")

# (what failed, the message, whether retrying may help)
Error = tuple[str, str, bool]
# GenericNode -> the object after our last write to it in this round
Latest = dict[str, JsonObject]

log = logs.get("loop")


def _rv_newer(new: JsonObject, old: JsonObject | None) -> bool:
    """Whether ``new`` is not older than ``old`` (resourceVersions compared as numbers when both are)."""
    if old is None:
        return True
    a = (new.get("metadata") or {}).get("resourceVersion")
    b = (old.get("metadata") or {}).get("resourceVersion")
    if isinstance(a, str) and isinstance(b, str) and a.isdigit() and b.isdigit():
        return int(a) >= int(b)
    return True


def _echo_or_older(event_obj: JsonObject, written: JsonObject) -> bool:
    """Whether a watch event shows the version we wrote, or an older one (resourceVersions that are not numbers
    are compared only for equality: when they differ, the event may be newer)."""
    a = (event_obj.get("metadata") or {}).get("resourceVersion")
    b = (written.get("metadata") or {}).get("resourceVersion")
    if not (isinstance(a, str) and isinstance(b, str) and a):
        return False
    return a == b or (a.isdigit() and b.isdigit() and int(a) < int(b))


# What an informer stores of an object, given the version it caches (None: none).
KeepLike = Callable[[JsonObject, JsonObject | None], JsonObject]


class Informer:
    """One kind's objects, kept current by list + watch.

    ``keep(obj, cached)``: the part of each object to store, given the version
    cached (``None``: none), whose unchanged parts it may reuse.
    """

    def __init__(self, kube: Kube, kind: str, label_selector: str | None = None,
                 on_change: Callable[[str, str | None], None] | None = None, keep: KeepLike | None = None):
        self.kube, self.kind, self.label_selector, self.on_change = kube, kind, label_selector, on_change
        self.keep = keep
        self.store: dict[str, JsonObject] = {}
        self.resource_version: str | None = None
        self._lock = threading.Lock()
        # Objects our own write is on its way to -> the last watch event about it meanwhile (None: none yet).
        self._writing: dict[str, tuple[str, JsonObject] | None] = {}

    @property
    def synced(self) -> bool:
        return self.resource_version is not None

    def relist(self) -> None:
        items, rv = self.kube.list_objects(self.kind, self.label_selector, self._kept_from_list)
        with self._lock:
            self.store = {object_key(obj): obj for obj in items}
            self.resource_version = rv
        self._changed()

    def apply(self, event: str, obj: JsonObject) -> None:
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        changed = False
        with self._lock:
            if object_key(obj) in self._writing:  # held back until the write answers (see writing())
                self._writing[object_key(obj)] = (event, obj)
            elif event in ("ADDED", "MODIFIED"):
                key = object_key(obj)
                current = self.store.get(key)
                if _rv_newer(obj, current):
                    # The echo of our own write (put() stored it already) changes nothing: waking the
                    # loop for it would run a pass that finds nothing to do, and the cached object is
                    # that very version (kept, not replaced by a copy).
                    changed = current is None or not rv or rv != (current.get("metadata") or {}).get("resourceVersion")
                    if changed:
                        self.store[key] = obj if self.keep is None else self.keep(obj, current)
            elif event == "DELETED":
                changed = self.store.pop(object_key(obj), None) is not None
            if rv:
                self.resource_version = rv
        if changed:
            self._changed(object_key(obj))

    def _kept_from_list(self, obj: JsonObject) -> JsonObject:
        """A listed object as stored: the cached one when the list shows it at the cached resourceVersion.

        A periodic resync lists every object again, and nearly all are
        unchanged: keeping the cached one spares compacting it again (seconds
        of CPU at 10,000 GenericNodes, Nodes and pods, while admissions wait)
        and holding two copies of the cache until the list ends.
        """
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        cached = self.get(object_key(obj)) if rv else None
        if cached is not None and (cached.get("metadata") or {}).get("resourceVersion") == rv:
            return cached
        return obj if self.keep is None else self.keep(obj, cached)

    def writing(self, key: str) -> None:
        """Our write of ``key`` is on its way: hold its watch events back until :meth:`done_writing`.

        The watch often brings the echo of our own write before the write's
        answer is stored: it then looked like somebody else's change, and the
        next pass decided that GenericNode again for nothing (close to half of
        a burst's writes), after compacting the echo into the cache.
        """
        with self._lock:
            self._writing[key] = None

    def done_writing(self, key: str, written: JsonObject | None) -> None:
        """Our write of ``key`` ended, storing ``written`` (``None``: it failed). The last event held back
        meanwhile is applied, unless it is the echo of that write or older than it: a write is conditional on the
        resourceVersion its decision read, so an older version held nothing that decision did not see."""
        with self._lock:
            held = self._writing.pop(key, None)
        if held is None or (written is not None and _echo_or_older(held[1], written)):
            return
        self.apply(*held)
        if written is None:  # noted as it was when it came (a re-read after a conflict may hold that version now)
            self._changed(key)

    def put(self, obj: JsonObject, like: JsonObject | None = None) -> JsonObject:
        """An object we wrote or read ourselves (newer than, or as new as, what the watch said); returns it as kept.

        ``like``: what ``keep`` may reuse the unchanged parts of (the cached version when not given).
        """
        key = object_key(obj)
        if self.keep is not None:
            obj = self.keep(obj, self.get(key) if like is None else like)
        with self._lock:
            if _rv_newer(obj, self.store.get(key)):
                self.store[key] = obj
        return obj

    def forget(self, key: str) -> None:
        with self._lock:
            gone = self.store.pop(key, None) is not None
        if gone:  # its DELETED event will find nothing left to change: the next pass must still see it went
            self._changed(key)

    def get(self, key: str) -> JsonObject | None:
        with self._lock:
            return self.store.get(key)

    def snapshot(self) -> dict[str, JsonObject]:
        with self._lock:
            return dict(self.store)

    def watch(self, timeout_seconds: int = 300, drop: Callable[[str, JsonObject], bool] | None = None) -> int:
        """Apply watch events from the last resourceVersion; returns how many arrived.

        Raises :class:`Gone` (the caller lists again) and the other KubeErrors.
        ``drop(event, obj)`` (tests) loses events on purpose.
        """
        if not self.synced:
            # A watch goes on from a list. Watched from "0" instead, the events would make
            # the cache look synced, and one event lost (a dropped connection) would leave
            # a GenericNode out of it for good: its Slurm node would look unshared and get
            # its whole GRES back while pods hold part of it.
            self.relist()
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
    # GenericNodes (None: actions tied to none) another round may find more to do for: those with a write but
    # a status that holds no reservation (a status is decided from everything else, so re-deciding on the
    # status just written finds it again; a reservation waits for Slurm to be read), or a write that conflicted.
    unsettled: set[str | None] = field(default_factory=set)
    conflicts: int = 0
    errors: list[Error] = field(default_factory=list)
    applied: list[core.Action] = field(default_factory=list)  # actions carried out (or, in dry-run, planned)

    def add(self, other: Outcome) -> None:
        self.wrote += other.wrote
        self.unsettled |= other.unsettled
        self.conflicts += other.conflicts
        self.errors.extend(other.errors)
        self.applied.extend(other.applied)


@dataclass
class _Lane:
    """One GenericNode's actions in a round (or the actions tied to none), and where carrying them out stands."""

    actions: list[core.Action]
    order: int = 0  # its place among the round's lanes
    done: int = 0  # actions taken (carried out, recorded or skipped)
    outcome: Outcome = field(default_factory=Outcome)
    latest: Latest = field(default_factory=dict)
    blocked: set[str | None] = field(default_factory=set)  # nodes whose next actions wait for the next round
    pending: dict[str | None, list[core.Decision]] = field(default_factory=dict)  # decisions waiting for their node's ledger write
    # Nodes with a decision this round: the decision's line (info) says what happened and why, so the
    # ledger write and the Slurm change that carry it out go at debug. Five lines per admission were 4%
    # of the daemon's CPU in a burst; an action no decision explains (a GRES re-asserted after a
    # reconfigure, a status whose Slurm usage changed, a drain) stays at info.
    decided: set[str | None] = field(default_factory=set)
    alone: int = -1  # the index of a GRES update that found no other to share a request with: it goes by itself

    def waiting(self) -> core.SetGres | None:
        """The GRES update the lane stopped at (None: it ran to its end)."""
        if self.done < len(self.actions):
            return cast(core.SetGres, self.actions[self.done])
        return None


class _Feed:
    """GenericNodes' action groups handed to the executor's threads as they come (inline with one lane), and waited for.

    A group becomes a lane (its bookkeeping) only when a thread takes it, and
    the lane is let go when it ends, but for its outcome: decisions outrun the
    requests, and at a first start with 10,000 GenericNodes lanes waiting in
    the queue, or kept to the round's end, cost megabytes of peak RSS.
    """

    def __init__(self, executor: Executor):
        self.executor = executor
        self.defer = executor._deferring()
        self.queue: queue.SimpleQueue[tuple[int, list[core.Action]] | None] = queue.SimpleQueue()
        self.tasks: list[concurrent.futures.Future[None]] = []
        self.outcomes: list[Outcome | None] = []  # each group's, in the order they came (None: not carried out yet)
        self.waiting: list[_Lane] = []  # lanes stopped at a GRES update
        self._lock = threading.Lock()

    def __enter__(self) -> _Feed:
        return self

    def put(self, group: list[core.Action]) -> None:
        order = len(self.outcomes)
        self.outcomes.append(None)
        if self.executor.lanes == 1:
            self._run(order, group)
            return
        self.queue.put((order, group))
        if len(self.tasks) < self.executor.lanes:  # one thread per lane: a task per GenericNode cost 3% of the CPU
            self.tasks.append(self.executor._threads().submit(self._work))

    def _work(self) -> None:
        while (taken := self.queue.get()) is not None:
            self._run(*taken)

    def _run(self, order: int, group: list[core.Action]) -> None:
        lane = _Lane(group, order=order)
        self.executor._run_lane(lane, self.defer)
        self.outcomes[order] = lane.outcome
        if lane.waiting() is not None:
            with self._lock:
                self.waiting.append(lane)

    def __exit__(self, *_exc: object) -> None:
        for _task in self.tasks:
            self.queue.put(None)
        for task in self.tasks:
            task.result()  # a lane's unexpected error (a bug) raises here


class Executor:
    """Carries out a round's actions: each GenericNode's in order, several GenericNodes at once.

    A GenericNode's actions (its ledger writes, its Slurm node's GRES, its
    placeholder jobs) depend on each other and go in order, each one waiting
    for the one before; different GenericNodes' actions touch different
    objects, so up to ``lanes`` GenericNodes go at once. Each round trip then
    overlaps the others' (the copilot prepares one request while the API server
    or slurmrestd answers another): a burst of admissions on many nodes no
    longer waits on one round trip at a time. Actions tied to no GenericNode
    (Slurm nodes nobody shares, orphaned placeholder jobs) go last, in order,
    as before. What each lane did is merged in the actions' order.

    A GRES update stops its lane until every lane has run as far as it can:
    the updates that want the same Gres string then go to Slurm in one request
    (:meth:`_set_gres_together`), and the lanes go on after them. Each one's
    ledger write went before it, as when it goes alone.
    """

    def __init__(self, kube: Kube, slurm: Slurm, informer: Informer, metrics: Metrics | None = None, dry_run: bool = False,
                 nodes: Informer | None = None, backoff: Backoff | None = None, lanes: int = 4):
        self.kube, self.slurm, self.informer, self.metrics, self.dry_run = kube, slurm, informer, metrics, dry_run
        self.nodes = nodes
        self.lanes = max(1, lanes)
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self.backoff = backoff if backoff is not None else Backoff()  # Slurm actions that failed, until they may go again
        self.refusals: dict[str, str] = {}  # placeholder job name -> Slurm's refusal of its submission
        # One handler per kind of action: a new action is a class in core (or a strategy) and a line here.
        self._handlers: dict[type[core.Action], Callable[[Any, Latest], None]] = {
            core.WriteStatus: self._write_status,
            core.AddFinalizer: self._add_finalizer,
            core.RemoveFinalizer: self._remove_finalizer,
            core.SetGres: self._set_gres,
            placeholder.SubmitPlaceholder: self._submit_placeholder,
            placeholder.CancelPlaceholder: self._cancel_placeholder,
            core.DrainNode: self._drain_node,
            core.ResumeNode: self._resume_node,
            core.AnnotateNode: self._annotate_node,
        }

    def run(self, actions: list[core.Action]) -> Outcome:
        """A round's actions (:meth:`run_groups`), grouped by GenericNode."""
        by_node: dict[str | None, list[core.Action]] = {}
        for action in actions:
            by_node.setdefault(action.node, []).append(action)
        tail = by_node.pop(None, [])
        return self.run_groups([*by_node.values(), tail])

    def run_groups(self, groups: Iterable[list[core.Action]]) -> Outcome:
        """A round's actions, a group at a time: all of one GenericNode's, or actions tied to none (those go last).

        ``groups`` may be decided while the first ones are carried out (a
        generator): each GenericNode's actions go to a lane as soon as they
        are decided, so the round trips of the first overlap deciding the
        rest instead of waiting for the last decision (tens of milliseconds
        per round in a burst, with nothing in flight meanwhile).
        """
        tail = _Lane([])
        with _Feed(self) as feed:
            for group in groups:
                if group and group[0].node is None:
                    tail.actions.extend(group)
                elif group:
                    feed.put(group)
        waiting = sorted(feed.waiting, key=lambda lane: lane.order)  # as decided, whichever thread ran them
        while waiting:
            self._set_gres_together(waiting)
            self._each(waiting, self._deferring())
            waiting = [lane for lane in waiting if lane.waiting() is not None]
        outcome = Outcome()
        for done in feed.outcomes:
            if done is not None:
                outcome.add(done)
        self._run_lane(tail)
        outcome.add(tail.outcome)
        return outcome

    def _each(self, lanes: list[_Lane], defer: bool) -> None:
        if self.lanes > 1 and len(lanes) > 1:
            self._in_lanes(lanes, defer)
        else:
            for lane in lanes:
                self._run_lane(lane, defer)

    def _in_lanes(self, lanes: list[_Lane], defer: bool) -> None:
        """Each lane's actions carried on, up to ``lanes`` GenericNodes at once: each thread takes the next until none is left.

        One task per thread, not one per GenericNode: a future per GenericNode (its
        lock, its condition, waking the round's thread for each) was 3% of the
        daemon's CPU in a burst.
        """
        pool = self._threads()
        todo = iter(lanes)
        lock = threading.Lock()

        def worker() -> None:
            while True:
                with lock:
                    taken = next(todo, None)
                if taken is None:
                    return
                self._run_lane(taken, defer)

        for task in [pool.submit(worker) for _ in range(min(self.lanes, len(lanes)))]:
            task.result()  # a lane's unexpected error (a bug) raises here, as the map before did

    def _deferring(self) -> bool:
        """Whether GRES updates wait for a request shared with other GenericNodes' (not in a dry run: nothing is sent)."""
        return not self.dry_run

    def _threads(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.lanes, thread_name_prefix="executor")
        return self._pool

    def _run_lane(self, lane: _Lane, defer: bool = False) -> None:
        """One GenericNode's actions in order (or, in the last lane, the actions tied to none), from where the lane stands.

        ``defer``: stop at a GRES update that may share one request with other
        GenericNodes' (:meth:`_set_gres_together`); the lane goes on after it.
        """
        while lane.done < len(lane.actions):
            action = lane.actions[lane.done]
            node = action.node
            if defer and self._deferrable(lane, action):
                return
            lane.done += 1
            if isinstance(action, core.Decision):
                lane.pending.setdefault(node, []).append(action)
                lane.decided.add(node)
            elif node is not None and node in lane.blocked:
                continue
            elif not self._carry_out(action, lane.latest, lane.outcome, quiet=node in lane.decided):
                if node is not None:
                    lane.blocked.add(node)
            elif isinstance(action, core.WriteStatus):
                for decision in lane.pending.pop(node, []):
                    self._record(decision, lane.outcome)

    def _deferrable(self, lane: _Lane, action: core.Action) -> bool:
        """Whether ``action`` is a GRES update to hold back for a request shared with other GenericNodes'.

        Never one whose GenericNode is blocked (its ledger write failed: it must
        not go at all), one that waits out a backoff (:meth:`_carry_out` says so),
        or one that went looking for company once already and found none.
        """
        if not isinstance(action, core.SetGres) or action.node in lane.blocked or lane.done == lane.alone:
            return False
        retry_key = _retry_key(action)
        return retry_key is None or self.backoff.ready(retry_key)

    def _set_gres_together(self, waiting: list[_Lane]) -> None:
        """The GRES updates the lanes wait at: one request for each Gres string several share, as slurmrestd allows.

        A round of a burst lowers one count on each of hundreds of nodes of the
        same size: they want the same Gres string, and one request instead of
        one per node spares most of what Slurm's side of an admission costs the
        copilot. Each GenericNode's ledger was written before (its lane got
        there); an update nobody shares, or one slurmrestd cannot take with
        others, goes alone when its lane goes on.
        """
        by_gres: dict[str, list[_Lane]] = {}
        for lane in waiting:
            lane.alone = lane.done  # whatever happens below, the lane does not stop at this update again
            by_gres.setdefault(cast(core.SetGres, lane.waiting()).gres, []).append(lane)
        for gres, lanes in by_gres.items():
            if len(lanes) > 1:
                self._set_gres_of(lanes, gres)

    def _set_gres_of(self, lanes: list[_Lane], gres: str) -> None:
        """The lanes' GRES updates (all ``gres``) in one request, each lane past its update once it went.

        Slurm applies such an update node by node and answers only its first
        refusal: after a refusal (or when slurmrestd has no such request) each
        goes alone, which finds the refused ones and sends their fallback (the
        same Gres string again is harmless for the others). When Slurm could
        not be reached, each failed as it would have alone.
        """
        actions = [cast(core.SetGres, lane.waiting()) for lane in lanes]
        try:
            if not self.slurm.set_gres_of_nodes([action.slurm_node for action in actions], gres):
                return
        except SlurmRefused as err:
            log.info("Slurm refused a GRES update of several nodes: each goes alone",
                     extra={"fields": {"gres": gres, "nodes": len(actions), "error": str(err)}})
            return
        except SlurmError as err:
            for lane, action in zip(lanes, actions, strict=True):
                lane.done += 1
                lane.blocked.add(action.node)
                self._failed(action, err, _retry_key(action), lane.outcome)
            return
        for lane, action in zip(lanes, actions, strict=True):
            lane.done += 1
            self._log_action(action, quiet=action.node in lane.decided)
            self._succeeded(action, _retry_key(action), lane.outcome)

    def _carry_out(self, action: core.Action, latest: Latest, outcome: Outcome, quiet: bool = False) -> bool:
        """Apply one action and count it; False when it did not go through (its node waits for the next round).

        ``quiet``: a decision logged at info explains it (its own line goes at debug, but in a dry run).
        """
        retry_key = _retry_key(action)
        if retry_key is not None and not self.backoff.ready(retry_key):
            outcome.errors.append((action.kind, "waiting to retry after Slurm failed it", True))
            return False
        writing = action.node if isinstance(action, _GENERIC_NODE_WRITES) and not self.dry_run else None
        if writing is not None:
            self.informer.writing(writing)
        try:
            self._apply(action, latest, quiet)
            if writing is not None:
                self.informer.done_writing(writing, latest.get(writing))
                writing = None
        except Conflict as err:
            outcome.conflicts += 1
            outcome.unsettled.add(action.node)
            if self.metrics is not None:
                self.metrics.conflicts.inc()
            log.info("ledger changed under us: re-reading", extra={"fields": {"node": action.node, "error": str(err)}})
            self._reread(action.node, outcome)
            return False
        except (KubeError, SlurmError) as err:
            self._failed(action, err, retry_key, outcome)
            return False
        finally:
            if writing is not None:  # it failed: what the watch said meanwhile goes in as it came
                self.informer.done_writing(writing, None)
        self._succeeded(action, retry_key, outcome)
        return True

    def _succeeded(self, action: core.Action, retry_key: tuple[object, ...] | None, outcome: Outcome) -> None:
        if retry_key is not None:
            self.backoff.succeeded(retry_key)
        outcome.applied.append(action)
        if self.metrics is not None:
            self.metrics.actions.labels(action.kind).inc()
        if not self.dry_run:
            outcome.wrote += 1
            if not (isinstance(action, core.WriteStatus) and not core.holds_reservation(action.status)):
                outcome.unsettled.add(action.node)

    def _failed(self, action: core.Action, err: KubeError | SlurmError, retry_key: tuple[object, ...] | None,
                outcome: Outcome) -> None:
        temporary = isinstance(err, (TemporaryError, Gone)) or getattr(err, "temporary", False)
        outcome.errors.append((action.kind, str(err), temporary))
        if self.metrics is not None:
            self.metrics.errors.labels(type(err).__name__).inc()
        fields: dict[str, object] = {"node": action.node, "action": action.kind, "error": str(err), "temporary": temporary}
        if retry_key is not None and isinstance(err, SlurmError):
            fields["retry_in"] = self.backoff.failed(retry_key)
        log.warning("action failed", extra={"fields": fields})

    def _record(self, decision: core.Decision, outcome: Outcome) -> None:
        if isinstance(decision, core.DenyAdmission) and decision.node is not None:
            self.refusals.pop(placeholder.job_name(decision.node, decision.uid), None)  # the denial carries it now
        outcome.applied.append(decision)
        if self.metrics is not None:
            self.metrics.actions.labels(decision.kind).inc()
        log.info(decision.kind, extra={"fields": {
            "node": decision.node, "uid": decision.uid, "reason": decision.reason, "dry_run": self.dry_run}})

    def _describe(self, action: core.Action) -> dict[str, object]:
        fields: dict[str, object] = {"node": action.node, "action": action.kind, "dry_run": self.dry_run}
        for name in ("slurm_node", "gres", "reason", "kube_node", "key", "value", "resource_version", "job_name",
                     "job_id", "cpus", "memory_mb"):
            if hasattr(action, name):
                fields[name] = getattr(action, name)
        return fields

    def _apply(self, action: core.Action, latest: Latest, quiet: bool = False) -> None:
        if self.dry_run:  # what a dry run would do is all it shows
            log.info("would " + action.kind, extra={"fields": self._describe(action)})
            return
        self._log_action(action, quiet)
        handler = self._handlers.get(type(action))
        if handler is None:
            raise TypeError("no executor for %r" % (action,))
        handler(action, latest)

    def _log_action(self, action: core.Action, quiet: bool) -> None:
        level = logging.DEBUG if quiet else logging.INFO
        if log.isEnabledFor(level):
            log.log(level, action.kind, extra={"fields": self._describe(action)})

    def _write_status(self, action: core.WriteStatus, latest: Latest) -> None:
        source, resource_version = self._source(action.node, latest, action.resource_version)
        result = self.kube.write_ledger(source, action.status, resource_version)
        like = None
        if isinstance(result, dict) and result.get("status") == action.status:
            # The server kept the status as sent: the cache shares the action's (which the pass
            # holds until it ends) instead of a copy of it; a first start writes every ledger.
            # Compacted already, it is not walked again: the cached form starts from the object
            # written with this status.
            result = dict(result, status=action.status)
            like = dict(source, status=action.status)
        self._wrote(result, latest, like)

    def _add_finalizer(self, action: core.AddFinalizer, latest: Latest) -> None:
        source, resource_version = self._source(action.node, latest, action.resource_version)
        self._wrote(self.kube.set_finalizer(source, True, resource_version), latest)

    def _remove_finalizer(self, action: core.RemoveFinalizer, latest: Latest) -> None:
        source, resource_version = self._source(action.node, latest, action.resource_version)
        self._wrote(self.kube.set_finalizer(source, False, resource_version), latest)

    def _set_gres(self, action: core.SetGres, _latest: Latest) -> None:
        try:
            self.slurm.set_node_gres(action.slurm_node, action.gres)
        except SlurmRefused as err:
            if not action.fallback:
                raise
            log.warning("Slurm refused the count, setting the fallback", extra={"fields": {
                "slurm_node": action.slurm_node, "gres": action.gres, "fallback": action.fallback, "error": str(err)}})
            self.slurm.set_node_gres(action.slurm_node, action.fallback)

    def _submit_placeholder(self, action: placeholder.SubmitPlaceholder, _latest: Latest) -> None:
        try:
            job_id = self.slurm.submit_placeholder(action.job_name, action.slurm_node, action.cpus, action.memory_mb)
        except SlurmRefused as err:
            self.refusals[action.job_name] = str(err)  # the next pass denies the admission with Slurm's words
            raise
        log.info("placeholder job submitted", extra={"fields": {"node": action.node, "job_id": job_id,
                                                                 "job_name": action.job_name}})

    def _cancel_placeholder(self, action: placeholder.CancelPlaceholder, _latest: Latest) -> None:
        self.slurm.cancel_job(action.job_id)

    def _drain_node(self, action: core.DrainNode, _latest: Latest) -> None:
        self.slurm.drain_node(action.slurm_node, action.reason)

    def _resume_node(self, action: core.ResumeNode, _latest: Latest) -> None:
        self.slurm.resume_node(action.slurm_node)

    def _annotate_node(self, action: core.AnnotateNode, _latest: Latest) -> None:
        result = self.kube.annotate_node(action.kube_node, action.key, action.value)
        if self.nodes is not None and isinstance(result, dict):
            self.nodes.put(result)

    def _source(self, name: str | None, latest: Latest, resource_version: str) -> tuple[JsonObject, str | None]:
        """The GenericNode a write starts from, and the resourceVersion it must still be at.

        After our own write in this round, that write's answer and its version
        (the action's was read before it); otherwise the cached object at the
        version the decision read.
        """
        if name is None:
            raise TypeError("a GenericNode write without its GenericNode")
        if name in latest:
            return latest[name], None
        source = self.informer.get(name)
        if source is None:
            raise Conflict("GenericNode %s is no longer cached" % name, 409)
        return source, resource_version

    def _wrote(self, result: JsonObject, latest: Latest, like: JsonObject | None = None) -> None:
        name = str((result.get("metadata") or {}).get("name"))
        if (result.get("metadata") or {}).get("deletionTimestamp") and not result["metadata"].get("finalizers"):
            latest[name] = result
            self.informer.forget(name)
        else:
            latest[name] = self.informer.put(result, like)  # the cached form: one copy for both

    def _reread(self, name: str | None, outcome: Outcome) -> None:
        if name is None:
            return
        try:
            fresh = self.kube.get_object(GENERICNODES, name)
        except KubeError as err:
            outcome.errors.append(("reread", str(err), True))
            return
        if fresh is None:
            self.informer.forget(name)
        else:
            self.informer.put(fresh)


# The actions that write a GenericNode: the watch events about it wait for the write's answer (Informer.writing).
_GENERIC_NODE_WRITES = (core.WriteStatus, core.AddFinalizer, core.RemoveFinalizer)

# The actions that go to Slurm: one that failed waits out a backoff (Executor.backoff) before it goes again.
_SLURM_ACTIONS = (core.SetGres, core.DrainNode, core.ResumeNode, placeholder.SubmitPlaceholder, placeholder.CancelPlaceholder)


def _retry_key(action: core.Action) -> tuple[object, ...] | None:
    """What tells a Slurm action apart from others for its backoff: its fields but the reason (None: not a Slurm action)."""
    if not isinstance(action, _SLURM_ACTIONS):
        return None
    return (type(action), *(getattr(action, f.name) for f in dataclasses.fields(action) if f.name != "reason"))


# -- passes ---------------------------------------------------------------------------------


# Values no two objects share: interning them would only grow the interpreter's table of interned strings.
_UNIQUE = frozenset(("uid", "resourceVersion", "creationTimestamp"))
_SCALARS = (str, int, float, bool, type(None))
_SHARED_ITEMS = 8  # dicts and lists up to this size are shared between the objects that hold equal ones
_SHARED_LIMIT = 4096  # shared containers remembered, the least recently met forgotten first
_shared: OrderedDict[tuple[object, ...], Any] = OrderedDict()
_shared_lock = threading.Lock()


def compact(value: _J, like: Any = None) -> _J:
    """``value`` (JSON-like) as the caches hold it: strings interned, equal small dicts and lists shared.

    Ten thousand GenericNodes repeat the same keys, labels, types, states,
    reasons and GRES strings, and the same small parts (the labels, an
    ``allocated`` of zero, an empty ledger, an unchanged condition); each
    parse (a list chunk, a watch event, a write's answer) makes its own copies.
    Compacted, the cache holds one of each. Safe because cached objects are
    never changed in place (the copilot copies what it changes). A container
    whose parts were all compact already is kept as it is, so a status the
    copilot wrote is shared with the action that wrote it, not copied.

    ``like``: the version of this object the cache holds (compact already). A
    new version differs from it in a few fields (the resourceVersion, one
    ledger entry); each part equal to the cached one's is the cached one,
    found by one comparison in C instead of walking and interning it again.
    """
    return cast(_J, _compact(value, like))


def _compact(value: Any, like: Any = None) -> Any:
    if type(value) is str:
        return like if type(like) is str and like == value else sys.intern(value)
    if type(value) is dict:
        was = like if type(like) is dict else _EMPTY
        items = [_compact_item(k, v, was) for k, v in value.items()]
        if was is not _EMPTY and len(was) == len(items) and all(v is was.get(k, _EMPTY) for k, v in items):
            return was  # every part is the cached one's: the cached object itself
        if not all(k is old_k and v is old_v for (k, v), (old_k, old_v) in zip(items, value.items(), strict=True)):
            value = dict(items)
    elif type(value) is list:
        was_list = like if type(like) is list and len(like) == len(value) else None
        items = [(None, _compact(v, None if was_list is None else was_list[i])) for i, v in enumerate(value)]
        if was_list is not None and all(v is old for (_k, v), old in zip(items, was_list, strict=True)):
            return was_list
        if not all(v is old for (_k, v), old in zip(items, value, strict=True)):
            value = [v for _k, v in items]
    else:
        return value
    if len(items) > _SHARED_ITEMS or any(k in _UNIQUE for k, _v in items):
        return value
    # Parts are compact already: a shared part is known by its identity (the table keeps it alive).
    key = (type(value), tuple((k, type(v), v if type(v) in _SCALARS else id(v)) for k, v in items))
    with _shared_lock:
        shared = _shared.get(key)
        if shared is not None:
            _shared.move_to_end(key)
            return shared
        _shared[key] = value
        if len(_shared) > _SHARED_LIMIT:
            _shared.popitem(last=False)
    return value


_EMPTY: Any = {}  # "no cached version" (its own object: no cached value is it)


def _compact_item(key: Any, value: Any, was: dict[Any, Any]) -> tuple[Any, Any]:
    """One entry of a dict compacted: the cached version's value when it is the same JSON as the new one.

    Python's ``==`` takes 1, 1.0 and True for equal, and the CRD keeps unknown
    fields (ACK's among them) without fixing their types: a value equal to
    Python is checked by :func:`_same_types` before the cached one stands for
    it, else a later PUT would write such a field back with the old type.
    """
    key = sys.intern(key) if type(key) is str else key
    old = was.get(key, _EMPTY)
    if old is not _EMPTY and (old is value or (type(old) is type(value) and old == value and _same_types(old, value))):
        return key, old
    if key in _UNIQUE:
        return key, value
    return key, _compact(value, None if old is _EMPTY else old)


def _same_types(a: Any, b: Any) -> bool:
    """Whether two values Python finds equal are the same JSON: ``==`` takes 1, 1.0 and True for equal."""
    if type(a) is not type(b):
        return False
    if type(a) is dict:
        return all(_same_types(v, b[k]) for k, v in a.items() if type(v) is not str)
    if type(a) is list:
        return all(_same_types(v, w) for v, w in zip(a, b, strict=True) if type(v) is not str)
    return True


def _decided(observed: core.Observed) -> Iterator[list[core.Action]]:
    """Each GenericNode's actions as soon as it is decided (statuses compacted), then those tied to none.

    A decided GenericNode leaves the observed snapshot at once: its actions
    may be carried out while the rest are decided, and each write replaces
    its GenericNode in the cache; the object it replaced can then go at once
    (a first start writes every ledger).
    """
    snapshot = cast(dict[str, JsonObject], observed.generic_nodes)  # observe() built it for this round alone
    for name, actions in core.decide(observed, functools.partial(_compact_status, cached=snapshot)):
        if name is not None:
            snapshot.pop(name, None)
        yield actions


def _compact_status(action: core.Action, cached: Mapping[str, JsonObject] | None = None) -> core.Action:
    """A WriteStatus with its status compacted, like the status of the GenericNode in ``cached`` it replaces.

    A new status differs from the one it replaces in a few parts (one ledger
    entry, an allocation, a condition's time): the others are the cached
    ones, found by one comparison each instead of walking and interning them.
    """
    if not isinstance(action, core.WriteStatus):
        return action
    obj = cached.get(action.node) if cached is not None and action.node is not None else None
    return dataclasses.replace(action, status=compact(action.status, None if obj is None else obj.get("status")))


def generic_node_fields(obj: JsonObject, cached: JsonObject | None = None) -> JsonObject:
    """A GenericNode as cached: all of it but ``metadata.managedFields``, compacted.

    The writes build their bodies from the cache: a PUT without managedFields
    keeps the server's (only an explicit value replaces them), and the rest of
    the object goes back as read.
    """
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = dict(obj, metadata={k: v for k, v in meta.items() if k != "managedFields"})
    return compact(obj, cached)


def pod_fields(obj: JsonObject, cached: JsonObject | None = None) -> JsonObject:
    """What pod_view reads of a pod: a cluster holds many large pods, of which the copilot reads five fields."""
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    kept = {"metadata": {key: meta[key] for key in ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp")
                         if key in meta}}
    if isinstance(status, dict) and "phase" in status:
        kept["status"] = {"phase": status["phase"]}
    return compact(kept, cached)


def node_fields(obj: JsonObject, cached: JsonObject | None = None) -> JsonObject:
    """What node_view reads of a Node (a real one also carries its images, conditions, addresses, ...)."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    kept = {"metadata": {key: meta[key] for key in ("name", "resourceVersion", "annotations") if key in meta}}
    if isinstance(spec, dict) and "unschedulable" in spec:
        kept["spec"] = {"unschedulable": spec["unschedulable"]}
    return compact(kept, cached)


def pod_view(obj: JsonObject) -> core.Pod:
    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    return core.Pod(namespace=str(meta.get("namespace") or ""), name=str(meta.get("name") or ""),
                    uid=str(meta.get("uid") or ""), phase=str(status.get("phase") or "Pending"),
                    terminating=bool(meta.get("deletionTimestamp")))


def node_view(obj: JsonObject) -> core.KubeNode:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return core.KubeNode(name=str(meta.get("name") or ""), unschedulable=bool(spec.get("unschedulable")),
                         annotations=dict(meta.get("annotations") or {}))


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
        self.generic_nodes = Informer(kube, GENERICNODES, selector, self._changed, generic_node_fields)
        self.pods = Informer(kube, PODS, None, self._changed, pod_fields)
        self.nodes = Informer(kube, NODES, None, self._changed, node_fields)
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
        if scope is None:
            generic_nodes = self.generic_nodes.snapshot()
            kube_nodes = {key: node_view(obj) for key, obj in self.nodes.snapshot().items()}
        else:
            generic_nodes = {name: obj for name in sorted(scope.generic_nodes)
                             if (obj := self.generic_nodes.get(name)) is not None}
            kube_nodes = {name: node_view(obj) for name in scope.generic_nodes if (obj := self.nodes.get(name)) is not None}
        pods = {}
        reads = {name: core.pods_needed({name: obj}) for name, obj in generic_nodes.items()}
        if scope is not None:
            reads.update((name, set()) for name in scope.generic_nodes - set(generic_nodes))
        self.changes.set_pods_read({name: {"%s/%s" % key for key in keys} for name, keys in reads.items()},
                                   everything=scope is None)
        needed = set().union(*reads.values())
        for namespace, name in sorted(needed):
            obj = self.pods.get("%s/%s" % (namespace, name))
            if obj is None:  # a cache miss is not "gone" until the API server says so
                obj = self.kube.get_object(PODS, name, namespace)
                if obj is not None:
                    self.pods.put(obj)
            if obj is not None:
                pods[(namespace, name)] = pod_view(obj)
        return core.Observed(generic_nodes, pods, kube_nodes, slurm_nodes, self.clock(), self.settings, slurm_jobs,
                             dict(self.executor.refusals))

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
    def _index(self, name: str, obj: JsonObject | None) -> str | None:
        """Note the Slurm node a GenericNode shares now; returns the one it shared before if that changed."""
        alias = core.alias_of(obj) if obj is not None and core.is_slurm_node(obj) else None
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
        objects: dict[str, JsonObject | None]
        if scope is None:
            self._reserving = set()
            objects = dict(self.generic_nodes.snapshot())
        else:
            objects = {name: self.generic_nodes.get(name) for name in scope.generic_nodes}
        for name, obj in objects.items():
            ledger = ((obj or {}).get("status") or {}).get(names.STATUS_ADMISSIONS)
            if isinstance(ledger, dict) and any(isinstance(e, dict) and e.get("state") == names.RESERVED
                                                for e in ledger.values()):
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
        for name, obj in self.generic_nodes.snapshot().items():
            if not core.is_slurm_node(obj):
                continue
            status = obj.get("status")
            status = status if isinstance(status, dict) else {}
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
            ledger = status.get(names.STATUS_ADMISSIONS)
            for entry in ledger.values() if isinstance(ledger, dict) else ():
                if isinstance(entry, dict):
                    states[str(entry.get("state"))] = states.get(str(entry.get("state")), 0) + 1
            over = any(c.get("type") == names.CONDITION_OVERCOMMITTED and c.get("status") == "True"
                       for c in status.get(names.STATUS_CONDITIONS) or [] if isinstance(c, dict))
            yield name, allocations, states, over


# -- the daemon -----------------------------------------------------------------------------


class Runner:
    """Threads that watch and poll, and the working loop they wake."""

    def __init__(self, copilot: Copilot, notifier: Notifier, resync_interval: float = 60.0, poll_interval: float = 5.0,
                 watch_timeout: int = 300, debounce: float = 0.0, max_backoff: float = 60.0):
        self.copilot, self.notifier = copilot, notifier
        self.resync_interval, self.poll_interval, self.watch_timeout = resync_interval, poll_interval, watch_timeout
        self.debounce, self.max_backoff = debounce, max_backoff
        self.stop = threading.Event()
        self.wake = threading.Event()
        self.threads: list[threading.Thread] = []

    def request_stop(self, *_args: object) -> None:
        self.stop.set()
        self.wake.set()

    def changed(self, _what: str | None = None) -> None:
        self.wake.set()

    def _watch_loop(self, informer: Informer) -> None:
        failures = 0
        while not self.stop.is_set():
            try:
                informer.watch(self.watch_timeout)  # lists first while the cache is not synced
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

    def _start(self, name: str, target: Callable[..., object], *args: object) -> None:
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
        last_pass = 0.0
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
                # A pass starts `debounce` seconds after the one before ended at the earliest (by default at
                # once): a burst gathers while the pass before runs, and while this wait lasts.
                self.stop.wait(max(0.0, last_pass + self.debounce - time.monotonic()))
            self.wake.clear()
            try:
                result = self.copilot.sync(full=full)
            except PermanentError as err:
                log.error("permanent error: fix it and the next resync retries", extra={"fields": {"error": str(err)}})
                self.notifier.status("error: %s" % err)
                result = PassResult(errors=[("permanent", str(err), False)])
            last_pass = time.monotonic()
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
