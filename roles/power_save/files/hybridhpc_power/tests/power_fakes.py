"""One fake per boundary: Slurm (scontrol) and a provider, in memory.

FakeSlurm moves nodes between states the way Slurm 24.11.5 did in the
experiments written up in README.md ("Slurm 24.11 states, verified"), for a
slurmctld without idle_on_node_suspend:

* ``state=DOWN`` keeps the power flags (POWERING_UP stays: ``down#``);
* ``state=POWER_DOWN_FORCE`` drops POWERING_UP, sets POWERING_DOWN, and runs
  SuspendProgram (recorded in ``suspend_program_calls``); ``finish_power_down``
  then ends it as POWERED_DOWN, still DOWN when it was;
* ``state=RESUME`` on DOWN+POWERED_DOWN gives IDLE+POWERED_DOWN (idle~).
"""

from __future__ import annotations

import itertools

from hybridhpc_power import names
from hybridhpc_power.providers.base import Instance, Provider, ProviderError, ResumeResult, SuspendResult
from hybridhpc_power.slurm import SlurmError, SlurmNode

POWER_FLAGS = {names.STATE_POWERED_DOWN, names.STATE_POWERING_UP, names.STATE_POWERING_DOWN, names.STATE_POWER_DOWN}


def node(name: str, *flags: str, reason: str = "", changed: float | None = None) -> SlurmNode:
    return SlurmNode(name, frozenset(flags or ("IDLE", "CLOUD")), reason, changed)


class FakeSlurm:
    def __init__(self, nodes=(), clock=lambda: 1000.0):
        self.state: dict[str, SlurmNode] = {n.name: n for n in nodes}
        self.calls: list[tuple] = []
        self.suspend_program_calls: list[list[str]] = []
        self.fail: dict[str, str] = {}  # method name -> error message
        self.clock = clock

    def _check(self, method: str, *args) -> None:
        self.calls.append((method, *args))
        if method in self.fail:
            raise SlurmError(self.fail[method])

    def _set(self, name: str, flags, reason=None, changed=None) -> None:
        old = self.state[name]
        self.state[name] = SlurmNode(name, frozenset(flags), old.reason if reason is None else reason,
                                     old.reason_changed_at if changed is None else changed)

    def nodes(self, names_=None):
        self._check("nodes", None if names_ is None else sorted(names_))
        if names_ is None:
            return dict(self.state)
        return {n: self.state[n] for n in names_ if n in self.state}

    def mark_down(self, nodes, reason):
        nodes = sorted(nodes)
        self._check("mark_down", nodes, reason)
        for name in nodes:
            flags = (set(self.state[name].state) - {"IDLE", "ALLOCATED", "MIXED"}) | {names.STATE_DOWN}
            self._set(name, flags, reason, self.clock())

    def power_down(self, nodes):
        nodes = sorted(nodes)
        self._check("power_down", nodes)
        for name in nodes:
            flags = set(self.state[name].state) - POWER_FLAGS | {names.STATE_POWERING_DOWN}
            if names.STATE_DOWN not in flags:
                flags |= {"IDLE"}
            self._set(name, flags)
        self.suspend_program_calls.append(nodes)

    def finish_power_down(self):
        for name, current in list(self.state.items()):
            if names.STATE_POWERING_DOWN in current.state:
                self._set(name, set(current.state) - {names.STATE_POWERING_DOWN} | {names.STATE_POWERED_DOWN})

    def return_to_service(self, nodes):
        nodes = sorted(nodes)
        self._check("return_to_service", nodes)
        for name in nodes:
            self._set(name, set(self.state[name].state) - {names.STATE_DOWN, names.STATE_DRAIN} | {"IDLE"})

    def updates(self):
        """The calls that change Slurm (not the reads)."""
        return [c for c in self.calls if c[0] != "nodes"]


class FakeProvider(Provider):
    """Machines in a dict; ``fail`` makes nodes fail, ``error`` makes a whole call raise ProviderError."""

    name = "fake"
    _ids = itertools.count(1)

    def __init__(self, cluster="t", options=None, secrets=None, listable=True):
        super().__init__(cluster, options or {}, secrets)
        self.machines: dict[str, Instance] = {}
        self.calls: list[tuple[str, list[str]]] = []
        self.fail: dict[str, str] = {}
        self.error: str | None = None
        self.list_error: str | None = None
        self.listable = listable

    def resume(self, nodes):
        self.calls.append(("resume", list(nodes)))
        if self.error:
            raise ProviderError(self.error)
        result = ResumeResult()
        for n in nodes:
            if n in self.fail:
                result.failed[n] = self.fail[n]
                continue
            if n not in self.machines:
                self.machines[n] = Instance(n, "i-%04d" % next(self._ids), names.INSTANCE_RUNNING, "10.0.0.%d" % (len(self.machines) + 1))
            result.started[n] = self.machines[n]
        return result

    def suspend(self, nodes):
        self.calls.append(("suspend", list(nodes)))
        if self.error:
            raise ProviderError(self.error)
        result = SuspendResult()
        for n in nodes:
            if n in self.fail:
                result.failed[n] = self.fail[n]
            else:
                self.machines.pop(n, None)
                result.stopped.append(n)
        return result

    def instances(self):
        self.calls.append(("instances", []))
        if self.list_error:
            raise ProviderError(self.list_error)
        return dict(self.machines) if self.listable else None
