"""The one interface every provider implements.

A provider starts and stops the machines (containers, instances) behind the
Slurm nodes of one node set. Node names are the Slurm node names; every
machine a provider starts carries the cluster name and the node name (labels,
tags), so ``instances()`` can find them again after a restart of the worker:
the provider's own inventory is the source of truth, never local memory.

Calls may be slow (cloud APIs); they run in the worker, never in the programs
slurmctld calls.
"""

from __future__ import annotations

import dataclasses
from typing import Mapping, Sequence


class ProviderError(Exception):
    """A call failed as a whole (API unreachable, bad credentials): nothing is known to have changed."""


@dataclasses.dataclass(frozen=True)
class Instance:
    """A machine behind a Slurm node, as the provider sees it."""

    node: str
    id: str
    # "pending", "running", "stopping", "stopped" or "terminated" (providers map their own words to these).
    state: str
    address: str | None = None
    # Unix time the machine was created, when the provider knows it.
    created: float | None = None


@dataclasses.dataclass
class ResumeResult:
    """What a resume call did: the machines started (node -> Instance) and the nodes it could not start (node -> reason)."""

    started: dict[str, Instance] = dataclasses.field(default_factory=dict)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class SuspendResult:
    """What a suspend call did: the nodes whose machine is gone or going, and the nodes it could not stop (node -> reason)."""

    stopped: list[str] = dataclasses.field(default_factory=list)
    failed: dict[str, str] = dataclasses.field(default_factory=dict)


class Provider:
    """Base class; ``name`` is the provider's key in the node set's ``provider`` setting."""

    name = "base"

    def __init__(self, cluster: str, options: Mapping, secrets: "Secrets"):
        self.cluster = cluster
        self.options = dict(options)
        self.secrets = secrets

    def resume(self, nodes: Sequence[str]) -> ResumeResult:
        """Start a machine for every node (idempotent: a node whose machine already runs is reported started)."""
        raise NotImplementedError

    def suspend(self, nodes: Sequence[str]) -> SuspendResult:
        """Stop and remove the machines of these nodes (idempotent: a node without a machine is reported stopped)."""
        raise NotImplementedError

    def instances(self) -> dict[str, Instance] | None:
        """Every machine of this cluster the provider knows (node -> Instance); None when the provider cannot list them."""
        raise NotImplementedError


class Secrets:
    """Read-only access to what a new node needs and nobody may see: read from files the worker (root) can read.

    Providers get bytes from here and pass them to the machine through a
    channel that is not logged, not user-data and not a process argument.
    """

    def __init__(self, munge_key_file: str):
        self.munge_key_file = munge_key_file

    def munge_key(self) -> bytes:
        with open(self.munge_key_file, "rb") as handle:
            return handle.read()
