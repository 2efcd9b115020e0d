"""The ledger: the shape of the status the copilot writes, and reading and writing its entries.

A GenericNode's ``spec.admissions`` are the scheduler's requests
(:class:`AdmissionRequest`, parsed by ``kube.generic_node_from_api``); its
``status.admissions`` (uid -> entry) is the ledger, with the allocations
``kubectl get genericnode`` shows, the Slurm side and the conditions beside
it. Everything here reads untrusted JSON defensively and returns copies:
cached objects are shared and never changed in place.
"""

from __future__ import annotations

import datetime as _dt
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from . import names
from .units import QuantityError, cpu_millis, memory_bytes

# An object as the API server sends it: JSON, read defensively (any field may be missing or of another type).
JsonObject = dict[str, Any]

# -- the shape of what the copilot writes ------------------------------------------------
# Every key is optional (total=False): a ledger read back may be one an older copilot, or
# somebody else, wrote. Readers use .get and check types; writers fill every key.


class PodRef(TypedDict, total=False):
    namespace: str
    name: str
    uid: str


class Quantities(TypedDict, total=False):
    """Kubernetes quantities (``"1500m"``, ``"2Gi"``)."""

    cpu: str
    memory: str


class LedgerEntry(TypedDict, total=False):
    """One admission in ``status.admissions``."""

    pod: PodRef
    request: Quantities
    state: str  # one of names.ADMISSION_STATES
    reason: str
    lastTransitionTime: str


# uid -> entry: the ledger.
Ledger = dict[str, LedgerEntry]


class Allocation(TypedDict):
    """One item of ``status.allocatedResources``, as ACK shows them."""

    allocated: Quantities
    type: str  # names.ALLOCATION_SLURM or names.ALLOCATION_KUBERNETES


class SlurmStatus(TypedDict, total=False):
    """``status.slurm``: the Slurm node and what the strategy holds there."""

    node: str
    configuredGres: str  # gres
    wantedGres: str  # gres
    strategy: str  # placeholder
    placeholderJobs: list[int]  # placeholder


class Condition(TypedDict, total=False):
    type: str
    status: str  # "True" or "False"
    reason: str
    message: str
    lastTransitionTime: str


class Status(TypedDict, total=False):
    """A GenericNode's status. Fields the copilot does not know are kept as they are."""

    admissions: Ledger
    allocatedResources: list[Allocation]
    slurm: SlurmStatus
    conditions: list[Condition]

# -- the scheduler's requests ----------------------------------------------------------


@dataclass(frozen=True, slots=True)  # the cache holds one per admission of every GenericNode
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


def object_in(value: object) -> JsonObject:
    """``value`` when it is a JSON object, else an empty one."""
    return cast(JsonObject, value) if isinstance(value, dict) else {}


def entry_amounts(entry: LedgerEntry) -> tuple[int, int]:
    """Millicores and bytes an entry holds (0 for an unreadable entry)."""
    raw: object = entry.get("request")
    request = raw if isinstance(raw, dict) else {}
    try:
        return cpu_millis(request.get("cpu", 0)), memory_bytes(request.get("memory", 0))
    except QuantityError:
        return 0, 0


def holdings(ledger: Mapping[str, LedgerEntry]) -> tuple[int, int]:
    """Millicores and bytes the ledger's Reserved and Granted admissions hold."""
    cpu = mem = 0
    for entry in ledger.values():
        if entry.get("state") in names.HOLDING_STATES:
            c, m = entry_amounts(entry)
            cpu, mem = cpu + c, mem + m
    return cpu, mem


# -- time ----------------------------------------------------------------------------


def timestamp(now: float) -> str:
    return _timestamp(int(now))


@functools.lru_cache(maxsize=256)
def _timestamp(seconds: int) -> str:
    return _dt.datetime.fromtimestamp(seconds, tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: object) -> float | None:
    try:
        return _dt.datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=_dt.timezone.utc).timestamp()
    except ValueError:
        return None


# -- writing the status ------------------------------------------------------------------


def transition(entry: LedgerEntry, state: str, reason: str, now: str) -> LedgerEntry:
    """The entry in ``state`` from ``now`` on (a copy)."""
    entry = entry.copy()
    entry.update({"state": state, "reason": reason, "lastTransitionTime": now})
    return entry


def slurm_status_of(status: Status) -> SlurmStatus:
    value: object = status.get(names.STATUS_SLURM)
    return cast(SlurmStatus, value) if isinstance(value, dict) else {}


def old_allocation(status: Status, kind: str) -> Quantities | None:
    """What ``allocatedResources`` recorded for ``kind`` (a copy), if it did."""
    items: object = status.get(names.STATUS_ALLOCATED)
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict) and item.get("type") == kind and isinstance(item.get("allocated"), dict):
            return cast(Quantities, dict(item["allocated"]))
    return None


def set_condition(conditions: object, kind: str, value: bool, reason: str, message: str, now: str) -> list[Condition]:
    """``conditions`` with the one of ``kind`` set (its transition time moves only when its status does)."""
    out: list[Condition] = []
    found = False
    for cond in _conditions(conditions):
        if isinstance(cond, dict) and cond.get("type") == kind:
            found = True
            status = "True" if value else "False"
            changed = cond.get("status") != status
            cond = cond.copy()
            cond.update({"status": status, "reason": reason, "message": message})
            if changed or not cond.get("lastTransitionTime"):
                cond["lastTransitionTime"] = now
        out.append(cond)
    if not found:
        out.append({"type": kind, "status": "True" if value else "False", "reason": reason, "message": message,
                    "lastTransitionTime": now})
    return out


def _conditions(conditions: object) -> Iterable[Condition]:
    """The conditions as read (an item that is not an object is kept as it is: somebody else wrote it)."""
    return cast(list[Condition], conditions) if isinstance(conditions, list) else []
