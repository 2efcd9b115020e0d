"""The ack_operator role in ack mode, run by ansible-playbook against a real kube-apiserver, and every manifest the
collection applies in either mode, and the Kubernetes parts of ACK's chart values, judged by that server.

The role runs as site.yml runs it on the first controller, here through the
local connection, with a MUNGE key "created by the munge role" (random bytes
at munge_key_file, as mungekey writes them) and a JWT key on disk. Helm is not
on this machine and ACK's charts are in no registry it can reach, so the run
stops at the first chart: what comes before is real (the keys read, the
namespaces and the JWT key Secret applied to the API server), and the values
the chart would get are read from the role's own variables after the failure.

Then every object the collection applies (the ack_operator role's templates in
both modes, the GenericNode CRD, the copilot's RBAC) goes to the server as a
server-side apply with dryRun=All and fieldValidation=Strict, so a field the
API does not have or a value of the wrong type fails here; and the parts of
the chart values that are Kubernetes types (the pods' volumes and mounts, the
ConfigMap of Slurm's files, the MUNGE key Secret) are judged the same way
inside the objects the chart makes of them.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import copilot_rbac

from .conftest import admin_kubeconfig

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
    # A field value for the dry runs only (no traffic goes to it): the API server refuses loopback Endpoints.
    ack_operator_slurmrestd_address: 192.0.2.10
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
                      'values': __ack_operator_cluster_values,
                      'manifests': query('ansible.builtin.template', *__templates) | map('from_yaml_all') | flatten
                                   | select('mapping') | list} | to_json }}"
      vars:
        role_path: "%(role)s"
        __templates: "{{ ['crd', 'namespaces', 'slurmrestd-service', 'genericnodes', 'jwt-secret', 'jwt-key-secret']
                         | map('regex_replace', '^', role_path ~ '/templates/') | map('regex_replace', '$', '.yml.j2') | list }}"
        # jwt-secret.yml.j2's token (bare_metal mode signs one).
        __ack_operator_token: a-token-for-the-dry-run
      no_log: true
"""


@pytest.fixture(scope="module")
def ack_run(control_plane, genericnode_crd, tmp_path_factory):
    """One run for the module's tests (a playbook run takes seconds)."""
    return _run_role(control_plane, tmp_path_factory.mktemp("ack"))


def _run_role(control_plane, tmp_path):
    playbook_bin = pathlib.Path(sys.executable).with_name("ansible-playbook")
    if not playbook_bin.exists():
        pytest.skip("ansible-playbook is not installed next to this Python")
    assert shutil.which("helm") is None, "helm is installed: this test expects the run to stop at the first chart"
    kubeconfig = admin_kubeconfig(control_plane)
    munge, jwt = tmp_path / "munge.key", tmp_path / "jwt_hs256.key"
    munge.write_bytes(os.urandom(1024))
    jwt.write_bytes(os.urandom(32))
    out = tmp_path / "out.json"
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK % {"kubeconfig": kubeconfig, "jwt": jwt, "munge": munge, "out": out,
                                    "password": PASSWORD, "role": ROOT / "roles" / "ack_operator"})
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


# -- every manifest, judged by the API server ----------------------------------------------

PLURALS = {"Namespace": "namespaces", "Secret": "secrets", "Service": "services", "Endpoints": "endpoints",
           "ConfigMap": "configmaps", "Pod": "pods", "ServiceAccount": "serviceaccounts",
           "GenericNode": "genericnodes", "CustomResourceDefinition": "customresourcedefinitions",
           "ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings", "Role": "roles",
           "RoleBinding": "rolebindings"}


def object_url(obj):
    group_version = obj["apiVersion"]
    base = "/api/v1" if group_version == "v1" else "/apis/" + group_version
    namespace = obj["metadata"].get("namespace")
    return "%s%s/%s/%s" % (base, "/namespaces/" + namespace if namespace else "", PLURALS[obj["kind"]], obj["metadata"]["name"])


def judged(plane, obj, dry_run=True):
    """The API server's word on ``obj`` as a server-side apply (Strict field validation), as the admin: None when
    it takes it, else its status code and message."""
    import urllib3

    query = "fieldManager=hybridhpc-test&fieldValidation=Strict&force=true" + ("&dryRun=All" if dry_run else "")
    pool = urllib3.PoolManager(cert_reqs="CERT_REQUIRED", ca_certs=str(plane.ca_path))
    response = pool.request("PATCH", "%s%s?%s" % (plane.server, object_url(obj), query), body=json.dumps(obj),
                            headers={"Content-Type": "application/apply-patch+yaml", "Accept": "application/json",
                                     "Authorization": "Bearer %s" % plane.admin_token}, timeout=30)
    if response.status < 300:
        return None
    return "%s %s" % (response.status, json.loads(response.data).get("message"))


def every_manifest(result):
    """The objects the collection applies: the ack_operator role's (both modes), the copilot's RBAC (both token
    sources), and the objects ACK's chart makes of the values' Kubernetes parts."""
    values = result["values"]
    namespace = "slurm"
    objects = list(result["manifests"])
    objects += copilot_rbac.manifests("hybridhpc-copilot-onprem", "hybridhpc-copilot",
                                      {"source": "secret", "secret_namespace": "ack-slurm-operator"})
    for part in ("headNodeConfig", "slurmdbdConfigs", "slurmrestdConfigs"):
        pod = values[part]
        objects.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": part.lower(), "namespace": namespace},
                        "spec": {"volumes": pod["volumes"],
                                 "containers": [{"name": "slurm", "image": "slurm", "volumeMounts": pod["volumeMounts"]}]}})
    files = values["slurmConfigs"]["filesInConfigMap"]
    objects.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "slurm-configs", "namespace": namespace},
                    "data": {name: text for name, text in files.items() if text is not None}})
    objects.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "munge-key", "namespace": namespace},
                    "data": {"munge.key": values["mungeConfigs"]["content"]}})
    return objects


def test_the_server_takes_every_manifest_and_values_part_as_written(ack_run, control_plane):
    result, _log, _munge, _jwt = ack_run
    objects = every_manifest(result)
    assert {o["kind"] for o in objects} >= {"CustomResourceDefinition", "Namespace", "Service", "Endpoints", "GenericNode",
                                            "Secret", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                                            "RoleBinding", "Pod", "ConfigMap"}
    # The namespaces first, for real: a namespaced dry run needs its namespace.
    for obj in objects:
        if obj["kind"] == "Namespace":
            assert judged(control_plane, obj, dry_run=False) is None, obj
    refused = {"%s/%s" % (o["kind"], o["metadata"]["name"]): judged(control_plane, o) for o in objects}
    assert {name: said for name, said in refused.items() if said} == {}


@pytest.mark.parametrize("kind, change, said", [
    ("Service", lambda o: o["spec"].update(portz=[]), "spec.portz: field not declared in schema"),
    ("Service", lambda o: o["spec"]["ports"][0].update(port="six-eight-two-zero"), "port"),
    ("GenericNode", lambda o: o["spec"].update(type=7), "spec.type"),
    ("Endpoints", lambda o: o["subsets"][0]["addresses"][0].update(ip="127.0.0.1"), "loopback"),
])
def test_a_wrong_field_or_type_is_refused(ack_run, control_plane, kind, change, said):
    """The check above can fail: the same objects with one mistake each are refused, in the server's words."""
    result, _log, _munge, _jwt = ack_run
    for obj in result["manifests"]:
        if obj["kind"] == "Namespace":
            judged(control_plane, obj, dry_run=False)
    obj = copy.deepcopy(next(o for o in result["manifests"] if o["kind"] == kind))
    change(obj)
    verdict = judged(control_plane, obj)
    assert verdict is not None and said in verdict, verdict
