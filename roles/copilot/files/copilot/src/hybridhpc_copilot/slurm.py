"""Every Slurm call the copilot makes, behind one small interface.

:class:`RestSlurm` talks to slurmrestd with the collection's own client
(``plugins/module_utils/slurmrestd.py``, vendored into ``_vendor`` by
``tools/vendor.sh``). :class:`FakeSlurm` is an in-memory Slurm for tests: it
schedules jobs against the count-only GRES like slurmctld does, reverts the
GRES on reconfigure, and records every change so tests can check the rules
(never above the configured count, never a drain cleared that it did not set).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Callable, Protocol

from . import names
from .core import SlurmNode
from .units import parse_gres, replace_gres


class SlurmError(Exception):
    """A Slurm call failed. ``temporary``: worth retrying later with backoff."""

    temporary = True


class SlurmUnavailable(SlurmError):
    """slurmrestd or slurmctld did not answer (or answered 502/503/504)."""


class SlurmRefused(SlurmError):
    """Slurm refused the request (bad node name, bad GRES, no permission, bad token)."""

    temporary = False


class Slurm(Protocol):
    def node_states(self, names: Iterable[str] | None = None) -> dict[str, SlurmNode]:
        """Nodes by name: all of them, or only ``names`` (an unknown name is left out)."""

    def set_node_gres(self, name: str, gres: str) -> None:
        """Replace the node's whole Gres string."""

    def drain_node(self, name: str, reason: str) -> None: ...

    def resume_node(self, name: str) -> None: ...


def node_from_rest(entry: dict) -> SlurmNode:
    """A :class:`SlurmNode` from slurmrestd's node JSON (v0.0.40 - v0.0.42)."""
    state = entry.get("state") or []
    if isinstance(state, str):
        state = [state]
    return SlurmNode(
        name=str(entry.get("name") or ""),
        gres=str(entry.get("gres") or ""),
        gres_used=str(entry.get("gres_used") or ""),
        alloc_cpus=int(_number(entry.get("alloc_cpus"))),
        alloc_memory_mb=int(_number(entry.get("alloc_memory"))),
        states=tuple(str(s).upper() for s in state),
        reason=str(entry.get("reason") or ""),
    )


def _number(value) -> float:
    """slurmrestd numbers are plain, or ``{"set", "infinite", "number"}`` structs."""
    if isinstance(value, dict):
        if value.get("infinite") or not value.get("set", True):
            return 0
        return value.get("number") or 0
    return value or 0


# slurm_errno.h: slurmrestd could not talk to slurmctld (SLURM_COMMUNICATIONS_* 1001-1004,
# SLURMCTLD_COMMUNICATIONS_* 1800-1804). 1007 (authentication) is not one of them.
_COMMUNICATION_ERRORS = frozenset((1001, 1002, 1003, 1004, 1800, 1801, 1802, 1803, 1804))


class RestSlurm:
    """Slurm through slurmrestd.

    ``tokens`` (see ``tokens.py``) hands out a current JWT before each call and a
    fresh one when slurmrestd rejects it; ``client`` is a vendored
    ``SlurmrestdClient`` (built here from ``url`` when not given).
    """

    def __init__(self, url="http://localhost:6820", tokens=None, user=None, unix_socket=None, timeout=10.0,
                 client=None, transport=None):
        from ._vendor import slurmrestd as rest

        self._rest = rest
        self.tokens = tokens
        refresh = tokens.refresh if tokens is not None else None
        self.client = client or rest.SlurmrestdClient(
            url=url, user=user, token_provider=refresh, unix_socket=unix_socket, timeout=timeout, retries=2,
            transport=transport)

    def _call(self, method, *args):
        if self.tokens is not None:
            self.client.token = self.tokens.current()
        try:
            return method(*args)
        except self._rest.SlurmrestdUnavailable as err:
            raise SlurmUnavailable(str(err)) from err
        except self._rest.SlurmrestdError as err:
            numbers = {e.get("error_number") for e in err.errors if isinstance(e, dict)}
            if any(n in _COMMUNICATION_ERRORS for n in numbers if isinstance(n, int)):
                raise SlurmUnavailable(str(err)) from err
            raise SlurmRefused(str(err)) from err

    def node_states(self, names: Iterable[str] | None = None) -> dict[str, SlurmNode]:
        if names is None:
            entries = self._call(self.client.nodes)
        else:
            entries = [e for e in (self._call(self.client.node, n) for n in names) if e]
        return {node.name: node for node in map(node_from_rest, entries)}

    def set_node_gres(self, name: str, gres: str) -> None:
        self._call(self.client.set_node_gres, name, gres)

    def drain_node(self, name: str, reason: str) -> None:
        self._call(self.client.drain_node, name, reason)

    def resume_node(self, name: str) -> None:
        self._call(self.client.resume_node, name)

    def close(self) -> None:
        self.client.close()


# -- the fake ---------------------------------------------------------------------------


@dataclass
class FakeNode:
    name: str
    cpus: int  # configured k8scpu
    memory_mb: int  # configured k8smemory
    other_gres: str = ""  # e.g. "gpu:2", kept through every update
    count_cpu: int = -1
    count_mem: int = -1
    jobs: dict = field(default_factory=dict)  # job id -> (cpus, mb, started while reverted)
    states: list = field(default_factory=lambda: ["IDLE"])
    reason: str = ""
    reverted: bool = False  # GRES back at slurm.conf's counts since the last update

    def __post_init__(self):
        if self.count_cpu < 0:
            self.count_cpu = self.cpus
        if self.count_mem < 0:
            self.count_mem = self.memory_mb

    @property
    def used(self) -> tuple[int, int]:
        return sum(j[0] for j in self.jobs.values()), sum(j[1] for j in self.jobs.values())

    @property
    def gres(self) -> str:
        return replace_gres(self.other_gres, {names.GRES_CPU: self.count_cpu, names.GRES_MEMORY: self.count_mem})

    def view(self) -> SlurmNode:
        used = self.used
        states = list(self.states)
        base = "MIXED" if self.jobs else "IDLE"
        states = [base] + [s for s in states if s not in ("IDLE", "MIXED")]
        return SlurmNode(
            name=self.name,
            gres=self.gres,
            gres_used="%s:%d,%s:%d" % (names.GRES_CPU, used[0], names.GRES_MEMORY, used[1]),
            alloc_cpus=used[0],
            alloc_memory_mb=used[1],
            states=tuple(states),
            reason=self.reason,
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

    # -- the interface -----------------------------------------------------------
    def _check(self, operation, node=None):
        self.calls.append((operation, node))
        if self.fault is not None:
            self.fault(operation, node)

    def node_states(self, names: Iterable[str] | None = None) -> dict[str, SlurmNode]:
        self._check("node_states")
        wanted = self.nodes if names is None else [n for n in names if n in self.nodes]
        return {n: self.nodes[n].view() for n in wanted}

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
        if "DRAIN" not in node.states:
            raise SlurmRefused("Invalid node state transition requested for node %s from=IDLE to=RESUME" % name)
        if not node.reason.startswith(names.DRAIN_REASON_PREFIX):
            self.violations.append("%s: resumed a drain the copilot did not set (%r)" % (name, node.reason))
        node.states.remove("DRAIN")
        node.reason = ""

    def _node(self, name) -> FakeNode:
        if name not in self.nodes:
            raise SlurmRefused("Invalid node name specified (error 2018)")
        return self.nodes[name]

    # -- what happens in Slurm without the copilot ----------------------------------
    def start_job(self, name: str, cpus: int, memory_mb: int) -> int | None:
        """Start a job if the node's free k8scpu/k8smemory allow it (as slurmctld schedules)."""
        node = self.nodes[name]
        used = node.used
        if "DRAIN" in node.states or used[0] + cpus > node.count_cpu or used[1] + memory_mb > node.count_mem:
            return None
        job = next(self._ids)
        node.jobs[job] = (cpus, memory_mb, node.reverted)
        return job

    def end_job(self, name: str, job: int) -> None:
        self.nodes[name].jobs.pop(job, None)

    def reconfigure(self, name: str | None = None) -> None:
        """``scontrol reconfigure`` or a slurmctld restart: GRES back to slurm.conf."""
        for node in self.nodes.values() if name is None else [self.nodes[name]]:
            if (node.count_cpu, node.count_mem) != (node.cpus, node.memory_mb):
                node.count_cpu, node.count_mem = node.cpus, node.memory_mb
                node.reverted = True

    def admin_drain(self, name: str, reason: str) -> None:
        node = self.nodes[name]
        if "DRAIN" not in node.states:
            node.states.append("DRAIN")
        node.reason = reason

    def admin_resume(self, name: str) -> None:
        node = self.nodes[name]
        if "DRAIN" in node.states:
            node.states.remove("DRAIN")
        node.reason = ""
