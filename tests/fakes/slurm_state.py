"""Slurm's state behind the tests' one slurmrestd (``fakes/slurmrestd.py``): nodes, jobs and slurmctld's rules.

It schedules jobs against the count-only GRES like slurmctld does, reverts the
GRES on reconfigure, and records every change so tests can check the rules
(never above the configured count, never a drain cleared that it did not set).
Nothing talks to it but the fake slurmrestd, which turns its views
(:class:`NodeView`, :class:`Job`) into slurmrestd's JSON: the copilot and the
collection's modules read Slurm only through their real slurmrestd clients.
Tests play what happens in Slurm without those clients on it (users' jobs,
reconfigures, admins). ``fault(operation, node)`` runs before each call
slurmrestd makes of it: a :class:`SlurmctldDown` it raises is answered as
slurmctld not answering, a :class:`SlurmctldRefused` as Slurm's error.

It imports nothing from the code under test: the names it shares with the
copilot (the GRES, the drain reasons) are slurm.conf's and slurmctld's, and
the copilot's tests check they agree. Test code only: nothing installs it.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

# The collection's count-only GRES (GresTypes in slurm.conf): CPUs and MB Kubernetes may use on a shared node.
GRES_CPU = "k8scpu"
GRES_MEMORY = "k8smemory"
# slurmctld's drain reason when slurmd registers a count that jobs hold (gres.c, _node_config_validate).
REGISTRATION_REASON = r"gres/(%s|%s) count changed and jobs are using them \((\d+) != (\d+)\)" % (GRES_CPU, GRES_MEMORY)
# The drains a RESUME may clear without breaking the copilot's rule: its own (reason "copilot: ...") and
# refused registrations; clearing any other (an admin's) is recorded in ``violations``.
RESUMABLE_DRAINS = re.compile(r"^copilot:|" + REGISTRATION_REASON)
# Job states in which a job holds (or waits for) resources.
ACTIVE_STATES = frozenset(("PENDING", "RUNNING"))

# slurm_errno.h
ACCESS_DENIED = 2002
INVALID_JOB_ID = 2017
INVALID_NODE_NAME = 2018
INVALID_NODE_STATE = 2030
REASON_REQUIRED = 2064
INVALID_GRES = 2072


class SlurmctldRefused(Exception):
    """slurmctld refused a request: ``number`` is its slurm_errno, ``error`` its text, ``description`` the detail."""

    def __init__(self, number: int, error: str, description: str = ""):
        super().__init__(description or error)
        self.number, self.error, self.description = number, error, description or error


class SlurmctldDown(Exception):
    """slurmctld does not answer (slurmrestd says "Unable to contact slurm controller")."""


def split_gres(gres: str | None) -> list[tuple[str, str, int]]:
    """``(name, type, count)`` of each entry of a Gres string, as Slurm reads it.

    ``gpu:a100:2(S:0-1)`` is ``("gpu", "a100", 2)``: annotations in parentheses
    (which may hold commas) are dropped, a count may carry K/M/G/T/P, an entry
    without a count counts 1; ``(null)`` and ``N/A`` are no GRES.
    """
    if not gres or gres.strip() in ("(null)", "N/A"):
        return []
    entries = []
    for raw in re.sub(r"\([^)]*\)", "", gres).split(","):
        parts = raw.strip().split(":")
        if not parts[0]:
            continue
        count = re.match(r"^(\d+)([KMGTP]?)$", parts[-1], re.IGNORECASE) if len(parts) > 1 else None
        if count:
            scale = 2 ** (10 * " KMGTP".index(count.group(2).upper() or " "))
            entries.append((parts[0], ":".join(parts[1:-1]), int(count.group(1)) * scale))
        else:
            entries.append((parts[0], ":".join(parts[1:]), 1))
    return entries


def parse_gres(gres: str | None) -> dict[str, int]:
    """Total count per GRES name (types summed)."""
    totals: dict[str, int] = {}
    for name, _kind, count in split_gres(gres):
        totals[name] = totals.get(name, 0) + count
    return totals


def replace_gres(gres: str | None, counts: dict[str, int]) -> str:
    """The Gres string with ``counts`` replacing (or adding) untyped entries, every other GRES kept."""
    out, done = [], set()
    for name, kind, count in split_gres(gres):
        if name in counts:
            if name not in done:
                out.append("%s:%d" % (name, counts[name]))
                done.add(name)
            continue
        out.append(":".join([name] + ([kind] if kind else []) + [str(count)]))
    out += ["%s:%d" % (name, counts[name]) for name in sorted(counts) if name not in done]
    return ",".join(out)


@dataclass(frozen=True)
class NodeView:
    """One node as slurmctld describes it (what slurmrestd's node JSON carries)."""

    name: str
    gres: str
    gres_used: str
    alloc_cpus: int
    alloc_memory_mb: int
    states: tuple[str, ...]
    reason: str
    cpus: int
    memory_mb: int
    features: tuple[str, ...] | None = None
    weight: int | None = None
    comment: str | None = None
    extra: str | None = None


@dataclass(frozen=True)
class Job:
    """A batch job submitted through slurmrestd (the placeholder jobs, or any job a client submits)."""

    job_id: int
    name: str
    state: str  # PENDING, RUNNING, CANCELLED, ...
    node: str = ""  # the node it is pinned to (required_nodes); "" for a job the fake never schedules
    cpus: int = 1
    memory_mb: int = 0
    reason: str = ""  # why it is pending
    user_name: str = "slurm"
    partition: str = ""

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES


@dataclass
class FakeNode:
    name: str
    cpus: int  # configured k8scpu (and the node's CPUs)
    memory_mb: int  # configured k8smemory (and its RealMemory)
    other_gres: str = ""  # e.g. "gpu:2", kept through every update
    count_cpu: int = -1
    count_mem: int = -1
    jobs: dict = field(default_factory=dict)  # job id -> (cpus, mb, started while reverted)
    states: list = field(default_factory=lambda: ["IDLE"])
    reason: str = ""
    reverted: bool = False  # GRES back at slurm.conf's counts since the last update
    registered: tuple = ()  # the counts slurmd last registered with (slurmctld's gres_cnt_found)
    gres_shared: bool = True  # False: a stock node without k8scpu/k8smemory (the placeholder strategy, the modules' tests)
    placeholders: tuple = (0, 0)  # CPUs and MB the running batch jobs pinned to it hold
    deleted: bool = False  # ``scontrol delete nodename``: gone from Slurm until a reconfigure reads slurm.conf again
    gres_set: str | None = None  # a stock node's Gres as last updated (None: slurm.conf's ``other_gres``)
    features: list | None = None  # the optional fields below: None leaves them out of slurmrestd's JSON
    weight: int | None = None
    comment: str | None = None
    extra: str | None = None

    def __post_init__(self):
        if self.count_cpu < 0:
            self.count_cpu = self.cpus
        if self.count_mem < 0:
            self.count_mem = self.memory_mb
        if not self.registered:
            self.registered = (self.count_cpu, self.count_mem)

    @property
    def used(self) -> tuple[int, int]:
        return sum(j[0] for j in self.jobs.values()), sum(j[1] for j in self.jobs.values())

    @property
    def gres(self) -> str:
        if not self.gres_shared:
            return self.other_gres if self.gres_set is None else self.gres_set
        return replace_gres(self.other_gres, {GRES_CPU: self.count_cpu, GRES_MEMORY: self.count_mem})

    def fits(self, cpus: int, memory_mb: int) -> bool:
        """Whether a job of this size can start now (slurmctld's view: GRES counts, or CPUs and memory)."""
        used = self.used
        if "DRAIN" in self.states or self.deleted:
            return False
        if self.gres_shared:
            return used[0] + cpus <= self.count_cpu and used[1] + memory_mb <= self.count_mem
        held = self.placeholders
        return used[0] + held[0] + cpus <= self.cpus and used[1] + held[1] + memory_mb <= self.memory_mb

    def view(self) -> NodeView:
        used = self.used
        held = self.placeholders
        base = "MIXED" if self.jobs or any(held) else "IDLE"
        states = [base] + [s for s in self.states if s not in ("IDLE", "MIXED")]
        return NodeView(
            name=self.name,
            gres=self.gres,
            gres_used="%s:%d,%s:%d" % (GRES_CPU, used[0], GRES_MEMORY, used[1]) if self.gres_shared else "",
            alloc_cpus=used[0] + held[0],
            alloc_memory_mb=used[1] + held[1],
            states=tuple(states),
            reason=self.reason,
            cpus=self.cpus,
            memory_mb=self.memory_mb,
            features=None if self.features is None else tuple(self.features),
            weight=self.weight,
            comment=self.comment,
            extra=self.extra,
        )


class FakeSlurm:
    """An in-memory Slurm with the count-only GRES rules of LAB-NOTES.

    ``fault(operation, node)`` (optional) may raise to inject failures, and
    runs before every call: tests also use it to interleave other events.
    ``controller_up = False``: slurmctld answers nothing (slurmrestd's ping
    says DOWN, every other call fails). Job ids start at ``first_job_id``.
    """

    def __init__(self, nodes: Iterable[FakeNode] = (), fault: Callable | None = None, first_job_id: int = 1):
        self.nodes = {n.name: n for n in nodes}
        self.fault = fault
        self.controller_up = True
        self.calls: list = []
        self.violations: list[str] = []
        self.next_job_id = first_job_id
        self.jobs: dict[int, Job] = {}  # the batch jobs submitted through slurmrestd, by id

    def _new_id(self) -> int:
        job_id, self.next_job_id = self.next_job_id, self.next_job_id + 1
        return job_id

    def schedule(self) -> None:
        """slurmctld's scheduler: start the pending jobs pinned to a node that fit there, oldest first."""
        for job_id in sorted(self.jobs):
            job = self.jobs[job_id]
            node = self.nodes.get(job.node)
            if job.state == "PENDING" and node is not None and node.fits(job.cpus, job.memory_mb):
                self.jobs[job_id] = dataclasses.replace(job, state="RUNNING")
                node.placeholders = (node.placeholders[0] + job.cpus, node.placeholders[1] + job.memory_mb)

    # -- what slurmrestd asks of slurmctld --------------------------------------------------------
    def _check(self, operation, node=None):
        self.calls.append((operation, node))
        if self.fault is not None:
            self.fault(operation, node)

    def node_states(self, names: Iterable[str] | None = None) -> dict[str, NodeView]:
        self._check("node_states")
        self.schedule()
        wanted = self.nodes if names is None else [n for n in names if n in self.nodes]
        return {n: self.nodes[n].view() for n in wanted if not self.nodes[n].deleted}

    def set_node_gres(self, name: str, gres: str) -> None:
        self._check("set_node_gres", name)
        node = self._node(name)
        if not node.gres_shared:  # a stock node: Slurm takes the whole string
            node.gres_set = gres
            return
        counts = parse_gres(gres)
        cpu, mem = counts.get(GRES_CPU), counts.get(GRES_MEMORY)
        if cpu is None or mem is None:
            self.violations.append("%s: Gres %r drops k8scpu/k8smemory" % (name, gres))
            raise SlurmctldRefused(INVALID_GRES, "Invalid generic resource (gres) specification")
        if cpu > node.cpus or mem > node.memory_mb:
            self.violations.append("%s: Gres %r above the configured k8scpu:%d,k8smemory:%d" % (
                name, gres, node.cpus, node.memory_mb))
        other = {k: v for k, v in counts.items() if k not in (GRES_CPU, GRES_MEMORY)}
        if other != parse_gres(node.other_gres):
            self.violations.append("%s: Gres %r changed other GRES %r" % (name, gres, node.other_gres))
        node.count_cpu, node.count_mem = cpu, mem  # Slurm accepts a count under the usage too
        node.reverted = False

    def list_jobs(self) -> list[Job]:
        """Every batch job slurmctld still knows (as ``GET /jobs`` lists them; no fault, no ``calls`` entry)."""
        self.schedule()
        return list(self.jobs.values())

    def submit_job(self, name: str, node: str, cpus: int, memory_mb: int, user_name: str = "slurm", partition: str = "") -> int:
        """A batch job, pinned to ``node`` (or to none: ``""``, which the fake never schedules)."""
        self._check("submit_job", node)
        if node:
            self._node(node)
        if any(j.name == name and j.active for j in self.jobs.values()):
            self.violations.append("%s: a second active job %r" % (node, name))
        job_id = self._new_id()
        self.jobs[job_id] = Job(job_id, name, "PENDING", node, cpus, memory_mb, user_name=user_name, partition=partition)
        return job_id

    def cancel_job(self, job_id: int) -> None:
        self._check("cancel_job")
        self.end_batch_job(job_id, "CANCELLED")

    def end_batch_job(self, job_id: int, state: str) -> None:
        """A batch job ends (scancel, a time limit): its resources go back to Slurm."""
        job = self.jobs.get(job_id)
        if job is None or not job.active:
            return
        node = self.nodes.get(job.node)
        if job.state == "RUNNING" and node is not None:
            node.placeholders = (node.placeholders[0] - job.cpus, node.placeholders[1] - job.memory_mb)
        self.jobs[job_id] = dataclasses.replace(job, state=state)

    def drain_node(self, name: str, reason: str) -> None:
        self._check("drain_node", name)
        node = self._node(name)
        if not reason:
            raise SlurmctldRefused(REASON_REQUIRED, "You must specify a reason when DRAINING a node")
        if "DRAIN" not in node.states:
            node.states.append("DRAIN")
        node.reason = reason

    def resume_node(self, name: str) -> None:
        self._check("resume_node", name)
        node = self._node(name)
        if "INVALID_REG" in node.states or not {"DRAIN", "DOWN"} & set(node.states):
            raise SlurmctldRefused(INVALID_NODE_STATE, "Invalid node state specified",
                                   "Invalid node state transition requested for node %s from=%s to=RESUME" % (
                                       name, "INVAL" if "INVALID_REG" in node.states else node.view().states[0]))
        if "DRAIN" in node.states and not RESUMABLE_DRAINS.search(node.reason):
            self.violations.append("%s: resumed a drain the copilot did not set or cause (%r)" % (name, node.reason))
        node.states[:] = [s for s in node.states if s not in ("DRAIN", "DOWN")] or ["IDLE"]
        node.reason = ""
        self.register(name)  # slurmctld asks a resumed node to register again

    def _node(self, name) -> FakeNode:
        if name not in self.nodes or self.nodes[name].deleted:
            raise SlurmctldRefused(INVALID_NODE_NAME, "Invalid node name specified")
        return self.nodes[name]

    # -- what happens in Slurm without slurmrestd ---------------------------------------------------
    def start_job(self, name: str, cpus: int, memory_mb: int) -> int | None:
        """Start a job if the node's free k8scpu/k8smemory allow it (as slurmctld schedules)."""
        node = self.nodes[name]
        if not node.fits(cpus, memory_mb):
            return None
        job = self._new_id()
        node.jobs[job] = (cpus, memory_mb, node.reverted)
        return job

    def end_job(self, name: str, job: int) -> None:
        self.nodes[name].jobs.pop(job, None)

    def reconfigure(self, name: str | None = None) -> None:
        """``scontrol reconfigure`` or a slurmctld restart: GRES back to slurm.conf, every slurmd registers.

        The new slurmctld has no registered counts yet, so every registration
        passes and records slurm.conf's counts.
        """
        for node in self.nodes.values() if name is None else [self.nodes[name]]:
            node.deleted = False  # slurm.conf still lists it
            node.gres_set = None
            if (node.count_cpu, node.count_mem) != (node.cpus, node.memory_mb):
                node.count_cpu, node.count_mem = node.cpus, node.memory_mb
                node.reverted = True
            node.registered = (node.cpus, node.memory_mb)
            if "INVALID_REG" in node.states:
                node.states.remove("INVALID_REG")

    def register(self, name: str) -> bool:
        """slurmd registers (restart, ``systemctl reload slurmd``, slurmctld's periodic request).

        As slurmctld does (gres.c, _node_config_validate): slurmd reports
        slurm.conf's count, cut to the node's current count; when that differs
        from the count last registered and jobs hold the GRES, the node goes
        INVALID_REG + DRAIN (the reason names the first such GRES; an older
        drain reason stays), else the new count is recorded. Returns whether
        the registration passed.
        """
        node = self.nodes[name]
        if not node.gres_shared:
            return True
        used = node.used
        registered = list(node.registered)
        problem = ""
        for i, (gres, count) in enumerate(((GRES_CPU, node.count_cpu), (GRES_MEMORY, node.count_mem))):
            if registered[i] != count:
                if used[i]:
                    problem = problem or "gres/%s count changed and jobs are using them (%d != %d)" % (
                        gres, registered[i], count)
                else:
                    registered[i] = count
        node.registered = tuple(registered)
        if problem:
            for state in ("DRAIN", "INVALID_REG"):
                if state not in node.states:
                    node.states.append(state)
            node.reason = node.reason or problem
            return False
        if "INVALID_REG" in node.states:
            node.states.remove("INVALID_REG")
        return True

    def delete_node(self, name: str) -> None:
        """``scontrol delete nodename=NAME``: Slurm forgets the node (and its drain) until slurm.conf is read again."""
        node = self.nodes[name]
        node.deleted, node.states, node.reason = True, ["IDLE"], ""

    def admin_drain(self, name: str, reason: str) -> None:
        node = self.nodes[name]
        if "DRAIN" not in node.states:
            node.states.append("DRAIN")
        node.reason = reason

    def admin_resume(self, name: str) -> None:
        node = self.nodes[name]
        if "DRAIN" in node.states and "INVALID_REG" not in node.states:
            node.states.remove("DRAIN")
            node.reason = ""
            self.register(name)
