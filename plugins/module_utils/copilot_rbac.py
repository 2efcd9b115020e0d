# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the copilot may do in Kubernetes: its ServiceAccount, ClusterRole and bindings, as manifests.

Each rule is one the copilot's client uses (roles/copilot/files/copilot,
kube.py), and nothing more: tests/k8s_control_plane/test_copilot_rbac.py runs
every call the client makes as this ServiceAccount against a real
kube-apiserver, and takes each verb away in turn to see the copilot refused.
The copilot role applies them from the Ansible controller when
copilot_rbac_kubeconfig is given (filter copilot_rbac_manifests).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

GROUP = "kai.alibabacloud.com"
CLUSTER_ROLE = "hybridhpc:copilot"
# Where ACK's slurm operator keeps the slurmrestd token (the copilot's
# names.JWT_SECRET_NAMESPACE / JWT_SECRET_NAME; a unit test holds them equal).
JWT_SECRET_NAMESPACE = "ack-slurm-operator"
JWT_SECRET_NAME = "ack-slurm-jwt-token"

# The informers list and watch GenericNodes, Pods and Nodes; the executor
# reads a GenericNode again before a write it must not base on a stale copy,
# writes the ledger (status) and the finalizer (the object); a pass reads a
# Pod again before it lets an admission go; the copilot annotates a Node.
CLUSTER_RULES = (
    {"apiGroups": [GROUP], "resources": ["genericnodes"], "verbs": ["get", "list", "watch", "update"]},
    {"apiGroups": [GROUP], "resources": ["genericnodes/status"], "verbs": ["update"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list", "watch", "patch"]},
)


def token_secret(token):
    """``(namespace, name)`` of the Secret the copilot reads its slurmrestd token from, or None (token.source is
    not ``secret``). ``token``: the copilot's ``token`` settings."""
    token = token or {}
    if token.get("source") != "secret":
        return None
    return token.get("secret_namespace") or JWT_SECRET_NAMESPACE, token.get("secret_name") or JWT_SECRET_NAME


def problems(service_account, namespace):
    """What is wrong with the names (each a DNS-1123 label Kubernetes accepts), naming the variable."""
    found = []
    for variable, value in (("copilot_service_account", service_account), ("copilot_service_account_namespace", namespace)):
        text = value if isinstance(value, str) else ""
        if not (0 < len(text) <= 63 and text[0].isalnum() and text[-1].isalnum()
                and all(c.islower() or c.isdigit() or c == "-" for c in text)):
            found.append("%s: %r is not a Kubernetes name (lowercase letters, digits and '-', at most 63, "
                         "starting and ending with a letter or digit)" % (variable, value))
    return found


def _metadata(name, namespace=None):
    metadata = {"name": name, "labels": {"app.kubernetes.io/name": "hybridhpc-copilot",
                                         "app.kubernetes.io/managed-by": "hybridhpc.slurm"}}
    if namespace:
        metadata["namespace"] = namespace
    return metadata


def manifests(service_account, namespace, token=None):
    """The objects to apply, in order: the namespace, the ServiceAccount, the ClusterRole and its binding, and
    with a token Secret (token_secret) a Role to read that one Secret and its binding."""
    subject = {"kind": "ServiceAccount", "name": service_account, "namespace": namespace}
    meta = _metadata
    objects = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": meta(namespace)},
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(service_account, namespace)},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": meta(CLUSTER_ROLE),
         "rules": [{key: list(values) for key, values in rule.items()} for rule in CLUSTER_RULES]},
        # One binding per ServiceAccount: two Slurm clusters sharing a
        # Kubernetes cluster each bind their own copilot.
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": meta("%s:%s:%s" % (CLUSTER_ROLE, namespace, service_account)),
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": CLUSTER_ROLE},
         "subjects": [subject]},
    ]
    secret = token_secret(token)
    if secret:
        secret_namespace, secret_name = secret
        role = "%s:%s:token" % (CLUSTER_ROLE, service_account)
        objects += [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta(role, secret_namespace),
             "rules": [{"apiGroups": [""], "resources": ["secrets"], "resourceNames": [secret_name], "verbs": ["get"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta(role, secret_namespace),
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
             "subjects": [subject]},
        ]
    return objects
