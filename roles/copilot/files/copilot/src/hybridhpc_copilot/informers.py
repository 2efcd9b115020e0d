"""The caches: one kind's objects, kept current by list + watch, each parsed once as it comes.

An :class:`Informer` holds what the decisions read of each object (the typed
values of ``model``, parsed by ``kube``), not the JSON: a pass reads fields,
and a GenericNode keeps its compacted JSON (``GenericNode.raw``) only for the
writes that send it back. A 410 Gone means list again; our own writes go in
at once, and the watch's echo of them changes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Generic, Protocol, TypeVar

from .compaction import compact
from .kube import GENERICNODES, NODES, PODS, Kube, generic_node_from_api, node_from_api, object_key, pod_from_api
from .ledger import JsonObject
from .model import GenericNode, KubeNode, Pod


class Cached(Protocol):
    """What an informer reads of what it keeps."""

    @property
    def key(self) -> str: ...

    @property
    def resource_version(self) -> str: ...


T = TypeVar("T", bound=Cached)

# What an informer stores of an object, given the version it caches (None: none), whose unchanged parts it may reuse.
KeepLike = Callable[[JsonObject, T | None], T]


def keep_generic_node(obj: JsonObject, cached: GenericNode | None = None) -> GenericNode:
    """A GenericNode as cached: all of it but ``metadata.managedFields``, compacted, and parsed.

    The writes build their bodies from the cached JSON: a PUT without
    managedFields keeps the server's (only an explicit value replaces them),
    and the rest of the object goes back as read.
    """
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        obj = dict(obj, metadata={k: v for k, v in meta.items() if k != "managedFields"})
    raw = compact(obj, None if cached is None else cached.raw)
    if cached is not None and raw is cached.raw:
        return cached  # nothing changed (a relist shows every object again)
    return generic_node_from_api(raw, cached)


def keep_pod(obj: JsonObject, _cached: Pod | None = None) -> Pod:
    return pod_from_api(obj)


def keep_node(obj: JsonObject, _cached: KubeNode | None = None) -> KubeNode:
    return node_from_api(obj)


def _version(obj: JsonObject) -> str:
    """An event's or an answer's resourceVersion ('' when it has none)."""
    rv = (obj.get("metadata") or {}).get("resourceVersion")
    return rv if isinstance(rv, str) else ""


def _rv_newer(new: str, old: Cached | None) -> bool:
    """Whether version ``new`` is not older than ``old`` (resourceVersions compared as numbers when both are)."""
    if old is None:
        return True
    a, b = new, old.resource_version
    if a.isdigit() and b.isdigit():
        return int(a) >= int(b)
    return True


def _echo_or_older(event_obj: JsonObject, written: Cached) -> bool:
    """Whether a watch event shows the version we wrote, or an older one (resourceVersions that are not numbers
    are compared only for equality: when they differ, the event may be newer)."""
    a, b = _version(event_obj), written.resource_version
    if not (a and b):
        return False
    return a == b or (a.isdigit() and b.isdigit() and int(a) < int(b))


class Informer(Generic[T]):
    """One kind's objects, kept current by list + watch.

    ``keep(obj, cached)``: what to store of each object (by default, what the
    decisions read of that kind), given the version cached (``None``: none),
    whose unchanged parts it may reuse.
    """

    def __init__(self, kube: Kube, kind: str, label_selector: str | None = None,
                 on_change: Callable[[str, str | None], None] | None = None, keep: KeepLike[T] | None = None):
        self.kube, self.kind, self.label_selector, self.on_change = kube, kind, label_selector, on_change
        self.keep: KeepLike[T] = keep if keep is not None else _KEEP[kind]
        self.store: dict[str, T] = {}
        self.resource_version: str | None = None
        self._lock = threading.Lock()
        # Objects our own write is on its way to -> the last watch event about it meanwhile (None: none yet).
        self._writing: dict[str, tuple[str, JsonObject] | None] = {}

    @property
    def synced(self) -> bool:
        return self.resource_version is not None

    def relist(self) -> None:
        items, rv = self.kube.list_objects(self.kind, self.label_selector, self._kept_from_list)
        with self._lock:
            self.store = {item.key: item for item in items}
            self.resource_version = rv
        self._changed()

    def apply(self, event: str, obj: JsonObject) -> None:
        rv = _version(obj)
        key = object_key(obj)
        changed = False
        with self._lock:
            if key in self._writing:  # held back until the write answers (see writing())
                self._writing[key] = (event, obj)
            elif event in ("ADDED", "MODIFIED"):
                current = self.store.get(key)
                if _rv_newer(rv, current):
                    # The echo of our own write (put() stored it already) changes nothing: waking the
                    # loop for it would run a pass that finds nothing to do, and the cached object is
                    # that very version (kept, not replaced by a copy).
                    changed = current is None or not rv or rv != current.resource_version
                    if changed:
                        self.store[key] = self.keep(obj, current)
            elif event == "DELETED":
                changed = self.store.pop(key, None) is not None
            if rv:
                self.resource_version = rv
        if changed:
            self._changed(key)

    def _kept_from_list(self, obj: JsonObject) -> T:
        """A listed object as stored: the cached one when the list shows it at the cached resourceVersion.

        A periodic resync lists every object again, and nearly all are
        unchanged: keeping the cached one spares compacting and parsing it
        again (seconds of CPU at 10,000 GenericNodes, Nodes and pods, while
        admissions wait) and holding two copies of the cache until the list ends.
        """
        rv = _version(obj)
        cached = self.get(object_key(obj)) if rv else None
        if cached is not None and cached.resource_version == rv:
            return cached
        return self.keep(obj, cached)

    def writing(self, key: str) -> None:
        """Our write of ``key`` is on its way: hold its watch events back until :meth:`done_writing`.

        The watch often brings the echo of our own write before the write's
        answer is stored: it then looked like somebody else's change, and the
        next pass decided that GenericNode again for nothing (close to half of
        a burst's writes), after compacting the echo into the cache.
        """
        with self._lock:
            self._writing[key] = None

    def done_writing(self, key: str, written: T | None) -> None:
        """Our write of ``key`` ended, storing ``written`` (``None``: it failed). The last event held back
        meanwhile is applied, unless it is the echo of that write or older than it: a write is conditional on the
        resourceVersion its decision read, so an older version held nothing that decision did not see."""
        with self._lock:
            held = self._writing.pop(key, None)
        if held is None or (written is not None and _echo_or_older(held[1], written)):
            return
        self.apply(*held)
        if written is None:  # noted as it was when it came (a re-read after a conflict may hold that version now)
            self._changed(key)

    def put(self, obj: JsonObject, like: T | None = None) -> T:
        """An object we wrote or read ourselves (newer than, or as new as, what the watch said); returns it as kept.

        ``like``: what ``keep`` may reuse the unchanged parts of (the cached version when not given).
        """
        key = object_key(obj)
        kept = self.keep(obj, self.get(key) if like is None else like)
        with self._lock:
            if _rv_newer(kept.resource_version, self.store.get(key)):
                self.store[key] = kept
        return kept

    def forget(self, key: str) -> None:
        with self._lock:
            gone = self.store.pop(key, None) is not None
        if gone:  # its DELETED event will find nothing left to change: the next pass must still see it went
            self._changed(key)

    def get(self, key: str) -> T | None:
        with self._lock:
            return self.store.get(key)

    def snapshot(self) -> dict[str, T]:
        with self._lock:
            return dict(self.store)

    def watch(self, timeout_seconds: int = 300, drop: Callable[[str, JsonObject], bool] | None = None) -> int:
        """Apply watch events from the last resourceVersion; returns how many arrived.

        Raises :class:`kube.Gone` (the caller lists again) and the other KubeErrors.
        ``drop(event, obj)`` (tests) loses events on purpose.
        """
        if not self.synced:
            # A watch goes on from a list. Watched from "0" instead, the events would make
            # the cache look synced, and one event lost (a dropped connection) would leave
            # a GenericNode out of it for good: its Slurm node would look unshared and get
            # its whole GRES back while pods hold part of it.
            self.relist()
        count = 0
        for event, obj in self.kube.watch_objects(self.kind, self.resource_version or "0", timeout_seconds,
                                                  self.label_selector):
            count += 1
            if drop is not None and drop(event, obj):
                continue
            self.apply(event, obj)
        return count

    def _changed(self, key: str | None = None) -> None:
        if self.on_change is not None:
            self.on_change(self.kind, key)


# What each kind's informer keeps of an object, unless told otherwise.
_KEEP: dict[str, KeepLike[Any]] = {GENERICNODES: keep_generic_node, PODS: keep_pod, NODES: keep_node}
