"""The copilot as it runs at a site: as the ServiceAccount the copilot role installs, with its ClusterRole and nothing more.

The objects are the role's (module_utils/copilot_rbac.py, which the role
applies through kubernetes.core.k8s), applied to a real kube-apiserver with
RBAC authorization; the copilot's own client (hybridhpc_copilot.kube) then
makes every call the daemon makes, with a token the API server issued for the
ServiceAccount (TokenRequest, as ``kubectl create token`` does). Each verb is
then taken away in turn: the copilot must be refused, or the verb is one it
does not need and must go from the ClusterRole.
"""

from __future__ import annotations

import copy
import uuid

import pytest
from hybridhpc_copilot import kube as copilot_kube_module
from hybridhpc_copilot import names

from ansible_collections.hybridhpc.slurm.plugins.module_utils import copilot_rbac

from .conftest import copilot_client, official_client, wait_for

pytestmark = pytest.mark.usefixtures("genericnode_crd")

SERVICE_ACCOUNT = "hybridhpc-copilot-onprem"
NAMESPACE = "hybridhpc-copilot"
SECRET_NAMESPACE = "ack-slurm-operator"
TOKEN_SETTINGS = {"source": "secret", "secret_namespace": SECRET_NAMESPACE, "secret_name": copilot_rbac.JWT_SECRET_NAME}


def apply(api_client, obj):
    """Create or replace one of the role's objects, as the admin."""
    import kubernetes

    core = kubernetes.client.CoreV1Api(api_client)
    rbac = kubernetes.client.RbacAuthorizationV1Api(api_client)
    name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace")
    create, replace = {
        "Namespace": (lambda: core.create_namespace(obj), lambda: core.replace_namespace(name, obj)),
        "Secret": (lambda: core.create_namespaced_secret(namespace, obj),
                   lambda: core.replace_namespaced_secret(name, namespace, obj)),
        "ServiceAccount": (lambda: core.create_namespaced_service_account(namespace, obj),
                           lambda: core.replace_namespaced_service_account(name, namespace, obj)),
        "ClusterRole": (lambda: rbac.create_cluster_role(obj), lambda: rbac.replace_cluster_role(name, obj)),
        "ClusterRoleBinding": (lambda: rbac.create_cluster_role_binding(obj),
                               lambda: rbac.replace_cluster_role_binding(name, obj)),
        "Role": (lambda: rbac.create_namespaced_role(namespace, obj), lambda: rbac.replace_namespaced_role(name, namespace, obj)),
        "RoleBinding": (lambda: rbac.create_namespaced_role_binding(namespace, obj),
                        lambda: rbac.replace_namespaced_role_binding(name, namespace, obj)),
    }[obj["kind"]]
    try:
        create()
    except kubernetes.client.ApiException as err:
        if err.status != 409:
            raise
        replace()


@pytest.fixture(scope="module")
def manifests():
    return copilot_rbac.manifests(SERVICE_ACCOUNT, NAMESPACE, TOKEN_SETTINGS)


@pytest.fixture(scope="module")
def site(control_plane, api_client, manifests):
    """The role's objects applied; ACK's token Secret, a Node, a Pod and a GenericNode the copilot works on; a
    kubeconfig with a token of the ServiceAccount."""
    import kubernetes

    core = kubernetes.client.CoreV1Api(api_client)
    # ACK's operator namespace and its token Secret exist before the copilot (the operator made them). The
    # session's plane is shared: the ack-mode role's test may have made the namespace already.
    apply(api_client, {"kind": "Namespace", "metadata": {"name": SECRET_NAMESPACE}})
    apply(api_client, {"kind": "Secret", "metadata": {"name": copilot_rbac.JWT_SECRET_NAME, "namespace": SECRET_NAMESPACE},
                       "stringData": {"onprem": "a-slurmrestd-token"}})
    apply(api_client, {"kind": "Secret", "metadata": {"name": "another-secret", "namespace": SECRET_NAMESPACE},
                       "stringData": {"k": "v"}})
    for obj in manifests:
        apply(api_client, obj)
    suffix = uuid.uuid4().hex[:6]
    node = "rbac-c1-%s" % suffix
    core.create_node({"metadata": {"name": node}})
    core.create_namespaced_pod("default", {"metadata": {"name": "web-%s" % suffix},
                                           "spec": {"containers": [{"name": "c", "image": "none"}], "nodeName": node}})
    kubernetes.client.CustomObjectsApi(api_client).create_cluster_custom_object(names.GROUP, names.VERSION, names.PLURAL, {
        "apiVersion": names.API_VERSION, "kind": names.KIND,
        "metadata": {"name": node, "labels": {names.LABEL_CLUSTER_NAME: "onprem", names.LABEL_CLUSTER_NAMESPACE: "slurm"}},
        "spec": {"type": names.NODE_TYPE_SLURM}})
    token = core.create_namespaced_service_account_token(
        SERVICE_ACCOUNT, NAMESPACE, {"spec": {"expirationSeconds": 3600}}).status.token
    kubeconfig = control_plane.write_kubeconfig(control_plane.work_dir / "copilot.kubeconfig", user=SERVICE_ACCOUNT, token=token)
    return {"kubeconfig": kubeconfig, "node": node, "pod": ("default", "web-%s" % suffix)}


def copilot_calls(kube, site):
    """Every call the copilot's daemon makes, by the Kube protocol's method it goes through: ``[(method, call)]``."""
    gn = copilot_kube_module.GENERICNODES
    selector = "%s=onprem" % names.LABEL_CLUSTER_NAME

    def watch(kind):
        _items, version = kube.list_objects(kind)
        return lambda: list(kube.watch_objects(kind, version, timeout_seconds=1))

    def ledger_and_finalizer():
        current = kube.get_object(gn, site["node"])
        written = kube.write_ledger(current, {"slurm": {"node": site["node"]}})
        with_finalizer = kube.set_finalizer(written, True)
        kube.set_finalizer(with_finalizer, False)

    def status_and_object():
        current = kube.get_object(gn, site["node"])
        kube.replace_object(kube.replace_status(current))

    return [
        ("list_objects", lambda: [kube.list_objects(gn, selector), kube.list_objects(copilot_kube_module.PODS),
                                  kube.list_objects(copilot_kube_module.NODES)]),
        ("watch_objects", lambda: [watch(kind)() for kind in (gn, copilot_kube_module.PODS, copilot_kube_module.NODES)]),
        ("get_object", lambda: [kube.get_object(gn, site["node"]),
                                kube.get_object(copilot_kube_module.PODS, site["pod"][1], site["pod"][0])]),
        ("write_ledger", ledger_and_finalizer),
        ("set_finalizer", ledger_and_finalizer),
        ("replace_status", status_and_object),
        ("replace_object", status_and_object),
        ("annotate_node", lambda: kube.annotate_node(site["node"], names.GROUP + "/rbac-check", "1")),
        ("read_secret", lambda: kube.read_secret(SECRET_NAMESPACE, copilot_rbac.JWT_SECRET_NAME)),
    ]


def refused(kube, site):
    """The first call of the copilot's the API server refuses (403), or None when it takes them all."""
    for method, call in copilot_calls(kube, site):
        try:
            call()
        except copilot_kube_module.PermanentError as err:
            if "403" in str(err):
                return "%s: %s" % (method, err)
            raise
    return None


def test_every_call_of_the_copilots_client_is_checked():
    """A method the Kube protocol gains (a new API call) must be added here, and its verb to the ClusterRole."""
    protocol = {name for name in vars(copilot_kube_module.Kube) if not name.startswith("_")}
    assert protocol == {method for method, _call in copilot_calls(None, {})}


def test_the_copilot_works_as_the_service_account_the_role_installs(site):
    kube = copilot_client(site["kubeconfig"])
    assert refused(kube, site) is None
    secret = kube.read_secret(SECRET_NAMESPACE, copilot_rbac.JWT_SECRET_NAME)
    assert secret["metadata"]["name"] == copilot_rbac.JWT_SECRET_NAME


def test_the_service_account_can_do_nothing_more(site):
    import kubernetes

    with official_client(site["kubeconfig"]) as client:
        core = kubernetes.client.CoreV1Api(client)
        custom = kubernetes.client.CustomObjectsApi(client)
        attempts = {
            "list every Secret": core.list_secret_for_all_namespaces,
            "read another Secret beside ACK's token": lambda: core.read_namespaced_secret("another-secret", SECRET_NAMESPACE),
            "delete a Pod": lambda: core.delete_namespaced_pod(site["pod"][1], site["pod"][0]),
            "create a Pod": lambda: core.create_namespaced_pod("default", {
                "metadata": {"name": "not-allowed"}, "spec": {"containers": [{"name": "c", "image": "none"}]}}),
            "delete a Node": lambda: core.delete_node(site["node"]),
            "delete a GenericNode": lambda: custom.delete_cluster_custom_object(names.GROUP, names.VERSION, names.PLURAL,
                                                                                site["node"]),
            "create a GenericNode": lambda: custom.create_cluster_custom_object(names.GROUP, names.VERSION, names.PLURAL, {
                "apiVersion": names.API_VERSION, "kind": names.KIND, "metadata": {"name": "not-allowed"},
                "spec": {"type": names.NODE_TYPE_SLURM}}),
        }
        allowed = []
        for what, attempt in attempts.items():
            try:
                attempt()
                allowed.append(what)
            except kubernetes.client.ApiException as err:
                assert err.status == 403, (what, err.status, err.reason)
        assert allowed == []


def verbs(manifests):
    """Each (object index, rule index, verb) the role grants."""
    return [(i, r, verb) for i, obj in enumerate(manifests) if obj["kind"] in ("ClusterRole", "Role")
            for r, rule in enumerate(obj["rules"]) for verb in rule["verbs"]]


VERBS = verbs(copilot_rbac.manifests(SERVICE_ACCOUNT, NAMESPACE, TOKEN_SETTINGS))


@pytest.mark.parametrize("index, rule, verb", VERBS, ids=["%s-%s" % (
    "/".join(copilot_rbac.manifests(SERVICE_ACCOUNT, NAMESPACE, TOKEN_SETTINGS)[i]["rules"][r]["resources"]), v)
    for i, r, v in VERBS])
def test_each_verb_the_role_grants_is_one_the_copilot_needs(site, api_client, manifests, index, rule, verb):
    kube = copilot_client(site["kubeconfig"])
    without = copy.deepcopy(manifests[index])
    without["rules"][rule]["verbs"].remove(verb)
    if not without["rules"][rule]["verbs"]:
        del without["rules"][rule]
    apply(api_client, without)
    try:
        # RBAC's authorizer follows the change within moments.
        said = wait_for("the copilot refused once %s is taken away" % verb, lambda: refused(kube, site), timeout=20)
        assert "403" in said
    finally:
        apply(api_client, manifests[index])
        wait_for("the copilot allowed again", lambda: refused(kube, site) is None, timeout=20)
