"""The ledger: reading GenericNodes, and the shape of the status the copilot writes.

A GenericNode's ``spec.admissions`` are the scheduler's requests; its
``status.admissions`` (uid -> entry) is the ledger, with the allocations
``kubectl get genericnode`` shows, the Slurm side and the conditions beside
it. Everything here reads untrusted JSON defensively and returns copies:
cached objects are shared and never changed in place.
"""

from __future__ import annotations

import datetime as _dt
import functools
from collections.abc import Mapping
from dataclasses import dataclass

from . import names
from .units import QuantityError, cpu_millis, memory_bytes

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


def spec_of(obj) -> Mapping:
    spec = obj.get("spec")
    return spec if isinstance(spec, dict) else {}


def status_of(obj) -> dict:
    status = obj.get("status")
    return dict(status) if isinstance(status, dict) else {}


def metadata_of(obj) -> Mapping:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def alias_of(obj) -> str:
    """The Slurm node a GenericNode stands for: ``spec.alias``, else its own name."""
    return str(spec_of(obj).get(names.SPEC_ALIAS) or metadata_of(obj).get("name") or "")


def is_slurm_node(obj) -> bool:
    return spec_of(obj).get(names.SPEC_TYPE) == names.NODE_TYPE_SLURM


def admissions_of(obj) -> list[AdmissionRequest]:
    raw = spec_of(obj).get(names.SPEC_ADMISSIONS)
    return [parse_admission(entry) for entry in raw] if isinstance(raw, list) else []


def ledger_of(obj) -> dict:
    """``status.admissions`` (uid -> entry), copied."""
    raw = status_of(obj).get(names.STATUS_ADMISSIONS)
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



# -- writing the status ------------------------------------------------------------------


def transition(entry: dict, state: str, reason: str, now: str) -> dict:
    entry = dict(entry)
    entry.update(state=state, reason=reason, lastTransitionTime=now)
    return entry


def slurm_status_of(status: Mapping) -> Mapping:
    value = status.get(names.STATUS_SLURM)
    return value if isinstance(value, dict) else {}


def old_allocation(status: Mapping, kind: str):
    for item in status.get(names.STATUS_ALLOCATED) or []:
        if isinstance(item, dict) and item.get("type") == kind and isinstance(item.get("allocated"), dict):
            return dict(item["allocated"])
    return None


def set_condition(conditions, kind: str, value: bool, reason: str, message: str, now: str) -> list:
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
