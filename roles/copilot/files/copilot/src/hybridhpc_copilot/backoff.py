"""When an action Slurm refused or could not take may be sent again.

Every pass decides afresh, so an action that keeps failing (a placeholder job
Slurm will not cancel, a node it will not update) is decided again on every
pass, and passes come with every event: without a memory of the failure it
would go to slurmrestd many times a second. A failed action waits ``first``
seconds, twice as long after each further failure, at most ``limit``; any
success forgets it. Actions are told apart by a key (their fields), so a
different action, a GRES count the ledger moved since, goes at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable


class Backoff:
    def __init__(self, first: float = 0.5, limit: float = 30.0, clock: Callable[[], float] = time.monotonic):
        self.first, self.limit, self.clock = first, limit, clock
        self._failed: dict[Hashable, tuple[int, float]] = {}  # key -> (failures in a row, when it may go again)
        self._lock = threading.Lock()  # the executor's lanes note failures at once

    def ready(self, key: Hashable) -> bool:
        """Whether the action may go now."""
        with self._lock:
            failed = self._failed.get(key)
        return failed is None or self.clock() >= failed[1]

    def failed(self, key: Hashable) -> float:
        """Note a failure; returns how long the action now waits."""
        now = self.clock()
        with self._lock:
            failures = self._failed.get(key, (0, 0.0))[0] + 1
            delay = min(self.limit, self.first * 2.0 ** (failures - 1))
            # Actions nobody sent again for a while (decided differently since) are forgotten.
            self._failed = {k: v for k, v in self._failed.items() if now - v[1] < self.limit}
            self._failed[key] = (failures, now + delay)
        return delay

    def succeeded(self, key: Hashable) -> None:
        with self._lock:
            self._failed.pop(key, None)
