"""Every Kubernetes call the copilot makes, behind one small interface.

Objects travel as plain dicts, exactly as the API server sends them (the
copilot never needs the client's model classes, whose shape changed between
python3-kubernetes 22 in Debian 12 and the releases on PyPI), and are parsed
here, once, into the typed values the decisions read (:func:`generic_node_from_api`,
:func:`pod_from_api`, :func:`node_from_api`) as the informers cache them. Three kinds are
read: ``genericnodes`` (cluster-scoped custom resource), ``pods`` and ``nodes``;
writes are few and all conditional:

* ``write_ledger``: the GenericNode status, ``PUT .../status`` carrying the
  resourceVersion read, so a concurrent writer makes it fail with 409;
* ``set_finalizer``: the GenericNode itself, only for its finalizer (``PUT``,
  same rule);
* ``annotate_node``: one annotation on a Node (a merge patch of
  ``metadata.annotations``).

Every request body is built here: callers say what they want written.

Errors: :class:`Conflict` (409), :class:`Gone` (410: watch from a fresh
list), :class:`TemporaryError` (5xx, 429, no connection: retry with backoff)
and :class:`PermanentError` (401, 403, 404 of a whole API, 422: report).
A missing object is not an error: ``get_object`` answers ``None``.

:class:`KubeClient` speaks HTTP through the ``kubernetes`` package's
connection pool, configured from a kubeconfig (or the in-cluster service
account). The tests talk to the project's API server double through it
(``tests/k8s_double``, over a socket or, with ``pool``, in memory); nothing
fake is installed on hosts.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol, cast
from urllib.parse import quote, urlencode

from . import names
from .compaction import compact
from .ledger import AdmissionRequest, JsonObject, Ledger, LedgerEntry, Status, object_in
from .model import GenericNode, KubeNode, Pod
from .units import QuantityError, cpu_millis, memory_bytes

# What a list keeps of each object (the informers: what the decisions read of it, parsed as it comes).
Keep = Callable[[JsonObject], Any]

GENERICNODES, PODS, NODES, SECRETS = "genericnodes", "pods", "nodes", "secrets"
NAMESPACED = frozenset((PODS, SECRETS))


class KubeError(Exception):
    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status


class Conflict(KubeError):
    """409: the object changed since it was read (or already exists)."""


class Gone(KubeError):
    """410: the watch's resourceVersion left the server's window: list again."""


class NotFound(KubeError):
    """404 for an object a write needed."""


class TemporaryError(KubeError):
    """The API server did not answer, or answered 429/5xx: retry with backoff."""


class PermanentError(KubeError):
    """The request can never succeed as it is (401, 403, 400, 422, missing CRD): report it."""


def error_for(status: int | None, message: str) -> KubeError:
    if status == 409:
        return Conflict(message, status)
    if status == 410:
        return Gone(message, status)
    if status == 404:
        return NotFound(message, status)
    if status is None or status == 429 or status >= 500:
        return TemporaryError(message, status)
    return PermanentError(message, status)


class Kube(Protocol):
    def list_objects(self, kind: str, label_selector: str | None = None, keep: Keep | None = None) -> tuple[list[Any], str]:
        """Every object of ``kind`` (``keep(obj)`` of each, when given) and the list's resourceVersion."""

    def watch_objects(self, kind: str, resource_version: str, timeout_seconds: int = 300,
                      label_selector: str | None = None) -> Iterator[tuple[str, JsonObject]]:
        """``(type, object)`` events after ``resource_version`` (ADDED, MODIFIED, DELETED, BOOKMARK)."""

    def get_object(self, kind: str, name: str, namespace: str | None = None) -> JsonObject | None: ...

    def replace_status(self, obj: JsonObject) -> JsonObject:
        """PUT a GenericNode's status (``obj`` carries metadata.name and resourceVersion)."""

    def replace_object(self, obj: JsonObject) -> JsonObject:
        """PUT a GenericNode (metadata and spec; the status is not written this way)."""

    def write_ledger(self, obj: JsonObject, status: Status, resource_version: str | None = None) -> JsonObject:
        """Replace a GenericNode's status (the ledger) if it is still at ``resource_version`` (else obj's)."""

    def set_finalizer(self, obj: JsonObject, present: bool, resource_version: str | None = None) -> JsonObject:
        """Add (or remove) the copilot's finalizer on a GenericNode, with the same condition."""

    def annotate_node(self, name: str, key: str, value: str | None) -> JsonObject:
        """Set (``None``: remove) one annotation on a Node."""

    def read_secret(self, namespace: str, name: str) -> JsonObject | None: ...


def object_key(obj: JsonObject) -> str:
    meta = obj.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace"), meta.get("name")) if meta.get("namespace") else str(meta.get("name"))


# -- what the decisions read of each object --------------------------------------------------

# A GenericNode without a status or a ledger reads these (never changed in place, as no cached part is).
_NO_STATUS: Status = {}
_NO_LEDGER: Ledger = {}


def generic_node_from_api(obj: JsonObject, cached: GenericNode | None = None) -> GenericNode:
    """A GenericNode as the decisions read it, from the object as read (kept as ``raw`` for the writes).

    ``cached``: the version before, whose parsed admissions stand for this
    one's when the object holds the very same list (compacted against the
    cached version, unchanged parts are the cached ones): most new versions
    change the status alone.
    """
    meta, spec = object_in(obj.get("metadata")), object_in(obj.get("spec"))
    requests = spec.get(names.SPEC_ADMISSIONS)
    if cached is not None and requests is object_in(cached.raw.get("spec")).get(names.SPEC_ADMISSIONS):
        admissions = cached.admissions
    else:
        admissions = tuple(parse_admission(entry) for entry in requests) if isinstance(requests, list) else ()
    finalizers = meta.get("finalizers")
    raw_status = obj.get("status")
    status = cast(Status, raw_status) if isinstance(raw_status, dict) else _NO_STATUS
    name = str(meta.get("name") or "")
    return GenericNode(
        name=name, resource_version=str(meta.get("resourceVersion") or ""), deleting=bool(meta.get("deletionTimestamp")),
        finalizers=_finalizers(tuple(str(f) for f in finalizers) if isinstance(finalizers, list) else ()),
        shares=spec.get(names.SPEC_TYPE) == names.NODE_TYPE_SLURM, alias=str(spec.get(names.SPEC_ALIAS) or name),
        admissions=admissions, ledger=_ledger(status), status=status, raw=obj)


@functools.lru_cache(maxsize=64)
def _finalizers(finalizers: tuple[str, ...]) -> tuple[str, ...]:
    """One tuple for all GenericNodes with the same finalizers (nearly all have the copilot's alone)."""
    return finalizers


def _ledger(status: Status) -> Ledger:
    """``status.admissions`` (uid -> entry); entries that are not objects are dropped (the status's own dict when
    none is: cached parts are shared, not copied)."""
    raw: object = status.get(names.STATUS_ADMISSIONS)
    if not isinstance(raw, dict):
        return _NO_LEDGER
    if all(type(uid) is str and isinstance(entry, dict) for uid, entry in raw.items()):
        return cast(Ledger, raw)
    return {str(uid): cast(LedgerEntry, entry) for uid, entry in raw.items() if isinstance(entry, dict)}


def parse_admission(entry: object) -> AdmissionRequest:
    """An admission request, with ``error`` set when it cannot be honoured as written."""
    if not isinstance(entry, dict):
        return AdmissionRequest(uid="", error="an admission must be an object")
    uid = str(entry.get("uid") or "")
    pod = object_in(entry.get("pod"))
    namespace, name, pod_uid = _text(pod.get("namespace")), _text(pod.get("name")), str(pod.get("uid") or "")
    base = AdmissionRequest(uid=uid, namespace=namespace, name=name, pod_uid=pod_uid)
    if not namespace or not name:
        return dataclasses.replace(base, error="invalid admission: pod.namespace and pod.name are required")
    request = object_in(entry.get("request"))
    try:
        cpu = cpu_millis(request.get("cpu", 0))
        mem = memory_bytes(request.get("memory", 0))
    except QuantityError as err:
        return dataclasses.replace(base, error="invalid admission request: %s" % err)
    return dataclasses.replace(base, cpu_millis=cpu, memory_bytes=mem)


def pod_from_api(obj: JsonObject) -> Pod:
    """A pod as the decisions read it: a cluster holds many large pods, of which the copilot reads five fields."""
    meta, status = object_in(obj.get("metadata")), object_in(obj.get("status"))
    return Pod(namespace=_text(meta.get("namespace")), name=_text(meta.get("name")), uid=str(meta.get("uid") or ""),
               phase=_text(status.get("phase") or "Pending"), terminating=bool(meta.get("deletionTimestamp")),
               resource_version=str(meta.get("resourceVersion") or ""))


def node_from_api(obj: JsonObject) -> KubeNode:
    """A Node as the decisions read it (a real one also carries its images, conditions, addresses, ...)."""
    meta, spec = object_in(obj.get("metadata")), object_in(obj.get("spec"))
    annotations = dict(object_in(meta.get("annotations")))
    return KubeNode(name=_text(meta.get("name")), unschedulable=bool(spec.get("unschedulable")),
                    annotations=compact(annotations), resource_version=str(meta.get("resourceVersion") or ""))


def _text(value: object) -> str:
    """A name many objects repeat (a namespace, a phase), one copy of it."""
    return sys.intern(str(value or ""))


def ledger_body(obj: JsonObject, status: Status, resource_version: str | None = None) -> JsonObject:
    """The body of ``PUT .../status``: the GenericNode as read, with ``status`` and the resourceVersion to hold to.

    ``obj`` is not changed (cached objects are shared). The server takes the
    status from it and fails with 409 when the resourceVersion moved on.
    """
    body = _generic_node_body(obj, resource_version)
    body["status"] = status
    return body


def finalizer_body(obj: JsonObject, present: bool, resource_version: str | None = None) -> JsonObject:
    """The body of ``PUT`` on a GenericNode with the copilot's finalizer added (or removed), others kept."""
    body = _generic_node_body(obj, resource_version)
    finalizers = [f for f in body["metadata"].get("finalizers") or [] if f != names.FINALIZER]
    if present:
        finalizers.append(names.FINALIZER)
    body["metadata"]["finalizers"] = finalizers
    return body


def _generic_node_body(obj: JsonObject, resource_version: str | None) -> JsonObject:
    body = {k: v for k, v in obj.items() if k != "status"}
    body["metadata"] = dict(obj.get("metadata") or {})
    if resource_version is not None:
        body["metadata"]["resourceVersion"] = resource_version
    body.setdefault("apiVersion", names.API_VERSION)
    body.setdefault("kind", names.KIND)
    return body


# -- the real client ----------------------------------------------------------------------


# Where each kind lives in the API: its collection (a Pod's, in every namespace) and one object by name.
_COLLECTIONS = {
    GENERICNODES: "/apis/%s/%s/%s" % (names.GROUP, names.VERSION, names.PLURAL),
    PODS: "/api/v1/pods",
    NODES: "/api/v1/nodes",
}


# Seconds the credentials read from the configuration serve before they are read again. Reading them runs the
# kubernetes package's refresh hook, which for a token also assigns the configuration's host again and so reads
# every proxy variable of the environment (0.3 ms a request, more in a large environment); the tokens it
# refreshes (exec plugins, the service account's) live for minutes.
CREDENTIALS_REUSE_SECONDS = 1.0


def object_path(kind: str, name: str, namespace: str | None = None) -> str:
    """The API path of one object (``namespace`` for namespaced kinds)."""
    if kind in NAMESPACED:
        return "/api/v1/namespaces/%s/%s/%s" % (quote(str(namespace), safe=""), kind, quote(name, safe=""))
    return "%s/%s" % (_COLLECTIONS[kind], quote(name, safe=""))


class KubeClient:
    """The Kubernetes API over HTTP, configured by the ``kubernetes`` package (python3-kubernetes 22.6 or later).

    The package loads the kubeconfig (or the in-cluster service account) and
    builds the connection pool (TLS, client certificates, proxy); the requests
    go through that pool as plain HTTP with JSON bodies. The package's
    generated API classes are not used: the copilot reads raw JSON anyway, and
    they cost about 23 MB of memory (CoreV1Api alone 21 MB with kubernetes 37)
    and, per request, a validation and serialisation pass over the body.
    Writes are ``PUT`` except the Node annotation, a JSON merge patch.
    """

    def __init__(self, kubeconfig: str | None = None, context: str | None = None, configuration: Any = None,
                 request_timeout: float = 30.0, list_chunk: int = 500, pool: Any = None,
                 clock: Callable[[], float] = time.monotonic):
        """``pool``: what to send the requests through instead of the configuration's connection pool
        (something with urllib3's ``PoolManager.request``; the tests' API server double in memory)."""
        from kubernetes import client, config
        from kubernetes.client import rest

        if configuration is None:
            configuration = client.Configuration()
            if kubeconfig or not _in_cluster():
                config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
            else:
                config.load_incluster_config(client_configuration=configuration)
        self.configuration = configuration
        self.host = configuration.host  # a property that reads the proxy settings from the environment each time
        self.pool = rest.RESTClientObject(configuration).pool_manager if pool is None else pool
        self._host_pool, self._path_prefix = _host_pool(self.pool, self.host)
        self.request_timeout = request_timeout
        self.list_chunk = list_chunk
        self._clock = clock
        self._credentials: dict[str, str] = {}
        self._credentials_read: float | None = None  # when (clock) they were read; None: read them before the next request

    # -- plumbing ------------------------------------------------------------------
    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        """Accept JSON, and the credentials (see :meth:`_credential_headers`)."""
        headers = {"Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        headers.update(self._credential_headers())
        return headers

    def _credential_headers(self) -> dict[str, str]:
        """The credentials the configuration holds (it refreshes expiring ones), read again every
        :data:`CREDENTIALS_REUSE_SECONDS` and after a 401."""
        now = self._clock()
        if self._credentials_read is None or now - self._credentials_read >= CREDENTIALS_REUSE_SECONDS:
            self._credentials = {auth["key"]: auth["value"] for auth in self.configuration.auth_settings().values()
                                 if auth.get("in") == "header" and auth.get("value")}
            self._credentials_read = now
        return self._credentials

    def _request(self, what: str, method: str, path: str, query: dict[str, Any] | None = None, body: JsonObject | None = None,
                 content_type: str = "application/json", timeout: Any = None) -> Any:
        """The response, not read yet (a watch streams it); errors as :class:`KubeError`."""
        import urllib3

        target = path + ("?" + urlencode(query) if query else "")
        options: dict[str, Any] = {
            "body": None if body is None else json.dumps(body),
            "headers": self._headers(content_type if body is not None else None),
            "preload_content": False,
            "timeout": urllib3.Timeout(connect=timeout[0], read=timeout[1]) if isinstance(timeout, tuple) else (timeout or self.request_timeout),
        }
        try:
            if self._host_pool is not None:
                response = self._host_pool.urlopen(method, self._path_prefix + target, **options)
            else:
                response = self.pool.request(method, self.host + target, **options)
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise TemporaryError("%s: %s: %s" % (what, type(err).__name__, err)) from err
        if response.status == 401:
            self._credentials_read = None  # a token that just expired: the next request reads them again
        if response.status >= 400:
            try:
                body_text = response.read()
            finally:
                response.release_conn()
            raise error_for(response.status, "%s: HTTP %s %s: %s" % (what, response.status, response.reason, _status_message(body_text)))
        return response

    def _json(self, what: str, method: str, path: str, query: dict[str, Any] | None = None, body: JsonObject | None = None,
              content_type: str = "application/json") -> JsonObject:
        import urllib3

        response = self._request(what, method, path, query, body, content_type)
        try:
            data: JsonObject = json.loads(response.read())
            return data
        except ValueError as err:
            raise TemporaryError("%s: the answer is not JSON: %s" % (what, err)) from err
        except (urllib3.exceptions.HTTPError, OSError) as err:
            raise TemporaryError("%s: %s: %s" % (what, type(err).__name__, err)) from err
        finally:
            response.release_conn()

    # -- the interface ---------------------------------------------------------------
    def list_objects(self, kind: str, label_selector: str | None = None, keep: Keep | None = None) -> tuple[list[Any], str]:
        """The list in chunks of ``list_chunk`` objects (``limit`` and ``continue``, as client-go's informers
        read), each through ``keep`` before the next is asked for: a large list never sits whole in memory.

        A continue token that expired meanwhile (the API server answers 410) means listing again, whole,
        as client-go's pager does. All chunks come from one snapshot: the list's resourceVersion is theirs.
        """
        try:
            try:
                return self._list(kind, label_selector, keep, self.list_chunk)
            except Gone:
                return self._list(kind, label_selector, keep, 0)
        except NotFound as err:
            raise PermanentError("%s: is the %s CRD installed? (kubectl apply -f crd/%s.yaml)" % (
                err, names.CRD_NAME, names.CRD_NAME), 404) from err

    def _list(self, kind: str, label_selector: str | None, keep: Keep | None, limit: int) -> tuple[list[Any], str]:
        query: dict[str, Any] = {"labelSelector": label_selector} if label_selector else {}
        if limit:
            query["limit"] = limit
        items: list[Any] = []
        resource_version = None
        while True:
            data = self._json("list %s" % kind, "GET", _COLLECTIONS[kind], query)
            chunk = data.get("items") or []
            items.extend(chunk if keep is None else map(keep, chunk))
            meta = data.get("metadata") or {}
            if resource_version is None:
                resource_version = str(meta.get("resourceVersion") or "")
            if not meta.get("continue"):
                return items, resource_version
            query["continue"] = meta["continue"]
            del data, chunk  # this chunk's raw objects go before the next arrives

    def watch_objects(self, kind: str, resource_version: str, timeout_seconds: int = 300,
                      label_selector: str | None = None) -> Iterator[tuple[str, JsonObject]]:
        query: dict[str, Any] = {"watch": "true", "resourceVersion": resource_version, "timeoutSeconds": int(timeout_seconds),
                                 "allowWatchBookmarks": "true"}
        if label_selector:
            query["labelSelector"] = label_selector
        response = self._request("watch %s" % kind, "GET", _COLLECTIONS[kind], query, timeout=(10, timeout_seconds + 30))
        try:
            for line in _lines(response):
                try:
                    event = json.loads(line)
                except ValueError as err:
                    raise TemporaryError("watch %s: bad event line: %s" % (kind, err)) from err
                kind_of_event, obj = event.get("type"), event.get("object") or {}
                if kind_of_event == "ERROR":
                    raise error_for(obj.get("code") or 500, "watch %s: %s" % (kind, obj.get("message")))
                yield kind_of_event, obj
        except OSError as err:
            raise TemporaryError("watch %s: %s" % (kind, err)) from err
        finally:
            response.release_conn()

    def get_object(self, kind: str, name: str, namespace: str | None = None) -> JsonObject | None:
        if kind not in _COLLECTIONS and kind not in NAMESPACED:
            raise ValueError("unknown kind %s" % kind)
        where = "%s/%s" % (namespace, name) if kind in NAMESPACED else name
        try:
            return self._json("get %s %s" % (kind[:-1], where), "GET", object_path(kind, name, namespace))
        except NotFound:
            return None

    def replace_status(self, obj: JsonObject) -> JsonObject:
        name = obj["metadata"]["name"]
        return self._json("update genericnode %s status" % name, "PUT", object_path(GENERICNODES, name) + "/status", body=obj)

    def replace_object(self, obj: JsonObject) -> JsonObject:
        name = obj["metadata"]["name"]
        return self._json("update genericnode %s" % name, "PUT", object_path(GENERICNODES, name), body=obj)

    def write_ledger(self, obj: JsonObject, status: Status, resource_version: str | None = None) -> JsonObject:
        return self.replace_status(ledger_body(obj, status, resource_version))

    def set_finalizer(self, obj: JsonObject, present: bool, resource_version: str | None = None) -> JsonObject:
        return self.replace_object(finalizer_body(obj, present, resource_version))

    def annotate_node(self, name: str, key: str, value: str | None) -> JsonObject:
        body = {"metadata": {"annotations": {key: value}}}
        return self._json("annotate node %s" % name, "PATCH", object_path(NODES, name), body=body,
                          content_type="application/merge-patch+json")

    def read_secret(self, namespace: str, name: str) -> JsonObject | None:
        return self.get_object(SECRETS, name, namespace)


def _host_pool(pool: Any, host: str) -> tuple[Any, str]:
    """The API server's own connection pool in ``pool`` and the path its URL starts with (``host`` may be
    ``https://gateway/k8s/clusters/c1``); ``(None, "")`` when the requests must go through ``pool`` itself.

    A request sent to the connection pool skips what ``PoolManager.request``
    does for every URL: parse it, find the pool for its host (building the
    pool key), wrap the headers. That was about a fifth of the copilot's CPU
    per ledger write, and a burst of admissions writes two ledgers each. Only
    a plain ``PoolManager`` is bypassed: a proxy's manager adds its headers and
    absolute URLs to each request, and the tests' in-memory double is no pool.
    """
    import urllib3

    if type(pool) is not urllib3.PoolManager:
        return None, ""
    return pool.connection_from_url(host), urllib3.util.parse_url(host).path or ""


def _in_cluster() -> bool:
    import os

    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(
        "/var/run/secrets/kubernetes.io/serviceaccount/token")


def _status_message(body: Any) -> str:
    try:
        data = json.loads(body)
        return str(data.get("message") or body)
    except (TypeError, ValueError):
        return str(body or "")[:300]


def _lines(response: Any) -> Iterator[bytes]:
    """Newline-delimited JSON from a streaming urllib3 response."""
    pending = b""
    for chunk in response.stream(65536):
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            if line.strip():
                yield line
    if pending.strip():
        yield pending
