"""The property test's world (roles/copilot/files/copilot/tests/copilot_world.py) on a real kube-apiserver.

``RealApiServer`` offers the in-process calls the world makes of the API
server double (add, update, delete and peek objects, compact, a hook before
each of the copilot's requests) on a real control plane, so the same random
interleavings run against the real server's resourceVersions, conflicts,
schema validation, status subresource and compaction.

The double ends a watch once it sent what happened (the world pumps the
copilot's watches in its own thread, between operations); a real watch never
ends by itself before its timeout. ``CaughtUpKube`` gives the copilot's
informers that shape on the real server: a watch from the informer's
resourceVersion, read until every write this world knows of (its own, and
the copilot's) has come through, then closed. The events are the real
server's, in its order, from its etcd history; a watch from a compacted
revision gets the real server's 410 Gone.
"""

from __future__ import annotations

from typing import Any, Callable

from hybridhpc_copilot import kube as copilot_kube
from hybridhpc_copilot.kube import GENERICNODES, NODES, PODS, KubeClient, TemporaryError, object_path

# How long a watch may take to bring the writes this world knows of; a real server on loopback takes milliseconds.
CATCH_UP_SECONDS = 20


def _rv(obj: dict) -> int:
    value = (obj.get("metadata") or {}).get("resourceVersion")
    return int(value) if value else 0


class Writes:
    """What this world knows was written, per kind: the newest resourceVersion, and deletions not seen yet.

    A delete's answer carries the object's last resourceVersion, not the
    deletion's revision (which only its DELETED event has): a deletion is
    known by its key and the etcd revision right after it (an informer whose
    list is at that revision or later has it).
    """

    def __init__(self, etcd_revision: Callable[[], int]):
        self.etcd_revision = etcd_revision
        self.newest: dict[str, int] = {}
        self.gone = 0  # watches the server answered 410 Gone
        self.deletions: dict[str, dict[str, int]] = {}

    def wrote(self, kind: str, obj: Any) -> Any:
        if isinstance(obj, dict):
            self.newest[kind] = max(self.newest.get(kind, 0), _rv(obj))
        return obj

    def deleted(self, kind: str, key: str) -> None:
        self.deletions.setdefault(kind, {})[key] = self.etcd_revision()

    def pending(self, kind: str, since: int) -> tuple[int, set[str]]:
        """What a watch from ``since`` must bring: a resourceVersion to reach, and the keys of deletions."""
        deletions = self.deletions.get(kind, {})
        for key in [k for k, revision in deletions.items() if revision <= since]:
            del deletions[key]  # the informer's list (or an earlier watch) is past it
        return self.newest.get(kind, 0), set(deletions)

    def seen_deleted(self, kind: str, key: str, revision: int) -> None:
        """A watch brought the deletion, at ``revision``: pending until the informer is there (a lost event
        leaves it behind, and its next watch brings the deletion again, as the double's does)."""
        deletions = self.deletions.get(kind, {})
        if key in deletions:
            deletions[key] = min(deletions[key], revision)


class CaughtUpKube:
    """The copilot's Kube client on the real server: its requests through the world's hook (see
    :class:`RealApiServer`), its writes noted, its watches read until they caught up with what was written."""

    def __init__(self, client: KubeClient, watcher: KubeClient, writes: Writes, before: Callable[[str, str], None]):
        self.client, self.watcher, self.writes, self.before = client, watcher, writes, before

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)

    def replace_status(self, obj):
        return self.writes.wrote(GENERICNODES, self.client.replace_status(obj))

    def replace_object(self, obj):
        return self.writes.wrote(GENERICNODES, self.client.replace_object(obj))

    def write_ledger(self, obj, status, resource_version=None):
        return self.writes.wrote(GENERICNODES, self.client.write_ledger(obj, status, resource_version))

    def set_finalizer(self, obj, present, resource_version=None):
        return self.writes.wrote(GENERICNODES, self.client.set_finalizer(obj, present, resource_version))

    def annotate_node(self, name, key, value):
        return self.writes.wrote(NODES, self.client.annotate_node(name, key, value))

    def watch_objects(self, kind, resource_version, timeout_seconds=300, label_selector=None):
        self.before("GET", copilot_kube._COLLECTIONS[kind])  # what lands meanwhile lands before the watch starts
        since = int(resource_version or 0)
        target, deletions = self.writes.pending(kind, since)
        if target <= since and not deletions:
            return  # nothing was written since: the double's watch would end at once, empty
        events = self.watcher.watch_objects(kind, resource_version, CATCH_UP_SECONDS, label_selector)
        reached = since
        try:
            while True:
                try:
                    event, obj = next(events)
                except StopIteration:
                    raise TemporaryError("watch %s from %s: at %s after %d s, not at %s yet (deletions: %s)" % (
                        kind, resource_version, reached, CATCH_UP_SECONDS, target, sorted(deletions))) from None
                except copilot_kube.Gone:
                    self.writes.gone += 1  # the real server's 410: the informer lists again
                    raise
                reached = max(reached, _rv(obj))
                if event == "DELETED":
                    key = copilot_kube.object_key(obj)
                    self.writes.seen_deleted(kind, key, _rv(obj))
                    deletions.discard(key)
                yield event, obj
                if reached >= target and not deletions:
                    return
        finally:
            events.close()
            self.watcher.pool.clear()  # the watch ended early: its connection holds the rest of the stream


class RealApiServer:
    """A real kube-apiserver driven through the calls the world makes of ``KubeDouble`` in process.

    ``kubeconfig``: the admin's; ``etcd_revision`` and ``compact(revision)``: the plane's
    (its API server must watch etcd directly, ``--watch-cache=false``, for a
    compaction to expire a watch).
    """

    injects_faults = False  # a real server answers 5xx or an unprovoked 409 only when it fails: not on demand

    def __init__(self, kubeconfig: str, etcd_revision: Callable[[], int], compact: Callable[[int], int]):
        self.kubeconfig, self._compact = kubeconfig, compact
        self._compacted = 0
        self.admin = KubeClient(kubeconfig=kubeconfig, request_timeout=15.0)
        self.writes = Writes(etcd_revision)
        self.hooks: list[Callable[[str, str], Any]] = []
        self.created: list[tuple[str, str, str | None]] = []  # (kind, name, namespace), for clean_up()

    # -- what KubeDouble offers the world ------------------------------------------------
    def start(self) -> RealApiServer:
        return self

    def intercept(self, method: str | None, path: str, callback: Callable[[str, str], Any], count: int | None = 1) -> None:
        if method is not None or path or count is not None:
            raise NotImplementedError("only a hook before every request (as the world uses)")
        self.hooks.append(callback)

    def client(self) -> CaughtUpKube:
        """The copilot's client: its own connections, each request after the world's hooks."""
        own = KubeClient(kubeconfig=self.kubeconfig, request_timeout=15.0)
        hooked = KubeClient(configuration=own.configuration, pool=_Hooked(own.pool, self._before), request_timeout=15.0)
        # The watches' own connections: one closed early is dropped (clear()) rather than reused. Not a plain
        # PoolManager, so that each request finds its pool again afterwards (KubeClient's _host_pool).
        watching = KubeClient(kubeconfig=self.kubeconfig, request_timeout=15.0)
        watcher = KubeClient(configuration=watching.configuration, pool=_Hooked(watching.pool, None), request_timeout=15.0)
        return CaughtUpKube(hooked, watcher, self.writes, self._before)

    def add_in_process(self, obj: dict) -> dict:
        kind = _kind_of(obj)
        namespace = (obj.get("metadata") or {}).get("namespace")
        collection = ("/api/v1/namespaces/%s/pods" % namespace) if kind == PODS else copilot_kube._COLLECTIONS[kind]
        created = self.admin._json("create %s" % kind, "POST", collection, body=obj)
        self.created.append((kind, created["metadata"]["name"], namespace))
        if "status" in obj and kind == GENERICNODES:
            created["status"] = obj["status"]
            created = self.admin.replace_status(created)
        return self.writes.wrote(kind, created)

    def update_in_process(self, name: str, change: Callable[[dict], Any], plural: str = GENERICNODES,
                          namespace: str | None = None, subresource: str = "") -> dict:
        """Read, change, write, as another controller does: again from a fresh read on a conflict. (The double's
        plurals are the copilot's kinds: ``genericnodes``, ``pods``, ``nodes``.)"""
        kind = plural
        path = object_path(kind, name, namespace) + ("/" + subresource if subresource else "")
        for _attempt in range(20):
            obj = self.admin.get_object(kind, name, namespace)
            change(obj)
            try:
                return self.writes.wrote(kind, self.admin._json("update %s %s" % (kind, name), "PUT", path, body=obj))
            except copilot_kube.Conflict:
                continue
        raise AssertionError("update of %s %s: 20 conflicts in a row" % (kind, name))

    def delete_in_process(self, name: str, plural: str = GENERICNODES, namespace: str | None = None) -> None:
        self._delete(plural, name, namespace)
        self.writes.deleted(plural, "%s/%s" % (namespace, name) if namespace else name)

    def peek(self, name: str, plural: str = GENERICNODES, namespace: str | None = None) -> dict | None:
        return self.admin.get_object(plural, name, namespace)

    def compact(self) -> None:
        """etcd forgets its history up to now: a watch from before gets 410 Gone from the API server."""
        revision = self.writes.etcd_revision()
        if revision > self._compacted:  # etcd refuses a compaction to where it compacted already
            self._compact(revision)
            self._compacted = revision

    # -- between worlds ------------------------------------------------------------------
    def clean_up(self) -> None:
        """Delete what this world created (a GenericNode's finalizer removed first), so the next world's
        copilot lists only its own."""
        for kind, name, namespace in reversed(self.created):
            obj = self.admin.get_object(kind, name, namespace)
            if obj is None:
                continue
            if obj["metadata"].get("finalizers"):
                obj["metadata"]["finalizers"] = []
                self.admin._json("update %s %s" % (kind, name), "PUT", object_path(kind, name, namespace), body=obj)
            try:
                self._delete(kind, name, namespace)
            except copilot_kube.NotFound:
                pass
        self.created.clear()
        self.hooks.clear()

    def _delete(self, kind: str, name: str, namespace: str | None) -> None:
        self.admin._json("delete %s %s" % (kind, name), "DELETE", object_path(kind, name, namespace),
                         body={"gracePeriodSeconds": 0})

    def _before(self, method: str, path: str) -> None:
        for hook in self.hooks:
            hook(method, path)  # the world's answer (a status to inject) is ignored: see injects_faults


class _Hooked:
    """A connection pool whose every request runs ``before(method, path)`` first (if given)."""

    def __init__(self, pool: Any, before: Callable[[str, str], None] | None):
        self.pool, self.before = pool, before

    def request(self, method: str, url: str, **options: Any) -> Any:
        from urllib.parse import urlsplit

        if self.before is not None:
            self.before(method, urlsplit(url).path)
        return self.pool.request(method, url, **options)

    def clear(self) -> None:
        self.pool.clear()


def _kind_of(obj: dict) -> str:
    return {"GenericNode": GENERICNODES, "Pod": PODS, "Node": NODES}[obj["kind"]]
