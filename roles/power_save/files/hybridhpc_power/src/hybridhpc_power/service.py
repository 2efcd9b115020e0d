"""The worker, the reconciler and status: coordinators over Slurm, the providers, the queue and the state file.

They read, hand decisions to pure functions (queue.coalesce, reconcile.plan)
and apply the result; every rule lives in those functions or in the
providers. Both the worker and the reconciler run under the lock file.

What the worker does on failures (README.md, "Failures"):

* resume: nodes the provider could not start are set DOWN with reason
  ``hybridhpc-power: resume failed: <reason>`` (Slurm requeues their jobs),
  then POWER_DOWN_FORCE: Slurm runs SuspendProgram for them (its request
  removes any half-started machine) and they end DOWN+POWERED_DOWN (down~);
  the reconciler returns them to idle~ after ``failed_retry_after``.
* suspend: a machine that could not be removed is logged; the reconciler's
  leaked-machine rule removes it later.
* resume-fail (ResumeTimeout): the machines are removed; Slurm left the nodes
  DOWN+POWERED_DOWN with its own reason "ResumeTimeout reached", which the
  worker replaces with ``hybridhpc-power: resume timed out (...)`` so the
  reconciler retries them like any other failed resume.
"""

from __future__ import annotations

import os
import time
import traceback
from collections.abc import Callable, Iterable

from . import hostlists, locking, names, queue, reconcile, state
from .config import Config
from .logs import TransitionLog
from .providers.base import Instance, Provider, ProviderError, ResumeResult, SuspendResult
from .slurm import Scontrol, SlurmError

# Slurm shows the reason in sinfo -R; keep it to one short line.
SLURM_REASON_MAX = 100
LOG_REASON_MAX = 300


def short(text: str, limit: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Power:
    def __init__(self, config: Config, slurm: Scontrol, provider_for: Callable[[str], Provider], log: TransitionLog,
                 clock: Callable[[], float] = time.time, lock_wait: float | None = None):
        self.config = config
        self.slurm = slurm
        self._provider_for = provider_for
        self.log = log
        self.clock = clock
        self.lock_wait = lock_wait  # None: the worker waits for a running reconcile
        self.errors = 0  # whole calls that failed (Slurm, a provider): the exit status says so

    # -- helpers -------------------------------------------------------------
    def provider(self, nodeset: str) -> Provider:
        return self._provider_for(nodeset)

    def _error(self, **fields) -> None:
        self.errors += 1
        self.log.event(level="error", **fields)

    def _by_nodeset(self, nodes: Iterable[str]) -> dict[str, list[str]]:
        node_map = self.config.node_map()
        out: dict[str, list[str]] = {}
        for node in nodes:
            out.setdefault(node_map[node], []).append(node)
        return out

    def _call_resume(self, nodeset: str, nodes: list[str]) -> ResumeResult:
        try:
            result = self.provider(nodeset).resume(nodes)
        except (ProviderError, ValueError) as err:  # ValueError: the node set's options (config.ConfigError)
            self._error(nodeset=nodeset, action=names.RESUME, msg="provider call failed", reason=short(err, LOG_REASON_MAX))
            return ResumeResult(failed={n: str(err) for n in nodes})
        except Exception as err:  # noqa: BLE001 - a provider bug must not lose the other node sets' requests
            self._error(nodeset=nodeset, action=names.RESUME, msg="provider crashed", reason=short("%s: %s" % (type(err).__name__, err), LOG_REASON_MAX))
            traceback.print_exc()
            return ResumeResult(failed={n: "provider error: %s" % type(err).__name__ for n in nodes})
        for node in nodes:
            if node not in result.started and node not in result.failed:
                result.failed[node] = "the provider did not report this node"
        return result

    def _call_suspend(self, nodeset: str, nodes: list[str], action: str) -> SuspendResult:
        try:
            result = self.provider(nodeset).suspend(nodes)
        except (ProviderError, ValueError) as err:  # ValueError: the node set's options (config.ConfigError)
            self._error(nodeset=nodeset, action=action, msg="provider call failed", reason=short(err, LOG_REASON_MAX))
            return SuspendResult(failed={n: str(err) for n in nodes})
        except Exception as err:  # noqa: BLE001 - see _call_resume
            self._error(nodeset=nodeset, action=action, msg="provider crashed", reason=short("%s: %s" % (type(err).__name__, err), LOG_REASON_MAX))
            traceback.print_exc()
            return SuspendResult(failed={n: "provider error: %s" % type(err).__name__ for n in nodes})
        reported = set(result.stopped) | set(result.failed)
        for node in nodes:
            if node not in reported:
                result.failed[node] = "the provider did not report this node"
        return result

    def _slurm(self, what: str, call: Callable[[], None], nodes: list[str], action: str, reason: str | None = None) -> bool:
        """Run one Slurm update and log it per node; False when it failed."""
        try:
            call()
        except SlurmError as err:
            self._error(action=action, nodes=hostlists.compress(nodes), msg="scontrol failed", reason=short(err, LOG_REASON_MAX))
            for node in nodes:
                self.log.node(node, action, "failed", step=what, reason=short(err, LOG_REASON_MAX))
            return False
        for node in nodes:
            self.log.node(node, action, what, reason=reason)
        return True

    def _down_and_power_down(self, by_reason: dict[str, list[str]], action: str) -> None:
        """DOWN with each group's reason, then one POWER_DOWN_FORCE for all (the order Slurm needs, README)."""
        downed: list[str] = []
        for reason, nodes in sorted(by_reason.items()):
            if self._slurm("down", lambda n=nodes, r=reason: self.slurm.mark_down(n, r), nodes, action, reason):
                downed.extend(nodes)
        # Power down even the nodes whose DOWN failed: a node Slurm keeps
        # POWERING_UP without a machine would otherwise wait for ResumeTimeout.
        everyone = sorted(n for nodes in by_reason.values() for n in nodes)
        if everyone:
            self._slurm("power-down", lambda: self.slurm.power_down(everyone), everyone, action)

    # -- the worker ----------------------------------------------------------
    def work(self) -> int:
        """Handle queued requests until the queue is empty; 0 unless a whole Slurm or provider call failed."""
        with locking.hold(self.config.lock_file, self.lock_wait):
            while self.work_once():
                pass
            self.log.flush()
        return 1 if self.errors else 0

    def work_once(self) -> bool:
        """One round: take every queued request, act, record, remove the files. False when the queue was empty."""
        now = self.clock()
        queue.remove_stale_tmp(self.config.queue_dir, now)
        requests, bad = queue.read(self.config.queue_dir)
        self._reject(bad)
        if not requests:
            return bool(bad)
        records = state.load(self.config.state_file)
        decided = queue.coalesce(requests)
        node_map = self.config.node_map()
        for node in [n for n in decided if n not in node_map]:
            request = decided.pop(node)
            self.log.node(node, request.action, "ignored", reason="not in any node set of the configuration", request=request.id)
        actions = queue.by_action(decided)
        for nodeset, nodes in sorted(self._by_nodeset(actions.get(names.SUSPEND, ())).items()):
            self._suspend(nodeset, nodes, records)
        for nodeset, nodes in sorted(self._by_nodeset(actions.get(names.RESUME_FAIL, ())).items()):
            self._resume_fail(nodeset, nodes, records)
        for nodeset, nodes in sorted(self._by_nodeset(actions.get(names.RESUME, ())).items()):
            self._resume(nodeset, nodes, {n: decided[n] for n in nodes}, records)
        self.log.flush()
        state.save(self.config.state_file, records)
        # Only now: a worker that dies before this line handles the same requests again (providers are idempotent).
        handled = [r.path for r in requests if r.path]
        queue.remove(handled)
        if any(os.path.exists(path) for path in handled):
            # Handling them again and again would hammer the provider: stop, say so, let the next start retry.
            self._error(msg="handled requests are still in %s; stopping" % self.config.queue_dir)
            return False
        return True

    def _reject(self, bad: list[tuple[str, str]]) -> None:
        """Move unreadable request files out of the queue (kept for a look, out of the path unit's sight)."""
        if not bad:
            return
        rejected = os.path.join(os.path.dirname(self.config.state_file) or ".", "rejected")
        os.makedirs(rejected, exist_ok=True)
        for path, why in bad:
            self._error(msg="unreadable request moved to %s" % rejected, file=os.path.basename(path), reason=short(why, LOG_REASON_MAX))
            try:
                os.replace(path, os.path.join(rejected, os.path.basename(path)))
            except FileNotFoundError:
                pass

    def _resume(self, nodeset: str, nodes: list[str], requests: dict[str, queue.Request], records: dict) -> None:
        result = self._call_resume(nodeset, nodes)
        now = self.clock()
        for node, machine in sorted(result.started.items()):
            if node not in requests:
                continue  # a provider reporting more than it was asked
            self.log.node(node, names.RESUME, "started", instance=machine.id, address=machine.address, nodeset=nodeset)
            state.record(records, node, names.RESUME, "started", now, instance=machine.id, resume_requested=requests[node].at)
        by_reason: dict[str, list[str]] = {}
        for node, why in sorted(result.failed.items()):
            if node not in requests or node in result.started:
                continue
            self.log.node(node, names.RESUME, "failed", reason=short(why, LOG_REASON_MAX), nodeset=nodeset)
            state.record(records, node, names.RESUME, "failed", now, reason=short(why, LOG_REASON_MAX), resume_requested=requests[node].at)
            slurm_reason = short(names.REASON_RESUME_FAILED + short(why, SLURM_REASON_MAX), SLURM_REASON_MAX + len(names.REASON_RESUME_FAILED))
            by_reason.setdefault(slurm_reason, []).append(node)
        self._down_and_power_down(by_reason, names.RESUME)

    def _stop(self, nodeset: str, nodes: list[str], records: dict, action: str) -> None:
        """Remove the machines of ``nodes`` and log and record each node's outcome under ``action``.

        A machine that could not be removed is only logged: the reconciler
        removes it later (leaked-machine rule).
        """
        result = self._call_suspend(nodeset, nodes, action)
        now = self.clock()
        for node in sorted(set(result.stopped) & set(nodes)):
            self.log.node(node, action, "stopped", nodeset=nodeset)
            state.record(records, node, action, "stopped", now)
        for node, why in sorted(result.failed.items()):
            if node in nodes and node not in result.stopped:
                self.log.node(node, action, "failed", reason=short(why, LOG_REASON_MAX), nodeset=nodeset)
                state.record(records, node, action, "failed", now, reason=short(why, LOG_REASON_MAX))

    def _suspend(self, nodeset: str, nodes: list[str], records: dict) -> None:
        self._stop(nodeset, nodes, records, names.SUSPEND)

    def _resume_fail(self, nodeset: str, nodes: list[str], records: dict) -> None:
        self._stop(nodeset, nodes, records, names.RESUME_FAIL)
        # Slurm 24.11 leaves these nodes DOWN+POWERED_DOWN with its own reason;
        # take them over (only those still so) so the reconciler retries them.
        try:
            current = self.slurm.nodes(nodes)
        except SlurmError as err:
            self._error(action=names.RESUME_FAIL, nodes=hostlists.compress(nodes), msg="scontrol failed", reason=short(err, LOG_REASON_MAX))
            return
        timed_out = sorted(n for n, s in current.items()
                           if n in nodes and s.down and not s.reason_is_ours and names.SLURM_RESUME_TIMEOUT_REASON in s.reason)
        if timed_out:
            self._slurm("down", lambda: self.slurm.mark_down(timed_out, names.REASON_RESUME_TIMEOUT), timed_out,
                        names.RESUME_FAIL, names.REASON_RESUME_TIMEOUT)

    # -- the reconciler --------------------------------------------------------
    def observe(self) -> tuple[dict, dict, reconcile.Pending, dict]:
        """(Slurm nodes, instances per node set, pending requests, state records). Raises SlurmError."""
        nodes = self.slurm.nodes()
        instances: dict[str, dict[str, Instance] | None] = {}
        for nodeset in self.config.nodesets:
            try:
                listing = self.provider(nodeset.name).instances()
            except (ProviderError, ValueError, OSError) as err:
                # Unknown is not empty: acting on a failed listing would mark every node "instance gone".
                self._error(nodeset=nodeset.name, msg="cannot list machines; machine rules skipped", reason=short(err, LOG_REASON_MAX))
                listing = None
            instances[nodeset.name] = listing
        requests, _ = queue.read(self.config.queue_dir)
        decided = queue.coalesce(requests)
        records = state.load(self.config.state_file)
        last_resume = state.last_resume_requests(records)
        for node, request in decided.items():
            if request.action == names.RESUME and request.at > last_resume.get(node, float("-inf")):
                last_resume[node] = request.at
        pending = reconcile.Pending(queued={n: r.action for n, r in decided.items()}, last_resume=last_resume)
        return nodes, instances, pending, records

    def settings(self) -> reconcile.Settings:
        return reconcile.Settings(self.config.node_map(), self.config.failed_retry_after, self.config.resume_grace)

    def reconcile(self, dry_run: bool = False, out=None) -> int:
        """One pass: observe, plan, apply (or print with ``dry_run``). Skips when a worker holds the lock."""
        try:
            with locking.hold(self.config.lock_file, 0 if self.lock_wait is None else self.lock_wait):
                try:
                    nodes, instances, pending, records = self.observe()
                except SlurmError as err:
                    self._error(msg="cannot read Slurm's nodes; nothing done", reason=short(err, LOG_REASON_MAX))
                    self.log.flush()
                    return 1
                actions = reconcile.plan(nodes, instances, pending, self.clock(), self.settings())
                if dry_run:
                    self.log.flush()
                    print_plan(actions, out)
                    return 1 if self.errors else 0
                for action in actions:
                    self.apply(action, records)
                self.log.flush()
                if actions:
                    state.save(self.config.state_file, records)
        except locking.LockBusy:
            self.log.event(msg="reconcile skipped: a worker holds the lock", lock=self.config.lock_file)
            self.log.flush()
            return 0
        return 1 if self.errors else 0

    def apply(self, action: reconcile.Action, records: dict) -> None:
        nodes = list(action.nodes)
        kind = action.kind
        now = self.clock()
        if kind == reconcile.TERMINATE:
            result = self._call_suspend(action.nodeset, nodes, kind)
            for node in sorted(set(result.stopped) & set(nodes)):
                self.log.node(node, kind, "stopped", why=action.why, nodeset=action.nodeset)
                if node in self.config.node_map():
                    state.record(records, node, kind, "stopped", now, reason=action.why)
            for node, why in sorted(result.failed.items()):
                if node in nodes and node not in result.stopped:
                    self.log.node(node, kind, "failed", reason=short(why, LOG_REASON_MAX), why=action.why, nodeset=action.nodeset)
        elif kind == reconcile.INSTANCE_GONE:
            self._down_and_power_down({names.REASON_INSTANCE_GONE: nodes}, kind)
            for node in nodes:
                state.record(records, node, kind, "down", now, reason=names.REASON_INSTANCE_GONE)
        elif kind == reconcile.POWER_DOWN:
            self._slurm("power-down", lambda: self.slurm.power_down(nodes), nodes, kind, action.why)
        elif kind == reconcile.RESUME_AGAIN:
            try:
                sent = queue.write(self.config.queue_dir, names.RESUME, nodes, now)
            except OSError as err:
                self._error(action=kind, msg="cannot queue in %s" % self.config.queue_dir, reason=err.strerror)
                return
            for node in nodes:
                self.log.node(node, kind, "requested", request=sent.id, why=action.why)
        elif kind == reconcile.RETURN_TO_SERVICE:
            if self._slurm("returned", lambda: self.slurm.return_to_service(nodes), nodes, kind, action.why):
                for node in nodes:
                    state.record(records, node, kind, "returned", now)
        else:  # pragma: no cover - plan() only returns the kinds above
            raise ValueError("unknown action %r" % kind)

    # -- status ------------------------------------------------------------------
    def status(self) -> list[dict]:
        """One row per node-set node: Slurm state, machine, last transition."""
        try:
            nodes = self.slurm.nodes()
            slurm_error = None
        except SlurmError as err:
            nodes, slurm_error = {}, short(err, LOG_REASON_MAX)
        rows = []
        records = state.load(self.config.state_file)
        for nodeset in self.config.nodesets:
            try:
                listing = self.provider(nodeset.name).instances()
                listing_error = None if listing is not None else "provider cannot list machines"
            except (ProviderError, ValueError, OSError) as err:
                listing, listing_error = None, short(err, LOG_REASON_MAX)
            for node in nodeset.members:
                slurm_node = nodes.get(node)
                machine = (listing or {}).get(node)
                record = records.get(node) or {}
                rows.append({
                    "node": node,
                    "nodeset": nodeset.name,
                    "slurm": slurm_node.describe() if slurm_node else ("?" if slurm_error else "unknown to Slurm"),
                    "reason": slurm_node.reason if slurm_node else slurm_error,
                    "machine": (None if machine is None else {"id": machine.id, "state": machine.state, "address": machine.address}),
                    "machine_error": listing_error,
                    "last": record or None,
                })
        return rows


def print_plan(actions: list[reconcile.Action], out=None) -> None:
    import sys

    out = out or sys.stdout
    if not actions:
        print("nothing to do", file=out)
    for action in actions:
        print("%s nodeset=%s nodes=%s count=%d why=%r" % (action.kind, action.nodeset, hostlists.compress(action.nodes),
                                                          len(action.nodes), action.why), file=out)


def format_status(rows: list[dict]) -> str:
    table = [("NODE", "NODESET", "SLURM", "MACHINE", "LAST TRANSITION")]
    for row in rows:
        machine = row["machine"]
        if machine:
            machine_text = "%s %s%s" % (machine["id"][:19], machine["state"], (" " + machine["address"]) if machine.get("address") else "")
        else:
            machine_text = "?" if row["machine_error"] else "-"
        last = row["last"]
        if last:
            last_text = "%s %s %s" % (last.get("at", "?")[:19] + "Z", last.get("action", "?"), last.get("result", "?"))
            if last.get("reason"):
                last_text += " (%s)" % short(last["reason"], 60)
        else:
            last_text = "-"
        slurm_text = row["slurm"] + ((" [%s]" % short(row["reason"], 50)) if row.get("reason") else "")
        table.append((row["node"], row["nodeset"], slurm_text, machine_text, last_text))
    widths = [max(len(r[i]) for r in table) for i in range(4)]
    lines = ["  ".join(cell.ljust(widths[i]) if i < 4 else cell for i, cell in enumerate(r)).rstrip() for r in table]
    notes = sorted({"%s: %s" % (r["nodeset"], r["machine_error"]) for r in rows if r["machine_error"]})
    return "\n".join(lines + ["", *("machines unknown for " + n for n in notes)] if notes else lines)
