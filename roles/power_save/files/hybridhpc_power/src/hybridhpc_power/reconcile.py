"""The reconciler's decisions: a pure function from what Slurm and the providers report to actions.

Public names other tools import (keep them stable):

``plan(nodes, instances, pending, now, settings) -> list[Action]``
    ``nodes``: ``dict[str, slurm.SlurmNode]``, Slurm's view (``slurm.parse_nodes``);
    nodes that are in no node set are ignored, node-set nodes Slurm does not
    know are left alone.
    ``instances``: ``dict[str, dict[str, Instance] | None]``, per node set
    name the machines its provider listed (node -> Instance), or None when
    that provider cannot list them (the machine-based rules then skip that
    node set). A node set missing from the mapping counts as None.
    ``pending``: :class:`Pending`, the queued requests and the time of each
    node's last resume request.
    ``now``: Unix time.
    ``settings``: :class:`Settings` (node -> node set, the two delays).
    Returns actions grouped per (kind, node set, why), nodes sorted, in the
    order they should be applied. No I/O; linear in nodes + instances.

The rules (README.md, "What the reconciler repairs"), for each node of a node
set without a queued request:

* powered down (POWERED_DOWN or POWERING_DOWN) but a machine exists: the
  machine leaked (a lost or failed suspend) -> ``terminate``;
* powered down, DOWN, reason ours, set ``failed_retry_after`` seconds ago or
  more -> ``return-to-service`` (scontrol RESUME: back to idle~);
* up (no power flag, not even POWER_DOWN, which means Slurm is about to
  power it down; not DOWN; not DRAIN by someone else) but no live
  machine -> ``instance-gone`` (DOWN with our reason, then power down; Slurm
  requeues its jobs);
* POWERING_UP, not DOWN, no live machine, last resume request older than
  ``resume_grace`` (or none recorded) -> ``resume-again`` (the request was
  lost, or the machine died before slurmd registered);
* DOWN with our reason while still powered up or POWERING_UP (the power
  down after our DOWN failed) -> ``power-down``.

And for each machine whose node is in no node set -> ``terminate``.
A DOWN or DRAIN with a reason this tool did not set is never touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from . import names
from .providers.base import Instance
from .slurm import SlurmNode

TERMINATE = "terminate"
INSTANCE_GONE = "instance-gone"
POWER_DOWN = "power-down"
RESUME_AGAIN = "resume-again"
RETURN_TO_SERVICE = "return-to-service"
# Machines go first (a leaked machine costs money), node returns last.
KINDS = (TERMINATE, INSTANCE_GONE, POWER_DOWN, RESUME_AGAIN, RETURN_TO_SERVICE)

WHY_LEAKED = "machine exists while Slurm has the node powered down"
WHY_ORPHAN = "machine of this cluster for a node in no node set"
WHY_GONE = "node is up but its machine is gone"
WHY_LOST = "powering up without a machine or a queued request"
WHY_STUCK_DOWN = "our DOWN was not followed by a power down"
WHY_RETRY = "failed_retry_after passed since our DOWN"

_GONE_STATES = frozenset((names.INSTANCE_TERMINATED,))


@dataclass(frozen=True)
class Settings:
    nodesets: Mapping[str, str]  # node -> node set name (config.Config.node_map())
    failed_retry_after: float
    resume_grace: float


@dataclass(frozen=True)
class Pending:
    queued: Mapping[str, str] = field(default_factory=dict)  # node -> action of its latest queued request
    last_resume: Mapping[str, float] = field(default_factory=dict)  # node -> Unix time of its last resume request


@dataclass(frozen=True)
class Action:
    kind: str
    nodeset: str
    nodes: tuple[str, ...]
    why: str


def _exists(machine: Instance | None) -> bool:
    return machine is not None and machine.state not in _GONE_STATES


def _alive(machine: Instance | None) -> bool:
    return machine is not None and machine.state in names.INSTANCE_ALIVE


def plan(nodes: Mapping[str, SlurmNode], instances: Mapping[str, Mapping[str, Instance] | None], pending: Pending,
         now: float, settings: Settings) -> list[Action]:
    """See the module docstring."""
    groups: dict[tuple[str, str, str], list[str]] = {}

    def add(kind: str, nodeset: str, why: str, node: str) -> None:
        key = (kind, nodeset, why)
        group = groups.get(key)
        if group is None:
            groups[key] = [node]
        else:
            group.append(node)

    membership = settings.nodesets
    queued = pending.queued
    last_resume = pending.last_resume
    retry_before = now - settings.failed_retry_after
    grace_before = now - settings.resume_grace
    empty: dict = {}

    # Machines whose node is in no node set (removed from the configuration).
    # Node sets sharing one docker daemon or account list the same machine:
    # terminate it once, through the first node set (by name) that listed it.
    terminated_ids: set[str] = set()
    for nodeset in sorted(instances):
        listing = instances[nodeset]
        if not listing:
            continue
        for node, machine in listing.items():
            if node in membership or not _exists(machine) or machine.id in terminated_ids:
                continue
            terminated_ids.add(machine.id)
            add(TERMINATE, nodeset, WHY_ORPHAN, node)

    for node, nodeset in membership.items():
        slurm_node = nodes.get(node)
        if slurm_node is None or node in queued:
            continue  # unknown to Slurm (config and slurm.conf disagree), or the worker is about to act
        state = slurm_node.state
        listing = instances.get(nodeset)
        known = listing is not None
        machine = (listing or empty).get(node)
        down = names.STATE_DOWN in state
        ours = slurm_node.reason.startswith(names.REASON_PREFIX)

        if names.STATE_POWERING_UP in state:
            if down:
                if ours:
                    add(POWER_DOWN, nodeset, WHY_STUCK_DOWN, node)
            elif known and not _alive(machine) and last_resume.get(node, float("-inf")) <= grace_before:
                add(RESUME_AGAIN, nodeset, WHY_LOST, node)
            continue

        if names.STATE_POWERED_DOWN in state or names.STATE_POWERING_DOWN in state:
            if known and _exists(machine):
                add(TERMINATE, nodeset, WHY_LEAKED, node)
            # Only once POWERED_DOWN: RESUME on a node still POWERING_DOWN would race Slurm's own power down.
            if (down and ours and names.STATE_POWERED_DOWN in state
                    and (slurm_node.reason_changed_at is None or slurm_node.reason_changed_at <= retry_before)):
                add(RETURN_TO_SERVICE, nodeset, WHY_RETRY, node)
            continue

        # Powered up (as far as Slurm knows).
        if names.STATE_POWER_DOWN in state:
            continue  # Slurm already decided to power it down: SuspendProgram is on its way
        if down:
            if ours:
                add(POWER_DOWN, nodeset, WHY_STUCK_DOWN, node)
            continue
        if names.STATE_DRAIN in state and not ours:
            continue  # someone else's drain: never touched
        if known and not _alive(machine):
            add(INSTANCE_GONE, nodeset, WHY_GONE, node)

    order = {kind: i for i, kind in enumerate(KINDS)}
    return [Action(kind, nodeset, tuple(sorted(group)), why)
            for (kind, nodeset, why), group in sorted(groups.items(), key=lambda item: (order[item[0][0]], item[0][1], item[0][2]))]
