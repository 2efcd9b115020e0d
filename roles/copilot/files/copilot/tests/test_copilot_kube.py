"""The real Kubernetes interface (the kubernetes package) and the whole copilot, against the API server double."""

from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest
from copilot_builders import CLUSTER, admission, generic_node, parse_exposition, rest_slurm_of
from fakes.slurm_state import FakeNode, FakeSlurm

from hybridhpc_copilot import core, names
from hybridhpc_copilot.kube import GENERICNODES, NODES, PODS, Conflict, Gone, KubeClient, PermanentError, TemporaryError
from hybridhpc_copilot.metrics import Metrics
from hybridhpc_copilot.passes import Copilot
from hybridhpc_copilot.runner import Runner
from hybridhpc_copilot.systemd import Notifier
from k8s_double import Fault


def gn_body(name="k8s-c1", alias="c1", admissions=()):
    obj = generic_node(name, alias, admissions, finalizers=())
    obj["metadata"].pop("resourceVersion")
    return obj


@pytest.fixture
def kube(kubeconfig):
    return KubeClient(kubeconfig)


@pytest.fixture
def world(api_server):
    """A GenericNode, its Kubernetes Node and a pod in the double."""
    api_server.load([
        gn_body(),
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "k8s-c1"}, "spec": {}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "default"},
         "spec": {"containers": [{"name": "c", "image": "x"}]}},
    ])
    return api_server


def add_admission(kube, name, adm):
    for _ in range(5):
        obj = kube.get_object(GENERICNODES, name)
        obj["spec"].setdefault("admissions", []).append(adm)
        try:
            return kube.replace_object(obj)
        except Conflict:
            continue
    raise AssertionError("could not add the admission")


# -- the interface ----------------------------------------------------------------------------


def test_list_get_and_the_label_selector(kube, world):
    world.load([gn_body("k8s-other", "x") | {"metadata": {"name": "k8s-other", "labels": {names.LABEL_CLUSTER_NAME: "elsewhere"}}}])
    items, rv = kube.list_objects(GENERICNODES, "%s=%s" % (names.LABEL_CLUSTER_NAME, CLUSTER))
    assert [i["metadata"]["name"] for i in items] == ["k8s-c1"] and rv.isdigit()
    assert [p["metadata"]["name"] for p in kube.list_objects(PODS)[0]] == ["p1"]
    assert kube.get_object(PODS, "p1", "default")["status"]["phase"] == "Pending"
    assert kube.get_object(PODS, "nope", "default") is None
    assert kube.get_object(GENERICNODES, "nope") is None


def test_lists_are_read_in_chunks_each_kept_before_the_next_and_listed_whole_when_the_token_expires(kubeconfig, world):
    world.load([gn_body("k8s-c%d" % i, "c%d" % i) for i in range(2, 8)])
    kube = KubeClient(kubeconfig, list_chunk=3)
    asked = []

    def keep(obj):
        asked.append(len([r for r in world.requests if r[0] == "GET" and r[1].endswith("/genericnodes")]))
        return {"metadata": {"name": obj["metadata"]["name"]}}

    items, rv = kube.list_objects(GENERICNODES, "%s=%s" % (names.LABEL_CLUSTER_NAME, CLUSTER), keep)
    assert [i["metadata"]["name"] for i in items] == ["k8s-c%d" % i for i in range(1, 8)]
    assert items[0] == {"metadata": {"name": "k8s-c1"}} and rv == str(world.state.rv)
    lists = [q for m, path, q in world.requests if m == "GET" and path.endswith("/genericnodes")]
    assert [q.get("limit") for q in lists] == ["3", "3", "3"] and "continue" in lists[1] and "continue" in lists[2]
    assert asked == [1, 1, 1, 2, 2, 2, 3]  # each chunk kept before the next one was asked for
    assert {q["labelSelector"] for q in lists} == {"%s=%s" % (names.LABEL_CLUSTER_NAME, CLUSTER)}
    # The snapshot went (410 on the next chunk): listed again, whole, with what changed meanwhile.
    real_json = kube._json

    def json_then_compact(what, method, path, query=None, *args, **kwargs):
        answer = real_json(what, method, path, query, *args, **kwargs)
        if query and "continue" not in query and query.get("limit"):
            add_admission(kube, "k8s-c5", admission("a1"))
            world.state.compact()  # the token's snapshot is gone: 410 on the next chunk
        return answer

    kube._json = json_then_compact
    before = len(world.requests)
    items, rv = kube.list_objects(GENERICNODES)
    lists = [q for m, path, q in world.requests[before:] if m == "GET" and path.endswith("/genericnodes")]
    assert [("limit" in q, "continue" in q) for q in lists] == [(True, False), (True, True), (False, False)]
    assert len(items) == 7 and int(rv) == world.state.rv
    assert [i for i in items if i["metadata"]["name"] == "k8s-c5"][0]["spec"]["admissions"][0]["uid"] == "a1"


def test_status_writes_carry_the_resource_version_and_conflict_when_stale(kube, world):
    obj = kube.get_object(GENERICNODES, "k8s-c1")
    written = kube.replace_status(dict(obj, status={names.STATUS_ADMISSIONS: {}}))
    assert written["status"] == {"admissions": {}}
    with pytest.raises(Conflict):
        kube.replace_status(dict(obj, status={names.STATUS_ADMISSIONS: {"x": {"state": "Granted"}}}))


def test_the_crd_rejects_a_ledger_it_does_not_declare(kube, world):
    obj = kube.get_object(GENERICNODES, "k8s-c1")
    with pytest.raises(PermanentError) as err:
        kube.replace_status(dict(obj, status={names.STATUS_ADMISSIONS: {"x": {"state": "Maybe"}}}))
    assert err.value.status == 422


def test_finalizer_writes_and_node_annotations(kube, world):
    obj = kube.get_object(GENERICNODES, "k8s-c1")
    obj["metadata"]["finalizers"] = [names.FINALIZER]
    assert kube.replace_object(obj)["metadata"]["finalizers"] == [names.FINALIZER]
    kube.annotate_node("k8s-c1", names.ANNOTATION_SLURM_DRAIN_REASON, "bad DIMM")
    assert kube.get_object(NODES, "k8s-c1")["metadata"]["annotations"] == {names.ANNOTATION_SLURM_DRAIN_REASON: "bad DIMM"}
    kube.annotate_node("k8s-c1", names.ANNOTATION_SLURM_DRAIN_REASON, None)
    assert not kube.get_object(NODES, "k8s-c1")["metadata"].get("annotations")


def test_watch_events_timeouts_and_410(kube, world):
    _, rv = kube.list_objects(GENERICNODES)
    add_admission(kube, "k8s-c1", admission("a1"))
    events = list(kube.watch_objects(GENERICNODES, rv, timeout_seconds=1))
    assert [(t, o["metadata"]["name"]) for t, o in events if t != "BOOKMARK"] == [("MODIFIED", "k8s-c1")]
    world.state.compact()
    with pytest.raises(Gone):
        list(kube.watch_objects(GENERICNODES, rv, timeout_seconds=1))


def test_errors_are_sorted_into_temporary_and_permanent(kube, world):
    world.inject(Fault(503, "GET", count=1))
    with pytest.raises(TemporaryError):
        kube.list_objects(PODS)
    world.inject(Fault(403, "GET", count=1, reason="Forbidden"))
    with pytest.raises(PermanentError):
        kube.list_objects(PODS)
    world.token = "other"
    with pytest.raises(PermanentError) as err:
        kube.list_objects(PODS)
    assert err.value.status == 401


class _RequestLines:
    """An HTTP server on loopback that notes each request line and answers with an empty object."""

    def __init__(self):
        import http.server

        seen = self.seen = []

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):
                seen.append(self.requestline)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *_args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = "http://127.0.0.1:%d" % self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def request_lines():
    server = _RequestLines()
    yield server
    server.close()


def _configuration(host, proxy=None):
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host, configuration.proxy = host, proxy
    return configuration


def test_requests_keep_the_path_the_servers_url_starts_with(request_lines):
    """An API server behind a gateway (``server: https://gateway/k8s/clusters/c1`` in the kubeconfig)."""
    kube = KubeClient(configuration=_configuration(request_lines.url + "/k8s/clusters/c1"))
    kube.get_object(NODES, "k8s-c1")
    kube.get_object(NODES, "k8s-c2")  # the second over the connection the first left in the pool
    assert request_lines.seen == ["GET /k8s/clusters/c1/api/v1/nodes/k8s-c1 HTTP/1.1",
                                  "GET /k8s/clusters/c1/api/v1/nodes/k8s-c2 HTTP/1.1"]


def test_every_request_goes_through_the_configured_proxy(request_lines):
    """A proxy's manager adds the absolute URL (and its headers) to each request: none goes to the API server itself."""
    kube = KubeClient(configuration=_configuration("http://kube.invalid:6443", proxy=request_lines.url))
    kube.get_object(NODES, "k8s-c1")
    assert request_lines.seen == ["GET http://kube.invalid:6443/api/v1/nodes/k8s-c1 HTTP/1.1"]


def test_the_client_loads_none_of_the_generated_api_classes(kubeconfig):
    """They cost about 23 MB with kubernetes 37, and the copilot reads raw JSON: only the configuration and pool are used."""
    probe = (
        "import sys, kubernetes.client\n"
        "eager = 'kubernetes.client.api.core_v1_api' in sys.modules\n"  # releases before 31 import every API at once
        "from hybridhpc_copilot.kube import KubeClient, NODES\n"
        "KubeClient(sys.argv[1]).list_objects(NODES)\n"
        "print(eager, sorted(m for m in sys.modules if m.startswith('kubernetes.client.api.')))\n"
    )
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", probe, kubeconfig], capture_output=True, text=True, env=env, check=True).stdout.split(" ", 1)
    if out[0] == "True":
        pytest.skip("this kubernetes package imports every API class with kubernetes.client")
    assert out[1].strip() == "[]"


def test_a_missing_crd_is_a_permanent_error_that_says_what_to_install(kubeconfig, api_server):
    api_server.state.delete(api_server.state.types[("apiextensions.k8s.io", "customresourcedefinitions")], None, names.CRD_NAME)
    with pytest.raises(PermanentError) as err:
        KubeClient(kubeconfig).list_objects(GENERICNODES)
    assert "is the genericnodes.kai.alibabacloud.com CRD installed?" in str(err.value)


def test_secrets_are_read(kube, world):
    world.load([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": names.JWT_SECRET_NAMESPACE}},
                {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": names.JWT_SECRET_NAME, "namespace": names.JWT_SECRET_NAMESPACE},
                 "data": {CLUSTER: base64.b64encode(b"a.b.c").decode()}}])
    assert kube.read_secret(names.JWT_SECRET_NAMESPACE, names.JWT_SECRET_NAME)["data"][CLUSTER]
    assert kube.read_secret("default", "missing") is None


# -- the copilot, end to end ----------------------------------------------------------------------


def settings():
    return core.Settings(configured={"c1": core.Capacity(4, 8000)})


def test_a_pass_grants_an_admission_through_the_real_api_and_the_crd_accepts_the_ledger(kube, world):
    slurm = FakeSlurm([FakeNode("c1", 4, 8000)])
    add_admission(kube, "k8s-c1", admission("a1", cpu="2735m", memory="3417Mi"))
    result = Copilot(kube, rest_slurm_of(slurm), settings(), CLUSTER).sync(full=True)
    assert result.ok, result.errors
    status = kube.get_object(GENERICNODES, "k8s-c1")["status"]
    assert status["admissions"]["a1"]["state"] == names.GRANTED
    assert status["allocatedResources"] == [{"allocated": {"cpu": "0", "memory": "0"}, "type": "Slurm"},
                                            {"allocated": {"cpu": "2735m", "memory": "3417Mi"}, "type": "Kubernetes"}]
    assert slurm.nodes["c1"].gres == "k8scpu:1,k8smemory:4583"
    assert kube.get_object(GENERICNODES, "k8s-c1")["metadata"]["finalizers"] == [names.FINALIZER]
    # The pod goes away: the next pass releases the admission and gives the GRES back.
    world.state.delete(world.state.types[("", "pods")], "default", "p1")
    assert Copilot(kube, rest_slurm_of(slurm), settings(), CLUSTER).sync(full=True).ok
    assert kube.get_object(GENERICNODES, "k8s-c1")["status"]["admissions"]["a1"]["state"] == names.RELEASED
    assert slurm.nodes["c1"].gres == "k8scpu:4,k8smemory:8000"


def test_a_dry_run_changes_nothing(kube, world):
    slurm = FakeSlurm([FakeNode("c1", 4, 8000)])
    add_admission(kube, "k8s-c1", admission("a1"))
    before = kube.get_object(GENERICNODES, "k8s-c1")
    result = Copilot(kube, rest_slurm_of(slurm), settings(), CLUSTER, dry_run=True).sync(full=True)
    assert {a.kind for a in result.actions} >= {"ReserveAdmission", "WriteStatus", "SetGres", "AddFinalizer"}
    assert kube.get_object(GENERICNODES, "k8s-c1") == before
    assert slurm.nodes["c1"].gres == "k8scpu:4,k8smemory:8000"


def test_a_conflicting_writer_makes_the_copilot_reread_and_decide_again(kube, world):
    slurm = FakeSlurm([FakeNode("c1", 4, 8000)])
    add_admission(kube, "k8s-c1", admission("a1"))
    copilot = Copilot(kube, rest_slurm_of(slurm), settings(), CLUSTER)
    copilot.relist()
    add_admission(kube, "k8s-c1", admission("a2", pod="p1", cpu="1"))  # the scheduler writes after our list
    result = copilot.sync()
    assert result.conflicts >= 1 and result.ok
    ledger = kube.get_object(GENERICNODES, "k8s-c1")["status"]["admissions"]
    assert {uid: e["state"] for uid, e in ledger.items()} == {"a1": names.GRANTED, "a2": names.GRANTED}


class NotifySocket:
    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.1)
        self.messages = []

    def drain(self):
        while True:
            try:
                self.messages.append(self.sock.recv(4096).decode())
            except (socket.timeout, BlockingIOError):
                return self.messages


def test_the_daemon_watches_wakes_grants_notifies_systemd_and_serves_metrics(kube, world, tmp_path):
    notify = NotifySocket(str(tmp_path / "notify"))
    notifier = Notifier({"NOTIFY_SOCKET": str(tmp_path / "notify"), "WATCHDOG_USEC": "2000000", "WATCHDOG_PID": str(os.getpid())})
    slurm = FakeSlurm([FakeNode("c1", 4, 8000)])
    metrics = Metrics()
    runner = None
    copilot = Copilot(kube, rest_slurm_of(slurm), settings(), CLUSTER, metrics=metrics, on_change=lambda what: runner.changed(what))
    runner = Runner(copilot, notifier, resync_interval=30, poll_interval=0.2, watch_timeout=2, debounce=0.05)
    server = metrics.serve("127.0.0.1", 0)
    thread = threading.Thread(target=runner.run, daemon=True)
    thread.start()
    try:
        deadline = time.time() + 10
        while "READY=1" not in "".join(notify.drain()) and time.time() < deadline:
            time.sleep(0.05)
        add_admission(kube, "k8s-c1", admission("a1"))  # only the watch can tell the daemon now
        while time.time() < deadline:
            status = kube.get_object(GENERICNODES, "k8s-c1").get("status") or {}
            if (status.get("admissions") or {}).get("a1", {}).get("state") == names.GRANTED:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the daemon did not grant the admission: %s" % status)
        slurm.reconfigure()  # the poller sees the revert, the loop re-asserts
        while slurm.nodes["c1"].gres != "k8scpu:3,k8smemory:6976" and time.time() < deadline:
            time.sleep(0.05)
        assert slurm.nodes["c1"].gres == "k8scpu:3,k8smemory:6976"
        text = httpx.get("http://127.0.0.1:%d/metrics" % server.server_address[1]).text
        samples = parse_exposition(text)
        assert samples[("hybridhpc_copilot_ledger_allocated", (("node", "k8s-c1"), ("resource", "cpu"), ("type", "Kubernetes")))] == 1.0
        assert samples[("hybridhpc_copilot_ready", ())] == 1.0
        assert "hybridhpc_copilot_reconciles_total" in text and "hybridhpc_copilot_reconcile_duration_seconds_bucket" in text
    finally:
        runner.request_stop()
        thread.join(10)
        metrics.close()
    messages = notify.drain()
    ready = [m for m in messages if m.startswith("READY=1")]
    assert ready and "STATUS=synced 1 GenericNodes" in ready[0]
    assert "WATCHDOG=1" in messages[messages.index(ready[0]):] and messages[-1] == "STOPPING=1"
