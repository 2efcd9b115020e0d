"""The HTTP side of the API server double: routing, verbs, watch streams, discovery, auth, faults."""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

from .patches import PatchError, json_patch, merge_patch
from .selectors import SelectorError, parse_field_selector, parse_label_selector
from .state import ApiError, ResourceType, State

SERVER_VERSION = {"major": "1", "minor": "31", "gitVersion": "v1.31.0-k8s-double", "gitCommit": "0" * 40,
                  "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.22",
                  "compiler": "gc", "platform": "linux/amd64"}
MERGE, JSON_PATCH, STRATEGIC, APPLY = ("application/merge-patch+json", "application/json-patch+json",
                                       "application/strategic-merge-patch+json", "application/apply-patch+yaml")
_UNAUTHENTICATED = ("/version", "/healthz", "/livez", "/readyz")
IN_MEMORY_URL = "http://k8s-double.invalid"  # where a server without a socket says it is (its kubeconfig names it)


@dataclass
class Fault:
    """Answer ``status`` to the next ``count`` requests matching ``method`` and ``path`` (a regex)."""

    status: int
    method: str | None = None
    path: str | None = None
    count: int = 1
    reason: str = "InternalError"

    def matches(self, method: str, path: str) -> bool:
        return self.count > 0 and (self.method is None or self.method == method) and (
            self.path is None or re.search(self.path, path) is not None)


@dataclass
class Route:
    rtype: ResourceType | None
    version: str
    namespace: str | None = None
    name: str | None = None
    subresource: str = ""
    discovery: str = ""  # "", "api", "apis", "group", "resources", "version", "health"
    group: str = ""


class ApiServer:
    """A stateful Kubernetes API server double on a loopback port, served by a thread.

    ``token``: the bearer token clients must send (None: no authentication).
    ``inject(Fault(...))`` makes matching requests fail; ``state.compact()``
    expires every watch position; ``requests`` records (method, path).
    """

    def __init__(self, address: str = "127.0.0.1", port: int = 0, token: str | None = "double-token",
                 window: int = 1000, bookmark_interval: float = 5.0, listen: bool = True):
        self.state = State(window=window)
        self.token = token
        self.bookmark_interval = bookmark_interval
        self.faults: list[Fault] = []
        self.requests: list[tuple] = []
        self._lock = threading.Lock()
        self.handler = _handler(self)
        # listen=False: no socket, only requests through memory.py's pool_manager() and transport()
        self.httpd = ThreadingHTTPServer((address, port), self.handler) if listen else None
        if self.httpd is not None:
            self.httpd.daemon_threads = True
        self.thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        if self.httpd is None:
            return IN_MEMORY_URL
        host, port = self.httpd.server_address[:2]
        return "http://%s:%d" % (host, port)

    def start(self) -> ApiServer:
        if self.httpd is not None:
            self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), name="k8s-double", daemon=True)
            self.thread.start()
        return self

    def stop(self) -> None:
        with self.state.lock:
            self.state.closed = True
            self.state.changed.notify_all()
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def inject(self, fault: Fault) -> Fault:
        with self._lock:
            self.faults.append(fault)
        return fault

    def _fault_for(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if fault.matches(method, path):
                    fault.count -= 1
                    return fault
        return None

    def kubeconfig(self, namespace: str = "default") -> str:
        """A kubeconfig (YAML) that points at this server."""
        user = "    token: %s\n" % self.token if self.token else "    {}\n"
        return (
            "apiVersion: v1\nkind: Config\n"
            "clusters:\n- name: k8s-double\n  cluster:\n    server: %s\n"
            "users:\n- name: k8s-double\n  user:\n%s"
            "contexts:\n- name: k8s-double\n  context:\n    cluster: k8s-double\n    user: k8s-double\n"
            "    namespace: %s\n"
            "current-context: k8s-double\n" % (self.url, user, namespace)
        )

    def load(self, objects) -> list[dict]:
        """Create objects (CRDs first), as ``kubectl create -f`` would."""
        created = []
        objects = sorted(objects, key=lambda o: 0 if o.get("kind") == "CustomResourceDefinition" else 1)
        for obj in objects:
            api_version = obj.get("apiVersion", "v1")
            group, _unused, version = api_version.rpartition("/")
            rtype = next((t for t in self.state.types.values() if t.kind == obj.get("kind") and t.group == group), None)
            if rtype is None:
                raise ValueError("unknown kind %s/%s" % (api_version, obj.get("kind")))
            namespace = (obj.get("metadata") or {}).get("namespace") if rtype.namespaced else None
            created.append(self.state.create(rtype, namespace, obj, version))
        return created

    # -- routing --------------------------------------------------------------------------
    def route(self, path: str) -> Route:
        parts = [unquote(p) for p in path.strip("/").split("/") if p]
        if not parts:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if parts[0] in ("healthz", "livez", "readyz"):
            return Route(None, "", discovery="health")
        if parts == ["version"]:
            return Route(None, "", discovery="version")
        if parts[0] == "api":
            if len(parts) == 1:
                return Route(None, "", discovery="api")
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis":
            if len(parts) == 1:
                return Route(None, "", discovery="apis")
            if len(parts) == 2:
                return Route(None, "", discovery="group", group=parts[1])
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            return Route(None, version, discovery="resources", group=group)
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3 and not (group == "" and rest[2] in ("status", "finalize")):
            namespace, rest = rest[1], rest[2:]
        rtype = self.state.find_type(group, version, rest[0])
        if namespace is not None and not rtype.namespaced:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else ""
        if len(rest) > 3 or (sub and not (sub == "status" and rtype.status_subresource)):
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return Route(rtype, version, namespace, name, sub, group=group)

    # -- discovery -------------------------------------------------------------------------
    def discovery(self, route: Route) -> dict:
        state = self.state
        if route.discovery == "version":
            return SERVER_VERSION
        if route.discovery == "api":
            return {"kind": "APIVersions", "versions": ["v1"],
                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": self.url.split("//")[1]}]}
        if route.discovery == "apis":
            return {"kind": "APIGroupList", "apiVersion": "v1",
                    "groups": [self._group(name, versions) for name, versions in sorted(state.groups().items())]}
        if route.discovery == "group":
            versions = state.groups().get(route.group)
            if not versions:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            return dict(self._group(route.group, versions), kind="APIGroup", apiVersion="v1")
        if route.discovery == "resources":
            found = [t for t in state.types.values() if t.group == route.group and route.version in t.versions]
            if not found:
                raise ApiError(404, "NotFound", "the server could not find the requested resource")
            resources = [entry for t in sorted(found, key=lambda t: t.plural) for entry in t.discovery()]
            group_version = "%s/%s" % (route.group, route.version) if route.group else route.version
            return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}
        raise ApiError(404, "NotFound", "the server could not find the requested resource")

    @staticmethod
    def _group(name: str, versions: list) -> dict:
        entries = [{"groupVersion": "%s/%s" % (name, v), "version": v} for v in versions]
        return {"name": name, "versions": entries, "preferredVersion": entries[0]}


def _as_version(obj: dict, rtype: ResourceType, version: str) -> dict:
    if obj.get("apiVersion") == rtype.api_version(version):
        return obj
    return dict(obj, apiVersion=rtype.api_version(version))


def _truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("1", "true", "yes")


def _handler(server: ApiServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "k8s-double"
        # A watch that ends once it has sent every event the log holds (as one whose timeout fell
        # right then), instead of waiting for more: for callers reading it in their own thread.
        ends_when_caught_up = False
        # Headers and body go out in two writes: with Nagle on, the body waits for the
        # client's delayed ACK of the headers (40 ms a request). Go's net/http, like
        # the real API server, sets TCP_NODELAY on every connection.
        disable_nagle_algorithm = True

        def log_message(self, *args):
            pass

        # -- plumbing --------------------------------------------------------------------
        def _send_json(self, code: int, body: dict, headers: dict | None = None) -> None:
            data = json.dumps(body).encode("utf-8")
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

        def _error(self, err: ApiError) -> None:
            self._send_json(err.code, err.status())

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _json_body(self):
            raw = self._body()
            try:
                return json.loads(raw or b"null")
            except ValueError as err:
                raise ApiError(400, "BadRequest", "the body of the request is not JSON: %s" % err) from err

        def _authorized(self, path: str) -> bool:
            if server.token is None or path in _UNAUTHENTICATED:
                return True
            return self.headers.get("Authorization", "") == "Bearer " + server.token

        def _dispatch(self, method: str) -> None:
            url = urlsplit(self.path)
            query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
            server.requests.append((method, url.path, query))
            del server.requests[:-1000]  # a long-running standalone server keeps the last 1000
            try:
                if not self._authorized(url.path):
                    self._body()
                    raise ApiError(401, "Unauthorized", "Unauthorized")
                fault = server._fault_for(method, url.path)
                if fault is not None:
                    self._body()
                    raise ApiError(fault.status, fault.reason, "injected fault: HTTP %d" % fault.status)
                route = server.route(url.path)
                if route.discovery:
                    if method != "GET":
                        raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
                    if route.discovery == "health":
                        data = b"ok"
                        self.send_response(200)
                        self.send_header("Content-Type", "text/plain")
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                        return
                    self._send_json(200, server.discovery(route))
                    return
                getattr(self, "_" + method.lower())(route, query)
            except ApiError as err:
                self._error(err)
            except (SelectorError, PatchError) as err:
                code, reason = (422, "Invalid") if isinstance(err, PatchError) else (400, "BadRequest")
                self._error(ApiError(code, reason, str(err)))
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

        def do_GET(self):  # noqa: N802 - http.server's naming
            self._dispatch("GET")

        def do_POST(self):  # noqa: N802
            self._dispatch("POST")

        def do_PUT(self):  # noqa: N802
            self._dispatch("PUT")

        def do_PATCH(self):  # noqa: N802
            self._dispatch("PATCH")

        def do_DELETE(self):  # noqa: N802
            self._dispatch("DELETE")

        # -- verbs -------------------------------------------------------------------------
        def _get(self, route: Route, query: dict) -> None:
            state, rtype = server.state, route.rtype
            if route.name is not None:
                with state.lock:
                    obj = state.get(rtype, route.namespace, route.name)
                self._send_json(200, _as_version(obj, rtype, route.version))
                return
            labels = parse_label_selector(query.get("labelSelector"))
            fields = parse_field_selector(query.get("fieldSelector"))

            def predicate(obj):
                return labels((obj.get("metadata") or {}).get("labels")) and fields(obj)

            if _truthy(query.get("watch")):
                self._watch(route, query, predicate)
                return
            limit, token = _limit(query.get("limit")), query.get("continue")
            if token and query.get("resourceVersion"):
                raise ApiError(400, "BadRequest", "specifying resource version is not allowed when using continue")
            meta = {}
            with state.lock:
                if limit or token:  # a chunk: what is left gets a continue token
                    selected = bool(query.get("labelSelector") or query.get("fieldSelector"))
                    objects, meta["resourceVersion"], next_token, remaining = state.list_chunk(
                        rtype, route.namespace, predicate, limit, token, count_remaining=not selected)
                    if next_token:
                        meta["continue"] = next_token
                    if remaining is not None:
                        meta["remainingItemCount"] = remaining
                else:
                    objects, meta["resourceVersion"] = state.list(rtype, route.namespace, predicate), str(state.rv)
                items = [_as_version(o, rtype, route.version) for o in objects]
            self._send_json(200, {"kind": rtype.kind + "List", "apiVersion": rtype.api_version(route.version),
                                  "metadata": meta, "items": items})

        def _post(self, route: Route, query: dict) -> None:
            if route.name is not None:
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
            body = self._json_body()
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request must be an object")
            obj = server.state.create(route.rtype, route.namespace, body, route.version,
                                      dry_run=query.get("dryRun") == "All", strict=query.get("fieldValidation") == "Strict")
            self._send_json(201, _as_version(obj, route.rtype, route.version))

        def _put(self, route: Route, query: dict) -> None:
            if route.name is None:
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
            body = self._json_body()
            if not isinstance(body, dict):
                raise ApiError(400, "BadRequest", "the body of the request must be an object")
            obj = server.state.update(route.rtype, route.namespace, route.name, body, route.version, route.subresource,
                                      dry_run=query.get("dryRun") == "All", strict=query.get("fieldValidation") == "Strict")
            self._send_json(200, _as_version(obj, route.rtype, route.version))

        def _patch(self, route: Route, query: dict) -> None:
            if route.name is None:
                raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
            rtype, state = route.rtype, server.state
            content_type = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            raw = self._body()
            if content_type == STRATEGIC and rtype.custom:
                raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted "
                               "media types include: application/json-patch+json, application/merge-patch+json, "
                               "application/apply-patch+yaml")
            if content_type not in (MERGE, JSON_PATCH, STRATEGIC, APPLY):
                raise ApiError(415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted "
                               "media types include: application/json-patch+json, application/merge-patch+json, "
                               "application/apply-patch+yaml, application/strategic-merge-patch+json")
            try:
                if content_type == APPLY:
                    patch = _load_yaml(raw)
                else:
                    patch = json.loads(raw or b"null")
            except ValueError as err:
                raise ApiError(400, "BadRequest", "the body of the request is not valid: %s" % err) from err
            dry_run = query.get("dryRun") == "All"
            with state.lock:
                if content_type == APPLY:
                    if not query.get("fieldManager"):
                        raise ApiError(400, "BadRequest", "PATCH requests with apply content type must have fieldManager set")
                    try:
                        state.get(rtype, route.namespace, route.name)
                    except ApiError:
                        obj = state.create(rtype, route.namespace, patch, route.version, dry_run=dry_run)
                        self._send_json(201, _as_version(obj, rtype, route.version))
                        return
                current = state.get(rtype, route.namespace, route.name)
                new = json_patch(current, patch) if content_type == JSON_PATCH else merge_patch(current, patch)
                if not isinstance(new, dict):
                    raise ApiError(422, "Invalid", "the patch must leave an object")
                wanted = (new.get("metadata") or {}).get("resourceVersion")
                if wanted and wanted != current["metadata"]["resourceVersion"]:
                    raise ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": the object has been '
                                   "modified; please apply your changes to the latest version and try again"
                                   % (rtype.qualified(), route.name))
                new.setdefault("metadata", {})["resourceVersion"] = current["metadata"]["resourceVersion"]
                obj = state.update(rtype, route.namespace, route.name, new, route.version, route.subresource,
                                   dry_run=dry_run, require_rv=False)
            self._send_json(200, _as_version(obj, rtype, route.version))

        def _delete(self, route: Route, query: dict) -> None:
            state, rtype = server.state, route.rtype
            body = self._json_body() or {}
            precondition = ((body.get("preconditions") or {}) if isinstance(body, dict) else {}).get("resourceVersion")
            dry_run = query.get("dryRun") == "All" or (isinstance(body, dict) and "All" in (body.get("dryRun") or []))
            if route.name is None:
                labels = parse_label_selector(query.get("labelSelector"))
                fields = parse_field_selector(query.get("fieldSelector"))
                with state.lock:
                    doomed = state.list(rtype, route.namespace, lambda o: labels(o["metadata"].get("labels")) and fields(o))
                    for obj in doomed:
                        state.delete(rtype, obj["metadata"].get("namespace"), obj["metadata"]["name"], dry_run)
                self._send_json(200, {"kind": rtype.kind + "List", "apiVersion": rtype.api_version(route.version),
                                      "metadata": {}, "items": doomed})
                return
            obj = state.delete(rtype, route.namespace, route.name, dry_run, precondition)
            self._send_json(200, _as_version(obj, rtype, route.version))

        # -- watch -------------------------------------------------------------------------
        def _chunk(self, data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        def _event(self, kind: str, obj: dict) -> None:
            self._chunk(json.dumps({"type": kind, "object": obj}).encode("utf-8") + b"\n")

        def _watch(self, route: Route, query: dict, predicate) -> None:
            state, rtype = server.state, route.rtype
            timeout = float(query.get("timeoutSeconds") or 1800)
            bookmarks = _truthy(query.get("allowWatchBookmarks"))
            deadline = time.monotonic() + timeout
            since = query.get("resourceVersion") or ""
            with state.lock:
                initial = []
                expired = None
                if since in ("", "0"):
                    initial = state.list(rtype, route.namespace, predicate)
                    position = state.rv
                else:
                    try:
                        position = int(since)
                    except ValueError as err:
                        raise ApiError(400, "BadRequest", "invalid resourceVersion %r" % since) from err
                    if position < state.horizon.get(rtype.key, 0):
                        expired = ApiError(410, "Expired", "too old resource version: %d (%d)" % (
                            position, state.horizon[rtype.key]))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if expired is not None:
                self._event("ERROR", expired.status())
                self._chunk(b"")
                return
            for obj in initial:
                self._event("ADDED", _as_version(obj, rtype, route.version))
            last_bookmark = time.monotonic()
            while True:
                with state.lock:
                    while True:
                        if state.closed or rtype.key not in state.types or (
                                time.monotonic() >= deadline and not self.ends_when_caught_up):
                            pending = None
                            break
                        log = state.events.get(rtype.key, [])
                        if state.horizon.get(rtype.key, 0) > position:
                            pending = "expired"
                            break
                        pending = log[_first_after(log, position):]
                        if pending:
                            break
                        if self.ends_when_caught_up:
                            pending = None
                            break
                        if bookmarks and time.monotonic() - last_bookmark >= server.bookmark_interval:
                            break
                        state.changed.wait(min(0.5, max(0.01, deadline - time.monotonic())))
                    current_rv = state.rv
                if pending is None:
                    break
                if pending == "expired":
                    self._event("ERROR", ApiError(410, "Expired", "too old resource version: %d (%d)" % (
                        position, state.horizon[rtype.key])).status())
                    break
                for event in pending:
                    position = event.rv
                    if route.namespace and (event.obj.get("metadata") or {}).get("namespace") != route.namespace:
                        continue
                    now = predicate(event.obj)
                    before = event.previous is not None and predicate(event.previous)
                    kind = None
                    if event.type == "ADDED" and now:
                        kind = "ADDED"
                    elif event.type == "MODIFIED":
                        kind = "MODIFIED" if (now and before) else "ADDED" if now else "DELETED" if before else None
                    elif event.type == "DELETED" and (now or before):
                        kind = "DELETED"
                    if kind:
                        self._event(kind, _as_version(event.obj, rtype, route.version))
                if bookmarks and time.monotonic() - last_bookmark >= server.bookmark_interval:
                    last_bookmark = time.monotonic()
                    position = max(position, current_rv) if not pending else position
                    self._event("BOOKMARK", {"kind": rtype.kind, "apiVersion": rtype.api_version(route.version),
                                             "metadata": {"resourceVersion": str(position)}})
            self._chunk(b"")

    return Handler


def _limit(value: str | None) -> int:
    """``limit``: at most this many items in the answer (0 or none: all of them)."""
    try:
        limit = int(value or 0)
    except ValueError as err:
        raise ApiError(400, "BadRequest", "invalid limit %r" % value) from err
    return max(limit, 0)


def _first_after(log: list, position: int) -> int:
    """The index of the first event after ``position``: a binary search, as the log is in resourceVersion
    order (a scan of a wide window on every write would make the double, not its client, the slow part)."""
    low, high = 0, len(log)
    while low < high:
        middle = (low + high) // 2
        if log[middle].rv <= position:
            low = middle + 1
        else:
            high = middle
    return low


def _load_yaml(raw: bytes):
    try:
        return json.loads(raw)
    except ValueError:
        import yaml

        return yaml.safe_load(raw)
