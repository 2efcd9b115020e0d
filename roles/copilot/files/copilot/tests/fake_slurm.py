"""Slurm's state behind the tests' one slurmrestd (``fake_slurmrestd.py``): nodes, jobs and slurmctld's rules.

It schedules jobs against the count-only GRES like slurmctld does, reverts the
GRES on reconfigure, and records every change so tests can check the rules
(never above the configured count, never a drain cleared that it did not set).
The copilot never talks to it directly: tests give it ``RestSlurm`` through
``fake_slurmrestd`` (``rest_slurm_of(slurm)``, no socket), and play what
happens in Slurm without the copilot (jobs, reconfigures, admins) on it.
``fault(operation, node)`` runs before each call slurmrestd makes of it: an
``SlurmUnavailable`` it raises is answered as slurmctld not answering.
Test code only: the copilot role installs nothing of it.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Callable

from hybridhpc_copilot import names
from hybridhpc_copilot.model import PlaceholderJob, SlurmNode
from hybridhpc_copilot.slurm import SlurmRefused
from hybridhpc_copilot.units import parse_gres, replace_gres


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
    gres_shared: bool = True  # False: a stock node without k8scpu/k8smemory (the placeholder strategy)
    placeholders: tuple = (0, 0)  # CPUs and MB the running placeholder jobs hold
    deleted: bool = False  # ``scontrol delete nodename``: gone from Slurm until a reconfigure reads slurm.conf again

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
            return self.other_gres
        return replace_gres(self.other_gres, {names.GRES_CPU: self.count_cpu, names.GRES_MEMORY: self.count_mem})

    def fits(self, cpus: int, memory_mb: int) -> bool:
        """Whether a job of this size can start now (slurmctld's view: GRES counts, or CPUs and memory)."""
        used = self.used
        if "DRAIN" in self.states or self.deleted:
            return False
        if self.gres_shared:
            return used[0] + cpus <= self.count_cpu and used[1] + memory_mb <= self.count_mem
        held = self.placeholders
        return used[0] + held[0] + cpus <= self.cpus and used[1] + held[1] + memory_mb <= self.memory_mb

    def view(self) -> SlurmNode:
        used = self.used
        held = self.placeholders
        states = list(self.states)
        base = "MIXED" if self.jobs or any(held) else "IDLE"
        states = [base] + [s for s in states if s not in ("IDLE", "MIXED")]
        return SlurmNode(
            name=self.name,
            gres=self.gres,
            gres_used="%s:%d,%s:%d" % (names.GRES_CPU, used[0], names.GRES_MEMORY, used[1]) if self.gres_shared else "",
            alloc_cpus=used[0] + held[0],
            alloc_memory_mb=used[1] + held[1],
            states=tuple(states),
            reason=self.reason,
            cpus=self.cpus,
            memory_mb=self.memory_mb,
        )


class FakeSlurm:
    """An in-memory Slurm with the count-only GRES rules of LAB-NOTES.

    ``fault(operation, node)`` (optional) may raise to inject failures, and
    runs before every call: tests also use it to interleave other events.
    """

    def __init__(self, nodes: Iterable[FakeNode] = (), fault: Callable | None = None):
        self.nodes = {n.name: n for n in nodes}
        self.fault = fault
        self.calls: list = []
        self.violations: list[str] = []
        self._ids = itertools.count(1)
        self.jobs: dict[int, PlaceholderJob] = {}  # the placeholder jobs, by id

    def schedule(self) -> None:
        """slurmctld's scheduler: start the pending placeholder jobs that fit, oldest first."""
        for job_id in sorted(self.jobs):
            job = self.jobs[job_id]
            node = self.nodes.get(job.node)
            if job.state == "PENDING" and node is not None and node.fits(job.cpus, job.memory_mb):
                self.jobs[job_id] = PlaceholderJob(job_id, job.name, "RUNNING", job.node, job.cpus, job.memory_mb)
                node.placeholders = (node.placeholders[0] + job.cpus, node.placeholders[1] + job.memory_mb)

    # -- the interface -----------------------------------------------------------
    def _check(self, operation, node=None):
        self.calls.append((operation, node))
        if self.fault is not None:
            self.fault(operation, node)

    def node_states(self, names: Iterable[str] | None = None) -> dict[str, SlurmNode]:
        self._check("node_states")
        self.schedule()
        wanted = self.nodes if names is None else [n for n in names if n in self.nodes]
        return {n: self.nodes[n].view() for n in wanted if not self.nodes[n].deleted}

    def set_node_gres(self, name: str, gres: str) -> None:
        self._check("set_node_gres", name)
        node = self._node(name)
        counts = parse_gres(gres)
        cpu, mem = counts.get(names.GRES_CPU), counts.get(names.GRES_MEMORY)
        if cpu is None or mem is None:
            self.violations.append("%s: Gres %r drops k8scpu/k8smemory" % (name, gres))
            raise SlurmRefused("Invalid generic resource (gres) specification")
        if cpu > node.cpus or mem > node.memory_mb:
            self.violations.append("%s: Gres %r above the configured k8scpu:%d,k8smemory:%d" % (
                name, gres, node.cpus, node.memory_mb))
        other = {k: v for k, v in counts.items() if k not in (names.GRES_CPU, names.GRES_MEMORY)}
        if other != parse_gres(node.other_gres):
            self.violations.append("%s: Gres %r changed other GRES %r" % (name, gres, node.other_gres))
        node.count_cpu, node.count_mem = cpu, mem  # Slurm accepts a count under the usage too
        node.reverted = False

    def placeholder_jobs(self, wanted: Callable[[str], bool] | None = None) -> list[PlaceholderJob]:
        self._check("placeholder_jobs")
        self.schedule()
        return list(self.jobs.values())

    def submit_placeholder(self, name: str, node: str, cpus: int, memory_mb: int) -> int:
        self._check("submit_placeholder", node)
        self._node(node)
        if any(j.name == name and j.active for j in self.jobs.values()):
            self.violations.append("%s: a second active placeholder job %r" % (node, name))
        job_id = next(self._ids)
        self.jobs[job_id] = PlaceholderJob(job_id, name, "PENDING", node, cpus, memory_mb)
        return job_id

    def cancel_job(self, job_id: int) -> None:
        self._check("cancel_job")
        self.end_placeholder(job_id, "CANCELLED")

    def end_placeholder(self, job_id: int, state: str) -> None:
        """A placeholder job ends (scancel, a time limit): its resources go back to Slurm."""
        job = self.jobs.get(job_id)
        if job is None or not job.active:
            return
        node = self.nodes.get(job.node)
        if job.state == "RUNNING" and node is not None:
            node.placeholders = (node.placeholders[0] - job.cpus, node.placeholders[1] - job.memory_mb)
        self.jobs[job_id] = PlaceholderJob(job_id, job.name, state, job.node, job.cpus, job.memory_mb)

    def drain_node(self, name: str, reason: str) -> None:
        self._check("drain_node", name)
        node = self._node(name)
        if not reason:
            raise SlurmRefused("You must specify a reason when DRAINING a node")
        if "DRAIN" not in node.states:
            node.states.append("DRAIN")
        node.reason = reason

    def resume_node(self, name: str) -> None:
        self._check("resume_node", name)
        node = self._node(name)
        if "INVALID_REG" in node.states:
            raise SlurmRefused("Invalid node state transition requested for node %s from=INVAL to=RESUME" % name)
        if "DRAIN" not in node.states:
            raise SlurmRefused("Invalid node state transition requested for node %s from=IDLE to=RESUME" % name)
        if not (node.reason.startswith(names.DRAIN_REASON_PREFIX) or re.search(names.REGISTRATION_REASON, node.reason)):
            self.violations.append("%s: resumed a drain the copilot did not set or cause (%r)" % (name, node.reason))
        node.states.remove("DRAIN")
        node.reason = ""
        self.register(name)  # slurmctld asks a resumed node to register again

    def _node(self, name) -> FakeNode:
        if name not in self.nodes or self.nodes[name].deleted:
            raise SlurmRefused("Invalid node name specified (error 2018)")
        return self.nodes[name]

    # -- what happens in Slurm without the copilot ----------------------------------
    def start_job(self, name: str, cpus: int, memory_mb: int) -> int | None:
        """Start a job if the node's free k8scpu/k8smemory allow it (as slurmctld schedules)."""
        node = self.nodes[name]
        if not node.fits(cpus, memory_mb):
            return None
        job = next(self._ids)
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
        for i, (gres, count) in enumerate(((names.GRES_CPU, node.count_cpu), (names.GRES_MEMORY, node.count_mem))):
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
