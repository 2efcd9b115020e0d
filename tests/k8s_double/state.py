"""The API server's state: resource types, objects, resourceVersions, the event log, CRDs.

Everything here runs under one lock (``State.lock``); watchers wait on a
condition and read the event log. Objects are stored as JSON-like dicts and
never changed in place, so readers can share them.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import random
import re
import string
import threading
import uuid
from dataclasses import dataclass, field

from . import schema as _schema
from .patches import json_copy

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class ApiError(Exception):
    """Becomes a ``Status`` answer: ``code``, ``reason`` (NotFound, Conflict, ...), ``message``."""

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details or {}

    def status(self) -> dict:
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            body["details"] = self.details
        return body


def _encode_continue(rv: int, after: tuple) -> str:
    """A continue token: opaque to clients, like the API server's (base64 of the version, resourceVersion and last key)."""
    data = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(after)}).encode("utf-8")
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _decode_continue(token: str) -> tuple[int, tuple]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        return int(data["rv"]), tuple(data["start"])
    except (ValueError, TypeError, KeyError) as err:
        raise ApiError(400, "BadRequest", "continue key is not valid: %s" % err) from err


def now_rfc3339() -> str:
    return _dt.datetime.now(tz=_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class ResourceType:
    group: str  # "" for the core group
    versions: list  # served versions, preferred first
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: list = field(default_factory=list)
    status_subresource: bool = False
    schemas: dict = field(default_factory=dict)  # version -> openAPIV3Schema (custom resources)
    custom: bool = False
    allow_unconditional_update: bool = True
    categories: list = field(default_factory=list)

    @property
    def key(self) -> tuple:
        return (self.group, self.plural)

    def api_version(self, version: str | None = None) -> str:
        version = version or self.versions[0]
        return "%s/%s" % (self.group, version) if self.group else version

    def qualified(self) -> str:
        return "%s.%s" % (self.plural, self.group) if self.group else self.plural

    def discovery(self) -> list[dict]:
        verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        entry = {"name": self.plural, "singularName": self.singular or self.kind.lower(), "namespaced": self.namespaced,
                 "kind": self.kind, "verbs": verbs}
        if self.short_names:
            entry["shortNames"] = list(self.short_names)
        if self.categories:
            entry["categories"] = list(self.categories)
        out = [entry]
        if self.status_subresource:
            out.append({"name": self.plural + "/status", "singularName": "", "namespaced": self.namespaced,
                        "kind": self.kind, "verbs": ["get", "patch", "update"]})
        return out


BUILTIN = [
    ResourceType("", ["v1"], "namespaces", "Namespace", False, "namespace", ["ns"], status_subresource=True),
    ResourceType("", ["v1"], "nodes", "Node", False, "node", ["no"], status_subresource=True),
    ResourceType("", ["v1"], "pods", "Pod", True, "pod", ["po"], status_subresource=True, categories=["all"]),
    ResourceType("", ["v1"], "secrets", "Secret", True, "secret"),
    ResourceType("", ["v1"], "configmaps", "ConfigMap", True, "configmap", ["cm"]),
    ResourceType("", ["v1"], "services", "Service", True, "service", ["svc"], status_subresource=True, categories=["all"]),
    ResourceType("", ["v1"], "endpoints", "Endpoints", True, "endpoints", ["ep"]),
    ResourceType("", ["v1"], "serviceaccounts", "ServiceAccount", True, "serviceaccount", ["sa"]),
    ResourceType("apiextensions.k8s.io", ["v1"], "customresourcedefinitions", "CustomResourceDefinition", False,
                 "customresourcedefinition", ["crd", "crds"], status_subresource=True),
]


@dataclass
class Event:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    obj: dict
    previous: dict | None  # the object before (to turn a selector change into ADDED/DELETED)


class State:
    def __init__(self, window: int = 1000):
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.types: dict[tuple, ResourceType] = {t.key: t for t in BUILTIN}
        self.objects: dict[tuple, dict] = {t.key: {} for t in BUILTIN}
        self.events: dict[tuple, list] = {t.key: [] for t in BUILTIN}
        self.horizon: dict[tuple, int] = {t.key: 0 for t in BUILTIN}  # events up to here are forgotten
        self.window = window
        self.rv = 1
        self.closed = False
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            self.create(self.types[("", "namespaces")], None, {"metadata": {"name": ns}})

    # -- types ---------------------------------------------------------------------------
    def find_type(self, group: str, version: str, plural: str) -> ResourceType:
        rtype = self.types.get((group, plural))
        if rtype is None or version not in rtype.versions:
            raise ApiError(404, "NotFound", "the server could not find the requested resource")
        return rtype

    def groups(self) -> dict[str, list]:
        out: dict[str, list] = {}
        for rtype in self.types.values():
            if rtype.group:
                versions = out.setdefault(rtype.group, [])
                for version in rtype.versions:
                    if version not in versions:
                        versions.append(version)
        return out

    # -- bookkeeping -----------------------------------------------------------------------
    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def _record(self, rtype: ResourceType, event: str, obj: dict, previous: dict | None) -> None:
        log = self.events[rtype.key]
        log.append(Event(int(obj["metadata"]["resourceVersion"]), event, obj, previous))
        if len(log) > self.window:
            self.horizon[rtype.key] = log[-self.window - 1].rv
            del log[: len(log) - self.window]
        self.changed.notify_all()

    def compact(self) -> None:
        """Forget the whole event log: a watch from any older resourceVersion gets 410 Gone."""
        with self.lock:
            for key in self.events:
                self.events[key] = []
                self.horizon[key] = self.rv

    @staticmethod
    def _key(namespace, name) -> tuple:
        return (namespace or "", name)

    def get(self, rtype: ResourceType, namespace, name) -> dict:
        obj = self.objects[rtype.key].get(self._key(namespace, name))
        if obj is None:
            raise ApiError(404, "NotFound", '%s "%s" not found' % (rtype.qualified(), name),
                           {"name": name, "group": rtype.group, "kind": rtype.plural})
        return obj

    def list(self, rtype: ResourceType, namespace, predicate) -> list[dict]:
        return [obj for (ns, _unused), obj in sorted(self.objects[rtype.key].items())
                if (not namespace or ns == namespace) and predicate(obj)]

    def list_chunk(self, rtype: ResourceType, namespace, predicate, limit: int, token: str | None,
                   count_remaining: bool) -> tuple[list[dict], str, str | None, int | None]:
        """One chunk of a list with ``limit`` (and ``continue``), as etcd serves it to the real API server.

        Every chunk comes from the state at the first chunk's resourceVersion (the
        event log rolls newer changes back), so a list read in chunks is as
        consistent as one read at once. A token whose resourceVersion left the
        event log's window gets 410 Expired, as one older than etcd's last
        compaction does. Returns (objects, resourceVersion, the next token or
        None, remainingItemCount or None: known only without selectors). ``limit`` 0: all that is left.
        """
        if token:
            rv, after = _decode_continue(token)
            objects = self._objects_at(rtype, rv)
        else:
            rv, after, objects = self.rv, None, self.objects[rtype.key]
        keys = sorted(k for k in objects if (not namespace or k[0] == namespace) and (after is None or k > after))
        chunk, left = [], None
        for index, key in enumerate(keys):
            if not predicate(objects[key]):
                continue
            if limit and len(chunk) == limit:
                left = index
                break
            chunk.append(objects[key])
        if left is None:
            return chunk, str(rv), None, None
        last = chunk[-1]["metadata"]
        remaining = sum(1 for key in keys[left:] if predicate(objects[key])) if count_remaining else None
        return chunk, str(rv), _encode_continue(rv, self._key(last.get("namespace"), last["name"])), remaining

    def _objects_at(self, rtype: ResourceType, rv: int) -> dict:
        """``rtype``'s objects as they were at resourceVersion ``rv`` (410 once the events after it are forgotten)."""
        if rv < self.horizon.get(rtype.key, 0) or rtype.key not in self.objects:
            raise ApiError(410, "Expired", "The provided continue parameter is too old to display a consistent list "
                           "result. You can start a new list without the continue parameter.")
        objects = dict(self.objects[rtype.key])
        for event in reversed(self.events[rtype.key]):
            if event.rv <= rv:
                break
            key = self._key(event.obj["metadata"].get("namespace"), event.obj["metadata"]["name"])
            if event.previous is None:
                objects.pop(key, None)
            else:
                objects[key] = event.previous
        return objects

    # -- validation ------------------------------------------------------------------------
    def _validate(self, rtype: ResourceType, version: str, obj: dict, strict: bool = False) -> dict:
        meta = obj.get("metadata")
        if not isinstance(meta, dict):
            raise ApiError(422, "Invalid", "%s is invalid: metadata: Required value" % rtype.kind)
        name = meta.get("name") or ""
        if not _DNS_SUBDOMAIN.match(name) or len(name) > 253:
            raise self._invalid(rtype, name, [("metadata.name", "FieldValueInvalid",
                                               "Invalid value: %r: a lowercase RFC 1123 subdomain must consist of lower case "
                                               "alphanumeric characters, '-' or '.'" % name)])
        schema = rtype.schemas.get(version)
        if schema is None:
            return obj
        if strict:
            unknown = _schema.unknown_fields(schema, obj)
            if unknown:
                raise ApiError(400, "BadRequest", 'strict decoding error: %s' % ", ".join('unknown field "%s"' % u for u in unknown))
        pruned, causes = _schema.validate(schema, obj)
        if causes:
            raise self._invalid(rtype, name, causes)
        return pruned

    @staticmethod
    def _invalid(rtype: ResourceType, name: str, causes: list) -> ApiError:
        text = "; ".join("%s: %s" % (path, message) for path, _reason, message in causes)
        kind = "%s.%s" % (rtype.kind, rtype.group) if rtype.group else rtype.kind
        details = {"name": name, "group": rtype.group, "kind": rtype.kind,
                   "causes": [{"reason": r, "message": m, "field": p} for p, r, m in causes]}
        return ApiError(422, "Invalid", '%s "%s" is invalid: %s' % (kind, name, text), details)

    # -- writes ----------------------------------------------------------------------------
    def create(self, rtype: ResourceType, namespace, body: dict, version: str | None = None, dry_run=False,
               strict=False) -> dict:
        with self.lock:
            obj = json_copy(body)
            meta = obj.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + "".join(random.choices(string.ascii_lowercase + string.digits, k=5))
            if rtype.namespaced:
                if meta.get("namespace") and namespace and meta["namespace"] != namespace:
                    raise ApiError(400, "BadRequest", "the namespace of the provided object does not match the namespace "
                                   "sent on the request")
                namespace = namespace or meta.get("namespace") or "default"
                if self._key(None, namespace) not in self.objects[("", "namespaces")]:
                    raise ApiError(404, "NotFound", 'namespaces "%s" not found' % namespace,
                                   {"name": namespace, "kind": "namespaces"})
                meta["namespace"] = namespace
            else:
                meta.pop("namespace", None)
            version = version or rtype.versions[0]
            obj["apiVersion"], obj["kind"] = rtype.api_version(version), rtype.kind
            obj = self._validate(rtype, version, obj, strict)
            meta = obj["metadata"]
            key = self._key(meta.get("namespace"), meta["name"])
            if key in self.objects[rtype.key]:
                raise ApiError(409, "AlreadyExists", '%s "%s" already exists' % (rtype.qualified(), meta["name"]),
                               {"name": meta["name"], "group": rtype.group, "kind": rtype.plural})
            if rtype.custom and rtype.status_subresource:
                obj.pop("status", None)  # the status subresource is the only way to write it
            if rtype.kind == "Pod":
                obj["status"] = {"phase": "Pending"}
            for field_name in ("deletionTimestamp", "deletionGracePeriodSeconds", "resourceVersion"):
                meta.pop(field_name, None)
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now_rfc3339()
            meta["generation"] = 1
            if rtype.kind == "CustomResourceDefinition":
                obj = self._establish(obj)
            if dry_run:
                meta["resourceVersion"] = str(self.rv)
                return obj
            meta["resourceVersion"] = self._next_rv()
            self.objects[rtype.key][key] = obj
            if rtype.kind == "CustomResourceDefinition":
                self._serve(obj)
            self._record(rtype, "ADDED", obj, None)
            return obj

    def update(self, rtype: ResourceType, namespace, name, body: dict, version=None, subresource="", dry_run=False,
               strict=False, require_rv=None) -> dict:
        with self.lock:
            current = self.get(rtype, namespace, name)
            new = json_copy(body)
            meta = new.setdefault("metadata", {})
            if meta.get("name") not in (None, name):
                raise ApiError(400, "BadRequest", "the name of the object (%s) does not match the name on the URL (%s)"
                               % (meta.get("name"), name))
            wanted_rv = meta.get("resourceVersion")
            must_have = (not rtype.allow_unconditional_update) if require_rv is None else require_rv
            if not wanted_rv and must_have:
                raise self._invalid(rtype, name, [("metadata.resourceVersion", "FieldValueInvalid",
                                                   "Invalid value: 0x0: must be specified for an update")])
            if wanted_rv and wanted_rv != current["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", 'Operation cannot be fulfilled on %s "%s": the object has been modified; '
                               "please apply your changes to the latest version and try again" % (rtype.qualified(), name),
                               {"name": name, "group": rtype.group, "kind": rtype.plural})
            version = version or rtype.versions[0]
            if subresource == "status":
                merged = json_copy(current)
                if "status" in new:
                    merged["status"] = new["status"]
                else:
                    merged.pop("status", None)
                new = merged
            else:
                if rtype.status_subresource:
                    new.pop("status", None)
                    if "status" in current:
                        new["status"] = json_copy(current["status"])
                keep = current["metadata"]
                meta = new["metadata"]
                meta["name"] = name
                for immutable in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                                  "generation"):
                    if immutable in keep:
                        meta[immutable] = keep[immutable]
                    else:
                        meta.pop(immutable, None)
                if rtype.namespaced:
                    meta["namespace"] = keep.get("namespace")
                if meta.get("deletionTimestamp") and set(meta.get("finalizers") or []) - set(keep.get("finalizers") or []):
                    raise self._invalid(rtype, name, [("metadata.finalizers", "Forbidden",
                                                       "no new finalizers can be added if the object is being deleted")])
            new["apiVersion"], new["kind"] = rtype.api_version(version), rtype.kind
            new = self._validate(rtype, version, new, strict)
            if rtype.kind == "CustomResourceDefinition":
                new = self._establish(new, current)
            if subresource != "status" and new.get("spec") != current.get("spec"):
                new["metadata"]["generation"] = int(current["metadata"].get("generation") or 1) + 1
            comparable = dict(new, metadata=dict(new["metadata"], resourceVersion=current["metadata"]["resourceVersion"]),
                              apiVersion=current.get("apiVersion"))
            if comparable == current:
                return current  # a no-op write changes nothing, not even the resourceVersion
            if dry_run:
                new["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
                return new
            new["metadata"]["resourceVersion"] = self._next_rv()
            key = self._key(new["metadata"].get("namespace"), name)
            if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
                self._remove(rtype, key, new, current)
                return new
            self.objects[rtype.key][key] = new
            if rtype.kind == "CustomResourceDefinition":
                self._serve(new)
            self._record(rtype, "MODIFIED", new, current)
            return new

    def delete(self, rtype: ResourceType, namespace, name, dry_run=False, precondition_rv=None) -> dict:
        with self.lock:
            current = self.get(rtype, namespace, name)
            if precondition_rv and precondition_rv != current["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", "Precondition failed: ResourceVersion in precondition: %s, "
                               "ResourceVersion in object meta: %s" % (precondition_rv, current["metadata"]["resourceVersion"]))
            if dry_run:
                return current
            key = self._key(current["metadata"].get("namespace"), name)
            if current["metadata"].get("finalizers"):
                if current["metadata"].get("deletionTimestamp"):
                    return current
                new = json_copy(current)
                new["metadata"]["deletionTimestamp"] = now_rfc3339()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                new["metadata"]["resourceVersion"] = self._next_rv()
                self.objects[rtype.key][key] = new
                self._record(rtype, "MODIFIED", new, current)
                return new
            new = json_copy(current)
            new["metadata"]["resourceVersion"] = self._next_rv()
            self._remove(rtype, key, new, current)
            return new

    def _remove(self, rtype: ResourceType, key, final: dict, current: dict) -> None:
        self.objects[rtype.key].pop(key, None)
        self._record(rtype, "DELETED", final, current)
        if rtype.kind == "Namespace":
            for other in self.types.values():
                if other.namespaced:
                    for (ns, name) in [k for k in self.objects[other.key] if k[0] == key[1]]:
                        obj = json_copy(self.objects[other.key][(ns, name)])
                        obj["metadata"]["resourceVersion"] = self._next_rv()
                        self._remove(other, (ns, name), obj, self.objects[other.key][(ns, name)])
        if rtype.kind == "CustomResourceDefinition":
            self._unserve(final)

    # -- CRDs --------------------------------------------------------------------------------
    def _establish(self, crd: dict, previous: dict | None = None) -> dict:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        problems = []
        for field_name in ("plural", "kind"):
            if not names.get(field_name):
                problems.append(("spec.names.%s" % field_name, "FieldValueRequired", "Required value"))
        if not spec.get("group"):
            problems.append(("spec.group", "FieldValueRequired", "Required value"))
        if spec.get("scope") not in ("Namespaced", "Cluster"):
            problems.append(("spec.scope", "FieldValueNotSupported", 'Unsupported value: %r: supported values: "Cluster", "Namespaced"'
                             % spec.get("scope")))
        versions = spec.get("versions") or []
        if not versions:
            problems.append(("spec.versions", "FieldValueRequired", "Required value"))
        if len([v for v in versions if v.get("storage")]) != 1:
            problems.append(("spec.versions", "FieldValueInvalid", "Invalid value: must have exactly one version marked as storage version"))
        for i, version in enumerate(versions):
            if not (version.get("schema") or {}).get("openAPIV3Schema"):
                problems.append(("spec.versions[%d].schema.openAPIV3Schema" % i, "FieldValueRequired",
                                 "Required value: schemas are required"))
        if names.get("plural") and spec.get("group") and crd["metadata"]["name"] != "%s.%s" % (names["plural"], spec["group"]):
            problems.append(("metadata.name", "FieldValueInvalid", 'Invalid value: "%s": must be spec.names.plural+"."+spec.group'
                             % crd["metadata"]["name"]))
        if problems:
            raise self._invalid(self.types[("apiextensions.k8s.io", "customresourcedefinitions")], crd["metadata"]["name"], problems)
        crd = dict(crd)
        crd["status"] = {
            "acceptedNames": dict(names),
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found",
                 "lastTransitionTime": now_rfc3339()},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": now_rfc3339()},
            ],
            "storedVersions": [v["name"] for v in versions if v.get("storage")],
        }
        # A condition keeps its lastTransitionTime while its status stays the
        # same, as the real apiextensions controller does.
        before = {(c.get("type"), c.get("status")): c for c in ((previous or {}).get("status") or {}).get("conditions") or []}
        for condition in crd["status"]["conditions"]:
            old = before.get((condition["type"], condition["status"]))
            if old and old.get("lastTransitionTime"):
                condition["lastTransitionTime"] = old["lastTransitionTime"]
        return crd

    def _serve(self, crd: dict) -> None:
        spec = crd["spec"]
        names = spec["names"]
        served = [v for v in spec["versions"] if v.get("served", True)]
        storage = [v for v in served if v.get("storage")]
        ordered = storage + [v for v in served if not v.get("storage")]
        rtype = ResourceType(
            group=spec["group"], versions=[v["name"] for v in ordered], plural=names["plural"], kind=names["kind"],
            namespaced=spec["scope"] == "Namespaced", singular=names.get("singular") or names["kind"].lower(),
            short_names=list(names.get("shortNames") or []), categories=list(names.get("categories") or []),
            status_subresource=any("status" in ((v.get("subresources") or {})) for v in served),
            schemas={v["name"]: v["schema"]["openAPIV3Schema"] for v in served}, custom=True,
            allow_unconditional_update=False,
        )
        self.types[rtype.key] = rtype
        self.objects.setdefault(rtype.key, {})
        self.events.setdefault(rtype.key, [])
        self.horizon.setdefault(rtype.key, self.rv)

    def _unserve(self, crd: dict) -> None:
        spec = crd.get("spec") or {}
        key = (spec.get("group"), (spec.get("names") or {}).get("plural"))
        rtype = self.types.pop(key, None)
        if rtype is None:
            return
        for okey, obj in list(self.objects.get(key, {}).items()):
            final = json_copy(obj)
            final["metadata"]["resourceVersion"] = self._next_rv()
            self.objects[key].pop(okey, None)
            self._record(rtype, "DELETED", final, obj)
