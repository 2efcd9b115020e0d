"""The copilot's decisions, as one pure function: ``reconcile(observed) -> actions``.

No I/O, no clock, no randomness: everything the decisions depend on is in
:class:`Observed` (GenericNodes as the API server returned them, the pods
their admissions name, Kubernetes Nodes, Slurm node states, the configured
GRES counts, the time), and everything the copilot should do comes back as a
list of :class:`Action` values that ``loop.Executor`` carries out in order.

The ledger is the GenericNode status. An admission goes
``Reserved -> Granted`` (or ``Denied``), and a held one ends ``Released``:

* A new admission in ``spec.admissions`` is *reserved* when it fits:
  ``Slurm usage + ceil(Kubernetes holdings + request) <= configured``, per
  resource (Slurm's GRES counts are integers, so Kubernetes' share is rounded
  up to whole CPUs and MiB). Otherwise it is denied, with the numbers.
* A reservation is counted at once: the node's wanted GRES drops, the status
  (the ledger) is written first, then the Slurm GRES is lowered. A crash in
  between leaves the ledger ahead of Slurm, which the next pass re-asserts.
* It is *granted* only in a later pass, from a Slurm observation showing the
  GRES at the wanted value and Slurm's usage under it: only then can Slurm no
  longer hand those resources out. If Slurm got there first (a job started
  between the decision and the GRES change), the newest reservations are
  denied until the rest fits; a reservation Slurm does not take within
  ``reservation_timeout`` is denied too.
* A held admission is released when its pod is gone (deleted, replaced by a
  pod with another uid, or finished) or the scheduler removed the admission;
  the GRES goes back up, never above the configured count.

Drains: a cordoned Kubernetes node drains its Slurm node with a reason that
starts with ``copilot:``; uncordoning resumes only such drains. A Slurm drain
somebody else set is shown on the Kubernetes Node as an annotation.
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from . import names
from .units import (
    MIB,
    QuantityError,
    cpu_millis,
    cpus_for,
    format_cpu,
    format_memory,
    memory_bytes,
    mib_for,
    parse_gres,
    replace_gres,
)

_REGISTRATION_REASON = re.compile(names.REGISTRATION_REASON)

# -- what the copilot observes -----------------------------------------------------


@dataclass(frozen=True)
class Capacity:
    """A node's configured ``k8scpu`` (CPUs) and ``k8smemory`` (MB) counts: what it shares."""

    cpus: int
    memory_mb: int


@dataclass(frozen=True)
class SlurmNode:
    """One Slurm node as slurmrestd describes it (only what the decisions need)."""

    name: str
    gres: str = ""
    gres_used: str = ""
    alloc_cpus: int = 0
    alloc_memory_mb: int = 0
    states: tuple = ()
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


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    uid: str = ""
    phase: str = "Pending"
    terminating: bool = False

    @property
    def finished(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


@dataclass(frozen=True)
class KubeNode:
    name: str
    unschedulable: bool = False
    annotations: Mapping = field(default_factory=dict)


@dataclass(frozen=True)
class Settings:
    """Decision parameters (from the copilot's config)."""

    configured: Mapping = field(default_factory=dict)  # Slurm node name -> Capacity
    usage_source: str = "max"  # "max" or "gres", see SlurmNode.usage
    reservation_timeout: float = 60.0
    drain_sync: bool = True
    manage_finalizer: bool = True
    strategy: str = "gres"  # how Kubernetes' share is held back from Slurm: "gres" or "placeholder"
    node_strategy: Mapping = field(default_factory=dict)  # Slurm node -> strategy, over ``strategy``

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

    generic_nodes: Mapping  # name -> GenericNode object (dict, as the API returns it)
    pods: Mapping  # (namespace, name) -> Pod
    kube_nodes: Mapping  # name -> KubeNode
    slurm_nodes: Mapping | None  # Slurm node name -> SlurmNode
    now: float  # seconds since the epoch
    settings: Settings = field(default_factory=Settings)
    slurm_jobs: tuple | None = ()  # the copilot's placeholder jobs (placeholder.PlaceholderJob); None: not read


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
    status: dict


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
    counts: tuple
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


# -- reading GenericNodes -------------------------------------------------------------


@dataclass(frozen=True)
class AdmissionRequest:
    """One entry of ``spec.admissions``."""

    uid: str
    namespace: str = ""
    name: str = ""
    pod_uid: str = ""
    cpu_millis: int = 0
    memory_bytes: int = 0
    error: str = ""

    @property
    def pod_key(self) -> tuple[str, str]:
        return (self.namespace, self.name)


def parse_admission(entry) -> AdmissionRequest:
    """An admission request, with ``error`` set when it cannot be honoured as written."""
    if not isinstance(entry, dict):
        return AdmissionRequest(uid="", error="an admission must be an object")
    uid = str(entry.get("uid") or "")
    pod = entry.get("pod") if isinstance(entry.get("pod"), dict) else {}
    namespace, name, pod_uid = str(pod.get("namespace") or ""), str(pod.get("name") or ""), str(pod.get("uid") or "")
    base = AdmissionRequest(uid=uid, namespace=namespace, name=name, pod_uid=pod_uid)
    if not namespace or not name:
        return _replace(base, error="invalid admission: pod.namespace and pod.name are required")
    request = entry.get("request") if isinstance(entry.get("request"), dict) else {}
    try:
        cpu = cpu_millis(request.get("cpu", 0))
        mem = memory_bytes(request.get("memory", 0))
    except QuantityError as err:
        return _replace(base, error="invalid admission request: %s" % err)
    return _replace(base, cpu_millis=cpu, memory_bytes=mem)


def _replace(obj, **changes):
    return type(obj)(**{**obj.__dict__, **changes})


def _spec(obj) -> Mapping:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def _status(obj) -> dict:
    status = obj.get("status")
    return dict(status) if isinstance(status, dict) else {}


def _meta(obj) -> Mapping:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def alias_of(obj) -> str:
    """The Slurm node a GenericNode stands for: ``spec.alias``, else its own name."""
    return str(_spec(obj).get(names.SPEC_ALIAS) or _meta(obj).get("name") or "")


def is_slurm_node(obj) -> bool:
    return _spec(obj).get(names.SPEC_TYPE) == names.NODE_TYPE_SLURM


def admissions_of(obj) -> list[AdmissionRequest]:
    raw = _spec(obj).get(names.SPEC_ADMISSIONS)
    return [parse_admission(entry) for entry in raw] if isinstance(raw, list) else []


def ledger_of(obj) -> dict:
    """``status.admissions`` (uid -> entry), copied."""
    raw = _status(obj).get(names.STATUS_ADMISSIONS)
    if not isinstance(raw, dict):
        return {}
    return {str(uid): dict(entry) for uid, entry in raw.items() if isinstance(entry, dict)}


def entry_amounts(entry) -> tuple[int, int]:
    """Millicores and bytes an entry holds (0 for an unreadable entry)."""
    request = entry.get("request") if isinstance(entry.get("request"), dict) else {}
    try:
        return cpu_millis(request.get("cpu", 0)), memory_bytes(request.get("memory", 0))
    except QuantityError:
        return 0, 0


def holdings(ledger: Mapping) -> tuple[int, int]:
    """Millicores and bytes the ledger's Reserved and Granted admissions hold."""
    cpu = mem = 0
    for entry in ledger.values():
        if entry.get("state") in names.HOLDING_STATES:
            c, m = entry_amounts(entry)
            cpu, mem = cpu + c, mem + m
    return cpu, mem


def pods_needed(generic_nodes: Mapping) -> set:
    """``(namespace, name)`` of every pod a decision may look at."""
    keys = set()
    for obj in generic_nodes.values():
        ledger = ledger_of(obj)
        for adm in admissions_of(obj):
            if adm.uid and adm.uid not in ledger and not adm.error:
                keys.add(adm.pod_key)
        for entry in ledger.values():
            if entry.get("state") in names.HOLDING_STATES:
                pod = entry.get("pod") or {}
                keys.add((str(pod.get("namespace") or ""), str(pod.get("name") or "")))
    return keys


def gres_string(cpus: int, memory_mb: int) -> str:
    return "%s:%d,%s:%d" % (names.GRES_CPU, cpus, names.GRES_MEMORY, memory_mb)


def capacity_from_gres(text) -> Capacity | None:
    counts = parse_gres(text) if isinstance(text, str) else {}
    if names.GRES_CPU in counts and names.GRES_MEMORY in counts:
        return Capacity(counts[names.GRES_CPU], counts[names.GRES_MEMORY])
    return None


def wanted_counts(cap: Capacity, ledger: Mapping) -> tuple[int, int]:
    """The k8scpu/k8smemory counts Slurm should have: configured minus what Kubernetes holds."""
    cpu, mem = holdings(ledger)
    return max(0, cap.cpus - cpus_for(cpu)), max(0, cap.memory_mb - mib_for(mem))


def fallback_counts(cap: Capacity, want: tuple[int, int], usage: tuple[int, int]) -> tuple[int, int]:
    """Counts to fall back on if Slurm refuses a count under its usage: the usage (never over the cap).

    The wanted count can be under Slurm's usage only when Slurm allocated
    Kubernetes' share while its GRES was reverted (reconfigure, slurmctld
    restart). A count under the usage is what we want then: Slurm starts no job
    on the node until its jobs are back under the wanted count. Should Slurm
    refuse such a count, the next best is the usage: nothing new fits either,
    though a job ending frees room until the next pass lowers the count.
    """
    return min(cap.cpus, max(want[0], usage[0])), min(cap.memory_mb, max(want[1], usage[1]))


# -- time ----------------------------------------------------------------------------


def timestamp(now: float) -> str:
    return _timestamp(int(now))


@functools.lru_cache(maxsize=256)
def _timestamp(seconds: int) -> str:
    return _dt.datetime.fromtimestamp(seconds, tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text) -> float | None:
    try:
        return _dt.datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.timezone.utc).timestamp()
    except ValueError:
        return None


# -- the decisions ----------------------------------------------------------------------


def reconcile(observed: Observed) -> list[Action]:
    """Every action that brings Slurm, the ledger and the Kubernetes Nodes in line."""
    actions: list[Action] = []
    owner_of: dict[str, str] = {}
    for name in sorted(observed.generic_nodes):
        obj = observed.generic_nodes[name]
        if is_slurm_node(obj):
            owner_of.setdefault(alias_of(obj), name)
    for name in sorted(observed.generic_nodes):
        obj = observed.generic_nodes[name]
        if is_slurm_node(obj):
            actions.extend(reconcile_node(name, obj, observed, owner_of[alias_of(obj)]))
    actions.extend(restore_unshared(observed, set(owner_of)))
    from . import placeholder

    actions.extend(placeholder.cancel_orphans(observed, set(owner_of.values())))
    return actions


def restore_unshared(observed: Observed, shared: set) -> list[Action]:
    """Configured Slurm nodes that no GenericNode shares get their slurm.conf counts back."""
    actions: list[Action] = []
    if observed.slurm_nodes is None:
        return actions
    for slurm_name in sorted(observed.settings.configured):
        slurm = observed.slurm_nodes.get(slurm_name)
        if slurm_name in shared or slurm is None or None in slurm.counts or \
                observed.settings.strategy_of(slurm_name) != GresSide.kind:
            continue
        cap = observed.settings.configured[slurm_name]
        target = (cap.cpus, cap.memory_mb)
        if slurm.counts != target:
            actions.append(_set_gres(None, slurm, target, "no GenericNode shares the node: restore the configured counts"))
    return actions


def _set_gres(node, slurm: SlurmNode, target, reason, fallback=None) -> SetGres:
    def gres(counts):
        return replace_gres(slurm.gres, {names.GRES_CPU: counts[0], names.GRES_MEMORY: counts[1]})

    backup = gres(fallback) if fallback is not None and tuple(fallback) != tuple(target) else ""
    return SetGres(node, slurm.name, gres(target), tuple(target), reason, backup)


def _capacity(settings: Settings, alias: str, status: Mapping, slurm: SlurmNode | None) -> Capacity | None:
    """What the node shares.

    The config's counts when it lists the node (they must equal slurm.conf).
    Otherwise the larger of what the ledger recorded and what Slurm shows now:
    Slurm never holds more than slurm.conf (a higher count makes the node
    INVALID_REG), so this never overshoots, and a revert shows the full value.
    """
    if slurm is not None and None in slurm.counts:
        return None  # slurm.conf gives the node no k8scpu/k8smemory GRES: not shared
    if alias in settings.configured:
        return settings.configured[alias]
    slurm_status = status.get(names.STATUS_SLURM) if isinstance(status.get(names.STATUS_SLURM), dict) else {}
    recorded = capacity_from_gres(slurm_status.get("configuredGres"))
    if slurm is None:
        return recorded
    current = Capacity(*slurm.counts)
    if recorded is None:
        return current
    return Capacity(max(recorded.cpus, current.cpus), max(recorded.memory_mb, current.memory_mb))


def _pod_gone(entry: Mapping, pods: Mapping) -> str:
    """Why a held admission's pod no longer holds resources ('' while it does)."""
    ref = entry.get("pod") if isinstance(entry.get("pod"), dict) else {}
    pod = pods.get((str(ref.get("namespace") or ""), str(ref.get("name") or "")))
    if pod is None:
        return "pod deleted"
    if ref.get("uid") and pod.uid and pod.uid != ref.get("uid"):
        return "pod replaced by another with the same name"
    if pod.finished:
        return "pod %s" % pod.phase
    return ""


def _transition(entry: dict, state: str, reason: str, now: str) -> dict:
    entry = dict(entry)
    entry.update(state=state, reason=reason, lastTransitionTime=now)
    return entry


def _shortfall(cap: Capacity, usage, held, request) -> str:
    """'' when ``request`` fits beside Slurm's usage and Kubernetes' holdings, else why not."""
    problems = []
    need_cpu = usage[0] + cpus_for(held[0] + request[0])
    if need_cpu > cap.cpus:
        free = max(0, cap.cpus * 1000 - usage[0] * 1000 - held[0])
        problems.append(
            "cpu: requested %s, free %s of %d (Slurm %d, Kubernetes %s)"
            % (format_cpu(request[0]), format_cpu(free), cap.cpus, usage[0], format_cpu(held[0]))
        )
    need_mem = usage[1] + mib_for(held[1] + request[1])
    if need_mem > cap.memory_mb:
        free = max(0, (cap.memory_mb - usage[1]) * MIB - held[1])
        problems.append(
            "memory: requested %s, free %s of %dMi (Slurm %dMi, Kubernetes %s)"
            % (format_memory(request[1]), format_memory(free), cap.memory_mb, usage[1], format_memory(held[1]))
        )
    return "insufficient " + "; ".join(problems) if problems else ""


class GresSide:
    """The count-only GRES strategy: Kubernetes' share is taken out of the node's k8scpu/k8smemory counts."""

    kind = "gres"
    reserving = "lowering the Slurm GRES"
    jobs_known = True

    def __init__(self, name: str, slurm: SlurmNode | None, cap: Capacity | None, usage, status: Mapping):
        self.name, self.slurm, self.cap, self.usage, self.status = name, slurm, cap, usage, status

    def not_shared(self, alias: str) -> str:
        return "Slurm node %s has no %s/%s GRES: it is not shared" % (alias, names.GRES_CPU, names.GRES_MEMORY)

    def refuse_new(self) -> str:
        """Why no new admission can be held now ('' when it can)."""
        return ""

    def held(self, ledger: Mapping) -> tuple[int, int]:
        return holdings(ledger)

    def settle_reserved(self, ledger: dict, reserved: list, now: str, decisions: list) -> None:
        """Grant once Slurm's GRES is down and its jobs fit under it; deny the newest if Slurm got there first."""
        cap, usage, slurm = self.cap, self.usage, self.slurm
        want = wanted_counts(cap, ledger)
        if usage[0] > want[0] or usage[1] > want[1]:
            for uid in reversed(reserved):
                reason = "Slurm allocated the resources before its GRES was lowered (Slurm holds %d CPUs, %dMi)" % usage
                ledger[uid] = _transition(ledger[uid], names.DENIED, reason, now)
                decisions.append(DenyAdmission(self.name, uid, reason))
                want = wanted_counts(cap, ledger)
                if usage[0] <= want[0] and usage[1] <= want[1]:
                    break
        elif slurm.counts == want:
            reason = "Slurm GRES lowered to " + gres_string(*want)
            for uid in reserved:
                ledger[uid] = _transition(ledger[uid], names.GRANTED, reason, now)
                decisions.append(GrantAdmission(self.name, uid, reason))

    def slurm_actions(self, ledger: Mapping) -> list[Action]:
        """The configured counts minus Kubernetes' holdings (re-asserted after a revert)."""
        slurm, cap = self.slurm, self.cap
        want = wanted_counts(cap, ledger)
        if slurm.counts != want:
            return [_set_gres(self.name, slurm, want, "ledger wants " + gres_string(*want),
                              fallback_counts(cap, want, usage=self.usage))]
        return []

    def slurm_status(self, alias: str, ledger: Mapping) -> dict:
        out = {"node": alias}
        if self.cap is not None:
            out["configuredGres"] = gres_string(self.cap.cpus, self.cap.memory_mb)
            out["wantedGres"] = gres_string(*wanted_counts(self.cap, ledger))
        return out

    def overcommitted(self, ledger: Mapping) -> str:
        held = holdings(ledger)
        usage, cap = self.usage, self.cap
        if usage[0] + cpus_for(held[0]) > cap.cpus or usage[1] + mib_for(held[1]) > cap.memory_mb:
            return "Slurm %d CPUs %dMi + Kubernetes %s %s of %d CPUs %dMi" % (
                usage[0], usage[1], format_cpu(held[0]), format_memory(held[1]), cap.cpus, cap.memory_mb)
        return ""

    def restored(self, ledger: Mapping) -> bool:
        return self.slurm is None or self.cap is None or self.slurm.counts == (self.cap.cpus, self.cap.memory_mb)


def reconcile_node(name: str, obj: Mapping, observed: Observed, owner: str) -> list[Action]:
    """Actions for one GenericNode (``owner``: the GenericNode that shares its Slurm node)."""
    from . import placeholder

    settings = observed.settings
    meta, status = _meta(obj), _status(obj)
    rv = str(meta.get("resourceVersion") or "")
    deleting = bool(meta.get("deletionTimestamp"))
    finalizers = list(meta.get("finalizers") or [])
    alias = alias_of(obj)
    now = timestamp(observed.now)
    slurm_known = observed.slurm_nodes is not None
    slurm = observed.slurm_nodes.get(alias) if slurm_known else None
    duplicate = owner != name
    if settings.strategy_of(alias) == placeholder.STRATEGY:
        side = placeholder.PlaceholderSide(name, alias, slurm, duplicate, observed)
    else:
        cap = None if duplicate else _capacity(settings, alias, status, slurm)
        usage = slurm.usage(settings.usage_source) if slurm is not None else (0, 0)
        side = GresSide(name, slurm, cap, usage, status)
    cap, usage = side.cap, side.usage
    if side.kind == placeholder.STRATEGY and not side.jobs_known:
        slurm_known, slurm = False, None  # decide nothing that depends on Slurm without its jobs

    decisions: list[Action] = []
    ledger = ledger_of(obj)
    requests = admissions_of(obj)
    in_spec = {adm.uid for adm in requests if adm.uid}

    # 1. Admissions the scheduler removed: forget them (releasing what they held).
    for uid in [uid for uid in ledger if uid not in in_spec]:
        if ledger.pop(uid).get("state") in names.HOLDING_STATES:
            decisions.append(ReleaseAdmission(name, uid, "admission removed"))

    # 2. Held admissions whose pod went away.
    for uid, entry in ledger.items():
        if entry.get("state") in names.HOLDING_STATES:
            gone = _pod_gone(entry, observed.pods)
            if gone:
                ledger[uid] = _transition(entry, names.RELEASED, gone, now)
                decisions.append(ReleaseAdmission(name, uid, gone))

    # 3. Reservations: granted once Slurm can no longer hand the resources out, else wait or deny.
    reserved = [uid for uid, entry in ledger.items() if entry.get("state") == names.RESERVED]
    if reserved and slurm is not None and cap is not None:
        side.settle_reserved(ledger, reserved, now, decisions)
    for uid in [uid for uid, entry in ledger.items() if entry.get("state") == names.RESERVED]:
        since = parse_timestamp(ledger[uid].get("lastTransitionTime"))
        if slurm_known and (slurm is None or cap is None or since is None or observed.now - since > settings.reservation_timeout):
            reason = "Slurm did not take the %s within %gs" % (
                "placeholder job" if side.kind == placeholder.STRATEGY else "lowered GRES", settings.reservation_timeout)
            ledger[uid] = _transition(ledger[uid], names.DENIED, reason, now)
            decisions.append(DenyAdmission(name, uid, reason))

    # 4. New admissions, in the order the scheduler listed them.
    held = side.held(ledger)
    for adm in requests:
        if not adm.uid or adm.uid in ledger:
            continue
        pod = observed.pods.get(adm.pod_key)
        reason = ""
        if adm.error:
            reason = adm.error
        elif deleting:
            reason = "GenericNode %s is being deleted" % name
        elif duplicate:
            reason = "Slurm node %s is shared through GenericNode %s" % (alias, owner)
        elif not slurm_known:
            continue  # Slurm could not be read: decide later
        elif slurm is None:
            reason = "Slurm has no node %s" % alias
        elif cap is None:
            reason = side.not_shared(alias)
        elif side.refuse_new():
            reason = side.refuse_new()
        elif pod is None:
            reason = "pod %s/%s not found" % adm.pod_key
        elif adm.pod_uid and pod.uid and adm.pod_uid != pod.uid:
            reason = "pod %s/%s has uid %s, not %s" % (adm.namespace, adm.name, pod.uid, adm.pod_uid)
        elif pod.finished:
            reason = "pod %s/%s is %s" % (adm.namespace, adm.name, pod.phase)
        else:
            reason = _shortfall(cap, usage, held, side.held({"new": {
                "state": names.RESERVED, "request": {"cpu": "%dm" % adm.cpu_millis, "memory": str(adm.memory_bytes)}}}))
        entry = {
            "pod": {"namespace": adm.namespace, "name": adm.name, "uid": adm.pod_uid or (pod.uid if pod else "")},
            "request": {"cpu": format_cpu(adm.cpu_millis), "memory": format_memory(adm.memory_bytes)},
        }
        if reason:
            ledger[adm.uid] = _transition(entry, names.DENIED, reason, now)
            decisions.append(DenyAdmission(name, adm.uid, reason))
        else:
            ledger[adm.uid] = _transition(entry, names.RESERVED, side.reserving, now)
            held = side.held(ledger)
            decisions.append(ReserveAdmission(name, adm.uid, "fits: " + side.reserving))

    # 5. Slurm: what it must hold back for Kubernetes now.
    slurm_actions: list[Action] = []
    if slurm is not None and cap is not None:
        slurm_actions = side.slurm_actions(ledger)

    # 6. The ledger: status, written only when it changed.
    new_status = dict(status)
    new_status[names.STATUS_ADMISSIONS] = ledger
    held = holdings(ledger)
    slurm_alloc = {"cpu": format_cpu(usage[0] * 1000), "memory": format_memory(usage[1] * MIB)}
    if slurm is None:
        slurm_alloc = _old_allocation(status, names.ALLOCATION_SLURM) or {"cpu": "0", "memory": "0"}
    new_status[names.STATUS_ALLOCATED] = [
        {"allocated": slurm_alloc, "type": names.ALLOCATION_SLURM},
        {"allocated": {"cpu": format_cpu(held[0]), "memory": format_memory(held[1])}, "type": names.ALLOCATION_KUBERNETES},
    ]
    if slurm is not None or side.kind == GresSide.kind:
        new_status[names.STATUS_SLURM] = side.slurm_status(alias, ledger)
    else:
        new_status[names.STATUS_SLURM] = dict(_slurm_status(status)) or {"node": alias}
    if slurm is not None and cap is not None:
        message = side.overcommitted(ledger)
        reason = "SlurmUsedKubernetesShare" if message else "WithinCapacity"
        new_status[names.STATUS_CONDITIONS] = _set_condition(
            status.get(names.STATUS_CONDITIONS), names.CONDITION_OVERCOMMITTED, bool(message), reason, message, now)

    actions: list[Action] = list(decisions)
    if settings.manage_finalizer and not deleting and names.FINALIZER not in finalizers:
        actions.append(AddFinalizer(name, rv))
    if new_status != status:
        actions.append(WriteStatus(name, rv, new_status))
    actions.extend(slurm_actions)

    # 7. Drains.
    kube = observed.kube_nodes.get(str(meta.get("name") or name))
    if slurm is not None and not duplicate and (settings.drain_sync or slurm.registration_refused is not None):
        actions.extend(_drain_sync(name, kube if settings.drain_sync else None, slurm))

    # 8. Deletion: once nothing is held and Slurm has its resources back, let the object go.
    if deleting and names.FINALIZER in finalizers and slurm_known:
        released = not any(e.get("state") in names.HOLDING_STATES for e in ledger.values())
        if released and (duplicate or side.restored(ledger)):
            actions.append(RemoveFinalizer(name, rv))
    return actions


def _slurm_status(status: Mapping) -> Mapping:
    value = status.get(names.STATUS_SLURM)
    return value if isinstance(value, dict) else {}


def _old_allocation(status: Mapping, kind: str):
    for item in status.get(names.STATUS_ALLOCATED) or []:
        if isinstance(item, dict) and item.get("type") == kind and isinstance(item.get("allocated"), dict):
            return dict(item["allocated"])
    return None


def _set_condition(conditions, kind: str, value: bool, reason: str, message: str, now: str) -> list:
    out, found = [], False
    for cond in conditions if isinstance(conditions, list) else []:
        if isinstance(cond, dict) and cond.get("type") == kind:
            found = True
            status = "True" if value else "False"
            changed = cond.get("status") != status
            cond = dict(cond, status=status, reason=reason, message=message)
            if changed or not cond.get("lastTransitionTime"):
                cond["lastTransitionTime"] = now
        out.append(cond)
    if not found:
        out.append({"type": kind, "status": "True" if value else "False", "reason": reason, "message": message,
                    "lastTransitionTime": now})
    return out


def _drain_sync(name: str, kube: KubeNode | None, slurm: SlurmNode) -> list[Action]:
    """Cordon <-> drain, for the drains the copilot set or caused.

    Caused: the drain slurmctld sets when it refuses slurmd's registration
    over a k8scpu/k8smemory count (``SlurmNode.registration_refused``). Every
    RESUME makes slurmd register again, and a registration passes only once no
    job holds the count that changed: so such a drain is resumed only when the
    node registered again (no longer INVALID_REG, responding) and no job holds
    its k8scpu/k8smemory; until then the drain is what keeps Slurm off
    Kubernetes' share. ``kube`` is ``None`` when drain sync is off: then only
    such drains are resumed.
    """
    actions: list[Action] = []
    caused = slurm.registration_refused is not None
    gres_used = parse_gres(slurm.gres_used)
    settled = not slurm.invalid_registration and slurm.responding and not any(
        gres_used.get(gres, 0) for gres in (names.GRES_CPU, names.GRES_MEMORY))
    ours = slurm.drained and (slurm.reason.startswith(names.DRAIN_REASON_PREFIX) or (caused and settled))
    if slurm.invalid_registration:
        ours = False  # Slurm refuses RESUME until the node registered again
    cordoned = kube is not None and kube.unschedulable
    if cordoned and not slurm.drained:
        reason = "%s Kubernetes node %s is cordoned" % (names.DRAIN_REASON_PREFIX, kube.name)
        actions.append(DrainNode(name, slurm.name, reason))
    elif not cordoned and ours and (kube is not None or caused):
        actions.append(ResumeNode(name, slurm.name))
    if kube is None:
        return actions
    foreign = slurm.reason if slurm.drained and not ours and not caused else None
    if (foreign or None) != (kube.annotations.get(names.ANNOTATION_SLURM_DRAIN_REASON) or None):
        actions.append(AnnotateNode(name, kube.name, names.ANNOTATION_SLURM_DRAIN_REASON, foreign or None))
    return actions
