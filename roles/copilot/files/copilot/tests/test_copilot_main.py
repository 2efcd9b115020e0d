"""The entry point as a process: flags, config errors, and --once (with --dry-run) against the doubles."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest
from copilot_builders import admission
from fakes.slurm_state import FakeNode, FakeSlurm
from fakes.slurmrestd import FakeSlurmrestd
from test_copilot_kube import add_admission, gn_body

from hybridhpc_copilot import names
from hybridhpc_copilot.kube import GENERICNODES, KubeClient

PACKAGE = pathlib.Path(__file__).resolve().parents[1]


def copilot(*args, env=None):
    environ = dict(os.environ, PYTHONPATH=str(PACKAGE / "src"), HYBRIDHPC_COPILOT_CONFIG="")
    environ.update(env or {})
    return subprocess.run([sys.executable, "-m", "hybridhpc_copilot", *args], capture_output=True, text=True, env=environ,
                          timeout=60)


def test_help_and_version():
    assert copilot("--help").returncode == 0
    done = copilot("--version")
    assert done.returncode == 0 and done.stdout.startswith("hybridhpc-copilot ")


def test_a_bad_config_stops_with_the_rule_and_the_fix(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("cluster_name: x\nslurmrestd: {ur1: http://x}\n")
    done = copilot("--config", str(path))
    assert done.returncode == 2 and "unknown key slurmrestd.ur1 in slurmrestd" in done.stderr
    assert copilot().returncode == 2  # no cluster_name anywhere


@pytest.fixture
def setup(api_server, kubeconfig, tmp_path):
    api_server.load([gn_body(), {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "default"}}])
    key = tmp_path / "jwt_hs256.key"
    key.write_bytes(os.urandom(32))
    slurm = FakeSlurm([FakeNode("c1", 4, 8000)])
    with FakeSlurmrestd(slurm, jwt_key=key.read_bytes()) as rest:
        config = tmp_path / "config.yaml"
        config.write_text(json.dumps({
            "cluster_name": "onprem", "kubeconfig": kubeconfig, "slurmrestd": {"url": rest.url, "user": "slurm"},
            "token": {"source": "key", "jwt_key_file": str(key)}, "nodes": {"c1": {"k8scpu": 4, "k8smemory": 8000}},
            "metrics": {"port": 0}}))
        kube = KubeClient(kubeconfig)
        add_admission(kube, "k8s-c1", admission("a1", cpu="2", memory="2Gi"))
        yield config, kube, slurm


def test_once_with_dry_run_decides_and_changes_nothing(setup):
    config, kube, slurm = setup
    done = copilot("--config", str(config), "--once", "--dry-run")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["dry_run"] and {"ReserveAdmission", "WriteStatus", "SetGres"} <= set(summary["actions"])
    assert "status" not in kube.get_object(GENERICNODES, "k8s-c1") and slurm.nodes["c1"].gres == "k8scpu:4,k8smemory:8000"
    logs = [json.loads(line) for line in done.stderr.splitlines()]
    assert any(entry["msg"] == "would SetGres" and entry["gres"] == "k8scpu:2,k8smemory:5952" for entry in logs)


def test_once_grants_through_slurmrestd_with_a_signed_token(setup):
    config, kube, slurm = setup
    done = copilot("--config", str(config), "--once")
    assert done.returncode == 0, done.stderr
    assert kube.get_object(GENERICNODES, "k8s-c1")["status"]["admissions"]["a1"]["state"] == names.GRANTED
    assert slurm.nodes["c1"].gres == "k8scpu:2,k8smemory:5952"
