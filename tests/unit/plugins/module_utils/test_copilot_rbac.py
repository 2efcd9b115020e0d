# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""copilot_rbac: the copilot's ServiceAccount, ClusterRole and bindings (the verbs themselves are judged against a
real kube-apiserver in tests/k8s_control_plane/test_copilot_rbac.py)."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import os
import sys

from ansible_collections.hybridhpc.slurm.plugins.module_utils import copilot_rbac

COPILOT_SRC = os.path.join(os.path.dirname(__file__), *[".."] * 4, "roles", "copilot", "files", "copilot", "src")


def kinds(objects):
    return [(o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in objects]


def test_the_service_account_is_bound_to_the_cluster_role_in_its_namespace():
    objects = copilot_rbac.manifests("hybridhpc-copilot-onprem", "hybridhpc-copilot")
    assert kinds(objects) == [
        ("Namespace", "hybridhpc-copilot", None),
        ("ServiceAccount", "hybridhpc-copilot-onprem", "hybridhpc-copilot"),
        ("ClusterRole", "hybridhpc:copilot", None),
        ("ClusterRoleBinding", "hybridhpc:copilot:hybridhpc-copilot:hybridhpc-copilot-onprem", None),
    ]
    binding = objects[3]
    assert binding["roleRef"]["name"] == "hybridhpc:copilot"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "hybridhpc-copilot-onprem", "namespace": "hybridhpc-copilot"}]
    # The rules are copies: a caller that edits them leaves the module's alone.
    objects[2]["rules"][0]["verbs"].append("delete")
    assert "delete" not in copilot_rbac.CLUSTER_RULES[0]["verbs"]


def test_a_token_from_a_secret_adds_a_role_for_that_one_secret():
    objects = copilot_rbac.manifests("sa", "ns", {"source": "secret", "secret_namespace": "ops", "secret_name": "tok"})
    role, binding = objects[-2:]
    assert (role["kind"], role["metadata"]["namespace"]) == ("Role", "ops")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["tok"], "verbs": ["get"]}]
    assert binding["kind"] == "RoleBinding" and binding["roleRef"]["name"] == role["metadata"]["name"]
    assert copilot_rbac.token_secret({"source": "secret"}) == ("ack-slurm-operator", "ack-slurm-jwt-token")
    assert copilot_rbac.token_secret({"source": "key"}) is None
    assert len(copilot_rbac.manifests("sa", "ns", {"source": "key"})) == 4


def test_the_token_secrets_default_is_the_copilots():
    sys.path.insert(0, COPILOT_SRC)
    try:
        from hybridhpc_copilot import names
    finally:
        sys.path.remove(COPILOT_SRC)
    assert (copilot_rbac.JWT_SECRET_NAMESPACE, copilot_rbac.JWT_SECRET_NAME) == (names.JWT_SECRET_NAMESPACE, names.JWT_SECRET_NAME)
    assert copilot_rbac.GROUP == names.GROUP


def test_names_kubernetes_refuses_are_named_with_their_variable():
    assert copilot_rbac.problems("hybridhpc-copilot-onprem", "hybridhpc-copilot") == []
    found = copilot_rbac.problems("Copilot_SA", "x" * 64)
    assert found[0].startswith("copilot_service_account: 'Copilot_SA' is not a Kubernetes name")
    assert found[1].startswith("copilot_service_account_namespace: ")
    assert copilot_rbac.problems("", None)[0].startswith("copilot_service_account: ''")
