"""What the daemon spends: no memory on modules it never uses, no CPU on work a request can skip."""

from __future__ import annotations

import dataclasses
import json
import pathlib
import subprocess
import sys

import httpx
import pytest
from copilot_builders import admission, entry, generic_node, observed, pod, rest_slurm, slurm_node
from copilot_process import KubeDouble
from fakes.slurm_state import FakeNode, FakeSlurm
from fakes.slurmrestd import FakeSlurmrestd
from memory_peak import peak_allocations

from hybridhpc_copilot import compaction, core
from hybridhpc_copilot.compaction import compact_status
from hybridhpc_copilot.executor import Executor
from hybridhpc_copilot.informers import Informer, keep_generic_node
from hybridhpc_copilot.kube import CREDENTIALS_REUSE_SECONDS, NODES, KubeClient, PermanentError
from hybridhpc_copilot.slurm import RestSlurm, node_from_rest

# The copilot's source tree (not conftest's PACKAGE: make unit runs several test trees, each with a conftest).
PACKAGE = pathlib.Path(__file__).resolve().parents[1]
# Modules httpx's command-line client pulls in (httpx._main): the daemon never runs it.
CLI_MODULES = ("httpx._main", "click", "rich", "pygments")


def _loaded_after(code: str) -> list[str]:
    """Which of CLI_MODULES a fresh interpreter holds after running ``code`` (the copilot importable)."""
    probe = code + "\nimport json, sys\nprint(json.dumps([m for m in %r if m in sys.modules]))" % (CLI_MODULES,)
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True,
                         env={"PYTHONPATH": str(PACKAGE / "src"), "PATH": "/usr/bin:/bin"})
    loaded: list[str] = json.loads(out.stdout.splitlines()[-1])
    return loaded


def test_the_daemon_loads_httpx_without_its_command_line_client(kubeconfig):
    # Where httpx's CLI dependencies are installed (Debian's python3-httpx depends on them), a plain
    # import loads them: the control that this test can fail here.
    assert set(_loaded_after("import httpx")) == set(CLI_MODULES)
    # What the daemon's entry point loads and builds before its loop starts.
    started = ("from hybridhpc_copilot import __main__\nfrom hybridhpc_copilot.kube import KubeClient\n"
               "from hybridhpc_copilot.slurm import RestSlurm\n"
               "kube = KubeClient(%r)\nslurm = RestSlurm('http://127.0.0.1:9')\n" % kubeconfig)
    assert _loaded_after(started) == []
    # httpx itself works, and a later explicit import of its CLI module still finds it.
    works = started + "import httpx\nassert httpx.Client and callable(httpx.main)\nimport httpx._main\n"
    assert _loaded_after(works) == ["httpx._main", "click", "rich", "pygments"]


def test_the_kube_client_reads_its_credentials_once_a_second_and_after_a_401(api_server, kubeconfig):
    now = [100.0]
    kube = KubeClient(kubeconfig, clock=lambda: now[0])
    # A kubeconfig with a token: the package refreshes it through this hook, at each read of the credentials.
    assert kube.configuration.refresh_api_key_hook is not None
    good = kube.configuration.api_key["BearerToken"]
    token, reads = [good], []

    def refresh(configuration):
        reads.append(now[0])
        configuration.api_key["BearerToken"] = token[0]

    kube.configuration.refresh_api_key_hook = refresh
    for _unused in range(5):
        assert kube.get_object(NODES, "absent") is None
    assert len(reads) == 1
    now[0] += CREDENTIALS_REUSE_SECONDS
    kube.get_object(NODES, "absent")
    assert len(reads) == 2

    # The token refreshed to one the server refuses: the 401 makes the next request read the credentials again.
    token[0] = "Bearer not-a-token"
    now[0] += CREDENTIALS_REUSE_SECONDS
    with pytest.raises(PermanentError):
        kube.get_object(NODES, "absent")
    token[0] = good
    assert kube.get_object(NODES, "absent") is None
    assert len(reads) == 4


def test_slurm_nodes_share_their_repeated_strings_and_carry_no_dict():
    # Two nodes decoded apart (two polls, or two entries of one answer): equal strings, distinct objects.
    text = '{"name": "c%d", "gres": "k8scpu:64,k8smemory:256000", "state": ["idle", "drain"], "reason": "copilot: x"}'
    a, b = node_from_rest(json.loads(text % 1)), node_from_rest(json.loads(text % 2))
    assert a.gres is b.gres and a.reason is b.reason and all(x is y for x, y in zip(a.states, b.states, strict=True))
    assert a.name == "c1" and a.states == ("IDLE", "DRAIN")
    assert not hasattr(a, "__dict__")


def test_reading_every_slurm_node_never_holds_the_whole_answer_decoded():
    # slurmrestd's answer, encoded once (a fake serving it in this process would build it at each read, and be measured).
    fake = FakeSlurmrestd(FakeSlurm([FakeNode("c%05d" % i, 64, 256000) for i in range(3000)]), listen=False)
    answer = rest_slurm(fake).client._send("GET", "/slurm/v0.0.42/nodes").content
    transport = httpx.MockTransport(lambda request: httpx.Response(
        200, content=answer if request.url.path.endswith("/nodes") else b'{"pings": [], "errors": []}'))
    slurm = RestSlurm("http://slurmrestd", transport=transport)
    slurm.node_states()  # the version probe
    decoded_first, _nodes = peak_allocations(lambda: {n.name: n for n in map(node_from_rest, slurm.client.nodes())})
    del _nodes
    as_decoded, nodes = peak_allocations(slurm.node_states)
    assert len(nodes) == 3000 and nodes["c00042"].cpus == 64
    assert as_decoded < 0.8 * decoded_first, (as_decoded, decoded_first)


def test_a_first_start_keeps_each_decided_status_compacted_as_it_goes():
    # A first start: no GenericNode has a status or a finalizer yet, so every one gets both written.
    count = 2000
    nodes = ["c%05d" % i for i in range(count)]
    world = observed(generic_nodes=[generic_node("k8s-" + n, n, finalizers=()) for n in nodes],
                     slurm=[slurm_node(n, 64, 256000) for n in nodes], configured=dict.fromkeys(nodes, core.Capacity(64, 256000)))
    core.reconcile(world, compact_status)  # the compaction's table of shared parts filled before both
    compacted_after, _actions = peak_allocations(lambda: [compact_status(a) for a in core.reconcile(world)])
    del _actions
    compacted_as_decided, actions = peak_allocations(lambda: core.reconcile(world, compact_status))
    statuses = [a.status for a in actions if isinstance(a, core.WriteStatus)]
    assert len(statuses) == count and statuses[0] == core.reconcile(world)[1].status
    assert statuses[0]["allocatedResources"] is statuses[1]["allocatedResources"]  # compacted: equal parts shared
    assert compacted_as_decided < 0.5 * compacted_after, (compacted_as_decided, compacted_after)


def _counting_compact(monkeypatch):
    """Count the parts compaction walks (``compaction._compact`` calls itself through the module, so each part counts)."""
    calls = [0]
    walk = compaction._compact

    def counted(value, like=None):
        calls[0] += 1
        return walk(value, like)

    monkeypatch.setattr(compaction, "_compact", counted)
    return calls


def _granted_world(admitted=20):
    """A GenericNode whose ledger holds ``admitted`` granted admissions, and one more admission asked for."""
    asked = [admission("u%02d" % i, pod="p%02d" % i, cpu="100m", memory="10Mi") for i in range(admitted + 1)]
    ledger = {"u%02d" % i: entry("Granted", pod="p%02d" % i, cpu="100m", memory="10Mi", uid="pod-uid-p%02d" % i)
              for i in range(admitted)}
    gn = keep_generic_node(generic_node("k8s-c1", "c1", admissions=asked, status={"admissions": ledger})).raw
    return observed(generic_nodes=[gn], pods=[pod("p%02d" % i, uid="pod-uid-p%02d" % i, phase="Pending") for i in range(admitted + 1)],
                    slurm=[slurm_node("c1", 64, 256000, used_cpu=2, used_mem=200)], configured={"c1": core.Capacity(64, 256000)})


def test_a_status_to_write_is_compacted_like_the_cached_one_it_replaces(monkeypatch):
    world = _granted_world()
    (write,) = [a for a in core.reconcile(world) if isinstance(a, core.WriteStatus)]
    cached = world.generic_nodes["k8s-c1"]
    assert write.status["admissions"]["u20"]["state"] == "Reserved"
    calls = _counting_compact(monkeypatch)
    alone = compact_status(write)
    walked_alone, calls[0] = calls[0], 0
    like_cached = compact_status(write, world.generic_nodes)
    assert like_cached.status == alone.status == write.status
    # The 20 unchanged ledger entries are the cached ones (found equal in C), not walked part by part:
    # what is walked is the new entry and the parts the cached status did not have.
    assert like_cached.status["admissions"]["u00"] is cached.status["admissions"]["u00"]
    assert 4 * calls[0] < walked_alone, (calls[0], walked_alone)


def test_a_written_status_goes_into_the_cache_without_being_walked_again(monkeypatch):
    double = KubeDouble(listen=False).start()
    world = _granted_world()
    double.add_in_process(world.generic_nodes["k8s-c1"].raw)
    kube = double.client()
    informer = Informer(kube, "genericnodes")
    informer.relist()
    cached = informer.get("k8s-c1")
    write = compact_status(next(a for a in core.reconcile(dataclasses.replace(world, generic_nodes={"k8s-c1": cached}))
                                      if isinstance(a, core.WriteStatus)), {"k8s-c1": cached})
    calls = _counting_compact(monkeypatch)
    outcome = Executor(kube, None, informer).run([write])
    assert not outcome.errors and outcome.wrote == 1
    kept = informer.get("k8s-c1")
    assert kept.status is write.status and kept.resource_version != cached.resource_version
    assert kept.raw["spec"] is cached.raw["spec"]
    assert calls[0] < 20, calls[0]  # the metadata, not the 21 ledger entries again
