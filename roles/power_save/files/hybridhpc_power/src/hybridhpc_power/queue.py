"""The request queue: one JSON file per program call in ``queue_dir``.

The programs slurmctld runs (as SlurmUser) only write here: the file is
written under a dot name and renamed into place (``os.replace``), so the
worker never reads half a request, and a systemd path unit
(``DirectoryNotEmpty=``) starts the worker. A request file is removed only
after the worker handled it: a worker that dies mid-way sees the request
again (providers are idempotent).

File: ``<ns since epoch>-<id>.json`` holding
``{"action": "resume", "nodes": ["cloud-dy-1", ...], "at": "2026-11-24T03:00:00.123456Z", "id": "..."}``.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from . import names
from .files import write_atomically


@dataclass(frozen=True)
class Request:
    action: str
    nodes: tuple[str, ...]
    at: float  # Unix time the program queued it
    id: str
    path: str | None = None  # the file it came from (None: not on disk)


def iso(ts: float) -> str:
    return _dt.datetime.fromtimestamp(ts, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_iso(text: str) -> float:
    return _dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def write(queue_dir: str, action: str, nodes: Iterable[str], now: float | None = None) -> Request:
    """Queue one request atomically; returns it (with its path)."""
    now = time.time() if now is None else now
    request_id = uuid.uuid4().hex[:16]
    nodes = tuple(nodes)
    body = json.dumps({"action": action, "nodes": list(nodes), "at": iso(now), "id": request_id})
    final = os.path.join(queue_dir, "%020d-%s%s" % (int(now * 1e9), request_id, names.REQUEST_SUFFIX))
    write_atomically(final, body, 0o640)
    return Request(action, nodes, now, request_id, final)


def parse(text: str, path: str | None = None) -> Request:
    """One request file's content; ValueError says what is wrong with it."""
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    action = data.get("action")
    if action not in names.ACTIONS:
        raise ValueError("action must be one of %s, got %r" % (", ".join(names.ACTIONS), action))
    nodes = data.get("nodes")
    if not isinstance(nodes, list) or not all(isinstance(n, str) and n for n in nodes):
        raise ValueError("nodes must be a list of node names")
    at = data.get("at")
    if not isinstance(at, str):
        raise ValueError("at must be an ISO 8601 time")
    request_id = data.get("id")
    if not isinstance(request_id, str):
        raise ValueError("id must be a string")
    return Request(action, tuple(nodes), parse_iso(at), request_id, path)


def read(queue_dir: str) -> tuple[list[Request], list[tuple[str, str]]]:
    """(requests oldest first, [(path, why) for unreadable files]). Files being written (dot names) are skipped."""
    requests, bad = [], []
    try:
        entries = sorted(os.listdir(queue_dir))
    except FileNotFoundError:
        return [], []
    for entry in entries:
        if not entry.endswith(names.REQUEST_SUFFIX) or entry.startswith("."):
            continue
        path = os.path.join(queue_dir, entry)
        try:
            with open(path, encoding="utf-8") as handle:
                requests.append(parse(handle.read(), path))
        except FileNotFoundError:
            continue  # another worker took it (cannot happen under the lock; harmless anyway)
        except (OSError, ValueError) as err:
            bad.append((path, str(err)))
    requests.sort(key=lambda r: (r.at, r.path or ""))
    return requests, bad


def coalesce(requests: Iterable[Request]) -> dict[str, Request]:
    """Node -> the request that decides it: the latest one naming the node (input in any order).

    A later request supersedes an earlier one: resume then suspend is a
    suspend, suspend then resume a resume. Ties (same ``at``) keep the input
    order, so pass requests in queue order.
    """
    out: dict[str, Request] = {}
    for request in sorted(requests, key=lambda r: r.at):  # stable: equal times keep queue order
        for node in request.nodes:
            out[node] = request
    return out


def by_action(decided: dict[str, Request]) -> dict[str, list[str]]:
    """Action -> nodes (in node order), from :func:`coalesce`'s result."""
    out: dict[str, list[str]] = {}
    for node, request in decided.items():
        out.setdefault(request.action, []).append(node)
    for nodes in out.values():
        nodes.sort()
    return out


def remove(paths: Iterable[str]) -> None:
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def remove_stale_tmp(queue_dir: str, now: float, older_than: float = 60.0) -> list[str]:
    """Remove dot files a crashed program left (a program writes and renames within milliseconds)."""
    removed = []
    try:
        entries = os.listdir(queue_dir)
    except FileNotFoundError:
        return removed
    for entry in entries:
        if not entry.startswith(names.TMP_PREFIX):
            continue
        path = os.path.join(queue_dir, entry)
        try:
            if now - os.stat(path).st_mtime > older_than:
                os.unlink(path)
                removed.append(path)
        except FileNotFoundError:
            pass
    return removed
