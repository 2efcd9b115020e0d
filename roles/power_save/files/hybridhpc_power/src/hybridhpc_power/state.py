"""The worker's memory of each node's last transition: one JSON file, written atomically.

It is a record for people (``status``) and for the reconciler's lost-request
rule (when was a node's last resume requested), never the source of truth
about machines: that is the provider's ``instances()``.

File: ``{"version": 1, "nodes": {"cloud-dy-1": {"action": "resume", "result": "started",
"at": "2026-11-24T03:00:00.000000Z", "time": 1795489200.0, "instance": "...",
"reason": "...", "resume_requested": 1795489199.5}}}``
"""

from __future__ import annotations

import json
import os

from .files import write_atomically
from .queue import iso

VERSION = 1


def load(path: str) -> dict[str, dict]:
    """Node -> last transition record; {} when there is no file yet (or an unreadable one: it is only a record)."""
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (FileNotFoundError, ValueError):
        return {}
    nodes = data.get("nodes") if isinstance(data, dict) else None
    return {k: v for k, v in nodes.items() if isinstance(v, dict)} if isinstance(nodes, dict) else {}


def save(path: str, nodes: dict[str, dict]) -> None:
    """Write atomically: a temporary file in the same directory, fsync, rename."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    text = json.dumps({"version": VERSION, "nodes": nodes}, sort_keys=True, separators=(",", ":"))
    write_atomically(path, text, 0o644, ".state-")  # status runs as any user; the file holds no secret


def record(nodes: dict[str, dict], node: str, action: str, result: str, now: float, *,
           instance: str | None = None, reason: str | None = None, resume_requested: float | None = None) -> None:
    """Set ``node``'s last transition; keeps the time of its last resume request unless a newer one is given."""
    previous = nodes.get(node) or {}
    entry = {"action": action, "result": result, "at": iso(now), "time": now}
    if instance:
        entry["instance"] = instance
    if reason:
        entry["reason"] = reason
    requested = resume_requested if resume_requested is not None else previous.get("resume_requested")
    if requested is not None:
        entry["resume_requested"] = requested
    nodes[node] = entry


def last_resume_requests(nodes: dict[str, dict]) -> dict[str, float]:
    """Node -> Unix time its last resume was requested (for reconcile.plan)."""
    out = {}
    for node, entry in nodes.items():
        value = entry.get("resume_requested")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            out[node] = float(value)
    return out
