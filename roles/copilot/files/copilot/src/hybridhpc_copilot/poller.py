"""Slurm has no watch: poll it, and turn the differences into events."""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Hashable, Mapping

from .model import SlurmNode
from .slurm import Slurm


def changed_nodes(before: Mapping[str, Hashable] | None, after: Mapping[str, Hashable]) -> set[str]:
    """Names of nodes that appeared, went away, or changed between two snapshots."""
    if before is None:
        return set(after)
    return {n for n in set(before) | set(after) if before.get(n) != after.get(n)}


def fingerprints(nodes: Mapping[str, SlurmNode]) -> dict[str, int]:
    """What the poller remembers of a snapshot to see the next one's changes: a hash per node.

    Ten thousand :class:`SlurmNode` objects kept between polls (and beside the
    next poll's) cost megabytes; their hashes a tenth of it. Two different
    states of one node with the same 64-bit hash would hide that change from
    the poll (a chance of about one in 2**64), until the next full resync.
    """
    return {name: hash(node) for name, node in nodes.items()}


class SlurmPoller:
    """Polls of Slurm's nodes, and ``on_change(names)`` whenever a poll sees a difference.

    ``poll()`` raises the Slurm error and forgets the last snapshot (the next
    poll reports every node); :meth:`run` polls every ``interval`` seconds
    until ``stop`` is set, reporting errors to ``on_error``. ``nodes`` holds the
    last snapshot's :func:`fingerprints`; the snapshots themselves go to the
    callers. Whole polls take turns (a pass's and the polling thread's): two
    reads of every node at once would hold two snapshots and two answers.
    """

    def __init__(self, slurm: Slurm, on_change: Callable[[set[str]], None] | None = None):
        self.slurm = slurm
        self.on_change = on_change
        self.nodes: dict[str, int] | None = None
        self._lock = threading.Lock()
        self._polling = threading.Lock()

    def poll(self, notify: bool = True, handled: Collection[str] = ()) -> dict[str, SlurmNode]:
        """A fresh snapshot of every node.

        Changes go to ``on_change``, except those of ``handled`` nodes, or all of
        them with ``notify=False``: a caller that acts on what it read itself.
        """
        with self._polling:
            try:
                fresh = self.slurm.node_states()
            except Exception:
                with self._lock:
                    self.nodes = None
                raise
        seen = fingerprints(fresh)
        with self._lock:
            changed = changed_nodes(self.nodes, seen)
            self.nodes = seen
        changed = {name for name in changed if name not in handled}
        if changed and notify and self.on_change is not None:
            self.on_change(changed)
        return fresh

    def poll_nodes(self, names: Collection[str]) -> dict[str, SlurmNode]:
        """Fresh states of ``names`` only (one read each; a node Slurm does not know is left out).

        They go into the snapshot, so the next :meth:`poll` compares against them;
        the caller acts on them itself (no ``on_change``).
        """
        wanted = set(names)
        try:
            fresh = self.slurm.node_states(sorted(wanted))
        except Exception:
            with self._lock:
                self.nodes = None
            raise
        with self._lock:
            if self.nodes is not None:  # changed in place (only under the lock): a copy costs a dict of every node
                for name in wanted.difference(fresh):
                    self.nodes.pop(name, None)
                self.nodes.update(fingerprints(fresh))
        return fresh

    def run(self, interval: float, stop: threading.Event, on_error: Callable[[Exception], None] | None = None) -> None:
        while not stop.wait(interval):
            try:
                self.poll()
            except Exception as err:  # noqa: BLE001 - reported, and the next poll retries
                if on_error is not None:
                    on_error(err)
