"""The ack_operator role in ack mode, run by ansible-playbook against the API double.

The role runs as site.yml runs it on the first controller, here through the
local connection, with a MUNGE key "created by the munge role" (random bytes
at munge_key_file, as mungekey writes them) and a JWT key on disk. Helm is not
on this machine and ACK's charts are in no registry it can reach, so the run
stops at the first chart: what comes before is real (the keys read, the
namespaces and the JWT key Secret applied to the double), and the values the
chart would get are read from the role's own variables after the failure.
"""

from __future__ import annotations

import base64
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from k8s_double import ApiServer

ROOT = pathlib.Path(__file__).resolve().parents[2]
PASSWORD = "Vaulted-db-pass-4711"

PLAYBOOK = """
- hosts: ctl1
  gather_facts: false
  vars:
    slurm_cluster_name: onprem
    ack_operator_mode: ack
    ack_operator_kubeconfig: "%(kubeconfig)s"
    slurm_common_k8s_shared_hosts: [cn001]
    slurm_common_controllers: [ctl1]
    slurm_common_cluster_hosts: [ctl1, cn001]
    slurm_common_jwt_key_file: "%(jwt)s"
    munge_key_file: "%(munge)s"
    slurm_common_config: {ClusterName: onprem, SlurmctldHost: [ctl1], GresTypes: [k8scpu, k8smemory]}
    slurm_common_nodes: [{NodeName: cn001, CPUs: 8, RealMemory: 16000, Gres: "k8scpu:8,k8smemory:16000"}]
    slurm_common_gres: [{Name: k8scpu, Flags: CountOnly}, {Name: k8smemory, Flags: CountOnly}]
    slurm_partitions: [{PartitionName: main, Nodes: ALL, Default: true}]
    slurmdbd_storage_host: db.example
    slurmdbd_storage_pass: "%(password)s"
  tasks:
    - block:
        - ansible.builtin.include_role:
            name: hybridhpc.slurm.ack_operator
            public: true
      rescue:
        - ansible.builtin.set_fact:
            failed_task: "{{ ansible_failed_task.name }}"
    - kubernetes.core.k8s_info: {kubeconfig: "%(kubeconfig)s", kind: Secret, namespace: slurm, name: onprem-jwt-key}
      register: jwt_secret
      no_log: true
    - kubernetes.core.k8s_info: {kubeconfig: "%(kubeconfig)s", kind: Namespace}
      register: namespaces
    - ansible.builtin.copy:
        dest: "%(out)s"
        mode: "0600"
        content: "{{ {'failed_task': failed_task | default(''),
                      'namespaces': namespaces.resources | map(attribute='metadata.name') | list,
                      'jwt_secret': jwt_secret.resources | map(attribute='data') | list,
                      'values': __ack_operator_cluster_values} | to_json }}"
      no_log: true
"""


@pytest.fixture(scope="module")
def ack_run(tmp_path_factory):
    """One run for the module's tests (a playbook run takes seconds)."""
    with ApiServer() as api_server:
        yield _run_role(api_server, tmp_path_factory.mktemp("ack"))


def _run_role(api_server, tmp_path):
    playbook_bin = pathlib.Path(sys.executable).with_name("ansible-playbook")
    if not playbook_bin.exists():
        pytest.skip("ansible-playbook is not installed next to this Python")
    assert shutil.which("helm") is None, "helm is installed: this test expects the run to stop at the first chart"
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(api_server.kubeconfig())
    munge, jwt = tmp_path / "munge.key", tmp_path / "jwt_hs256.key"
    munge.write_bytes(os.urandom(1024))
    jwt.write_bytes(os.urandom(32))
    out = tmp_path / "out.json"
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK % {"kubeconfig": kubeconfig, "jwt": jwt, "munge": munge, "out": out,
                                    "password": PASSWORD})
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  hosts:\n    ctl1: {ansible_connection: local, ansible_python_interpreter: %s}\n"
                         % sys.executable)
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_CACHE_PLUGIN="memory",
               ANSIBLE_LOG_PATH="/dev/null", ANSIBLE_FORCE_COLOR="0")
    done = subprocess.run([str(playbook_bin), "-v", "-i", str(inventory), str(playbook)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    return json.loads(out.read_text()), done.stdout + done.stderr, munge.read_bytes(), jwt.read_bytes()


def test_the_run_reaches_the_first_chart(ack_run):
    result, _log, _munge, _jwt = ack_run
    assert result["failed_task"].startswith("Install the ack-slurm-operator chart"), result["failed_task"]
    assert {"slurm", "ack-slurm-operator"} <= set(result["namespaces"])


def test_the_generated_munge_key_reaches_the_munge_secret_value(ack_run):
    result, _log, munge, _jwt = ack_run
    assert base64.b64decode(result["values"]["mungeConfigs"]["content"], validate=True) == munge


def test_the_jwt_key_secret_holds_the_key_the_pods_mount(ack_run):
    result, _log, _munge, jwt = ack_run
    (data,) = result["jwt_secret"]
    assert base64.b64decode(data["jwt_hs256.key"]) == jwt
    (volume,) = result["values"]["headNodeConfig"]["volumes"]
    assert volume["secret"]["secretName"] == "onprem-jwt-key"


def test_no_secret_in_the_log(ack_run):
    result, log, munge, jwt = ack_run
    assert "StoragePass=%s" % PASSWORD in result["values"]["slurmConfigs"]["filesInConfigMap"]["slurmdbd.conf"]
    for secret in (PASSWORD, base64.b64encode(munge).decode(), base64.b64encode(jwt).decode()):
        assert secret not in log
