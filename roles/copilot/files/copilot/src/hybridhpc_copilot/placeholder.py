"""The placeholder strategy, for Slurm nodes without the k8scpu/k8smemory GRES.

Kubernetes' share is held back from Slurm by Slurm itself: for each admission
the copilot starts a *placeholder job* pinned to the node with the pod's CPUs
and memory (rounded up to whole CPUs and MiB), and grants the admission only
once that job is RUNNING. Slurm's own accounting then keeps every other job
off those resources, on stock Slurm. Releasing the admission cancels the job.

Placeholder jobs are named ``copilot-placeholder/<GenericNode>/<admission uid>``
and found again by name on every pass: the name, not the copilot's memory,
ties a job to its admission, so a restarted copilot neither loses nor doubles
one. The ledger is written (Reserved) before the job is submitted, and an
active job no held admission names is cancelled.

A placeholder job that ends while its admission is Granted (a time limit, an
admin's scancel, a node failure) is started again, and the GenericNode shows
``Overcommitted`` until it runs.

A submission Slurm refuses (an invalid account, a QoS limit) denies the
admission with Slurm's words (``Observed.refusals``, kept by the executor)
instead of waiting for the reservation timeout.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from . import names
from .ledger import Ledger, LedgerEntry, SlurmStatus, entry_amounts, transition
from .model import (
    ACTIVE_STATES,
    Action,
    Capacity,
    Decision,
    DenyAdmission,
    GrantAdmission,
    Observed,
    PlaceholderJob,
    SlurmNode,
    job_name,
    parse_job_name,
)
from .strategy import NodeFacts, Step
from .units import MIB, cpus_for, mib_for

STRATEGY = "placeholder"

# The jobs themselves are observations (model), named here too: this is where readers look for them.
__all__ = ["ACTIVE_STATES", "STRATEGY", "CancelPlaceholder", "PlaceholderJob", "PlaceholderStrategy", "SubmitPlaceholder",
           "cancel_orphans", "job_name", "job_size", "parse_job_name"]


def job_size(entry: LedgerEntry) -> tuple[int, int]:
    """CPUs and MiB a placeholder job needs for a ledger entry (a Slurm job needs at least 1 of each)."""
    cpu, mem = entry_amounts(entry)
    return max(1, cpus_for(cpu)), max(1, mib_for(mem))


@dataclass(frozen=True)
class SubmitPlaceholder(Action):
    slurm_node: str
    job_name: str
    cpus: int
    memory_mb: int
    reason: str


@dataclass(frozen=True)
class CancelPlaceholder(Action):
    job_id: int
    job_name: str
    reason: str


class PlaceholderStrategy:
    """The :class:`strategy.Strategy` of nodes whose share Slurm jobs hold."""

    kind = STRATEGY
    reserving = "starting a Slurm placeholder job"
    awaited = "placeholder job"

    def __init__(self, facts: NodeFacts, observed: Observed):
        slurm = facts.slurm
        self.name, self.alias, self.slurm = facts.name, facts.alias, slurm
        self.reads_slurm = observed.slurm_jobs is not None
        self.active, self.ended = _jobs_of(facts.name, observed.slurm_jobs or ())
        self.refusals = observed.refusals
        self.cap = None
        if slurm is not None and not facts.duplicate and slurm.cpus > 0 and slurm.memory_mb > 0:
            self.cap = Capacity(slurm.cpus, slurm.memory_mb)
        self.usage = _usage_besides(slurm, [j for j in self.active.values() if j.state == "RUNNING"])

    def not_shared(self) -> str:
        return "Slurm node %s reports no CPUs or memory" % self.alias

    def refuse_new(self) -> str:
        if self.slurm is not None and self.slurm.drained:
            return "Slurm node %s is drained (%s): no placeholder job can start there" % (self.alias, self.slurm.reason or "no reason")
        return ""

    def held(self, ledger: Mapping[str, LedgerEntry]) -> tuple[int, int]:
        """What the placeholder jobs of the held admissions take, in millicores and bytes."""
        cpus = mem = 0
        for entry in ledger.values():
            if entry.get("state") in names.HOLDING_STATES:
                size = job_size(entry)
                cpus, mem = cpus + size[0], mem + size[1]
        return cpus * 1000, mem * MIB

    def settle_reserved(self, ledger: Ledger, reserved: list[str], stamp: str) -> Step:
        """Deny the newest reservations without a running job while Slurm's jobs leave no room; then grant
        those whose job runs, deny those whose job ended before it ran or that a drain keeps out."""
        ledger, crowded = self._deny_crowded_out(ledger, reserved, stamp)
        verdicts = {uid: self._verdict(uid) for uid in reserved if ledger[uid].get("state") == names.RESERVED}
        ledger = dict(ledger)
        decisions: list[Decision] = []
        for uid, (state, reason) in verdicts.items():
            if state:
                ledger[uid] = transition(ledger[uid], state, reason, stamp)
                decisions.append((GrantAdmission if state == names.GRANTED else DenyAdmission)(self.name, uid, reason))
        return ledger, crowded + decisions

    def _deny_crowded_out(self, ledger: Ledger, reserved: list[str], stamp: str) -> Step:
        """Slurm gave the room to its own jobs first: deny the newest reservations whose job does not run, until the rest fits."""
        reason = "Slurm allocated the resources before the placeholder job started (Slurm holds %d CPUs, %dMi)" % (self.usage)
        ledger = dict(ledger)
        decisions: list[Decision] = []
        for uid in reversed(reserved):
            if not self._over(ledger):
                break
            if uid in self.active and self.active[uid].state == "RUNNING":
                continue
            ledger[uid] = transition(ledger[uid], names.DENIED, reason, stamp)
            decisions.append(DenyAdmission(self.name, uid, reason))
        return ledger, decisions

    def _verdict(self, uid: str) -> tuple[str, str]:
        """``(new state, reason)`` of a reservation Slurm left room for (``("", "")``: it waits)."""
        job = self.active.get(uid)
        if job is not None and job.state == "RUNNING":
            return names.GRANTED, "placeholder job %d runs on %s" % (job.job_id, self.alias)
        if job is None and uid in self.ended:
            ended = self.ended[uid]
            return names.DENIED, "placeholder job %d ended %s before it ran" % (ended.job_id, ended.state)
        refusal = self.refusals.get(job_name(self.name, uid)) if job is None else None
        if refusal:
            return names.DENIED, "Slurm refused the placeholder job: %s" % refusal
        refused = self.refuse_new()
        return (names.DENIED, refused) if refused else ("", "")

    def _over(self, ledger: Ledger) -> bool:
        if self.cap is None:
            raise ValueError("Slurm node %s shares nothing" % self.alias)  # core settles only nodes that share
        held = self.held(ledger)
        return self.usage[0] * 1000 + held[0] > self.cap.cpus * 1000 or self.usage[1] * MIB + held[1] > self.cap.memory_mb * MIB

    def slurm_actions(self, ledger: Ledger) -> list[Action]:
        """A placeholder job for every held admission without one; cancel the jobs nothing holds."""
        actions: list[Action] = []
        holding = [uid for uid, entry in ledger.items() if entry.get("state") in names.HOLDING_STATES]
        for uid in holding:
            if uid in self.active:
                continue
            cpus, memory = job_size(ledger[uid])
            if ledger[uid].get("state") == names.GRANTED:
                reason = "the placeholder job of a granted admission ended: starting another"
            else:
                reason = "hold %d CPUs %dMi on %s for the admission" % (cpus, memory, self.alias)
            actions.append(SubmitPlaceholder(self.name, self.alias, job_name(self.name, uid), cpus, memory, reason))
        for uid, job in sorted(self.active.items()):
            if uid not in holding:
                actions.append(CancelPlaceholder(self.name, job.job_id, job.name, "no held admission needs it"))
        return actions

    def slurm_status(self, ledger: Ledger) -> SlurmStatus | None:
        if self.slurm is None or not self.reads_slurm:
            return None  # which jobs run is unknown: keep what the ledger recorded
        jobs = sorted(job.job_id for uid, job in self.active.items() if (ledger.get(uid) or {}).get("state") in names.HOLDING_STATES)
        return {"node": self.alias, "strategy": STRATEGY, "placeholderJobs": jobs}

    def overcommitted(self, ledger: Ledger) -> str:
        bare = sorted(
            uid for uid, entry in ledger.items() if entry.get("state") == names.GRANTED and (uid not in self.active or self.active[uid].state != "RUNNING")
        )
        if bare:
            return "granted admissions without a running placeholder job: " + ", ".join(bare)
        return ""

    def restored(self, ledger: Ledger) -> bool:
        return not self.active


def _jobs_of(generic_node: str, jobs: Iterable[PlaceholderJob]) -> tuple[dict[str, PlaceholderJob], dict[str, PlaceholderJob]]:
    """A GenericNode's newest active and newest ended placeholder job, per admission uid."""
    active: dict[str, PlaceholderJob] = {}
    ended: dict[str, PlaceholderJob] = {}
    for job in sorted(jobs, key=lambda j: j.job_id):
        owner = job.owner
        if owner is not None and owner[0] == generic_node:
            (active if job.active else ended)[owner[1]] = job
    return active, ended


def _usage_besides(slurm: SlurmNode | None, running: list[PlaceholderJob]) -> tuple[int, int]:
    """CPUs and MB Slurm allocated on the node to other jobs than the running placeholder jobs."""
    if slurm is None:
        return 0, 0
    alloc = (int(slurm.alloc_cpus or 0), int(slurm.alloc_memory_mb or 0))
    return max(0, alloc[0] - sum(j.cpus for j in running)), max(0, alloc[1] - sum(j.memory_mb for j in running))


def cancel_orphans(observed: Observed, owners: set[str]) -> list[Action]:
    """Active placeholder jobs of GenericNodes that no longer share a node (deleted, or another type)."""
    actions: list[Action] = []
    for job in sorted(observed.slurm_jobs or (), key=lambda j: j.job_id):
        owner = job.owner
        if job.active and owner is not None and owner[0] not in owners:
            actions.append(CancelPlaceholder(None, job.job_id, job.name, "GenericNode %s shares no node" % owner[0]))
    return actions
