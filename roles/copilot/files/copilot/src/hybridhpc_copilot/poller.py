"""Slurm has no watch: poll it, and turn the differences into events."""

from __future__ import annotations

import threading
from typing import Callable

from .core import SlurmNode
from .slurm import Slurm


def changed_nodes(before: dict | None, after: dict) -> set:
    """Names of nodes that appeared, went away, or changed between two snapshots."""
    if before is None:
        return set(after)
    return {n for n in set(before) | set(after) if before.get(n) != after.get(n)}


class SlurmPoller:
    """The latest Slurm snapshot, and ``on_change(names)`` whenever a poll sees a difference.

    ``poll()`` raises the Slurm error and forgets the snapshot (decisions never
    rest on an old one); :meth:`run` polls every ``interval`` seconds until
    ``stop`` is set, reporting errors to ``on_error``.
    """

    def __init__(self, slurm: Slurm, on_change: Callable | None = None):
        self.slurm = slurm
        self.on_change = on_change
        self.nodes: dict[str, SlurmNode] | None = None
        self._lock = threading.Lock()

    def poll(self) -> dict[str, SlurmNode]:
        try:
            fresh = self.slurm.node_states()
        except Exception:
            with self._lock:
                self.nodes = None
            raise
        with self._lock:
            changed = changed_nodes(self.nodes, fresh)
            self.nodes = fresh
        if changed and self.on_change is not None:
            self.on_change(changed)
        return fresh

    def run(self, interval: float, stop: threading.Event, on_error: Callable | None = None) -> None:
        while not stop.wait(interval):
            try:
                self.poll()
            except Exception as err:  # noqa: BLE001 - reported, and the next poll retries
                if on_error is not None:
                    on_error(err)
