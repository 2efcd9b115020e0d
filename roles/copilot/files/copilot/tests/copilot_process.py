"""The copilot daemon as a real process, between a Kubernetes API server double and a fake slurmrestd.

For fault tests and benchmarks that need the shipped entry point
(``python -m hybridhpc_copilot --config FILE``) talking HTTP, not the loop
classes called in-process. Three parts, each a context manager, and
:class:`CopilotHarness` that starts all three::

    from copilot_process import CopilotHarness

    with CopilotHarness(tmp_path, nodes={"c1": (4, 8000)}) as harness:
        harness.share("k8s-c1", "c1", pods=["p1"])        # GenericNode + Node + pods
        harness.copilot.start()                           # waits for the "ready" log line
        harness.kube.add_admission("k8s-c1", "a1", "p1", cpu="2", memory="2Gi")
        harness.kube.wait_for_admission("k8s-c1", "a1", "Granted")
        harness.slurm.counts("c1")                        # (2, 5952): k8scpu, k8smemory
        harness.copilot.kill()                            # SIGKILL; start() again resumes
        harness.slurm.restart()                           # same port, Slurm's state kept

* :class:`KubeDouble`: ``tests/k8s_double`` with the GenericNode CRD, in this
  process (``in_process=True``, the default: fault injection, held requests
  and paused watches need it) or as a ``python -m k8s_double`` process.
  Helpers speak HTTP to it, so they work the same in both modes.
* :class:`FakeSlurmrestdProcess`: ``tests/fakes/slurmrestd.py`` at the
  collection's root (the tests' one slurmrestd) in a process of its own,
  with what fault tests need: Slurm's state kept in a file across restarts
  (slurmctld keeps it when slurmrestd restarts), requests held before or
  after Slurm applies them, requests answered with a Slurm error, a clock
  skew for the token check, and an audit of every request with its token's
  expiry, the answer and its size.
* :class:`CopilotProcess`: writes the config file (token from a JWT key,
  short poll and watch intervals, no metrics endpoint unless asked) and runs
  the daemon; its JSON log lines go to a file per start, read back with
  :meth:`CopilotProcess.logs`.

Everything listens on 127.0.0.1 and every wait has a timeout. The copilot's
``_vendor`` modules must exist (``tools/vendor.sh``; the tests' conftest runs
it). ``HYBRIDHPC_COPILOT_SRC`` runs the daemon from another source tree (for
example a deliberately broken copy, to see a test fail).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import pathlib
import re
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import Callable

import httpx

from k8s_double.patches import json_copy

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE = HERE.parent
COLLECTION = PACKAGE.parents[3]
CRD_FILE = PACKAGE / "crd" / "genericnodes.kai.alibabacloud.com.yaml"

GROUP, VERSION, PLURAL = "kai.alibabacloud.com", "v1alpha1", "genericnodes"
GENERICNODES_PATH = "/apis/%s/%s/%s" % (GROUP, VERSION, PLURAL)
LABEL_CLUSTER_NAME = "kai.alibabacloud.com/cluster-name"
DEFAULT_CLUSTER = "onprem"
START_TIMEOUT = 20.0


def copilot_src() -> pathlib.Path:
    return pathlib.Path(os.environ.get("HYBRIDHPC_COPILOT_SRC") or PACKAGE / "src")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (for the metrics endpoint)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate: Callable, timeout: float, interval: float = 0.02, what: str = "condition"):
    """Poll ``predicate`` until it returns something truthy (returned); AssertionError after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %gs waiting for %s" % (timeout, what))
        time.sleep(interval)


def _first_line(process: subprocess.Popen, what: str, timeout: float) -> str:
    """The first stdout line of a process that announces where it listens."""
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            process.kill()
            raise RuntimeError("%s did not start within %gs" % (what, timeout))
    line = process.stdout.readline().strip()
    if not line:
        process.wait(5)
        raise RuntimeError("%s exited with %s before listening" % (what, process.returncode))
    return line


def _stop(process: subprocess.Popen | None, timeout: float = 10.0, sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` (SIGKILL after ``timeout``), reap the process and close our end of its stdout."""
    if process is None:
        return
    if process.poll() is None:
        process.send_signal(sig)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)
    if process.stdout is not None:
        process.stdout.close()


# -- Kubernetes ---------------------------------------------------------------------------------


class KubeRequestError(Exception):
    def __init__(self, status: int, body: str):
        super().__init__("HTTP %d: %s" % (status, body[:500]))
        self.status = status


class KubeHold:
    """A request held at the in-process API server until :meth:`release`.

    ``arrived`` is set once a matching request is waiting. ``release(apply=True)``
    lets it through; ``apply=False`` answers it with 503 instead, so the write
    never lands (what a writer killed before its request arrived leaves behind).
    """

    def __init__(self, method: str, path: str, when: Callable | None, timeout: float):
        self.method, self.path, self.when, self.timeout = method, re.compile(path), when, timeout
        self.arrived = threading.Event()
        self._released = threading.Event()
        self._apply = True
        self.used = False

    def matches(self, method: str, path: str) -> bool:
        return not self.used and method == self.method and self.path.search(path) is not None and (self.when is None or self.when())

    def claim(self) -> bool:
        if self.used:
            return False
        self.used = True
        return True

    def run(self, _method: str, _path: str):
        """In the request's handler thread: wait for :meth:`release`; the status to answer instead, if any."""
        self.arrived.set()
        self._released.wait(self.timeout)
        return None if self._apply else 503

    def wait_arrived(self, timeout: float = 10.0) -> None:
        if not self.arrived.wait(timeout):
            raise AssertionError("no %s %s arrived within %gs" % (self.method, self.path.pattern, timeout))

    def release(self, apply: bool = True) -> None:
        self._apply = apply
        self._released.set()


class _Intercept:
    """``method`` None: any; ``count`` None: every matching request."""

    def __init__(self, method: str | None, path: str, callback: Callable, count: int | None):
        self.method, self.path, self.callback, self.count = method, re.compile(path), callback, count

    def matches(self, method: str, path: str) -> bool:
        return (self.count is None or self.count > 0) and self.method in (None, method) and self.path.search(path) is not None

    def claim(self) -> bool:
        if self.count is None:
            return True
        if self.count <= 0:
            return False
        self.count -= 1
        return True

    def run(self, method: str, path: str):
        return self.callback(method, path)


@functools.cache
def _intercepting_server_class():
    from k8s_double import ApiServer, Fault

    class InterceptingApiServer(ApiServer):
        """The double, plus hooks that run before a matching request is served (in its handler thread)."""

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.hooks: list = []

        def _fault_for(self, method, path):
            with self._lock:
                hooks = list(self.hooks)
            chosen = []
            for hook in hooks:
                if hook.matches(method, path):  # may run the test's code, which may call this server: not under _lock
                    with self._lock:
                        if hook.claim():
                            chosen.append(hook)
            for hook in chosen:
                status = hook.run(method, path)
                if status:
                    return Fault(status, method, count=0, reason="ServiceUnavailable")
            return super()._fault_for(method, path)

    return InterceptingApiServer


@functools.cache
def _crd() -> dict:
    import yaml

    return yaml.safe_load(CRD_FILE.read_text())


@functools.cache
def _memory_configuration(kubeconfig: str):
    """The kubernetes package's configuration loaded from a kubeconfig (the same for every server in memory)."""
    import yaml
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config_from_dict(yaml.safe_load(kubeconfig), client_configuration=configuration)
    # The hook re-reads the kubeconfig's credentials before every request (for expiring ones): this
    # token never expires, and the re-read (it sets the host, which scans the environment for proxies)
    # would cost the property test more than the requests themselves.
    configuration.refresh_api_key_hook = None
    return configuration


class KubeDouble:
    """The API server double with the GenericNode CRD, and a scheduler's helpers over HTTP.

    ``in_process=True`` serves it from a thread of this process (``server`` is
    the ``k8s_double.ApiServer``: :meth:`inject`, :meth:`hold`,
    :meth:`intercept`, :meth:`paused_watches` and the ``*_in_process``
    helpers need it); ``False`` runs ``python -m k8s_double`` (lighter on this
    process's GIL for benchmarks). ``listen=False`` (in process only): no
    socket and no thread, every request served in the caller's thread through
    ``k8s_double.memory`` (watches end once they have sent what happened):
    for tests that run the copilot's loop classes themselves, thousands of
    times. ``window``: watch events kept per kind (older resourceVersions get
    410 Gone).
    """

    def __init__(self, workdir: pathlib.Path | None = None, in_process: bool = True, window: int = 1000, token: str = "harness-token",
                 bookmark_interval: float = 1.0, listen: bool = True):
        if not (listen or in_process):
            raise ValueError("a double without a socket runs in this process")
        self.workdir = pathlib.Path(workdir) if workdir is not None else None
        self.in_process, self.window, self.token, self.bookmark_interval = in_process, window, token, bookmark_interval
        self.listen = listen
        self.kubeconfig = str(self.workdir / "kubeconfig") if self.workdir is not None else ""
        self.server = None
        self.process: subprocess.Popen | None = None
        self.url = ""
        self._http: httpx.Client | None = None

    # -- life cycle ------------------------------------------------------------------------
    def start(self) -> KubeDouble:
        if self.in_process:
            self.server = _intercepting_server_class()(token=self.token, window=self.window, bookmark_interval=self.bookmark_interval,
                                                      listen=self.listen)
            self.server.load([_crd()])
            self.server.start()
            self.url = self.server.url
            if not self.listen:
                from k8s_double import memory

                self._http = httpx.Client(base_url=self.url, headers={"Authorization": "Bearer " + self.token},
                                          transport=memory.transport(self.server))
                return self
            pathlib.Path(self.kubeconfig).write_text(self.server.kubeconfig())
        else:
            env = dict(os.environ, PYTHONPATH=str(COLLECTION / "tests"))
            with open(self.workdir / "k8s_double.log", "wb") as log:
                self.process = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "k8s_double",
                        "--port",
                        "0",
                        "--token",
                        self.token,
                        "--window",
                        str(self.window),
                        "--kubeconfig-out",
                        self.kubeconfig,
                        "--load",
                        str(CRD_FILE),
                    ],
                    stdout=subprocess.PIPE,
                    stderr=log,
                    text=True,
                    env=env,
                )
            self.url = _first_line(self.process, "k8s_double", START_TIMEOUT).rsplit(" ", 1)[-1]
        self._http = httpx.Client(base_url=self.url, headers={"Authorization": "Bearer " + self.token}, timeout=10)
        return self

    def stop(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None
        if self.server is not None:
            for hook in list(self.server.hooks):
                if isinstance(hook, KubeHold):
                    hook.release(apply=False)
            self.server.stop()
            self.server = None
        _stop(self.process)
        self.process = None

    def __enter__(self) -> KubeDouble:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def client(self):
        """The copilot's own Kubernetes client (``KubeClient``), configured from this double's kubeconfig."""
        from hybridhpc_copilot.kube import KubeClient

        if self.listen:
            return KubeClient(kubeconfig=self.kubeconfig)
        from k8s_double import memory

        return KubeClient(configuration=_memory_configuration(self._in_process().kubeconfig()),
                          pool=memory.pool_manager(self.server))

    # -- plain API calls -------------------------------------------------------------------
    def request(self, method: str, path: str, body=None, content_type: str = "application/json"):
        data = None if body is None else json.dumps(body)
        response = self._http.request(method, path, content=data, headers={"Content-Type": content_type})
        if response.status_code >= 400:
            raise KubeRequestError(response.status_code, response.text)
        return response.json()

    def create(self, obj: dict) -> dict:
        kind, meta = obj["kind"], obj.setdefault("metadata", {})
        if kind == "GenericNode":
            path = GENERICNODES_PATH
        elif kind == "Pod":
            path = "/api/v1/namespaces/%s/pods" % meta.setdefault("namespace", "default")
        else:
            path = "/api/v1/%ss" % kind.lower()
        return self.request("POST", path, obj)

    def generic_node(self, name: str) -> dict:
        return self.request("GET", "%s/%s" % (GENERICNODES_PATH, name))

    def update_generic_node(self, name: str, change: Callable, attempts: int = 20) -> dict:
        """GET, ``change(obj)`` in place, PUT with its resourceVersion; again on 409, like any careful writer."""
        for _ in range(attempts):
            obj = self.generic_node(name)
            change(obj)
            try:
                return self.request("PUT", "%s/%s" % (GENERICNODES_PATH, name), obj)
            except KubeRequestError as err:
                if err.status != 409:
                    raise
        raise AssertionError("GenericNode %s kept changing under %d updates" % (name, attempts))

    # -- the scheduler's side ----------------------------------------------------------------
    def add_shared_node(self, name: str, alias: str, cluster: str = DEFAULT_CLUSTER) -> None:
        """A GenericNode sharing Slurm node ``alias``, and its Kubernetes Node."""
        self.create(
            {
                "apiVersion": "%s/%s" % (GROUP, VERSION),
                "kind": "GenericNode",
                "metadata": {"name": name, "labels": {LABEL_CLUSTER_NAME: cluster}},
                "spec": {"type": "Slurm", "alias": alias, "admissions": []},
            }
        )
        self.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}})

    def set_unschedulable(self, name: str, value: bool) -> dict:
        """Cordon (``True``) or uncordon a Kubernetes Node, as ``kubectl cordon`` does."""
        path = "/api/v1/nodes/%s" % name
        return self.request("PATCH", path, {"spec": {"unschedulable": value}}, "application/merge-patch+json")

    def create_pod(self, name: str, namespace: str = "default") -> dict:
        return self.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"containers": [{"name": "main", "image": "busybox"}]},
            }
        )

    def delete_pod(self, name: str, namespace: str = "default") -> None:
        self.request("DELETE", "/api/v1/namespaces/%s/pods/%s" % (namespace, name))

    def add_admission(self, node: str, uid: str, pod: str, cpu="1", memory="1Gi", namespace: str = "default") -> dict:
        entry = {"uid": uid, "pod": {"namespace": namespace, "name": pod}, "request": {"cpu": cpu, "memory": memory}}
        return self.update_generic_node(node, lambda obj: obj["spec"].setdefault("admissions", []).append(entry))

    def remove_admission(self, node: str, uid: str) -> dict:
        def drop(obj):
            obj["spec"]["admissions"] = [a for a in obj["spec"].get("admissions") or [] if a.get("uid") != uid]

        return self.update_generic_node(node, drop)

    def ledger(self, node: str) -> dict:
        """``status.admissions`` of a GenericNode (uid -> entry)."""
        return dict((self.generic_node(node).get("status") or {}).get("admissions") or {})

    def wait_for_admission(self, node: str, uid: str, states, timeout: float = 15.0) -> dict:
        """The ledger entry once its state is ``states`` (a name or several); AssertionError with the ledger after ``timeout``."""
        wanted = (states,) if isinstance(states, str) else tuple(states)
        deadline = time.monotonic() + timeout
        while True:
            ledger = self.ledger(node)
            entry = ledger.get(uid)
            if entry is not None and entry.get("state") in wanted:
                return entry
            if time.monotonic() >= deadline:
                raise AssertionError("admission %s on %s not %s within %gs; ledger: %s" % (uid, node, "/".join(wanted), timeout, json.dumps(ledger)))
            time.sleep(0.02)

    # -- in-process only -------------------------------------------------------------------
    def _in_process(self):
        if self.server is None:
            raise RuntimeError("this needs the in-process API server double (KubeDouble(in_process=True))")
        return self.server

    def inject(self, fault):
        """Answer ``fault.status`` to the next ``fault.count`` matching requests (a ``k8s_double.Fault``)."""
        return self._in_process().inject(fault)

    def hold(self, method: str, path: str, when: Callable | None = None, timeout: float = 30.0) -> KubeHold:
        """Hold the next ``method`` request whose path matches the regex ``path`` (and, if given, while ``when()``)."""
        server = self._in_process()
        hold = KubeHold(method, path, when, timeout)
        with server._lock:
            server.hooks.append(hold)
        return hold

    def intercept(self, method: str | None, path: str, callback: Callable, count: int | None = 1) -> None:
        """Run ``callback(method, path)`` just before each of the next ``count`` matching requests is served
        (``method`` None: any; ``count`` None: every one).

        The request is served after the callback, so a write the callback makes
        lands between the copilot's read and its write. A callback returning an
        HTTP status answers the request with it instead.
        """
        server = self._in_process()
        with server._lock:
            server.hooks.append(_Intercept(method, path, callback, count))

    @contextlib.contextmanager
    def paused_watches(self):
        """Hold the double's state lock: watches see nothing until the block ends, then all of it at once."""
        with self._in_process().state.lock:
            yield

    def _type(self, plural: str):
        return self._in_process().state.types[(GROUP if plural == PLURAL else "", plural)]

    def add_in_process(self, obj: dict) -> dict:
        """Create an object straight in the double's state, and then its status if it has one (as its
        controller or kubelet would write it: a create leaves a custom resource's status out)."""
        server = self._in_process()
        created = server.load([obj])[0]
        if "status" in obj and created.get("status") != obj["status"]:
            meta = created["metadata"]
            created = self.update_in_process(meta["name"], lambda new: new.update(status=json_copy(obj["status"])),
                                             plural=self._type_of(created).plural, namespace=meta.get("namespace"),
                                             subresource="status")
        return created

    def _type_of(self, obj: dict):
        return next(t for t in self._in_process().state.types.values()
                    if t.kind == obj["kind"] and t.api_version() == obj["apiVersion"])

    def update_in_process(self, name: str, change: Callable, plural: str = PLURAL, namespace: str | None = None,
                          subresource: str = "") -> dict:
        """Change an object (a GenericNode unless ``plural`` says) straight in the double's state, at the
        resourceVersion read (usable inside :meth:`paused_watches` and hooks)."""
        state, rtype = self._in_process().state, self._type(plural)
        with state.lock:
            obj = json_copy(state.get(rtype, namespace, name))
            change(obj)
            return state.update(rtype, namespace, name, obj, subresource=subresource)

    def delete_in_process(self, name: str, plural: str = PLURAL, namespace: str | None = None) -> None:
        """Delete an object straight in the double's state (finalizers hold it, as they would)."""
        self._in_process().state.delete(self._type(plural), namespace, name)

    def peek(self, name: str, plural: str = PLURAL, namespace: str | None = None) -> dict | None:
        """An object read straight from the double's state, or None (cheap; for hooks and checks). Do not change it."""
        state = self._in_process().state
        with state.lock:
            return state.objects[self._type(plural).key].get((namespace or "", name))

    def compact(self) -> None:
        """The double forgets every watch event: a watch from an older resourceVersion gets 410 Gone."""
        self._in_process().state.compact()

    def requests_seen(self) -> list[tuple[str, str]]:
        """(method, path) of the requests the double served, oldest first (the last thousand)."""
        return [(method, path) for method, path, _query in self._in_process().requests]

    def peek_generic_node(self, name: str) -> dict:
        """A GenericNode read straight from the double's state (cheap; for hooks and samplers). Do not change it."""
        obj = self.peek(name)
        if obj is None:
            raise KeyError("no GenericNode %s" % name)
        return obj

    def peek_ledger(self, name: str) -> dict:
        return dict((self.peek_generic_node(name).get("status") or {}).get("admissions") or {})


# -- Slurm --------------------------------------------------------------------------------------


class FakeSlurmrestdProcess:
    """``tests/fakes/slurmrestd.py`` (the collection's) as a process, killable and restartable on the same port.

    ``nodes``: Slurm node -> (k8scpu, k8smemory) configured counts. With
    ``jwt_key`` tokens are checked (HS256, ``exp``). Slurm's state (GRES
    counts, jobs, drains) lives in ``state_file``: :meth:`restart` keeps it
    (a slurmrestd restart), ``restart(keep_state=False)`` starts from
    slurm.conf's counts again (a slurmctld restart that reverted the GRES).
    """

    def __init__(self, workdir: pathlib.Path, nodes: dict, jwt_key: pathlib.Path | None = None, port: int = 0, foreign_jobs: int = 0):
        self.workdir = pathlib.Path(workdir)
        self.nodes, self.jwt_key, self.port, self.foreign_jobs = dict(nodes), jwt_key, port, foreign_jobs
        self.state_file = self.workdir / "slurm-state.json"
        self.audit_file = self.workdir / "slurm-audit.jsonl"
        self.process: subprocess.Popen | None = None
        self.starts = 0
        self._http = httpx.Client(timeout=10)

    @property
    def url(self) -> str:
        return "http://127.0.0.1:%d" % self.port

    def start(self) -> FakeSlurmrestdProcess:
        self.starts += 1
        args = [
            sys.executable,
            str(COLLECTION / "tests" / "fakes" / "slurmrestd.py"),
            "--port",
            str(self.port),
            "--state-file",
            str(self.state_file),
            "--audit-file",
            str(self.audit_file),
        ]
        for name, (cpus, memory) in self.nodes.items():
            args += ["--node", "%s:%d:%d" % (name, cpus, memory)]
        if self.jwt_key is not None:
            args += ["--jwt-key", str(self.jwt_key)]
        if self.foreign_jobs:
            args += ["--foreign-jobs", str(self.foreign_jobs)]
        # The fake imports nothing of the copilot: HYBRIDHPC_COPILOT_SRC changes the daemon under test, never the reference.
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        with open(self.workdir / ("slurmrestd-%d.log" % self.starts), "wb") as log:
            self.process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, env=env, text=True)
        url = _first_line(self.process, "fake slurmrestd", START_TIMEOUT).rsplit(" ", 1)[-1]
        self.port = int(url.rsplit(":", 1)[1])
        return self

    def kill(self) -> None:
        """SIGKILL: slurmrestd dies; Slurm's state stays in the state file."""
        _stop(self.process, sig=signal.SIGKILL)

    def stop(self) -> None:
        _stop(self.process)

    def restart(self, keep_state: bool = True) -> None:
        self.kill()
        if not keep_state:
            self.state_file.unlink(missing_ok=True)
        self.start()

    def close(self) -> None:
        self.stop()
        self._http.close()

    def __enter__(self) -> FakeSlurmrestdProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- looking at Slurm ------------------------------------------------------------------
    def _fake(self, method: str, what: str, body=None):
        response = self._http.request(method, self.url + "/fake/" + what, json=body)
        response.raise_for_status()
        return response.json()

    def state(self) -> dict:
        """Every node: ``gres``, ``k8scpu``/``k8smemory`` counts, ``configured``, ``used`` ([cpus, mb]), ``jobs``, ``states``; and ``violations``."""
        return self._fake("GET", "state")

    def node(self, name: str) -> dict:
        return self.state()["nodes"][name]

    def counts(self, name: str) -> tuple[int, int]:
        """The node's current k8scpu and k8smemory counts."""
        node = self.node(name)
        return node["k8scpu"], node["k8smemory"]

    # -- what happens in Slurm without the copilot ------------------------------------------
    def start_job(self, node: str, cpus: int, memory_mb: int) -> int | None:
        response = self._http.post(self.url + "/fake/job", json={"node": node, "cpus": cpus, "memory": memory_mb})
        return response.json().get("job_id") if response.status_code == 200 else None

    def end_job(self, node: str, job: int) -> None:
        self._fake("POST", "end_job", {"node": node, "job": job})

    def reconfigure(self) -> None:
        """``scontrol reconfigure``: GRES back at slurm.conf's counts, deleted nodes back from slurm.conf."""
        self._fake("POST", "reconfigure", {})

    def delete_node(self, node: str) -> None:
        """``scontrol delete nodename=NODE``: slurmrestd no longer lists it (until :meth:`reconfigure`)."""
        self._fake("POST", "delete_node", {"node": node})

    def drain(self, node: str, reason: str) -> None:
        """An admin's ``scontrol update nodename=NODE state=DRAIN reason=...``."""
        self._fake("POST", "drain", {"node": node, "reason": reason})

    # -- faults ----------------------------------------------------------------------------
    def hold(self, method: str, path: str, phase: str = "before", count: int = 1) -> None:
        """Hold the next ``count`` Slurm API requests matching (``path`` a regex) until :meth:`release`.

        ``phase="before"``: before Slurm applies them; ``"after"``: applied,
        the answer not yet sent.
        """
        self._fake("POST", "hold", {"method": method, "path": path, "phase": phase, "count": count})

    def held(self) -> list:
        return self._fake("GET", "held")["held"]

    def wait_held(self, count: int = 1, timeout: float = 10.0) -> list:
        def enough():
            held = self.held()
            return held if len(held) >= count else None

        return wait_until(enough, timeout, what="%d held slurmrestd request(s)" % count)

    def release(self, apply: bool = True) -> None:
        """Let held requests go (and drop unused holds and failure rules). ``apply=False``: close them
        unanswered, and a request held before Slurm applied it never is."""
        self._fake("POST", "release", {"apply": apply})

    def fail(self, method: str, path: str, error: str, number: int = 0, status: int = 500, count: int = 1) -> None:
        """Answer the next ``count`` Slurm API requests matching (``path`` a regex) with Slurm's error ``error``
        (``number``: its slurm_errno), unapplied, as slurmrestd answers a request slurmctld refused."""
        self._fake("POST", "fail", {"method": method, "path": path, "error": error, "number": number, "status": status, "count": count})

    def set_clock_skew(self, seconds: float) -> None:
        """Check token expiry against a clock ``seconds`` ahead (tokens expire that much sooner)."""
        self._fake("POST", "clock", {"skew": seconds})

    def audit(self) -> list:
        """Every Slurm API request since the first start, restarts included: ``method``, ``path``,
        ``status`` (None: dropped unanswered), ``bytes`` (of the answer's body), ``exp`` (the token's),
        ``now`` (the token check's clock), ``token`` (its last characters), ``t`` (when it arrived)."""
        if not self.audit_file.exists():
            return []
        return [json.loads(line) for line in self.audit_file.read_text().splitlines() if line.endswith("}")]


# -- the copilot ---------------------------------------------------------------------------------


class CopilotProcess:
    """The daemon: ``python -m hybridhpc_copilot --config FILE``.

    ``settings`` go into the config file over the harness defaults (nested
    mappings merged one level deep). Each :meth:`start` logs to its own file
    (``copilot-N.log``).
    """

    def __init__(
        self,
        workdir: pathlib.Path,
        kubeconfig: str,
        slurm_url: str,
        jwt_key: pathlib.Path,
        nodes: dict,
        cluster: str = DEFAULT_CLUSTER,
        settings: dict | None = None,
    ):
        self.workdir = pathlib.Path(workdir)
        self.config_file = self.workdir / "copilot.yaml"
        config = {
            "cluster_name": cluster,
            "kubeconfig": kubeconfig,
            "slurmrestd": {"url": slurm_url, "user": "slurm", "timeout": 5},
            "token": {"source": "key", "jwt_key_file": str(jwt_key), "lifespan": 300},
            "nodes": {name: {"k8scpu": cpus, "k8smemory": memory} for name, (cpus, memory) in nodes.items()},
            "resync_interval": 30,
            "slurm_poll_interval": 0.2,
            "watch_timeout": 30,
            "reservation_timeout": 60,
            "metrics": {"address": "127.0.0.1", "port": 0},
            "log_level": "info",
        }
        for key, value in (settings or {}).items():
            config[key] = dict(config[key], **value) if isinstance(value, dict) and isinstance(config.get(key), dict) else value
        self.config = config
        self.config_file.write_text(json.dumps(config, indent=2))
        self.process: subprocess.Popen | None = None
        self.starts = 0

    @property
    def log_file(self) -> pathlib.Path:
        return self.workdir / ("copilot-%d.log" % self.starts)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, wait_ready: bool = True, timeout: float = START_TIMEOUT) -> CopilotProcess:
        if self.running:
            raise RuntimeError("the copilot is already running")
        self.starts += 1
        env = dict(os.environ, PYTHONPATH=str(copilot_src()), HYBRIDHPC_COPILOT_CONFIG="")
        env.pop("NOTIFY_SOCKET", None)
        with open(self.log_file, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "hybridhpc_copilot", "--config", str(self.config_file)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
                env=env,
            )
        if wait_ready:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        """Until this start logged "ready" (its first full sync is done)."""
        with open(self.log_file, "rb") as log:
            pending = b""

            def ready():
                nonlocal pending
                if self.process.poll() is not None:
                    raise AssertionError("the copilot exited with %s:\n%s" % (self.process.returncode, self.log_file.read_text()))
                pending += log.read()
                *lines, pending = pending.split(b"\n")
                return any(b'"ready"' in line and json.loads(line).get("msg") == "ready" for line in lines)

            wait_until(ready, timeout, 0.05, "the copilot's first sync")

    def kill(self) -> None:
        """SIGKILL: no cleanup, no last write (a crash, an OOM kill, a power cut)."""
        _stop(self.process, sig=signal.SIGKILL)

    def terminate(self, timeout: float = 10.0) -> int:
        """SIGTERM and wait: the daemon's orderly stop; returns its exit code."""
        if self.running:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout)
                raise AssertionError("the copilot did not stop within %gs of SIGTERM" % timeout) from None
        return self.process.returncode if self.process is not None else 0

    def metrics(self) -> str:
        """The /metrics text (configure a port first: ``settings={"metrics": {"port": free_port()}}``)."""
        port = self.config["metrics"]["port"]
        if not port:
            raise RuntimeError("the copilot serves no metrics: metrics.port is 0")
        return httpx.get("http://127.0.0.1:%d/metrics" % port, timeout=5).text

    def once(self, dry_run: bool = True, timeout: float = 30.0) -> dict:
        """``--once [--dry-run]`` with the same config: one full sync; its JSON summary (``actions``, ``errors``, ...)
        and ``returncode``. With ``dry_run`` the actions are what a copilot starting now would do."""
        env = dict(os.environ, PYTHONPATH=str(copilot_src()), HYBRIDHPC_COPILOT_CONFIG="")
        args = [sys.executable, "-m", "hybridhpc_copilot", "--config", str(self.config_file), "--once"]
        done = subprocess.run(args + (["--dry-run"] if dry_run else []), capture_output=True, text=True, env=env, timeout=timeout, stdin=subprocess.DEVNULL)
        try:
            summary = json.loads(done.stdout)
        except ValueError:
            raise AssertionError("copilot --once printed no summary (exit %d):\n%s" % (done.returncode, done.stderr)) from None
        return dict(summary, returncode=done.returncode)

    def logs(self, start: int | None = None) -> list[dict]:
        """The JSON log lines of one start (1, 2, ...), or of every start."""
        entries = []
        for number in [start] if start else range(1, self.starts + 1):
            path = self.workdir / ("copilot-%d.log" % number)
            if not path.exists():
                continue
            for line in path.read_text(errors="replace").splitlines():
                try:
                    entries.append(json.loads(line))
                except ValueError:
                    entries.append({"msg": line, "level": "raw"})
        return entries

    def __enter__(self) -> CopilotProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.kill()


# -- all three -----------------------------------------------------------------------------------


class CopilotHarness:
    """The API server double, a fake slurmrestd process and a copilot process (not started) in ``workdir``.

    ``nodes``: Slurm node -> (k8scpu, k8smemory), both in Slurm and in the
    copilot's config. ``copilot_settings`` go over the config defaults (see
    :class:`CopilotProcess`); ``foreign_jobs``: other users' jobs slurmrestd
    lists (see :class:`FakeSlurmrestdProcess`). Leaving the ``with`` block
    stops everything.
    """

    def __init__(
        self,
        workdir,
        nodes: dict | None = None,
        kube_in_process: bool = True,
        kube_window: int = 1000,
        cluster: str = DEFAULT_CLUSTER,
        copilot_settings: dict | None = None,
        foreign_jobs: int = 0,
    ):
        self.workdir = pathlib.Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.nodes = dict(nodes or {"c1": (4, 8000)})
        self.cluster = cluster
        self.jwt_key = self.workdir / "jwt_hs256.key"
        self.jwt_key.write_bytes(os.urandom(32))
        self.kube = KubeDouble(self.workdir, kube_in_process, kube_window)
        self.slurm = FakeSlurmrestdProcess(self.workdir, self.nodes, self.jwt_key, foreign_jobs=foreign_jobs)
        self._copilot_settings = copilot_settings
        self.copilot: CopilotProcess | None = None

    def __enter__(self) -> CopilotHarness:
        try:
            self.kube.start()
            self.slurm.start()
            self.copilot = CopilotProcess(self.workdir, self.kube.kubeconfig, self.slurm.url, self.jwt_key, self.nodes, self.cluster, self._copilot_settings)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc) -> None:
        if self.copilot is not None:
            self.copilot.kill()
        with contextlib.suppress(Exception):
            self.slurm.release(apply=False)  # held handler threads would outlive the test otherwise
        self.slurm.close()
        self.kube.stop()

    def share(self, generic_node: str, slurm_node: str, pods=()) -> None:
        """A GenericNode (in this harness's cluster) sharing ``slurm_node``, its Node, and pods in ``default``."""
        self.kube.add_shared_node(generic_node, slurm_node, self.cluster)
        for pod in pods:
            self.kube.create_pod(pod)
