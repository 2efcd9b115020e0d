"""Structured logs: one JSON object per line on stderr (journald keeps them as they are).

Call sites pass their fields as ``extra={"fields": {...}}``; secrets never go in.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import sys
from typing import TextIO

LOGGER = "hybridhpc_copilot"
logging.getLogger(LOGGER).addHandler(logging.NullHandler())  # silent as a library until setup() runs


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": _dt.datetime.fromtimestamp(record.created, tz=_dt.timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            for key, value in fields.items():
                entry.setdefault(key, value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, sort_keys=False)


def setup(level: str = "info", stream: TextIO | None = None) -> logging.Logger:
    logger = logging.getLogger(LOGGER)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    logger.handlers[:] = [handler]
    logger.setLevel(level.upper())
    logger.propagate = False
    return logger


def get(name: str = "") -> logging.Logger:
    return logging.getLogger(LOGGER + ("." + name if name else ""))
