"""The copilot's CRD, its client, kwok nodes and the real scheduler, and 410 Gone, against a real control plane.

No doubles: every answer here is kube-apiserver's (v1.37, on etcd), every
binding kube-scheduler's, every Ready node and Running pod kwok's. The
GenericNode calls go through the copilot's own client
(hybridhpc_copilot.kube.KubeClient), the rest through the venv's kubernetes
package.
"""

from __future__ import annotations

import uuid

import pytest
from hybridhpc_copilot import kube as copilot_kube_module
from hybridhpc_copilot import names

from .conftest import CRD_FILE, wait_for

pytestmark = pytest.mark.usefixtures("genericnode_crd")


def unique(prefix):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:8])


def generic_node(name, **spec):
    return {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": {"name": name, "labels": {names.LABEL_CLUSTER_NAME: "onprem", names.LABEL_CLUSTER_NAMESPACE: "slurm"}},
        "spec": {"type": names.NODE_TYPE_SLURM, **spec},
    }


@pytest.fixture
def custom(api_client):
    import kubernetes

    return kubernetes.client.CustomObjectsApi(api_client)


@pytest.fixture
def core(api_client):
    import kubernetes

    return kubernetes.client.CoreV1Api(api_client)


def create_generic_node(custom, body):
    return custom.create_cluster_custom_object(names.GROUP, names.VERSION, names.PLURAL, body)


# -- the CRD ------------------------------------------------------------------------------


def test_crd_is_established_and_served_as_written(genericnode_crd, api_client):
    import kubernetes
    import yaml

    written = yaml.safe_load(CRD_FILE.read_text())
    conditions = {c.type: c.status for c in genericnode_crd.status.conditions}
    assert conditions["Established"] == "True" and conditions["NamesAccepted"] == "True"
    # Structural: the server found no NonStructuralSchema problem with it.
    assert conditions.get("NonStructuralSchema") in (None, "False")
    assert genericnode_crd.status.accepted_names.short_names == ["gn"]
    # Discovery serves the resource, with its status subresource.
    resources = kubernetes.client.CustomObjectsApi(api_client).get_api_resources(names.GROUP, names.VERSION)
    served = {r.name: r for r in resources.resources}
    assert served[names.PLURAL].kind == names.KIND and served[names.PLURAL].namespaced is False
    assert "%s/status" % names.PLURAL in served
    stored = api_client.sanitize_for_serialization(genericnode_crd)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert stored == written["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def test_genericnode_round_trips_through_the_copilot_client(custom, copilot_kube):
    name = unique("gn")
    body = generic_node(name, alias="c7", admissions=[
        {"uid": "a-1", "pod": {"namespace": "default", "name": "web-1"}, "request": {"cpu": "2735m", "memory": "3417Mi"}},
        {"uid": "a-2", "pod": {"namespace": "default", "name": "web-2", "uid": "0e06"}, "request": {"cpu": 2}},
    ], ackField={"kept": True})
    body["topLevelJunk"] = "pruned"
    created = create_generic_node(custom, body)

    got = copilot_kube.get_object(copilot_kube_module.GENERICNODES, name)
    assert got["spec"] == body["spec"]  # spec keeps unknown fields (x-kubernetes-preserve-unknown-fields)
    assert "topLevelJunk" not in got  # a field the schema does not know is pruned at the root
    assert got["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
    assert got["metadata"]["labels"][names.LABEL_CLUSTER_NAME] == "onprem"

    items, list_rv = copilot_kube.list_objects(copilot_kube_module.GENERICNODES, label_selector="%s=onprem" % names.LABEL_CLUSTER_NAME)
    assert name in {i["metadata"]["name"] for i in items} and int(list_rv) >= int(created["metadata"]["resourceVersion"])

    # The ledger: PUT .../status at the resourceVersion read.
    status = {
        "allocatedResources": [{"type": "Slurm", "allocated": {"cpu": "3", "memory": "4000Mi"}},
                               {"type": "Kubernetes", "allocated": {"cpu": "2735m", "memory": "3417Mi"}}],
        "admissions": {"a-1": {"state": "Granted", "reason": "Slurm GRES lowered", "pod": {"namespace": "default", "name": "web-1"},
                               "request": {"cpu": "2735m", "memory": "3417Mi"}, "lastTransitionTime": "2026-11-22T02:42:18Z"}},
        "slurm": {"node": "c7", "configuredGres": "k8scpu:4,k8smemory:8000", "wantedGres": "k8scpu:1,k8smemory:4583"},
        "conditions": [{"type": "Overcommitted", "status": "False", "reason": "WithinCapacity", "message": "",
                        "lastTransitionTime": "2026-11-22T02:42:18Z"}],
    }
    written = copilot_kube.write_ledger(got, status)
    assert written["status"] == status and written["spec"] == body["spec"]
    assert int(written["metadata"]["resourceVersion"]) > int(got["metadata"]["resourceVersion"])
    assert copilot_kube.get_object(copilot_kube_module.GENERICNODES, name)["status"] == status

    # A write at the old resourceVersion: the server's 409, the copilot's Conflict.
    with pytest.raises(copilot_kube_module.Conflict):
        copilot_kube.write_ledger(got, {**status, "slurm": {"node": "c7"}})
    # The status subresource does not write the spec, nor the main resource the status.
    changed_spec = {**written, "spec": {**written["spec"], "alias": "other"}}
    after = copilot_kube.write_ledger(changed_spec, status)
    assert after["spec"]["alias"] == "c7"

    with_finalizer = copilot_kube.set_finalizer(after, True)
    assert names.FINALIZER in with_finalizer["metadata"]["finalizers"]
    assert with_finalizer["status"] == status
    without = copilot_kube.set_finalizer(with_finalizer, False)
    assert names.FINALIZER not in (without["metadata"].get("finalizers") or [])


def test_the_server_takes_every_ledger_the_copilot_writes(custom, copilot_kube):
    """Each admission state and each strategy the copilot knows (its own constants) passes the CRD's schema."""
    from hybridhpc_copilot.config import STRATEGIES

    created = create_generic_node(custom, generic_node(unique("states")))
    current = created
    for state in names.ADMISSION_STATES:
        for strategy in STRATEGIES:
            status = {"admissions": {"u-%s" % state: {"state": state, "reason": "r", "request": {"cpu": 1, "memory": "1Gi"},
                                                      "lastTransitionTime": "2026-11-22T02:42:18Z"}},
                      "slurm": {"node": "c1", "strategy": strategy, "placeholderJobs": [41, 42]}}
            current = copilot_kube.write_ledger(current, status)
            assert current["status"] == status


@pytest.mark.parametrize("spec, status, field", [
    pytest.param({"alias": "c1"}, None, "spec.type", id="spec-without-type"),
    pytest.param({"type": "Slurm", "alias": 7}, None, "spec.alias", id="alias-not-a-string"),
    pytest.param({"type": "Slurm", "admissions": [{"uid": "", "pod": {"namespace": "d", "name": "p"}}]}, None,
                 "spec.admissions[0].uid", id="empty-admission-uid"),
    pytest.param({"type": "Slurm", "admissions": [{"uid": "u"}]}, None, "spec.admissions[0].pod", id="admission-without-pod"),
    pytest.param({"type": "Slurm"}, {"admissions": {"u": {"state": "Bogus"}}}, "status.admissions.u.state",
                 id="unknown-admission-state"),
    pytest.param({"type": "Slurm"}, {"slurm": {"strategy": "magic"}}, "status.slurm.strategy", id="unknown-strategy"),
    pytest.param({"type": "Slurm"}, {"allocatedResources": [{"type": "Slurm"}]}, "status.allocatedResources[0].allocated",
                 id="allocation-without-amounts"),
])
def test_the_server_refuses_what_the_schema_forbids(custom, copilot_kube, spec, status, field):
    import kubernetes

    name = unique("bad")
    body = generic_node(name)
    body["spec"] = spec
    if status is None:
        with pytest.raises(kubernetes.client.ApiException) as refused:
            create_generic_node(custom, body)
        assert refused.value.status == 422, refused.value.body
        message = refused.value.body
    else:
        # The copilot writes the status, through the status subresource: the server validates that too.
        created = create_generic_node(custom, body)
        with pytest.raises(copilot_kube_module.PermanentError) as refused:
            copilot_kube.write_ledger(created, status)
        assert refused.value.status == 422, refused.value
        message = str(refused.value)
    assert field in message, message


# -- kwok nodes and the real scheduler ----------------------------------------------------


def condition(obj, kind):
    for c in obj.status.conditions or []:
        if c.type == kind:
            return c
    return None


def make_node(core, name, labels, capacity):
    core.create_node({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"capacity": capacity, "allocatable": capacity},
    })

    def ready():
        node = core.read_node(name)
        c = condition(node, "Ready")
        return node if c is not None and c.status == "True" else None

    return wait_for("node %s Ready (kwok)" % name, ready)


def test_a_kwok_node_becomes_ready_and_the_scheduler_binds_a_pod_to_it(core, namespace, copilot_kube):
    pool = unique("pool")
    capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    node_name = unique("kwok-node")
    other_name = unique("kwok-other")
    node = make_node(core, node_name, {"hybridhpc.test/pool": pool}, capacity)
    make_node(core, other_name, {"hybridhpc.test/pool": "elsewhere"}, capacity)
    assert node.status.capacity == capacity and node.status.allocatable == capacity
    assert node.metadata.labels["hybridhpc.test/pool"] == pool
    assert node.spec.taints is None  # nothing (no node lifecycle controller) keeps it from the scheduler

    def pod(name, selector, cpu="2"):
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"nodeSelector": selector, "containers": [
                    {"name": "c", "image": "registry.invalid/none:1", "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]}}

    core.create_namespaced_pod(namespace, pod("placed", {"hybridhpc.test/pool": pool}))
    core.create_namespaced_pod(namespace, pod("nowhere", {"hybridhpc.test/pool": unique("absent")}))
    core.create_namespaced_pod(namespace, pod("too-big", {"hybridhpc.test/pool": pool}, cpu="9"))

    def running():
        p = core.read_namespaced_pod("placed", namespace)
        return p if p.status.phase == "Running" else None

    placed = wait_for("pod placed Running on %s" % node_name, running)
    assert placed.spec.node_name == node_name
    assert condition(placed, "PodScheduled").status == "True"
    assert condition(placed, "Ready").status == "True"
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=placed,reason=Scheduled").items
    assert events and events[0].reporting_component == "default-scheduler", events
    assert node_name in events[0].message

    # The scheduler, not something binding every pod: no node matches this selector, and none has 9 CPUs.
    for unschedulable in ("nowhere", "too-big"):
        def refused(name=unschedulable):
            p = core.read_namespaced_pod(name, namespace)
            c = condition(p, "PodScheduled")
            return p if c is not None and c.status == "False" and c.reason == "Unschedulable" else None

        p = wait_for("pod %s Unschedulable" % unschedulable, refused)
        assert p.spec.node_name is None and p.status.phase == "Pending"

    # The copilot's node reads and its one Node write (a merge patch of one annotation).
    nodes = copilot_kube.list_objects(copilot_kube_module.NODES)[0]
    assert {node_name, other_name} <= {n["metadata"]["name"] for n in nodes}
    annotated = copilot_kube.annotate_node(node_name, "hybridhpc.io/test", "yes")
    assert annotated["metadata"]["annotations"]["hybridhpc.io/test"] == "yes"
    assert annotated["metadata"]["labels"]["hybridhpc.test/pool"] == pool
    removed = copilot_kube.annotate_node(node_name, "hybridhpc.io/test", None)
    assert "hybridhpc.io/test" not in (removed["metadata"].get("annotations") or {})


# -- 410 Gone -----------------------------------------------------------------------------
#
# kube-apiserver serves watches from its watch cache, which keeps the recent
# events of each resource in memory and goes on serving a watch from a
# revision etcd has compacted away (it expires a watch only when the revision
# has left its own window: more than 100 events and 75 s back). A compaction
# alone makes a watch 410 Gone when the server watches etcd itself: the
# planes of these tests run with --watch-cache=false.


def write_three_ledgers(copilot_kube, custom, name):
    """A GenericNode written four times: its first resourceVersion and its last state."""
    created = create_generic_node(custom, generic_node(name))
    current = created
    for i in range(3):
        current = copilot_kube.write_ledger(current, {"slurm": {"node": name, "wantedGres": "k8scpu:%d" % i}})
    return created["metadata"]["resourceVersion"], current


def replay(copilot_kube, name, resource_version, count=3):
    """The first ``count`` events of GenericNode ``name`` a watch from ``resource_version`` sends."""
    seen = []
    for kind, obj in copilot_kube.watch_objects(copilot_kube_module.GENERICNODES, resource_version, timeout_seconds=5):
        if obj.get("metadata", {}).get("name") == name:
            seen.append((kind, obj["status"]["slurm"]["wantedGres"]))
        if len(seen) == count:
            break
    return seen


EXPECTED_REPLAY = [("MODIFIED", "k8scpu:%d" % i) for i in range(3)]


@pytest.fixture(params=["etcd-compaction", "apiserver-compaction"])
def uncached_plane(request):
    """A control plane of its own whose API server watches etcd directly (--watch-cache=false), the GenericNode
    CRD applied; etcd compacted by the test (etcd's API) or by the API server itself every second."""
    from .conftest import admin_kubeconfig, apply_crd, copilot_client, official_client, running_plane

    interval = "1s" if request.param == "apiserver-compaction" else "0"
    with running_plane(watch_cache=False, etcd_compaction_interval=interval) as plane:
        kubeconfig = admin_kubeconfig(plane)
        with official_client(kubeconfig) as client:
            apply_crd(client)
            import kubernetes

            yield request.param, plane, kubernetes.client.CustomObjectsApi(client), copilot_client(kubeconfig)


def test_a_watch_from_before_an_etcd_compaction_gets_410_gone(uncached_plane):
    how, plane, custom, copilot_kube = uncached_plane
    name = unique("gone")
    old_rv, current = write_three_ledgers(copilot_kube, custom, name)

    # Before the compaction the watch replays what happened since old_rv (etcd's history).
    assert not plane.etcd_compacted(int(old_rv))
    assert replay(copilot_kube, name, old_rv) == EXPECTED_REPLAY

    if how == "etcd-compaction":
        assert plane.compact_etcd() > int(old_rv)
    else:  # the API server's compactor compacts to the revision it saw one interval before
        wait_for("the API server compacts etcd past %s" % old_rv, lambda: plane.etcd_compacted(int(old_rv)), timeout=30)
    assert plane.etcd_compacted(int(old_rv))

    with pytest.raises(copilot_kube_module.Gone) as gone:
        replay(copilot_kube, name, old_rv)
    assert gone.value.status == 410
    # What the copilot does after a Gone works: list again, and watch from the list's resourceVersion.
    items, rv = copilot_kube.list_objects(copilot_kube_module.GENERICNODES)
    assert name in {i["metadata"]["name"] for i in items} and int(rv) >= int(current["metadata"]["resourceVersion"])
    copilot_kube.write_ledger(current, {"slurm": {"node": name, "wantedGres": "k8scpu:9"}})
    assert replay(copilot_kube, name, rv, count=1) == [("MODIFIED", "k8scpu:9")]


def test_the_watch_cache_serves_a_watch_etcd_has_compacted(control_plane, custom, copilot_kube):
    """Why the test above turns the watch cache off: with it on (the default), a compaction alone expires nothing."""
    name = unique("cached")
    old_rv = write_three_ledgers(copilot_kube, custom, name)[0]
    assert control_plane.compact_etcd() > int(old_rv)
    assert control_plane.etcd_compacted(int(old_rv))
    assert replay(copilot_kube, name, old_rv) == EXPECTED_REPLAY
