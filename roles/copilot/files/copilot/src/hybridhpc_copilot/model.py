"""What the copilot's decisions read and what they return: observations and actions.

Plain frozen values, no I/O: ``kube`` (as the informers cache each object)
and ``slurm`` build the observations, ``core.reconcile`` turns them into
actions, ``executor.Executor`` carries those out. Every strategy (``gres``, ``placeholder``) and ``core`` import this
module and nothing imports them back, so there is no cycle between them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from . import names
from .ledger import AdmissionRequest, JsonObject, Ledger, Status
from .units import parse_gres

_REGISTRATION_REASON = re.compile(names.REGISTRATION_REASON)

# -- what the copilot observes -----------------------------------------------------


@dataclass(frozen=True)
class Capacity:
    """A node's configured ``k8scpu`` (CPUs) and ``k8smemory`` (MB) counts: what it shares."""

    cpus: int
    memory_mb: int


@dataclass(frozen=True, slots=True)  # a whole poll holds one per node: no __dict__ each
class SlurmNode:
    """One Slurm node as slurmrestd describes it (only what the decisions need)."""

    name: str
    gres: str = ""
    gres_used: str = ""
    alloc_cpus: int = 0
    alloc_memory_mb: int = 0
    states: tuple[str, ...] = ()
    reason: str = ""
    cpus: int = 0  # CPUs Slurm schedules on the node
    memory_mb: int = 0  # RealMemory
    slurmd_start_time: float = 0.0  # seconds since the epoch (0: unknown)

    @property
    def counts(self) -> tuple[int | None, int | None]:
        """Current ``k8scpu`` and ``k8smemory`` counts (``None`` when the node has no such GRES)."""
        gres = parse_gres(self.gres)
        return gres.get(names.GRES_CPU), gres.get(names.GRES_MEMORY)

    @property
    def drained(self) -> bool:
        return any(state.upper() in ("DRAIN", "DRAINED", "DRAINING") for state in self.states)

    @property
    def invalid_registration(self) -> bool:
        return any(state.upper() == "INVALID_REG" for state in self.states)

    @property
    def responding(self) -> bool:
        return not any(state.upper() == "NOT_RESPONDING" for state in self.states)

    @property
    def registration_refused(self) -> tuple[str, int] | None:
        """``(gres, registered count)`` when Slurm refused slurmd's registration over a k8scpu/k8smemory count.

        Read from the reason slurmctld gives (``names.REGISTRATION_REASON``);
        ``None`` for any other reason, including a drain an admin set before
        the registration (slurmctld keeps the older reason).
        """
        match = _REGISTRATION_REASON.search(self.reason or "")
        return (match.group(1), int(match.group(2))) if match else None

    def usage(self, source: str = "max") -> tuple[int, int]:
        """CPUs and MB Slurm has allocated on the node.

        ``gres``: what Slurm jobs hold of ``k8scpu``/``k8smemory``. ``max``
        (the default) also counts ``alloc_cpus``/``alloc_memory``, so a job that
        escaped the job_submit plugin (and holds no GRES) still counts.
        """
        used = parse_gres(self.gres_used)
        cpus, mem = used.get(names.GRES_CPU, 0), used.get(names.GRES_MEMORY, 0)
        if source == "max":
            cpus, mem = max(cpus, int(self.alloc_cpus or 0)), max(mem, int(self.alloc_memory_mb or 0))
        return cpus, mem


# The Kubernetes objects below are parsed once, as the informers cache them (kube.generic_node_from_api,
# pod_from_api, node_from_api): each pass reads their fields, not the JSON again. A cache holds one per
# object (10,000 of each in the benchmarks): slots, no __dict__ each.


@dataclass(frozen=True, slots=True)
class GenericNode:
    """A GenericNode as the decisions read it.

    ``raw`` is the object as read (compacted), kept for the writes alone: a
    PUT sends it back with the new status or finalizers (kube.ledger_body).
    The decisions read the fields; ``status`` and ``ledger`` are the parts
    of ``raw`` (shared, never changed in place), so a status written back
    keeps the fields the copilot does not know.
    """

    name: str
    resource_version: str
    deleting: bool
    finalizers: tuple[str, ...]
    shares: bool  # spec.type is Slurm: it shares a Slurm node
    alias: str  # the Slurm node: spec.alias, else its own name
    admissions: tuple[AdmissionRequest, ...]  # spec.admissions, the scheduler's requests
    ledger: Ledger  # status.admissions (entries that are objects)
    status: Status  # as read ({} when there is none)
    raw: JsonObject = field(repr=False, compare=False)

    @property
    def key(self) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class Pod:
    namespace: str
    name: str
    uid: str = ""
    phase: str = "Pending"
    terminating: bool = False
    resource_version: str = ""

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def key(self) -> str:
        return "%s/%s" % (self.namespace, self.name) if self.namespace else self.name


@dataclass(frozen=True, slots=True)
class KubeNode:
    name: str
    unschedulable: bool = False
    annotations: Mapping[str, str] = field(default_factory=dict)
    resource_version: str = ""

    @property
    def key(self) -> str:
        return self.name


@dataclass(frozen=True)
class Settings:
    """Decision parameters (from the copilot's config)."""

    configured: Mapping[str, Capacity] = field(default_factory=dict)  # by Slurm node name
    usage_source: str = "max"  # "max" or "gres", see SlurmNode.usage
    reservation_timeout: float = 60.0
    drain_sync: bool = True
    manage_finalizer: bool = True
    strategy: str = "gres"  # how Kubernetes' share is held back from Slurm: "gres" or "placeholder"
    node_strategy: Mapping[str, str] = field(default_factory=dict)  # Slurm node -> strategy, over ``strategy``

    def strategy_of(self, slurm_node: str) -> str:
        return self.node_strategy.get(slurm_node, self.strategy)

    @property
    def uses_placeholders(self) -> bool:
        return "placeholder" in (self.strategy, *self.node_strategy.values())


@dataclass(frozen=True)
class Observed:
    """Everything one reconcile pass decides from.

    ``pods`` holds the pods that admissions name and that exist (a missing key
    means the pod is gone: the caller confirms a cache miss before saying so).
    ``slurm_nodes`` is ``None`` when Slurm could not be read: then nothing that
    depends on Slurm is decided.
    """

    generic_nodes: Mapping[str, GenericNode]  # by name
    pods: Mapping[tuple[str, str], Pod]  # by (namespace, name)
    kube_nodes: Mapping[str, KubeNode]  # by name
    slurm_nodes: Mapping[str, SlurmNode] | None  # by Slurm node name
    now: float  # seconds since the epoch
    settings: Settings = field(default_factory=Settings)
    slurm_jobs: tuple[PlaceholderJob, ...] | None = ()  # the copilot's placeholder jobs; None: not read
    refusals: Mapping[str, str] = field(default_factory=dict)  # placeholder job name -> why Slurm refused to submit it


# -- the copilot's placeholder jobs (the placeholder strategy) ----------------------------

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


# -- what the copilot does ---------------------------------------------------------


@dataclass(frozen=True)
class Action:
    node: str | None  # the GenericNode it belongs to (None: not tied to one)

    @property
    def kind(self) -> str:
        return type(self).__name__

    @property
    def writes(self) -> bool:
        """Whether carrying it out changes something (decisions are records)."""
        return True


@dataclass(frozen=True)
class Decision(Action):
    uid: str
    reason: str

    @property
    def writes(self) -> bool:
        return False


@dataclass(frozen=True)
class ReserveAdmission(Decision):
    pass


@dataclass(frozen=True)
class GrantAdmission(Decision):
    pass


@dataclass(frozen=True)
class DenyAdmission(Decision):
    pass


@dataclass(frozen=True)
class ReleaseAdmission(Decision):
    pass


@dataclass(frozen=True)
class WriteStatus(Action):
    """Replace the GenericNode's status, if its resourceVersion is still ``resource_version``."""

    resource_version: str
    status: Status


@dataclass(frozen=True)
class AddFinalizer(Action):
    resource_version: str


@dataclass(frozen=True)
class RemoveFinalizer(Action):
    resource_version: str


@dataclass(frozen=True)
class SetGres(Action):
    """Set a Slurm node's whole Gres string (``counts`` are the k8scpu/k8smemory part).

    ``fallback``: the Gres string to send instead if Slurm refuses ``gres``
    (a count under its usage); empty when there is none.
    """

    slurm_node: str
    gres: str
    counts: tuple[int, int]
    reason: str
    fallback: str = ""


@dataclass(frozen=True)
class DrainNode(Action):
    slurm_node: str
    reason: str


@dataclass(frozen=True)
class ResumeNode(Action):
    slurm_node: str


@dataclass(frozen=True)
class AnnotateNode(Action):
    """Set (or with ``value=None`` remove) an annotation on a Kubernetes Node."""

    kube_node: str
    key: str
    value: str | None
