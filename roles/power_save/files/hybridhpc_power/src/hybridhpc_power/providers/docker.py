"""The ``docker`` provider (the lab): one container per node, through the Docker Engine API on its unix socket.

No docker CLI and no third-party library: ``http.client`` over AF_UNIX,
API version v1.41 (Docker 20.10 and later).

Options::

    "image": "hybridhpc/slurm-compute:trixie",   # required: an image with slurmd, munge and systemd
    "network": "hybridhpc-lab",                  # required: the network slurmctld is on; the node name is the alias
    "conf_server": "ctl1",                       # required: slurmctld host[:port] (configless slurmd)
    "munge_uid": 104, "munge_gid": 104,          # required: the munge user's ids in the image
    "socket": "/var/run/docker.sock",
    "labels": {},                                # more container labels
    "cap_add": ["SYS_NICE"], "security_opt": ["seccomp=unconfined"],
    "devices": ["/dev/fuse"],                    # host path, or "host:container[:permissions]"
    "tmpfs": {"/scratch": "size=1g"}, "binds": ["/srv/home:/home"],
    "cgroupns": "host",
    "systemd": true,                             # the image boots systemd: cgroup mount, tmpfs /run, /run/lock, /tmp
    "cgroup_mount": "auto",                      # auto | ro | rw (auto: rw on a cgroup v2 host, ro on v1)
    "parallel": 8,                               # containers started at once
    "timeout": 60                                # seconds per API call

resume creates the container (hostname and network alias = node name,
labels hybridhpc.slurm.cluster / hybridhpc.slurm.node), copies
/etc/munge/munge.key (0400, munge_uid:munge_gid) and /etc/default/slurmd
(``SLURMD_OPTIONS="--conf-server ... -N node -b"``, see slurmd_options) into it with
``PUT /containers/{id}/archive`` BEFORE it starts, then starts it: the key
never appears in an environment variable, a command line, a label or
``docker inspect``. Idempotent: our running container counts as started, our
stopped one is started again, a container of that name that this cluster
did not create fails that node and is never touched. suspend force-removes
our containers (already gone = stopped).
"""

from __future__ import annotations

import concurrent.futures
import http.client
import io
import json
import os
import socket
import tarfile
import time
import urllib.parse
from collections.abc import Sequence

from .. import names
from .base import Instance, Provider, ProviderError, ResumeResult, SuspendResult

API_VERSION = "v1.41"
FOREIGN = "name in use by a container this cluster did not create"
_STATES = {
    "created": names.INSTANCE_PENDING,
    "restarting": names.INSTANCE_PENDING,
    "running": names.INSTANCE_RUNNING,
    "paused": names.INSTANCE_RUNNING,
    "removing": names.INSTANCE_STOPPING,
    "exited": names.INSTANCE_STOPPED,
    "dead": names.INSTANCE_STOPPED,  # a failed removal: still there, so the reconciler removes it
}
_OPTIONS = ("image", "network", "conf_server", "munge_uid", "munge_gid", "socket", "labels", "cap_add", "security_opt", "devices",
            "tmpfs", "binds", "cgroupns", "systemd", "cgroup_mount", "parallel", "timeout")


class DockerError(ProviderError):
    def __init__(self, status: int, message: str):
        super().__init__("docker API %d: %s" % (status, message))
        self.status = status


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class DockerApi:
    """The few Engine API calls the provider needs. One connection per call, so threads may share it."""

    def __init__(self, socket_path: str = "/var/run/docker.sock", timeout: float = 60.0, version: str = API_VERSION):
        self.socket_path = socket_path
        self.timeout = timeout
        self.prefix = "/" + version

    def call(self, method: str, path: str, query: dict | None = None, body=None, content_type: str = "application/json"):
        """(status, decoded JSON or None). Raises DockerError for 4xx/5xx, ProviderError when the daemon does not answer."""
        url = self.prefix + path + ("?" + urllib.parse.urlencode(query) if query else "")
        headers = {}
        if body is not None and not isinstance(body, bytes):
            body = json.dumps(body).encode()
        if body is not None:
            headers["Content-Type"] = content_type
        connection = _UnixConnection(self.socket_path, self.timeout)
        try:
            connection.request(method, url, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
        except OSError as err:
            raise ProviderError("docker daemon at %s did not answer: %s" % (self.socket_path, err.strerror or err)) from None
        finally:
            connection.close()
        decoded = None
        if data and response.getheader("Content-Type", "").startswith("application/json"):
            try:
                decoded = json.loads(data)
            except ValueError:
                decoded = None
        if response.status >= 400:
            message = decoded.get("message") if isinstance(decoded, dict) else data.decode("utf-8", "replace").strip()
            raise DockerError(response.status, message or response.reason)
        return response.status, decoded

    def containers(self, labels: Sequence[str]) -> list[dict]:
        _, found = self.call("GET", "/containers/json", {"all": "1", "filters": json.dumps({"label": list(labels)})})
        return found or []

    def inspect(self, name: str) -> dict | None:
        try:
            return self.call("GET", "/containers/%s/json" % urllib.parse.quote(name, safe=""))[1]
        except DockerError as err:
            if err.status == 404:
                return None
            raise

    def create(self, name: str, spec: dict) -> str:
        return self.call("POST", "/containers/create", {"name": name}, spec)[1]["Id"]

    def put_archive(self, container: str, path: str, tar: bytes) -> None:
        self.call("PUT", "/containers/%s/archive" % container, {"path": path}, tar, "application/x-tar")

    def start(self, container: str) -> None:
        self.call("POST", "/containers/%s/start" % container)  # 304: already running

    def remove(self, container: str) -> bool:
        """Force-remove (with anonymous volumes); False when it was already gone."""
        try:
            self.call("DELETE", "/containers/%s" % container, {"force": "1", "v": "1"})
        except DockerError as err:
            if err.status == 404:
                return False
            raise
        return True


def slurmd_options(conf_server: str, node: str) -> str:
    """slurmd's flags: configless from conf_server, as ``node``, and ``-b``.

    ``-b`` makes slurmd report its start as the node's boot. A container
    reports the host's boot time, and slurmctld 24.11 keeps a POWERING_UP node
    waiting until the node reports a boot newer than the resume request: without
    ``-b`` every container node would stay ``alloc#`` until ResumeTimeout.
    """
    return "--conf-server %s -N %s -b" % (conf_server, node)


def node_files(munge_key: bytes, munge_uid: int, munge_gid: int, conf_server: str, node: str) -> bytes:
    """A tar (in memory) with /etc/munge (0700), /etc/munge/munge.key (0400) and /etc/default/slurmd (0644)."""
    buffer = io.BytesIO()
    now = time.time()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        directory = tarfile.TarInfo("etc/munge")
        directory.type, directory.mode, directory.uid, directory.gid, directory.mtime = tarfile.DIRTYPE, 0o700, munge_uid, munge_gid, now
        tar.addfile(directory)
        for path, data, mode, uid, gid in (
            ("etc/munge/munge.key", munge_key, 0o400, munge_uid, munge_gid),
            ("etc/default/slurmd", ('SLURMD_OPTIONS="%s"\n' % slurmd_options(conf_server, node)).encode(), 0o644, 0, 0),
        ):
            info = tarfile.TarInfo(path)
            info.size, info.mode, info.uid, info.gid, info.mtime = len(data), mode, uid, gid, now
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def cgroup_v2(root: str = "/sys/fs/cgroup") -> bool:
    """Like lab/labctl.py cgroup_flags(); the worker may itself run in a container that sees the host's hierarchy (cgroupns=host)."""
    return os.path.exists(os.path.join(root, "cgroup.controllers"))


def _strings(options, key: str) -> list[str]:
    value = options.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ValueError("%s must be a list of strings, got %r" % (key, value))
    return list(value)


def _int(options, key: str, default=None, minimum: int = 0) -> int:
    value = options.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError("%s must be an integer of at least %d, got %r" % (key, minimum, value))
    return value


class _NodeFailed(Exception):
    pass


class DockerProvider(Provider):
    name = "docker"

    def __init__(self, cluster, options, secrets, api: DockerApi | None = None, cgroup_v2_host: bool | None = None):
        super().__init__(cluster, options, secrets)
        o = self.options
        unknown = sorted(set(o) - set(_OPTIONS))
        if unknown:
            raise ValueError("unknown option %s; the docker provider knows %s" % (", ".join(unknown), ", ".join(_OPTIONS)))
        for key in ("image", "network", "conf_server"):
            if not isinstance(o.get(key), str) or not o[key]:
                raise ValueError("%s is required (a non-empty string)%s" % (key, {
                    "image": ": an image with systemd, slurmd and munge installed",
                    "network": ": the docker network slurmctld is on",
                    "conf_server": ": the slurmctld host[:port] slurmd fetches its configuration from"}[key]))
        for key in ("munge_uid", "munge_gid"):
            if key not in o:
                raise ValueError("%s is required: the numeric id of the munge user in the image (docker run --rm IMAGE id -%s munge)"
                                 % (key, "u" if key == "munge_uid" else "g"))
        self.munge_uid, self.munge_gid = _int(o, "munge_uid"), _int(o, "munge_gid")
        labels = o.get("labels", {})
        if not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
            raise ValueError("labels must map strings to strings, got %r" % (labels,))
        if names.LABEL_CLUSTER in labels or names.LABEL_NODE in labels:
            raise ValueError("labels must not set %s or %s: the provider sets them" % (names.LABEL_CLUSTER, names.LABEL_NODE))
        self.labels = dict(labels)
        self.cap_add, self.security_opt = _strings(o, "cap_add"), _strings(o, "security_opt")
        self.devices, self.binds = _strings(o, "devices"), _strings(o, "binds")
        tmpfs = o.get("tmpfs", {})
        if not isinstance(tmpfs, dict) or not all(isinstance(k, str) and k.startswith("/") and isinstance(v, str) for k, v in tmpfs.items()):
            raise ValueError("tmpfs must map absolute paths to mount options (\"\" for the defaults), got %r" % (tmpfs,))
        self.tmpfs = dict(tmpfs)
        self.cgroupns = o.get("cgroupns", "host")
        if self.cgroupns not in ("host", "private"):
            raise ValueError("cgroupns must be host or private, got %r" % (self.cgroupns,))
        self.systemd = o.get("systemd", True)
        if not isinstance(self.systemd, bool):
            raise ValueError("systemd must be true or false, got %r" % (self.systemd,))
        self.cgroup_mount = o.get("cgroup_mount", "auto")
        if self.cgroup_mount not in ("auto", "ro", "rw"):
            raise ValueError("cgroup_mount must be auto, ro or rw, got %r" % (self.cgroup_mount,))
        self.parallel = _int(o, "parallel", 8, 1)
        timeout = o.get("timeout", 60)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError("timeout must be a number of seconds above 0, got %r" % (timeout,))
        socket_path = o.get("socket", "/var/run/docker.sock")
        if not isinstance(socket_path, str) or not socket_path.startswith("/"):
            raise ValueError("socket must be the absolute path of the docker socket, got %r" % (socket_path,))
        self.api = api or DockerApi(socket_path, float(timeout))
        self._cgroup_v2 = cgroup_v2_host

    # -- the container ---------------------------------------------------------
    def _cgroup_binds(self) -> list[str]:
        mode = self.cgroup_mount
        if mode == "auto":
            v2 = cgroup_v2() if self._cgroup_v2 is None else self._cgroup_v2
            # systemd in the container needs its subtree writable on cgroup v2; v1 works read-only (LAB-NOTES).
            mode = "rw" if v2 else "ro"
        return ["/sys/fs/cgroup:/sys/fs/cgroup:" + mode]

    def spec(self, node: str) -> dict:
        """The container's create body (no secret in it: files come later, through the archive API)."""
        network = self.options["network"]
        tmpfs = {"/run": "", "/run/lock": "", "/tmp": "exec"} if self.systemd else {}
        tmpfs.update(self.tmpfs)
        binds = (self._cgroup_binds() if self.systemd else []) + self.binds
        devices = []
        for device in self.devices:
            parts = device.split(":")
            devices.append({"PathOnHost": parts[0], "PathInContainer": parts[1] if len(parts) > 1 and parts[1] else parts[0],
                            "CgroupPermissions": parts[2] if len(parts) > 2 else "rwm"})
        host_config = {"NetworkMode": network, "CapAdd": self.cap_add, "SecurityOpt": self.security_opt, "Devices": devices,
                       "Tmpfs": tmpfs, "Binds": binds, "CgroupnsMode": self.cgroupns, "RestartPolicy": {"Name": "no"}}
        return {
            "Image": self.options["image"],
            "Hostname": node,
            "Labels": {**self.labels, names.LABEL_CLUSTER: self.cluster, names.LABEL_NODE: node},
            "HostConfig": host_config,
            "NetworkingConfig": {"EndpointsConfig": {network: {"Aliases": [node]}}},
        }

    def _ours(self, container: dict, node: str) -> bool:
        labels = (container.get("Config") or {}).get("Labels") or container.get("Labels") or {}
        return labels.get(names.LABEL_CLUSTER) == self.cluster and labels.get(names.LABEL_NODE) == node

    def _instance(self, node: str, container: dict) -> Instance:
        """From a /containers/json entry or an inspect document."""
        state = container.get("State")
        if isinstance(state, dict):  # inspect
            state = state.get("Status")
        networks = (container.get("NetworkSettings") or {}).get("Networks") or {}
        address = (networks.get(self.options["network"]) or {}).get("IPAddress") or None
        created = container.get("Created")
        return Instance(node, container.get("Id", ""), _STATES.get(state or "", names.INSTANCE_PENDING), address,
                        float(created) if isinstance(created, (int, float)) else None)

    def _resume_one(self, node: str, key: bytes, existing: dict | None) -> Instance:
        created_now = False
        if existing is None:
            try:
                container = self.api.create(node, self.spec(node))
                created_now = True
            except ProviderError as err:
                if getattr(err, "status", None) != 409:
                    raise _NodeFailed("cannot create the container: %s" % err) from None
                existing = self.api.inspect(node)  # the name is taken: by whom?
                if existing is None:
                    raise _NodeFailed("cannot create the container: %s" % err) from None
        if existing is not None:
            if not self._ours(existing, node):
                raise _NodeFailed(FOREIGN)
            container = existing["Id"]
            if (existing.get("State") or {}).get("Running") or existing.get("State") == "running":
                return self._instance(node, self.api.inspect(container) or existing)
        try:
            # Before start: munged and slurmd find their files at boot; the key travels only in this request body.
            self.api.put_archive(container, "/", node_files(key, self.munge_uid, self.munge_gid, self.options["conf_server"], node))
            self.api.start(container)
            info = self.api.inspect(container)
        except ProviderError as err:
            if created_now:
                try:
                    self.api.remove(container)  # leave no half-made machine behind
                except ProviderError:
                    pass  # the reconciler's leaked-machine rule gets it
            raise _NodeFailed("cannot start the container: %s" % err) from None
        if info is None:
            raise _NodeFailed("the container vanished right after it started")
        return self._instance(node, info)

    def _ours_by_node(self) -> dict[str, dict]:
        out = {}
        for container in self.api.containers(["%s=%s" % (names.LABEL_CLUSTER, self.cluster)]):
            node = (container.get("Labels") or {}).get(names.LABEL_NODE)
            if node:
                out[node] = container
        return out

    def _each(self, nodes: Sequence[str], work) -> dict[str, object]:
        """node -> work(node) result or the _NodeFailed/ProviderError it raised; ``parallel`` at a time."""
        results: dict[str, object] = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=min(self.parallel, max(1, len(nodes)))) as pool:
            futures = {pool.submit(work, node): node for node in nodes}
            for future in concurrent.futures.as_completed(futures):
                node = futures[future]
                try:
                    results[node] = future.result()
                except (_NodeFailed, ProviderError) as err:
                    results[node] = err
        return results

    # -- the Provider interface ------------------------------------------------
    def resume(self, nodes: Sequence[str]) -> ResumeResult:
        result = ResumeResult()
        if not nodes:
            return result
        try:
            key = self.secrets.munge_key()
        except OSError as err:
            why = "cannot read the munge key file %s: %s" % (self.secrets.munge_key_file, err.strerror)
            return ResumeResult(failed=dict.fromkeys(nodes, why))
        try:
            ours = self._ours_by_node()
        except ProviderError as err:
            return ResumeResult(failed={n: str(err) for n in nodes})

        def one(node: str) -> Instance:
            existing = ours.get(node)
            # The list entry has no full State; inspect only the containers we already have.
            return self._resume_one(node, key, self.api.inspect(existing["Id"]) if existing else None)

        for node, outcome in self._each(nodes, one).items():
            if isinstance(outcome, Instance):
                result.started[node] = outcome
            else:
                result.failed[node] = str(outcome)
        return result

    def suspend(self, nodes: Sequence[str]) -> SuspendResult:
        result = SuspendResult()
        if not nodes:
            return result
        try:
            ours = self._ours_by_node()
        except ProviderError as err:
            return SuspendResult(failed={n: str(err) for n in nodes})

        def one(node: str) -> bool:
            container = ours.get(node)
            if container is not None:
                self.api.remove(container["Id"])  # 404: already gone
            return True  # no container of ours (a foreign one of that name is not this node's machine)

        for node, outcome in self._each(nodes, one).items():
            if outcome is True:
                result.stopped.append(node)
            else:
                result.failed[node] = str(outcome)
        result.stopped.sort()
        return result

    def instances(self) -> dict[str, Instance]:
        return {node: self._instance(node, container) for node, container in self._ours_by_node().items()}
