"""Fixtures: one real control plane for the session (plane.py), clients of it, the GenericNode CRD.

The binaries are make k8s-bin's: HYBRIDHPC_K8S_BIN names their directory
(make k8s-test sets it), else the Makefile is asked (make k8s-bin-dir). A test
that fails gets the tail of each process's log in its report.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from .plane import ControlPlane, ControlPlaneError, missing_binaries

ROOT = Path(__file__).resolve().parents[2]
COPILOT = ROOT / "roles" / "copilot" / "files" / "copilot"
CRD_FILE = COPILOT / "crd" / "genericnodes.kai.alibabacloud.com.yaml"
READY_TIMEOUT = 60.0

if str(COPILOT / "src") not in sys.path:
    sys.path.insert(0, str(COPILOT / "src"))

_running: list[ControlPlane] = []


def bin_dir() -> Path:
    configured = os.environ.get("HYBRIDHPC_K8S_BIN")
    if configured:
        return Path(configured)
    answer = subprocess.run(["make", "-s", "--no-print-directory", "k8s-bin-dir"], cwd=ROOT, capture_output=True, text=True, check=False)
    if answer.returncode != 0 or not answer.stdout.strip():
        pytest.fail("cannot tell where make k8s-bin puts the binaries (make k8s-bin-dir: %s); set HYBRIDHPC_K8S_BIN"
                    % (answer.stderr.strip() or answer.returncode), pytrace=False)
    return Path(answer.stdout.strip())


@contextlib.contextmanager
def running_plane(**options):
    """A control plane started from make k8s-bin's binaries (``options``: ControlPlane's), stopped at the end."""
    where = bin_dir()
    missing = missing_binaries(where)
    if missing:
        pytest.fail("the control plane's binaries are missing from %s (%s): run `make k8s-bin` first"
                    % (where, ", ".join(missing)), pytrace=False)
    plane = ControlPlane(where, ready_timeout=READY_TIMEOUT, **options)
    try:
        plane.start()
    except ControlPlaneError as err:
        pytest.fail("the control plane did not start: %s" % err, pytrace=False)
    _running.append(plane)
    try:
        yield plane
    finally:
        _running.remove(plane)
        plane.stop()


@pytest.fixture(scope="session")
def control_plane():
    """etcd, kube-apiserver (its watch cache on, as in production), kube-scheduler and kwok, for the whole session."""
    # The clients' traffic stays on loopback even where a proxy is configured.
    saved = {k: os.environ.get(k) for k in ("NO_PROXY", "no_proxy")}
    for k, v in saved.items():
        os.environ[k] = ",".join(filter(None, ("127.0.0.1", v)))
    try:
        with running_plane() as plane:
            yield plane
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        for plane in _running:
            report.sections.append(("control plane logs (%s)" % plane.server, plane.log_tails()))


def admin_kubeconfig(plane):
    """The admin's kubeconfig, in the run's directory."""
    return plane.write_kubeconfig(plane.work_dir / "admin.kubeconfig")


@contextlib.contextmanager
def official_client(kubeconfig):
    """The official Python client (the venv's kubernetes package) from a kubeconfig."""
    import kubernetes

    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    client = kubernetes.client.ApiClient(configuration)
    try:
        yield client
    finally:
        client.close()


def copilot_client(kubeconfig):
    """The copilot's own client (hybridhpc_copilot.kube.KubeClient), as the daemon builds it from a kubeconfig."""
    from hybridhpc_copilot.kube import KubeClient

    return KubeClient(kubeconfig=str(kubeconfig), request_timeout=15.0)


@pytest.fixture(scope="session")
def kubeconfig(control_plane):
    return admin_kubeconfig(control_plane)


@pytest.fixture(scope="session")
def api_client(kubeconfig):
    with official_client(kubeconfig) as client:
        yield client


@pytest.fixture(scope="session")
def copilot_kube(kubeconfig):
    return copilot_client(kubeconfig)


@pytest.fixture
def report_line(capsys):
    """Print a line past pytest's output capture (a run's figures, shown when it passes too)."""

    def report(line):
        with capsys.disabled():
            print(line)

    return report


def wait_for(what, probe, timeout=READY_TIMEOUT, interval=0.2):
    """``probe()``'s first true answer, polling at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            pytest.fail("%s: not within %.0f s (last: %r)" % (what, timeout, last), pytrace=False)
        time.sleep(interval)


@pytest.fixture(scope="session")
def genericnode_crd(api_client):
    """The copilot's CRD, applied from the role's file and Established."""
    return apply_crd(api_client)


def apply_crd(api_client):
    import kubernetes

    api = kubernetes.client.ApiextensionsV1Api(api_client)
    body = yaml.safe_load(CRD_FILE.read_text())
    api.create_custom_resource_definition(body=body)

    def established():
        crd = api.read_custom_resource_definition(body["metadata"]["name"])
        conditions = {c.type: c.status for c in (crd.status.conditions or [])}
        return crd if conditions.get("Established") == "True" and conditions.get("NamesAccepted") == "True" else None

    return wait_for("CRD %s Established" % body["metadata"]["name"], established)


@pytest.fixture
def namespace(api_client):
    import kubernetes

    core = kubernetes.client.CoreV1Api(api_client)
    name = "t-%s" % uuid.uuid4().hex[:8]
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)
