"""An in-memory Kubernetes API server for the copilot's tests (it implements ``hybridhpc_copilot.kube.Kube``).

Test code only: the copilot role installs nothing of it. The process-level
tests use the API server double (``tests/k8s_double``) and the real client.
"""

from __future__ import annotations

import time
from typing import Callable

from hybridhpc_copilot.kube import (
    GENERICNODES,
    NODES,
    PODS,
    SECRETS,
    Conflict,
    GenericNodeWrites,
    Gone,
    NotFound,
    label_selector_matches,
    object_key,
)


def clone(obj):
    """A deep copy of JSON-like data (faster than copy.deepcopy for dicts and lists)."""
    if isinstance(obj, dict):
        return {k: clone(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [clone(v) for v in obj]
    return obj


class FakeKube(GenericNodeWrites):
    """An in-memory API server for the kinds the copilot uses.

    Every write bumps one global resourceVersion; a PUT carrying an old one
    fails with :class:`Conflict`; watches replay the events after a
    resourceVersion and raise :class:`Gone` once it left the ``window`` of
    retained events; ``fault(operation, kind, name)`` runs before every call and
    may raise (tests inject 409s, 5xx and interleaved writes with it).
    Watches do not block: they yield what happened and end. Stored objects are
    never changed in place (every write stores a new one), so answers share
    them: callers must not modify what they get (the copilot never does).
    """

    def __init__(self, fault: Callable | None = None, window: int = 200, clock: Callable = time.time):
        self.objects: dict[str, dict[str, dict]] = {GENERICNODES: {}, PODS: {}, NODES: {}, SECRETS: {}}
        self.events: dict[str, list] = {kind: [] for kind in self.objects}
        self.horizon: dict[str, int] = dict.fromkeys(self.objects, 0)  # events up to here are forgotten
        self.rv = 0
        self.window = window
        self.fault = fault
        self.clock = clock
        self.calls: list = []

    # -- internals ---------------------------------------------------------------------
    def _check(self, operation, kind=None, name=None):
        self.calls.append((operation, kind, name))
        if self.fault is not None:
            self.fault(operation, kind, name)

    def _store(self, kind: str, obj: dict, event: str) -> dict:
        self.rv += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.rv)
        key = object_key(obj)
        if event == "DELETED":
            self.objects[kind].pop(key, None)
        else:
            self.objects[kind][key] = obj
        log = self.events[kind]
        log.append((self.rv, event, obj))
        if len(log) > self.window:
            self.horizon[kind] = log[-self.window - 1][0]
            del log[: len(log) - self.window]
        return obj

    def _current(self, kind, obj) -> dict:
        key = object_key(obj)
        current = self.objects[kind].get(key)
        if current is None:
            raise NotFound("%s %s not found" % (kind, key), 404)
        wanted = (obj.get("metadata") or {}).get("resourceVersion")
        if wanted and wanted != current["metadata"]["resourceVersion"]:
            raise Conflict("%s %s: the object has been modified; please apply your changes to the latest version "
                           "and try again" % (kind, key), 409)
        return current

    # -- the interface -------------------------------------------------------------------
    def list_objects(self, kind, label_selector=None, keep=None):
        self._check("list", kind)
        items = [o for o in self.objects[kind].values() if label_selector_matches(label_selector, o["metadata"].get("labels"))]
        return (items if keep is None else [keep(o) for o in items]), str(self.rv)

    def watch_objects(self, kind, resource_version, timeout_seconds=300, label_selector=None):
        self._check("watch", kind)
        since = int(resource_version or 0)
        if since < self.horizon[kind]:
            raise Gone("too old resource version: %d (%d)" % (since, self.horizon[kind]), 410)
        for rv, event, obj in list(self.events[kind]):
            if rv > since and label_selector_matches(label_selector, obj["metadata"].get("labels")):
                yield event, obj

    def get_object(self, kind, name, namespace=None):
        self._check("get", kind, name)
        return self.objects[kind].get("%s/%s" % (namespace, name) if namespace else name)

    def replace_status(self, obj):
        self._check("replace_status", GENERICNODES, obj["metadata"]["name"])
        current = self._current(GENERICNODES, obj)
        new = dict(current, metadata=dict(current["metadata"]))
        if "status" in obj:
            new["status"] = obj["status"]
        else:
            new.pop("status", None)
        return self._store(GENERICNODES, new, "MODIFIED")

    def replace_object(self, obj):
        self._check("replace", GENERICNODES, obj["metadata"]["name"])
        current = self._current(GENERICNODES, obj)
        new = clone(obj)
        new.pop("status", None)
        if "status" in current:
            new["status"] = current["status"]
        meta = new["metadata"]
        for keep in ("uid", "creationTimestamp", "deletionTimestamp"):
            if keep in current["metadata"]:
                meta[keep] = current["metadata"][keep]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._store(GENERICNODES, new, "DELETED")
        return self._store(GENERICNODES, new, "MODIFIED")

    def annotate_node(self, name, key, value):
        self._check("annotate", NODES, name)
        current = self.objects[NODES].get(name)
        if current is None:
            raise NotFound("node %s not found" % name, 404)
        new = dict(current, metadata=dict(current["metadata"]))
        annotations = new["metadata"]["annotations"] = dict(new["metadata"].get("annotations") or {})
        if value is None:
            annotations.pop(key, None)
        else:
            annotations[key] = value
        return self._store(NODES, new, "MODIFIED")

    def read_secret(self, namespace, name):
        return self.get_object(SECRETS, name, namespace)

    # -- what other actors do (tests) -----------------------------------------------------
    def create(self, kind: str, obj: dict) -> dict:
        obj = clone(obj)
        meta = obj.setdefault("metadata", {})
        if object_key(obj) in self.objects[kind]:
            raise Conflict("%s %s already exists" % (kind, object_key(obj)), 409)
        meta.setdefault("uid", "uid-%s-%d" % (meta.get("name"), self.rv + 1))
        meta.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
        return self._store(kind, obj, "ADDED")

    def update(self, kind: str, obj: dict) -> dict:
        """An unconditional-unless-resourceVersion-given update of a whole object (status included).

        ``obj`` becomes the stored object: pass a copy you no longer touch.
        """
        current = self._current(kind, obj)
        new = dict(obj, metadata=dict(obj["metadata"]))
        new["metadata"]["uid"] = current["metadata"].get("uid")
        return self._store(kind, new, "MODIFIED")

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        key = "%s/%s" % (namespace, name) if namespace else name
        current = self.objects[kind].get(key)
        if current is None:
            return
        new = clone(current)
        if new["metadata"].get("finalizers"):
            if not new["metadata"].get("deletionTimestamp"):
                new["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
                self._store(kind, new, "MODIFIED")
            return
        self._store(kind, new, "DELETED")

    def compact(self) -> None:
        """Forget every retained event: the next watch from an old resourceVersion gets 410."""
        for kind in self.events:
            self.events[kind] = []
            self.horizon[kind] = self.rv
