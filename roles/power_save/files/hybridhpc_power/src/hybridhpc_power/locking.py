"""One lock file (fcntl.flock) so a worker and a reconcile never act at the same time.

Both decide from a snapshot of Slurm, the queue and the machines; run
together, a reconcile could see a machine the worker is still starting as
"missing" and queue it again, or terminate one the worker just created.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time


class LockBusy(Exception):
    """Another worker or reconcile holds the lock."""


@contextlib.contextmanager
def hold(path: str, wait: float | None = None):
    """Hold the lock; ``wait``: None blocks until free, a number of seconds raises LockBusy after that long (0: at once)."""
    directory = os.path.dirname(path)
    if directory:
        os.makedirs(directory, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if wait is None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise LockBusy(path) from None
                    time.sleep(0.05)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock
