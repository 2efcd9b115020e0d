"""What ``core`` asks of a strategy: a way to hold Kubernetes' share of a node back from Slurm.

Two exist: ``gres`` (lower the node's count-only k8scpu/k8smemory GRES) and
``placeholder`` (run a Slurm job of the admission's size). ``core`` decides
the ledger's life cycle the same way for both; a strategy answers the
questions whose answers depend on how the share is held: how much the node
shares, what Slurm uses of it, when a reservation may be granted, and what
Slurm must be told. Strategies import this module, ``model`` and ``ledger``;
``core`` imports them: no cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from .ledger import Ledger, LedgerEntry, SlurmStatus, Status
from .model import Action, Capacity, Decision, SlurmNode

# A phase's result: the ledger after it (the one it was given, when nothing changed) and its decisions.
Step = tuple[Ledger, list[Decision]]


@dataclass(frozen=True)
class NodeFacts:
    """What every phase of one GenericNode's decisions reads, taken once from the object and the observation."""

    name: str  # the GenericNode
    owner: str  # the GenericNode that shares its Slurm node (the first by name)
    alias: str  # the Slurm node
    resource_version: str
    deleting: bool
    finalizers: tuple[str, ...]
    status: Status  # as read (the cached one: never changed in place)
    kube_node: str  # the Kubernetes Node of the same name
    slurm: SlurmNode | None  # None: Slurm has no such node, or Slurm could not be read
    slurm_known: bool  # whether Slurm could be read at all
    now: float
    stamp: str  # ``now`` as the ledger writes it

    @property
    def duplicate(self) -> bool:
        """Another GenericNode shares this Slurm node already: this one holds nothing."""
        return self.owner != self.name


class Strategy(Protocol):
    @property
    def kind(self) -> str:
        """The strategy's name in the config (``gres``, ``placeholder``)."""

    @property
    def reserving(self) -> str:
        """What a new reservation sets going, as the ledger says it."""

    @property
    def awaited(self) -> str:
        """What a reservation waits for, as a timeout's reason says it."""

    @property
    def reads_slurm(self) -> bool:
        """False when this strategy's view of Slurm is incomplete (jobs unlisted): then nothing depends on Slurm."""

    @property
    def cap(self) -> Capacity | None:
        """What the node shares (None: nothing, or unknown)."""

    @property
    def usage(self) -> tuple[int, int]:
        """CPUs and MB Slurm's own jobs use on the node."""

    def not_shared(self) -> str:
        """Why the node takes no admission when ``cap`` is None."""

    def refuse_new(self) -> str:
        """Why no new admission can be held now ('' when it can)."""

    def held(self, ledger: Mapping[str, LedgerEntry]) -> tuple[int, int]:
        """Millicores and bytes the ledger's held admissions take from the node."""

    def settle_reserved(self, ledger: Ledger, reserved: list[str], stamp: str) -> Step:
        """Grant the reservations Slurm took, deny those it cannot take; the rest wait."""

    def slurm_actions(self, ledger: Ledger) -> list[Action]:
        """What Slurm must be told so that it holds back what the ledger holds."""

    def slurm_status(self, ledger: Ledger) -> SlurmStatus | None:
        """``status.slurm`` (None: cannot tell now, keep the recorded one)."""

    def overcommitted(self, ledger: Ledger) -> str:
        """Why Slurm and Kubernetes together hold more than the node shares ('' when they do not)."""

    def restored(self, ledger: Ledger) -> bool:
        """Whether Slurm has every resource back (a deleted GenericNode may go)."""
