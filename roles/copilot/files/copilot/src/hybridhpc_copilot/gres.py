"""The count-only GRES strategy: Kubernetes' share is taken out of a node's k8scpu/k8smemory counts.

Every Slurm job consumes ``k8scpu``/``k8smemory``; lowering a node's counts
by what Kubernetes holds leaves Slurm only the rest. A reservation is granted
once Slurm shows the lowered counts and its jobs fit under them. Slurm
reverts the counts on every reconfigure: the wanted counts are re-asserted on
every pass, never above the configured ones.
"""

from __future__ import annotations

from collections.abc import Mapping

from . import names
from .ledger import Ledger, LedgerEntry, SlurmStatus, Status, holdings, object_in, transition
from .model import Action, Capacity, Decision, DenyAdmission, GrantAdmission, Observed, SetGres, Settings, SlurmNode
from .strategy import NodeFacts, Step
from .units import cpus_for, format_cpu, format_memory, mib_for, parse_gres, replace_gres

STRATEGY = "gres"


def gres_string(cpus: int, memory_mb: int) -> str:
    return "%s:%d,%s:%d" % (names.GRES_CPU, cpus, names.GRES_MEMORY, memory_mb)


def capacity_from_gres(text: object) -> Capacity | None:
    counts = parse_gres(text) if isinstance(text, str) else {}
    if names.GRES_CPU in counts and names.GRES_MEMORY in counts:
        return Capacity(counts[names.GRES_CPU], counts[names.GRES_MEMORY])
    return None


def wanted_counts(cap: Capacity, ledger: Mapping[str, LedgerEntry]) -> tuple[int, int]:
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


def capacity(settings: Settings, alias: str, status: Status, slurm: SlurmNode | None) -> Capacity | None:
    """What the node shares.

    The config's counts when it lists the node (they must equal slurm.conf).
    Otherwise the larger of what the ledger recorded and what Slurm shows now:
    Slurm never holds more than slurm.conf (a higher count makes the node
    INVALID_REG), so this never overshoots, and a revert shows the full value.
    """
    current = None
    if slurm is not None:
        cpus, memory_mb = slurm.counts
        if cpus is None or memory_mb is None:
            return None  # slurm.conf gives the node no k8scpu/k8smemory GRES: not shared
        current = Capacity(cpus, memory_mb)
    if alias in settings.configured:
        return settings.configured[alias]
    recorded = capacity_from_gres(object_in(status.get(names.STATUS_SLURM)).get("configuredGres"))
    if current is None:
        return recorded
    if recorded is None:
        return current
    return Capacity(max(recorded.cpus, current.cpus), max(recorded.memory_mb, current.memory_mb))


def set_gres(node: str | None, slurm: SlurmNode, target: tuple[int, int], reason: str,
             fallback: tuple[int, int] | None = None) -> SetGres:
    """Set the node's counts to ``target``, the rest of its Gres string kept (Slurm replaces the whole string)."""
    def gres(counts: tuple[int, int]) -> str:
        return replace_gres(slurm.gres, {names.GRES_CPU: counts[0], names.GRES_MEMORY: counts[1]})

    backup = gres(fallback) if fallback is not None and fallback != target else ""
    return SetGres(node, slurm.name, gres(target), target, reason, backup)


def restore_unshared(observed: Observed, shared: set[str]) -> list[Action]:
    """Configured Slurm nodes that no GenericNode shares get their slurm.conf counts back."""
    actions: list[Action] = []
    if observed.slurm_nodes is None:
        return actions
    # The nodes Slurm was read for (an event pass reads only its own): a configured node not
    # among them has nothing to compare, so looking through every configured node finds no more.
    for slurm_name in sorted(observed.slurm_nodes.keys() & observed.settings.configured.keys()):
        slurm = observed.slurm_nodes[slurm_name]
        if slurm_name in shared or None in slurm.counts or \
                observed.settings.strategy_of(slurm_name) != STRATEGY:
            continue
        cap = observed.settings.configured[slurm_name]
        target = (cap.cpus, cap.memory_mb)
        if slurm.counts != target:
            actions.append(set_gres(None, slurm, target, "no GenericNode shares the node: restore the configured counts"))
    return actions


class GresStrategy:
    """The :class:`strategy.Strategy` of nodes with k8scpu/k8smemory GRES."""

    kind = STRATEGY
    reserving = "lowering the Slurm GRES"
    awaited = "lowered GRES"
    reads_slurm = True

    def __init__(self, facts: NodeFacts, observed: Observed):
        settings, slurm = observed.settings, facts.slurm
        self.name, self.alias, self.slurm = facts.name, facts.alias, slurm
        self.cap = None if facts.duplicate else capacity(settings, facts.alias, facts.status, slurm)
        self.usage = slurm.usage(settings.usage_source) if slurm is not None else (0, 0)

    def not_shared(self) -> str:
        return "Slurm node %s has no %s/%s GRES: it is not shared" % (self.alias, names.GRES_CPU, names.GRES_MEMORY)

    def refuse_new(self) -> str:
        return ""

    def held(self, ledger: Mapping[str, LedgerEntry]) -> tuple[int, int]:
        return holdings(ledger)

    def settle_reserved(self, ledger: Ledger, reserved: list[str], stamp: str) -> Step:
        """Grant once Slurm's GRES is down and its jobs fit under it; deny the newest if Slurm got there first."""
        cap, usage = self._shared()
        want = wanted_counts(cap, ledger)
        if usage[0] > want[0] or usage[1] > want[1]:
            return self._deny_newest(ledger, reserved, stamp)
        if self._slurm().counts != want:
            return ledger, []
        reason = "Slurm GRES lowered to " + gres_string(*want)
        ledger = dict(ledger)
        decisions: list[Decision] = []
        for uid in reserved:
            ledger[uid] = transition(ledger[uid], names.GRANTED, reason, stamp)
            decisions.append(GrantAdmission(self.name, uid, reason))
        return ledger, decisions

    def _deny_newest(self, ledger: Ledger, reserved: list[str], stamp: str) -> Step:
        """Slurm allocated the share before its GRES was lowered: deny the newest reservations until the rest fits."""
        cap, usage = self._shared()
        reason = "Slurm allocated the resources before its GRES was lowered (Slurm holds %d CPUs, %dMi)" % usage
        ledger = dict(ledger)
        decisions: list[Decision] = []
        for uid in reversed(reserved):
            ledger[uid] = transition(ledger[uid], names.DENIED, reason, stamp)
            decisions.append(DenyAdmission(self.name, uid, reason))
            want = wanted_counts(cap, ledger)
            if usage[0] <= want[0] and usage[1] <= want[1]:
                break
        return ledger, decisions

    def slurm_actions(self, ledger: Ledger) -> list[Action]:
        """The configured counts minus Kubernetes' holdings (re-asserted after a revert)."""
        cap, slurm = self._shared()[0], self._slurm()
        want = wanted_counts(cap, ledger)
        if slurm.counts == want:
            return []
        return [set_gres(self.name, slurm, want, "ledger wants " + gres_string(*want), fallback_counts(cap, want, usage=self.usage))]

    def slurm_status(self, ledger: Ledger) -> SlurmStatus:
        out: SlurmStatus = {"node": self.alias}
        if self.cap is not None:
            out["configuredGres"] = gres_string(self.cap.cpus, self.cap.memory_mb)
            out["wantedGres"] = gres_string(*wanted_counts(self.cap, ledger))
        return out

    def overcommitted(self, ledger: Ledger) -> str:
        held = holdings(ledger)
        cap, usage = self._shared()
        if usage[0] + cpus_for(held[0]) > cap.cpus or usage[1] + mib_for(held[1]) > cap.memory_mb:
            return "Slurm %d CPUs %dMi + Kubernetes %s %s of %d CPUs %dMi" % (
                usage[0], usage[1], format_cpu(held[0]), format_memory(held[1]), cap.cpus, cap.memory_mb)
        return ""

    def restored(self, ledger: Ledger) -> bool:
        return self.slurm is None or self.cap is None or self.slurm.counts == (self.cap.cpus, self.cap.memory_mb)

    # core asks the questions below only of a node Slurm has and that shares something.
    def _shared(self) -> tuple[Capacity, tuple[int, int]]:
        if self.cap is None:
            raise ValueError("Slurm node %s shares nothing" % self.alias)
        return self.cap, self.usage

    def _slurm(self) -> SlurmNode:
        if self.slurm is None:
            raise ValueError("Slurm has no node %s" % self.alias)
        return self.slurm
