# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""From slurmrestd's answers to metric samples: pure, no I/O.

Input is what slurmrestd answers for ``/nodes``, ``/jobs`` and ``/ping``:
data_parser v0.0.40 to v0.0.45 (Slurm 24.11 and later), and openapi/v0.0.38
(Slurm 22.05), whose node state is one lower-case word plus ``state_flags``,
whose numbers are plain, and whose pings say ``ping: UP``. A node entry is reduced
to a :class:`Node` as it is decoded (:func:`node_of`), so a scrape of
thousands of nodes never holds their ~60 fields each.

Names that Slurm's own metrics/openmetrics plugin (25.11+) serves keep its
name, type and meaning (``slurm_nodes_down``, ``slurm_jobs_pending``,
``slurm_partition_jobs_pending{partition}``, ``slurm_node_cpus_alloc{node}``):
rules written for one work on the other. Memory follows Slurm's names
(``..._bytes``): slurmrestd gives MiB, so it is multiplied out.
Names Slurm does not serve start ``hybridhpc_slurm_``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

MIB = 1024 * 1024
GAUGE = "gauge"

# Slurm's base node states (node_state_string's first word), lower case as its metric names.
BASE_STATES = ("idle", "alloc", "mixed", "down", "future", "unknown", "error")
_BASE_OF = {"IDLE": "idle", "ALLOCATED": "alloc", "MIXED": "mixed", "DOWN": "down", "FUTURE": "future",
            "UNKNOWN": "unknown", "ERROR": "error"}
# Flags counted by Slurm's nodes metrics: our flag -> the suffix of slurm_nodes_<suffix>.
FLAG_METRICS = {
    "COMPLETING": "completing", "CLOUD": "cloud", "DRAIN": "drain", "FAIL": "fail", "INVALID_REG": "invalid_reg",
    "MAINTENANCE": "maint", "NOT_RESPONDING": "noresp", "PLANNED": "planned", "POWER_DOWN": "power_down",
    "POWERING_UP": "powering_up", "POWERED_DOWN": "powered_down", "POWER_UP": "power_up",
    "REBOOT_ISSUED": "reboot_issued", "REBOOT_REQUESTED": "reboot_req", "RESERVED": "resv",
    "DYNAMIC_FUTURE": "dyn_future", "DYNAMIC_NORM": "dyn_normal", "EXTERNAL": "external", "BLOCKED": "blocked",
}
# Job states counted as slurm_jobs_<suffix> (Slurm's job_state_string, lower case; OUT_OF_MEMORY is "outofmemory").
JOB_STATES = {
    "PENDING": "pending", "RUNNING": "running", "SUSPENDED": "suspended", "COMPLETED": "completed",
    "CANCELLED": "cancelled", "FAILED": "failed", "TIMEOUT": "timeout", "NODE_FAIL": "node_failed",
    "PREEMPTED": "preempted", "BOOT_FAIL": "bootfail", "DEADLINE": "deadline", "OUT_OF_MEMORY": "outofmemory",
}
JOB_FLAGS = {"COMPLETING": "completing", "CONFIGURING": "configuring", "REQUEUED": "requeued", "RESIZING": "resizing",
             "SIGNALING": "signaling", "STAGE_OUT": "stageout", "REVOKED": "revoked", "POWER_UP_NODE": "powerup_node"}
_GPU = re.compile(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)")


@dataclass(frozen=True)
class Node:
    name: str
    states: tuple[str, ...]
    reason: str
    partitions: tuple[str, ...]
    cpus: int
    cpus_alloc: int
    cpus_effective: int
    memory_mib: int
    memory_alloc_mib: int
    memory_free_mib: int | None
    memory_effective_mib: int
    gpus: int
    gpus_alloc: int

    @property
    def base(self) -> str:
        for state in self.states:
            if state in _BASE_OF:
                return _BASE_OF[state]
        return "unknown"

    @property
    def state_text(self) -> str:
        """Slurm's own spelling: ``IDLE+DRAIN``, ``DOWN+CLOUD+POWERED_DOWN``."""
        return "+".join(self.states) or "UNKNOWN"


def number(value: Any) -> int | None:
    """slurmrestd's numbers: a plain int, or ``{"set", "infinite", "number"}`` (None when unset or infinite)."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def gpu_count(gres: str) -> int:
    """GPUs in a Gres string: ``gpu:2``, ``gpu:a100:2(S:0-1)``, ``gpu:a100:1(IDX:0),gpu:v100:1(IDX:1)``."""
    return sum(int(count) for count in _GPU.findall(gres or ""))


def node_states(entry: dict[str, Any]) -> tuple[str, ...]:
    """A node's states, upper case: a list from v0.0.40; v0.0.38's base word (``idle``) followed by its ``state_flags``."""
    state = entry.get("state") or []
    if isinstance(state, str):
        state = [state, *(entry.get("state_flags") or [])]
    return tuple(str(s).upper() for s in state)


def free_memory(entry: dict[str, Any]) -> int | None:
    """Free MiB: ``free_mem`` from v0.0.40, ``free_memory`` in v0.0.38 (negative when slurmd has not reported it)."""
    value = number(entry["free_mem"] if "free_mem" in entry else entry.get("free_memory"))
    return value if value is None or value >= 0 else None


def node_of(entry: dict[str, Any]) -> Node:
    """The few fields of a slurmrestd node entry the metrics use."""
    states = node_states(entry)
    cpus = number(entry.get("cpus")) or 0
    specialized = number(entry.get("specialized_memory")) or 0
    memory = number(entry.get("real_memory")) or 0
    return Node(
        name=str(entry.get("name") or ""),
        states=states,
        reason=str(entry.get("reason") or ""),
        partitions=tuple(str(p) for p in (entry.get("partitions") or [])),
        cpus=cpus,
        cpus_alloc=number(entry.get("alloc_cpus")) or 0,
        cpus_effective=number(entry.get("effective_cpus")) or cpus,
        memory_mib=memory,
        memory_alloc_mib=number(entry.get("alloc_memory")) or 0,
        memory_free_mib=free_memory(entry),
        memory_effective_mib=max(memory - specialized, 0),
        gpus=gpu_count(str(entry.get("gres") or "")),
        gpus_alloc=gpu_count(str(entry.get("gres_used") or "")),
    )


@dataclass(frozen=True)
class Job:
    states: tuple[str, ...]
    partition: str
    submit_time: int | None


def job_of(entry: dict[str, Any]) -> Job:
    states = entry.get("job_state") or []
    if isinstance(states, str):
        states = [states]
    # A job submitted to several partitions lists them comma-separated; it waits in the first it names.
    partition = str(entry.get("partition") or "").split(",")[0]
    return Job(states=tuple(str(s).upper() for s in states), partition=partition, submit_time=number(entry.get("submit_time")))


def pinged_up(entry: dict[str, Any]) -> bool:
    """``responding`` (v0.0.45), ``pinged: UP`` (v0.0.40 to v0.0.44) or ``ping: UP`` (v0.0.38)."""
    if "responding" in entry:
        return bool(entry["responding"])
    return str(entry.get("pinged", entry.get("ping", ""))).upper() == "UP"


# -- families ---------------------------------------------------------------------------------------
# A family is (name, help, labels, samples) with samples [(label values, value)].
Family = tuple[str, str, tuple[str, ...], list[tuple[tuple[str, ...], float]]]


def node_families(nodes: Iterable[Node], slurm_names: bool) -> Iterator[Family]:
    nodes = list(nodes)
    yield ("hybridhpc_slurm_node_state_info",
           "1 for each node, labelled with Slurm's state (IDLE+DRAIN, DOWN+CLOUD+POWERED_DOWN, ...) and reason.",
           ("node", "state", "reason"), [((n.name, n.state_text, n.reason), 1.0) for n in nodes])
    if not slurm_names:
        return
    per_node = (
        ("slurm_node_cpus", "Total number of cpus in the node", lambda n: n.cpus),
        ("slurm_node_cpus_alloc", "Allocated cpus in the node", lambda n: n.cpus_alloc),
        ("slurm_node_cpus_effective", "CPUs allocatable to jobs not reserved for system usage", lambda n: n.cpus_effective),
        ("slurm_node_cpus_idle", "Idle cpus in the node", lambda n: max(n.cpus_effective - n.cpus_alloc, 0)),
        ("slurm_node_gpus", "Total number of GPUs in the node", lambda n: n.gpus),
        ("slurm_node_gpus_alloc", "Number of GPUs currently allocated by jobs on the node", lambda n: n.gpus_alloc),
        ("slurm_node_memory_alloc_bytes", "Bytes allocated to jobs in the node", lambda n: n.memory_alloc_mib * MIB),
        ("slurm_node_memory_effective_bytes", "Memory allocatable to jobs not reserved for system usage",
         lambda n: n.memory_effective_mib * MIB),
        ("slurm_node_memory_free_bytes", "Free memory in bytes of the node", lambda n: (n.memory_free_mib or 0) * MIB),
        ("slurm_node_memory_bytes", "Total memory in bytes of the node", lambda n: n.memory_mib * MIB),
    )
    for name, documentation, value in per_node:
        yield name, documentation, ("node",), [((n.name,), float(value(n))) for n in nodes]
    counts = state_counts(nodes)
    yield "slurm_nodes", "Total number of nodes", (), [((), float(len(nodes)))]
    for suffix in sorted(counts):
        yield "slurm_nodes_" + suffix, "Number of nodes in %s state or with that flag" % suffix, (), [((), float(counts[suffix]))]
    partitions: dict[str, list[Node]] = {}
    for node in nodes:
        for partition in node.partitions:
            partitions.setdefault(partition, []).append(node)
    for name, documentation, value in (
        ("slurm_partition_nodes", "Partition total nodes", len),
        ("slurm_partition_cpus", "Partition total cpus", lambda ns: sum(n.cpus for n in ns)),
        ("slurm_partition_gpus", "Partition total gpus", lambda ns: sum(n.gpus for n in ns)),
        ("slurm_partition_nodes_cpus_alloc", "Number of allocated cpus", lambda ns: sum(n.cpus_alloc for n in ns)),
        ("slurm_partition_nodes_cpus_idle", "Number of idle CPUs on all nodes",
         lambda ns: sum(max(n.cpus_effective - n.cpus_alloc, 0) for n in ns)),
    ):
        yield name, documentation, ("partition",), [((p,), float(value(ns))) for p, ns in sorted(partitions.items())]
    per_partition = {p: state_counts(ns) for p, ns in partitions.items()}
    for suffix in ("alloc", "idle", "mixed", "down", "drain", "drained", "draining", "powered_down", "fail", "maint"):
        yield ("slurm_partition_nodes_" + suffix, "Nodes in %s state or with that flag" % suffix, ("partition",),
               [((p,), float(c.get(suffix, 0))) for p, c in sorted(per_partition.items())])


def state_counts(nodes: Iterable[Node]) -> dict[str, int]:
    """Slurm's node counters: one per base state and per flag; drained and draining split DRAIN by whether jobs run."""
    counts = dict.fromkeys(BASE_STATES + tuple(FLAG_METRICS.values()) + ("drained", "draining"), 0)
    for node in nodes:
        counts[node.base] += 1
        flags = set(node.states)
        for flag in flags & FLAG_METRICS.keys():
            counts[FLAG_METRICS[flag]] += 1
        if "DRAIN" in flags:
            busy = node.base in ("alloc", "mixed") or "COMPLETING" in flags
            counts["draining" if busy else "drained"] += 1
    return counts


def job_families(jobs: Iterable[Job], now: float, slurm_names: bool) -> Iterator[Family]:
    jobs = list(jobs)
    oldest: dict[str, float] = {}
    for job in jobs:
        if "PENDING" in job.states and job.submit_time:
            age = max(now - job.submit_time, 0.0)
            oldest[job.partition] = max(oldest.get(job.partition, 0.0), age)
    yield ("hybridhpc_slurm_partition_pending_oldest_seconds", "Age of the oldest pending job of each partition (0: none pending).",
           ("partition",), [((p,), round(age, 3)) for p, age in sorted(oldest.items())])
    if not slurm_names:
        return
    totals = dict.fromkeys(list(JOB_STATES.values()) + list(JOB_FLAGS.values()), 0)
    per_partition: dict[str, dict[str, int]] = {}
    for job in jobs:
        counts = per_partition.setdefault(job.partition, {"jobs": 0, "pending": 0, "running": 0})
        counts["jobs"] += 1
        for state in job.states:
            suffix = JOB_STATES.get(state) or JOB_FLAGS.get(state)
            if suffix:
                totals[suffix] += 1
                if suffix in counts:
                    counts[suffix] += 1
    yield "slurm_jobs", "Total number of jobs", (), [((), float(len(jobs)))]
    for suffix in sorted(totals):
        yield "slurm_jobs_" + suffix, "Number of jobs in %s state" % suffix, (), [((), float(totals[suffix]))]
    for key, name in (("jobs", "slurm_partition_jobs"), ("pending", "slurm_partition_jobs_pending"),
                      ("running", "slurm_partition_jobs_running")):
        yield (name, "Number of jobs in this partition" if key == "jobs" else "Number of jobs in %s state" % key.capitalize(),
               ("partition",), [((p,), float(c[key])) for p, c in sorted(per_partition.items())])


def controller_families(pings: list[dict[str, Any]]) -> Iterator[Family]:
    """One sample per slurmctld of the cluster, in slurm.conf's order: index 0 is the primary."""
    yield ("hybridhpc_slurm_controller_up", "1 when this slurmctld answers ping (index 0: the primary, 1 and up: backups).",
           ("host", "index"), [((str(p.get("hostname") or ""), str(i)), 1.0 if pinged_up(p) else 0.0) for i, p in enumerate(pings)])


_FED_LINE = re.compile(r"^\s*(Self|Sibling):\s+(\S+?):\S*\s+ID:\d+\s+FedState:(\S+)(.*)$")


def parse_federation(text: str) -> tuple[str, list[tuple[str, str, str]]]:
    """``scontrol show federation``: (federation name, [(member, FedState, how this controller is connected)]).

    A cluster in no federation prints no "Federation:" line: ("", []).
    """
    name, members = "", []
    for line in (text or "").splitlines():
        if line.startswith("Federation:"):
            name = line.split(":", 1)[1].strip()
            continue
        match = _FED_LINE.match(line)
        if match:
            role, member, state, rest = match.groups()
            connected = "self" if role == "Self" else ("yes" if re.search(r"PersistConnSend/Recv:Yes/Yes", rest) else "no")
            members.append((member, state.split("+")[0], connected))
    return name, members


def federation_families(text: str) -> Iterator[Family]:
    name, members = parse_federation(text)
    yield ("hybridhpc_slurm_federation_member_active",
           "1 when this member of the federation is ACTIVE, as this cluster's slurmctld sees it (state: its FedState).",
           ("federation", "member", "state"), [((name, m, state), 1.0 if state == "ACTIVE" else 0.0) for m, state, _c in members])
    yield ("hybridhpc_slurm_federation_member_connected",
           "1 when this slurmctld holds its persistent connections to the sibling both ways (Self: always 1).",
           ("federation", "member"), [((name, m), 1.0 if c in ("self", "yes") else 0.0) for m, _s, c in members])
