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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from . import names
from .core import (
    MIB,
    Action,
    Capacity,
    DenyAdmission,
    GrantAdmission,
    Observed,
    SlurmNode,
    _transition,
    entry_amounts,
)
from .units import cpus_for, mib_for

STRATEGY = "placeholder"

# Job states in which a job still holds, or will hold, its resources.
ACTIVE_STATES = frozenset(("PENDING", "CONFIGURING", "RUNNING", "SUSPENDED", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESIZING", "SIGNALING", "STAGE_OUT"))


@dataclass(frozen=True)
class PlaceholderJob:
    """One of the copilot's placeholder jobs, as Slurm lists it."""

    job_id: int
    name: str
    state: str  # Slurm's base job state: PENDING, RUNNING, COMPLETED, CANCELLED, ...
    node: str = ""  # the node it runs on (or is pinned to)
    cpus: int = 0
    memory_mb: int = 0
    reason: str = ""  # why it is pending

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def owner(self) -> tuple[str, str] | None:
        """``(GenericNode, admission uid)`` from the job's name."""
        return parse_job_name(self.name)


def job_name(generic_node: str, uid: str) -> str:
    return "%s%s/%s" % (names.PLACEHOLDER_JOB_PREFIX, generic_node, uid)


def parse_job_name(name: str) -> tuple[str, str] | None:
    if not name.startswith(names.PLACEHOLDER_JOB_PREFIX):
        return None
    node, sep, uid = name[len(names.PLACEHOLDER_JOB_PREFIX) :].partition("/")
    return (node, uid) if sep and node and uid else None


def job_size(entry: Mapping) -> tuple[int, int]:
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


class PlaceholderSide:
    """What ``core.reconcile_node`` asks of a strategy, for placeholder nodes."""

    kind = STRATEGY
    reserving = "starting a Slurm placeholder job"

    def __init__(self, name: str, alias: str, slurm: SlurmNode | None, duplicate: bool, observed: Observed):
        self.name, self.alias, self.slurm = name, alias, slurm
        self.jobs_known = observed.slurm_jobs is not None
        self.active: dict[str, PlaceholderJob] = {}  # admission uid -> its newest active job
        self.ended: dict[str, PlaceholderJob] = {}  # admission uid -> its newest ended job
        for job in sorted(observed.slurm_jobs or (), key=lambda j: j.job_id):
            owner = job.owner
            if owner is not None and owner[0] == name:
                (self.active if job.active else self.ended)[owner[1]] = job
        self.cap = None
        if slurm is not None and not duplicate and slurm.cpus > 0 and slurm.memory_mb > 0:
            self.cap = Capacity(slurm.cpus, slurm.memory_mb)
        running = [j for j in self.active.values() if j.state == "RUNNING"]
        alloc = (int(slurm.alloc_cpus or 0), int(slurm.alloc_memory_mb or 0)) if slurm is not None else (0, 0)
        self.usage = (max(0, alloc[0] - sum(j.cpus for j in running)), max(0, alloc[1] - sum(j.memory_mb for j in running)))

    def not_shared(self, alias: str) -> str:
        return "Slurm node %s reports no CPUs or memory" % alias

    def refuse_new(self) -> str:
        if self.slurm is not None and self.slurm.drained:
            return "Slurm node %s is drained (%s): no placeholder job can start there" % (self.alias, self.slurm.reason or "no reason")
        return ""

    def held(self, ledger: Mapping) -> tuple[int, int]:
        """What the placeholder jobs of the held admissions take, in millicores and bytes."""
        cpus = mem = 0
        for entry in ledger.values():
            if entry.get("state") in names.HOLDING_STATES:
                size = job_size(entry)
                cpus, mem = cpus + size[0], mem + size[1]
        return cpus * 1000, mem * MIB

    def settle_reserved(self, ledger: dict, reserved: list, now: str, decisions: list) -> None:
        """Grant once the admission's placeholder job runs; deny if it ended before it ran, or if Slurm
        gave the room to its own jobs first (the newest reservations, until the rest fits)."""
        for uid in reversed(reserved):
            if not self._over(ledger):
                break
            if uid in self.active and self.active[uid].state == "RUNNING":
                continue
            reason = "Slurm allocated the resources before the placeholder job started (Slurm holds %d CPUs, %dMi)" % (self.usage)
            ledger[uid] = _transition(ledger[uid], names.DENIED, reason, now)
            decisions.append(DenyAdmission(self.name, uid, reason))
        for uid in [u for u in reserved if ledger[u].get("state") == names.RESERVED]:
            job = self.active.get(uid)
            if job is not None and job.state == "RUNNING":
                reason = "placeholder job %d runs on %s" % (job.job_id, self.alias)
                ledger[uid] = _transition(ledger[uid], names.GRANTED, reason, now)
                decisions.append(GrantAdmission(self.name, uid, reason))
            elif job is None and uid in self.ended:
                ended = self.ended[uid]
                reason = "placeholder job %d ended %s before it ran" % (ended.job_id, ended.state)
                ledger[uid] = _transition(ledger[uid], names.DENIED, reason, now)
                decisions.append(DenyAdmission(self.name, uid, reason))
            elif self.refuse_new():
                reason = self.refuse_new()
                ledger[uid] = _transition(ledger[uid], names.DENIED, reason, now)
                decisions.append(DenyAdmission(self.name, uid, reason))

    def _over(self, ledger: Mapping) -> bool:
        held = self.held(ledger)
        return self.usage[0] * 1000 + held[0] > self.cap.cpus * 1000 or self.usage[1] * MIB + held[1] > self.cap.memory_mb * MIB

    def slurm_actions(self, ledger: Mapping) -> list[Action]:
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

    def slurm_status(self, alias: str, ledger: Mapping) -> dict:
        jobs = sorted(job.job_id for uid, job in self.active.items() if (ledger.get(uid) or {}).get("state") in names.HOLDING_STATES)
        return {"node": alias, "strategy": STRATEGY, "placeholderJobs": jobs}

    def overcommitted(self, ledger: Mapping) -> str:
        bare = sorted(
            uid for uid, entry in ledger.items() if entry.get("state") == names.GRANTED and (uid not in self.active or self.active[uid].state != "RUNNING")
        )
        if bare:
            return "granted admissions without a running placeholder job: " + ", ".join(bare)
        return ""

    def restored(self, ledger: Mapping) -> bool:
        return not self.active


def cancel_orphans(observed: Observed, owners: set) -> list[Action]:
    """Active placeholder jobs of GenericNodes that no longer share a node (deleted, or another type)."""
    actions: list[Action] = []
    for job in sorted(observed.slurm_jobs or (), key=lambda j: j.job_id):
        owner = job.owner
        if job.active and owner is not None and owner[0] not in owners:
            actions.append(CancelPlaceholder(None, job.job_id, job.name, "GenericNode %s shares no node" % owner[0]))
    return actions
