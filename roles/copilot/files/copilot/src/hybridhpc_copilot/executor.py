"""Carrying a round's actions out: each GenericNode's in order, in lanes of their own, several at once.

A GenericNode's actions (its ledger writes, its Slurm node's GRES, its
placeholder jobs) depend on each other and go in order; different
GenericNodes' go at once, up to ``lanes`` of them. A 409 on the ledger
(someone wrote in between) re-reads that GenericNode and stops its remaining
actions for this round; the next round decides again. A Slurm action that
failed waits out a backoff before it goes again, and Slurm's refusal of a
placeholder job is kept for the decisions.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import logging
import queue
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from . import core, logs, placeholder
from .backoff import Backoff
from .informers import Informer
from .kube import GENERICNODES, Conflict, Gone, Kube, KubeError, TemporaryError, generic_node_from_api
from .ledger import JsonObject
from .metrics import Metrics
from .model import GenericNode, KubeNode
from .slurm import Slurm, SlurmError, SlurmRefused

# (what failed, the message, whether retrying may help)
Error = tuple[str, str, bool]
# GenericNode -> the object after our last write to it in this round
Latest = dict[str, GenericNode]

log = logs.get("loop")  # the working loop's logger, as before it had modules of its own: log filters read its name


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

    def __init__(self, kube: Kube, slurm: Slurm, informer: Informer[GenericNode], metrics: Metrics | None = None, dry_run: bool = False,
                 nodes: Informer[KubeNode] | None = None, backoff: Backoff | None = None, lanes: int = 4):
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
        result = self.kube.write_ledger(source.raw, action.status, resource_version)
        like = None
        if isinstance(result, dict) and result.get("status") == action.status:
            # The server kept the status as sent: the cache shares the action's (which the pass
            # holds until it ends) instead of a copy of it; a first start writes every ledger.
            # Compacted already, it is not walked again: the cached form starts from the object
            # written with this status.
            result = dict(result, status=action.status)
            like = generic_node_from_api(dict(source.raw, status=action.status), source)
        self._wrote(result, latest, like)

    def _add_finalizer(self, action: core.AddFinalizer, latest: Latest) -> None:
        source, resource_version = self._source(action.node, latest, action.resource_version)
        self._wrote(self.kube.set_finalizer(source.raw, True, resource_version), latest)

    def _remove_finalizer(self, action: core.RemoveFinalizer, latest: Latest) -> None:
        source, resource_version = self._source(action.node, latest, action.resource_version)
        self._wrote(self.kube.set_finalizer(source.raw, False, resource_version), latest)

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

    def _source(self, name: str | None, latest: Latest, resource_version: str) -> tuple[GenericNode, str | None]:
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

    def _wrote(self, result: JsonObject, latest: Latest, like: GenericNode | None = None) -> None:
        name = str((result.get("metadata") or {}).get("name"))
        if (result.get("metadata") or {}).get("deletionTimestamp") and not result["metadata"].get("finalizers"):
            latest[name] = generic_node_from_api(result)  # gone: read for what this round still does, not cached
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

