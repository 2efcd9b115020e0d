"""The copilot's decisions, as one pure function: ``reconcile(observed) -> actions``.

No I/O, no clock, no randomness: everything the decisions depend on is in
:class:`Observed` (GenericNodes, the pods their admissions name, Kubernetes
Nodes, each parsed once as the informers cached it; Slurm node states, the
configured GRES counts, the time), and everything the copilot should do comes
back as a list of :class:`Action` values that ``executor.Executor`` carries
out in order.

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
  ``reservation_timeout`` is denied too (a Slurm node that vanished for a
  while, deleted and read back from slurm.conf by a reconfigure, gets that
  long to come back: nothing held is revoked meanwhile).
* A GenericNode whose Slurm node Slurm does not list shows the
  ``SlurmNodeMissing`` condition (naming ``spec.alias``); its new admissions
  are denied, its granted ones stay granted.
* A held admission is released when its pod is gone (deleted, replaced by a
  pod with another uid, or finished) or the scheduler removed the admission;
  the GRES goes back up, never above the configured count.

Drains: a cordoned Kubernetes node drains its Slurm node with a reason that
starts with ``copilot:``; uncordoning resumes only such drains. A Slurm drain
somebody else set is shown on the Kubernetes Node as an annotation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence

from . import names
from .gres import GresStrategy, restore_unshared, wanted_counts
from .ledger import (
    AdmissionRequest,
    Allocation,
    Condition,
    Ledger,
    LedgerEntry,
    Quantities,
    Status,
    entry_amounts,
    holdings,
    object_in,
    old_allocation,
    parse_timestamp,
    set_condition,
    slurm_status_of,
    timestamp,
    transition,
)
from .model import (
    Action,
    AddFinalizer,
    AnnotateNode,
    Capacity,
    Decision,
    DenyAdmission,
    DrainNode,
    GenericNode,
    GrantAdmission,
    KubeNode,
    Observed,
    Pod,
    ReleaseAdmission,
    RemoveFinalizer,
    ReserveAdmission,
    ResumeNode,
    SetGres,
    Settings,
    SlurmNode,
    WriteStatus,
)
from .placeholder import PlaceholderStrategy, cancel_orphans
from .strategy import NodeFacts, Step, Strategy
from .units import MIB, cpus_for, format_cpu, format_memory, mib_for, parse_gres

# What the decisions read and return, and the ledger's readers, are named here too: core is where
# readers (and the tests) look for the copilot's vocabulary.
__all__ = [
    "Action", "AddFinalizer", "AnnotateNode", "Capacity", "Decision", "DenyAdmission", "DrainNode", "GenericNode",
    "GrantAdmission", "KubeNode", "NodeFacts", "Observed", "Pod", "ReleaseAdmission", "RemoveFinalizer", "ReserveAdmission",
    "ResumeNode", "SetGres", "Settings", "SlurmNode", "Strategy", "WriteStatus", "entry_amounts", "holdings", "holds_reservation",
    "decide", "pods_needed", "reconcile", "reconcile_node", "timestamp", "wanted_counts",
]

# How each strategy is built for a node; a Slurm node's strategy comes from the config.
STRATEGIES: dict[str, Callable[[NodeFacts, Observed], Strategy]] = {
    GresStrategy.kind: GresStrategy,
    PlaceholderStrategy.kind: PlaceholderStrategy,
}


def reconcile(observed: Observed, keep: Callable[[Action], Action] | None = None) -> list[Action]:
    """Every action that brings Slurm, the ledger and the Kubernetes Nodes in line (:func:`decide`'s, in its order).

    ``keep(action)``: each action as the caller holds it, made as soon as its
    node is decided (the loop compacts the statuses to write: a first start
    decides a status for every GenericNode, and all of them as built, held
    until the last is decided, cost megabytes at 10,000).
    """
    return [action for _name, actions in decide(observed, keep) for action in actions]


def decide(observed: Observed, keep: Callable[[Action], Action] | None = None) -> Iterator[tuple[str | None, list[Action]]]:
    """:func:`reconcile`'s actions as they are decided: ``(GenericNode, its actions)`` for each one sharing a Slurm
    node, in name order, then ``(None, the actions tied to no GenericNode)``.

    Each GenericNode's decisions read only its own objects (and the owner of
    its Slurm node, found first), so the caller may carry out one
    GenericNode's actions while the next is decided.
    """
    owner_of: dict[str, str] = {}
    for name in sorted(observed.generic_nodes):
        node = observed.generic_nodes[name]
        if node.shares:
            owner_of.setdefault(node.alias, name)
    for name in sorted(observed.generic_nodes):
        node = observed.generic_nodes[name]
        if node.shares:
            decided = reconcile_node(name, node, observed, owner_of[node.alias])
            yield name, decided if keep is None else [keep(action) for action in decided]
    yield None, [*restore_unshared(observed, set(owner_of)), *cancel_orphans(observed, set(owner_of.values()))]


def reconcile_node(name: str, node: GenericNode, observed: Observed, owner: str) -> list[Action]:
    """Actions for one GenericNode (``owner``: the GenericNode that shares its Slurm node), phase by phase.

    The decisions come first, then the finalizer, the ledger write, what Slurm
    must be told, the drains and, last, letting a deleted GenericNode go: the
    executor carries them out in this order, so the ledger is written before
    Slurm changes (a crash in between leaves the ledger ahead, which the next
    pass re-asserts).
    """
    facts = node_facts(name, node, observed, owner)
    strategy = STRATEGIES.get(observed.settings.strategy_of(facts.alias), GresStrategy)(facts, observed)
    if not strategy.reads_slurm:
        facts = dataclasses.replace(facts, slurm=None, slurm_known=False)  # decide nothing that depends on Slurm
    requests = node.admissions
    ledger, decisions = forget_removed(facts, node.ledger, requests)
    ledger, released = release_gone(facts, ledger, observed.pods)
    ledger, settled = settle_reservations(facts, strategy, ledger, observed.settings.reservation_timeout)
    ledger, admitted = admit_new(facts, strategy, ledger, requests, observed.pods)
    actions: list[Action] = [*decisions, *released, *settled, *admitted]
    actions.extend(add_finalizer(facts, observed.settings))
    actions.extend(write_status(facts, strategy, ledger))
    actions.extend(tell_slurm(facts, strategy, ledger))
    actions.extend(sync_drains(facts, observed))
    actions.extend(remove_finalizer(facts, strategy, ledger))
    return actions


def node_facts(name: str, node: GenericNode, observed: Observed, owner: str) -> NodeFacts:
    slurm_known = observed.slurm_nodes is not None
    return NodeFacts(
        name=name, owner=owner, alias=node.alias, resource_version=node.resource_version,
        deleting=node.deleting, finalizers=node.finalizers, status=node.status, kube_node=node.name or name,
        slurm=observed.slurm_nodes.get(node.alias) if observed.slurm_nodes is not None else None,
        slurm_known=slurm_known, now=observed.now, stamp=timestamp(observed.now))


def pods_needed(node: GenericNode) -> set[tuple[str, str]]:
    """``(namespace, name)`` of every pod a decision about ``node`` may look at."""
    keys = {adm.pod_key for adm in node.admissions if adm.uid and adm.uid not in node.ledger and not adm.error}
    for entry in node.ledger.values():
        if entry.get("state") in names.HOLDING_STATES:
            pod = object_in(entry.get("pod"))
            keys.add((str(pod.get("namespace") or ""), str(pod.get("name") or "")))
    return keys


# -- 1-4: the ledger's decisions ---------------------------------------------------------


def forget_removed(facts: NodeFacts, ledger: Ledger, requests: Sequence[AdmissionRequest]) -> Step:
    """Admissions the scheduler removed from the spec: forgotten, releasing what they held."""
    in_spec = {adm.uid for adm in requests if adm.uid}
    removed = [uid for uid in ledger if uid not in in_spec]
    if not removed:
        return ledger, []
    decisions: list[Decision] = [ReleaseAdmission(facts.name, uid, "admission removed")
                                 for uid in removed if ledger[uid].get("state") in names.HOLDING_STATES]
    return {uid: entry for uid, entry in ledger.items() if uid in in_spec}, decisions


def release_gone(facts: NodeFacts, ledger: Ledger, pods: Mapping[tuple[str, str], Pod]) -> Step:
    """Held admissions whose pod went away: released."""
    gone = {uid: why for uid, entry in ledger.items()
            if entry.get("state") in names.HOLDING_STATES and (why := pod_gone(entry, pods))}
    if not gone:
        return ledger, []
    ledger = dict(ledger)
    for uid, why in gone.items():
        ledger[uid] = transition(ledger[uid], names.RELEASED, why, facts.stamp)
    return ledger, [ReleaseAdmission(facts.name, uid, why) for uid, why in gone.items()]


def settle_reservations(facts: NodeFacts, strategy: Strategy, ledger: Ledger, timeout: float) -> Step:
    """Reservations: granted once Slurm can no longer hand the resources out; denied when it cannot, or not in time."""
    decisions: list[Decision] = []
    reserved = _reserved(ledger)
    if reserved and facts.slurm is not None and strategy.cap is not None:
        ledger, decisions = strategy.settle_reserved(ledger, reserved, facts.stamp)
    late = [uid for uid in _reserved(ledger) if _too_late(facts, strategy, ledger[uid], timeout)]
    if not late:
        return ledger, decisions
    reason = "Slurm did not take the %s within %gs" % (strategy.awaited, timeout)
    if facts.slurm is None:
        reason = "Slurm has had no node %s for %gs" % (facts.alias, timeout)
    ledger = dict(ledger)
    for uid in late:
        ledger[uid] = transition(ledger[uid], names.DENIED, reason, facts.stamp)
    return ledger, decisions + [DenyAdmission(facts.name, uid, reason) for uid in late]


def _reserved(ledger: Ledger) -> list[str]:
    return [uid for uid, entry in ledger.items() if entry.get("state") == names.RESERVED]


def _too_late(facts: NodeFacts, strategy: Strategy, entry: LedgerEntry, timeout: float) -> bool:
    """Whether a reservation Slurm has not taken is to be denied (never while Slurm cannot be read).

    A node Slurm lists but that shares nothing cannot take it: at once. A node
    Slurm does not list may be back after a reconfigure: only after ``timeout``.
    """
    if not facts.slurm_known:
        return False
    if facts.slurm is not None and strategy.cap is None:
        return True
    since = parse_timestamp(entry.get("lastTransitionTime"))
    return since is None or facts.now - since > timeout


def admit_new(facts: NodeFacts, strategy: Strategy, ledger: Ledger, requests: Sequence[AdmissionRequest], pods: Mapping[tuple[str, str], Pod]) -> Step:
    """New admissions, in the order the scheduler listed them, each against what the ones before took."""
    refusal = node_refusal(facts, strategy)
    decisions: list[Decision] = []
    ledger = dict(ledger)
    held = strategy.held(ledger)
    for adm in requests:
        if not adm.uid or adm.uid in ledger:
            continue
        pod = pods.get(adm.pod_key)
        reason = adm.error or refusal
        if reason is None:
            continue  # Slurm could not be read: decide later
        reason = reason or pod_refusal(adm, pod) or shortfall(strategy, held, adm)
        entry = new_entry(adm, pod)
        if reason:
            ledger[adm.uid] = transition(entry, names.DENIED, reason, facts.stamp)
            decisions.append(DenyAdmission(facts.name, adm.uid, reason))
        else:
            ledger[adm.uid] = transition(entry, names.RESERVED, strategy.reserving, facts.stamp)
            held = strategy.held(ledger)
            decisions.append(ReserveAdmission(facts.name, adm.uid, "fits: " + strategy.reserving))
    return ledger, decisions


def node_refusal(facts: NodeFacts, strategy: Strategy) -> str | None:
    """Why this node takes no new admission ('' when it may; None: Slurm could not be read, decide later)."""
    if facts.deleting:
        return "GenericNode %s is being deleted" % facts.name
    if facts.duplicate:
        return "Slurm node %s is shared through GenericNode %s" % (facts.alias, facts.owner)
    if not facts.slurm_known:
        return None
    if facts.slurm is None:
        return "Slurm has no node %s" % facts.alias
    if strategy.cap is None:
        return strategy.not_shared()
    return strategy.refuse_new()


def pod_refusal(adm: AdmissionRequest, pod: Pod | None) -> str:
    """Why the admission's pod cannot be admitted ('' when it can)."""
    if pod is None:
        return "pod %s/%s not found" % adm.pod_key
    if adm.pod_uid and pod.uid and adm.pod_uid != pod.uid:
        return "pod %s/%s has uid %s, not %s" % (adm.namespace, adm.name, pod.uid, adm.pod_uid)
    if pod.finished:
        return "pod %s/%s is %s" % (adm.namespace, adm.name, pod.phase)
    return ""


def shortfall(strategy: Strategy, held: tuple[int, int], adm: AdmissionRequest) -> str:
    """'' when ``adm`` fits beside Slurm's usage and Kubernetes' holdings, else why not."""
    cap, usage = strategy.cap, strategy.usage
    if cap is None:
        raise ValueError("shortfall of a node that shares nothing")  # node_refusal denied it before
    request = strategy.held({"new": {"state": names.RESERVED, "request": {"cpu": "%dm" % adm.cpu_millis,
                                                                          "memory": str(adm.memory_bytes)}}})
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


def new_entry(adm: AdmissionRequest, pod: Pod | None) -> LedgerEntry:
    """A ledger entry for a new admission, before its state is set."""
    return {
        "pod": {"namespace": adm.namespace, "name": adm.name, "uid": adm.pod_uid or (pod.uid if pod else "")},
        "request": {"cpu": format_cpu(adm.cpu_millis), "memory": format_memory(adm.memory_bytes)},
    }


def pod_gone(entry: LedgerEntry, pods: Mapping[tuple[str, str], Pod]) -> str:
    """Why a held admission's pod no longer holds resources ('' while it does)."""
    ref = object_in(entry.get("pod"))
    pod = pods.get((str(ref.get("namespace") or ""), str(ref.get("name") or "")))
    if pod is None:
        return "pod deleted"
    if ref.get("uid") and pod.uid and pod.uid != ref.get("uid"):
        return "pod replaced by another with the same name"
    if pod.finished:
        return "pod %s" % pod.phase
    return ""


# -- 5-8: writes ------------------------------------------------------------------------


def add_finalizer(facts: NodeFacts, settings: Settings) -> list[Action]:
    """The finalizer goes on before the first ledger write: a deleted GenericNode waits for its pods and Slurm."""
    if settings.manage_finalizer and not facts.deleting and names.FINALIZER not in facts.finalizers:
        return [AddFinalizer(facts.name, facts.resource_version)]
    return []


def write_status(facts: NodeFacts, strategy: Strategy, ledger: Ledger) -> list[Action]:
    """The ledger and what it shows, written only when it changed."""
    status = facts.status.copy()
    status[names.STATUS_ADMISSIONS] = ledger
    status[names.STATUS_ALLOCATED] = allocations(facts, strategy, ledger)
    status[names.STATUS_SLURM] = strategy.slurm_status(ledger) or slurm_status_of(facts.status).copy() or {"node": facts.alias}
    if facts.slurm is not None and strategy.cap is not None:
        message = strategy.overcommitted(ledger)
        reason = "SlurmUsedKubernetesShare" if message else "WithinCapacity"
        status[names.STATUS_CONDITIONS] = set_condition(facts.status.get(names.STATUS_CONDITIONS),
                                                        names.CONDITION_OVERCOMMITTED, bool(message), reason, message, facts.stamp)
    missing = slurm_node_missing(facts, status.get(names.STATUS_CONDITIONS))
    if missing is not None:
        status[names.STATUS_CONDITIONS] = missing
    if status == facts.status:
        return []
    return [WriteStatus(facts.name, facts.resource_version, status)]


def holds_reservation(status: Status) -> bool:
    """Whether a status to write holds an admission still Reserved (it waits for Slurm to be read again)."""
    return bool(_reserved(status.get(names.STATUS_ADMISSIONS) or {}))


def slurm_node_missing(facts: NodeFacts, conditions: object) -> list[Condition] | None:
    """``conditions`` with ``SlurmNodeMissing`` set, when it must change (None: leave them as they are).

    True while Slurm lists no node ``spec.alias`` names; False once it does
    again. A GenericNode whose Slurm node was always there never gets it, and
    nothing changes while Slurm cannot be read or another GenericNode shares
    the node.
    """
    if not facts.slurm_known or facts.duplicate:
        return None
    missing = facts.slurm is None
    listed = conditions if isinstance(conditions, list) else []
    had = any(isinstance(c, dict) and c.get("type") == names.CONDITION_SLURM_NODE_MISSING for c in listed)
    if not (missing or had):
        return None
    if missing:
        reason, message = "NotInSlurm", "Slurm lists no node %s (spec.alias): new admissions are denied, granted ones kept" % facts.alias
    else:
        reason, message = "InSlurm", "Slurm lists node %s" % facts.alias
    return set_condition(conditions, names.CONDITION_SLURM_NODE_MISSING, missing, reason, message, facts.stamp)


def allocations(facts: NodeFacts, strategy: Strategy, ledger: Ledger) -> list[Allocation]:
    """``allocatedResources`` as ACK shows them: Slurm's usage (the recorded one while Slurm is unread), Kubernetes' holdings."""
    usage, held = strategy.usage, holdings(ledger)
    slurm: Quantities = {"cpu": format_cpu(usage[0] * 1000), "memory": format_memory(usage[1] * MIB)}
    if facts.slurm is None:
        slurm = old_allocation(facts.status, names.ALLOCATION_SLURM) or {"cpu": "0", "memory": "0"}
    return [
        {"allocated": slurm, "type": names.ALLOCATION_SLURM},
        {"allocated": {"cpu": format_cpu(held[0]), "memory": format_memory(held[1])}, "type": names.ALLOCATION_KUBERNETES},
    ]


def tell_slurm(facts: NodeFacts, strategy: Strategy, ledger: Ledger) -> list[Action]:
    """What Slurm must hold back for Kubernetes now."""
    if facts.slurm is None or strategy.cap is None:
        return []
    return strategy.slurm_actions(ledger)


def sync_drains(facts: NodeFacts, observed: Observed) -> list[Action]:
    """Cordons to drains and back, when drain sync is on; a drain the copilot caused is resumed either way."""
    slurm, settings = facts.slurm, observed.settings
    if slurm is None or facts.duplicate or not (settings.drain_sync or slurm.registration_refused is not None):
        return []
    kube = observed.kube_nodes.get(facts.kube_node) if settings.drain_sync else None
    return drain_sync(facts.name, kube, slurm)


def remove_finalizer(facts: NodeFacts, strategy: Strategy, ledger: Ledger) -> list[Action]:
    """A deleted GenericNode goes once nothing is held and Slurm has its resources back."""
    if not (facts.deleting and names.FINALIZER in facts.finalizers and facts.slurm_known):
        return []
    released = not any(entry.get("state") in names.HOLDING_STATES for entry in ledger.values())
    if released and (facts.duplicate or strategy.restored(ledger)):
        return [RemoveFinalizer(facts.name, facts.resource_version)]
    return []


# -- drains ------------------------------------------------------------------------------


def drain_sync(name: str, kube: KubeNode | None, slurm: SlurmNode) -> list[Action]:
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
    ours = copilot_drained(slurm)
    cordoned = kube is not None and kube.unschedulable
    if kube is not None and cordoned and not slurm.drained:
        reason = "%s Kubernetes node %s is cordoned" % (names.DRAIN_REASON_PREFIX, kube.name)
        actions.append(DrainNode(name, slurm.name, reason))
    elif not cordoned and ours and (kube is not None or caused):
        actions.append(ResumeNode(name, slurm.name))
    if kube is not None:
        actions.extend(annotate_foreign_drain(name, kube, slurm, ours or caused))
    return actions


def copilot_drained(slurm: SlurmNode) -> bool:
    """Whether the node's drain is one the copilot may resume: it set it, or caused it and Slurm is past the cause."""
    if not slurm.drained or slurm.invalid_registration:
        return False  # nothing to resume, or Slurm refuses RESUME until the node registered again
    if slurm.reason.startswith(names.DRAIN_REASON_PREFIX):
        return True
    gres_used = parse_gres(slurm.gres_used)
    no_job_holds_the_gres = not any(gres_used.get(gres, 0) for gres in (names.GRES_CPU, names.GRES_MEMORY))
    return slurm.registration_refused is not None and slurm.responding and no_job_holds_the_gres


def annotate_foreign_drain(name: str, kube: KubeNode, slurm: SlurmNode, copilots: bool) -> list[Action]:
    """Show a drain somebody else set on the Kubernetes Node (and take the annotation off once it went)."""
    foreign = slurm.reason if slurm.drained and not copilots else None
    if (foreign or None) == (kube.annotations.get(names.ANNOTATION_SLURM_DRAIN_REASON) or None):
        return []
    return [AnnotateNode(name, kube.name, names.ANNOTATION_SLURM_DRAIN_REASON, foreign or None)]
