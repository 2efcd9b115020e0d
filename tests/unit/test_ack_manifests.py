"""Every manifest the ack_operator role applies is valid Kubernetes.

The role's templates are rendered with Ansible's own templating (so filters
and lookups behave as in a play) for a realistic cluster, then checked with
kubernetes-validate against the Kubernetes OpenAPI schemas, and GenericNodes
against the CRD's openAPIV3Schema.
"""

import base64
import pathlib

import jsonschema
import kubernetes_validate
import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar
from templating import trusted

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "ack_operator"
CRD = ROOT / "roles" / "copilot" / "files" / "copilot" / "crd" / "genericnodes.kai.alibabacloud.com.yaml"
K8S_VERSION = "1.31"

VARS = {
    "role_path": str(ROLE),
    "slurm_cluster_name": "onprem",
    "ack_operator_cluster_namespace": "slurm",
    "ack_operator_namespace": "ack-slurm-operator",
    "ack_operator_slurmrestd_address": "10.0.0.5",
    "ack_operator_slurmrestd_port": 6820,
    "slurm_common_k8s_shared_hosts": ["cn001", "cn002"],
    "hostvars": {"cn001": {"k8s_node_name": "k8s-cn001"}, "cn002": {}},
    "__ack_operator_token": "eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJzbHVybSJ9.c2ln",
    "__ack_operator_jwt_key": {"content": base64.b64encode(b"k" * 32).decode()},
}


def render(template):
    loader = DataLoader()
    loader.set_basedir(str(ROLE))
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    templar = Templar(loader=loader, variables=trusted({**role_vars, **VARS}))
    text = (ROLE / "templates" / template).read_text()
    return [doc for doc in yaml.safe_load_all(templar.template(trusted(text))) if doc]


@pytest.mark.parametrize("template", ["namespaces.yml.j2", "slurmrestd-service.yml.j2", "jwt-secret.yml.j2", "crd.yml.j2",
                                      "jwt-key-secret.yml.j2"])
def test_core_manifests_validate_against_kubernetes_schemas(template):
    docs = render(template)
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_service_points_at_slurmrestd():
    service, endpoints = render("slurmrestd-service.yml.j2")
    assert service["metadata"]["name"] == endpoints["metadata"]["name"] == "onprem-slurmrestd"
    assert "selector" not in service["spec"]
    assert endpoints["subsets"][0]["addresses"][0]["ip"] == "10.0.0.5"


def test_secret_holds_the_token_under_the_cluster_name():
    (secret,) = render("jwt-secret.yml.j2")
    assert base64.b64decode(secret["data"]["onprem"]).decode() == VARS["__ack_operator_token"]


def test_genericnodes_match_the_crd_schema():
    crd = yaml.safe_load(CRD.read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    nodes = render("genericnodes.yml.j2")
    assert [n["metadata"]["name"] for n in nodes] == ["k8s-cn001", "cn002"]
    assert [n["spec"]["alias"] for n in nodes] == ["cn001", "cn002"]
    for node in nodes:
        assert node["apiVersion"] == "%s/%s" % (crd["spec"]["group"], crd["spec"]["versions"][0]["name"])
        assert node["kind"] == crd["spec"]["names"]["kind"]
        assert node["metadata"]["labels"]["kai.alibabacloud.com/cluster-name"] == "onprem"
        jsonschema.validate(node, schema)


def test_jwt_key_secret_holds_the_key_the_pods_mount():
    (secret,) = render("jwt-key-secret.yml.j2")
    assert secret["metadata"]["namespace"] == "slurm"
    assert secret["data"]["jwt_hs256.key"] == VARS["__ack_operator_jwt_key"]["content"]
