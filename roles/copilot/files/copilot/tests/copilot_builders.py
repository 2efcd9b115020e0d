"""Builders for GenericNodes, pods and Slurm nodes, and the copilot's Slurm client to the fake slurmrestd, shared by the copilot's tests."""

from __future__ import annotations

from fakes.slurm_state import FakeSlurm
from fakes.slurmrestd import FakeSlurmrestd

from hybridhpc_copilot import core, names
from hybridhpc_copilot.kube import generic_node_from_api
from hybridhpc_copilot.slurm import RestSlurm

NOW = 1_800_000_000.0
CLUSTER = "onprem"


def admission(uid, pod="p1", namespace="default", cpu="1", memory="1Gi", pod_uid=None):
    entry = {"uid": uid, "pod": {"namespace": namespace, "name": pod}, "request": {"cpu": cpu, "memory": memory}}
    if pod_uid:
        entry["pod"]["uid"] = pod_uid
    return entry


def generic_node(name="k8s-c1", alias="c1", admissions=(), status=None, rv="10", finalizers=(names.FINALIZER,),
                 deleting=False, node_type=names.NODE_TYPE_SLURM, cluster=CLUSTER):
    obj = {
        "apiVersion": names.API_VERSION,
        "kind": names.KIND,
        "metadata": {
            "name": name,
            "resourceVersion": rv,
            "labels": {names.LABEL_CLUSTER_NAME: cluster, names.LABEL_CLUSTER_NAMESPACE: "slurm"},
            "finalizers": list(finalizers),
        },
        "spec": {"alias": alias, "type": node_type, "admissions": [dict(a) for a in admissions]},
    }
    if status is not None:
        obj["status"] = status
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return obj


def pod_object(name="p1", namespace="default", phase="Running"):
    """A Pod as the API server holds it once its kubelet reported ``phase``."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "status": {"phase": phase}}


def node_object(name):
    """A Kubernetes Node."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}}


def entry(state, pod="p1", namespace="default", cpu="1", memory="1Gi", uid="pod-uid-p1", since=NOW - 1, reason="r"):
    return {"state": state, "reason": reason, "pod": {"namespace": namespace, "name": pod, "uid": uid},
            "request": {"cpu": cpu, "memory": memory}, "lastTransitionTime": core.timestamp(since)}


def slurm_node(name="c1", cpu=4, mem=8000, used_cpu=0, used_mem=0, other="", states=("IDLE",), reason="",
               alloc_cpus=None, alloc_mem=None):
    gres = ",".join(x for x in (other, "k8scpu:%d,k8smemory:%d" % (cpu, mem)) if x)
    return core.SlurmNode(
        name=name, gres=gres, gres_used="k8scpu:%d,k8smemory:%d" % (used_cpu, used_mem),
        alloc_cpus=used_cpu if alloc_cpus is None else alloc_cpus,
        alloc_memory_mb=used_mem if alloc_mem is None else alloc_mem,
        states=tuple(states), reason=reason)


def pod(name="p1", namespace="default", uid=None, phase="Running"):
    return core.Pod(namespace=namespace, name=name, uid=uid or "pod-uid-" + name, phase=phase)


def observed(generic_nodes=(), pods=(), slurm=(), kube_nodes=(), configured=None, now=NOW, slurm_down=False, **settings):
    configured = {"c1": core.Capacity(4, 8000)} if configured is None else configured
    return core.Observed(
        generic_nodes={g["metadata"]["name"]: generic_node_from_api(g) for g in generic_nodes},  # as the informer parses it
        pods={(p.namespace, p.name): p for p in pods},
        kube_nodes={n.name: n for n in kube_nodes},
        slurm_nodes=None if slurm_down else {s.name: s for s in slurm},
        now=now,
        settings=core.Settings(configured=configured, **settings),
    )


def of(actions, kind):
    return [a for a in actions if isinstance(a, kind)]


def status_of(actions):
    writes = of(actions, core.WriteStatus)
    assert len(writes) <= 1
    return writes[0].status if writes else None


def parse_exposition(text):
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            head, value = line.rsplit(" ", 1)
            name, _, labels = head.partition("{")
            pairs = tuple(sorted(tuple(p.split("=", 1)) for p in labels.rstrip("}").split(",") if p))
            samples[(name, tuple((k, v.strip('"')) for k, v in pairs))] = float(value)
    return samples


def rest_slurm(rest: FakeSlurmrestd, **options) -> RestSlurm:
    """The copilot's own Slurm client (``RestSlurm``) talking to ``rest`` through its httpx transport (no socket)."""
    slurm = RestSlurm("http://fake-slurmrestd", transport=rest.transport(), user="slurm", **options)
    slurm.client.token = "unchecked"  # a token is checked only with a jwt_key
    return slurm


def rest_slurm_of(slurm: FakeSlurm, **options) -> RestSlurm:
    """The copilot's Slurm client to ``slurm`` through the fake slurmrestd (no socket): how in-process tests give the copilot Slurm."""
    return rest_slurm(FakeSlurmrestd(slurm, listen=False), **options)
