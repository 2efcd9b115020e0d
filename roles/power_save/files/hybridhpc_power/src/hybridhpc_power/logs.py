"""Transition log: one line per node per transition, to the log file and to stdout (the journal).

``2026-11-24T03:00:00Z node=cloud-dy-1 action=resume result=started instance=2f1c...``

Values with spaces, quotes or ``=`` are written as JSON strings, so every line
splits into key=value pairs. Callers pass node names, actions, results,
instance ids and short reasons: never a secret.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
import time
from typing import TextIO

_PLAIN = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.:/[],@+~%#")


def stamp(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _value(value) -> str:
    text = str(value)
    if text and all(c in _PLAIN for c in text):
        return text
    return json.dumps(text, ensure_ascii=False)


def format_line(ts: float, fields: dict) -> str:
    return stamp(ts) + "".join(" %s=%s" % (key, _value(value)) for key, value in fields.items() if value is not None and value != "")


class TransitionLog:
    """Appends lines to ``path`` (when set) and ``stream``; a log file that cannot be written never stops the caller."""

    def __init__(self, path: str | None, stream: TextIO | None = None, clock=time.time):
        self.path = path
        self.stream = stream if stream is not None else sys.stdout
        self.clock = clock
        self.file_error: str | None = None
        self._pending: list[str] = []

    def node(self, node: str, action: str, result: str, **fields) -> None:
        """Queue one node's transition line (written by :meth:`flush`, or at once with ``flush=True``)."""
        self._pending.append(format_line(self.clock(), {"node": node, "action": action, "result": result, **fields}))

    def event(self, **fields) -> None:
        """A line that is not about one node (worker start, errors that hit a whole call)."""
        self._pending.append(format_line(self.clock(), fields))

    def flush(self) -> None:
        if not self._pending:
            return
        text = "\n".join(self._pending) + "\n"
        self._pending = []
        if self.path:
            try:
                # O_APPEND: lines of the programs (SlurmUser) and of the worker (root) interleave whole.
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    data = text.encode("utf-8")
                    while data:
                        data = data[os.write(fd, data):]
                finally:
                    os.close(fd)
            except OSError as err:
                self.file_error = "cannot write %s: %s" % (self.path, err.strerror)
                text += format_line(self.clock(), {"level": "error", "msg": self.file_error}) + "\n"
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass  # stdout closed (slurmctld discards it): the file has the lines
