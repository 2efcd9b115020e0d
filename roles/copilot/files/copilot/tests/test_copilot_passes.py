"""Event passes look only at what changed since the last pass; full passes at everything."""

from __future__ import annotations

import contextlib
import copy
import logging
import time

from copilot_builders import CLUSTER, admission, generic_node, node_object, pod_object, rest_slurm, rest_slurm_of
from copilot_process import KubeDouble
from fakes.slurm_state import FakeNode, FakeSlurm, SlurmctldDown
from fakes.slurmrestd import FakeSlurmrestd

from hybridhpc_copilot import core, names
from hybridhpc_copilot.informers import Informer, keep_generic_node
from hybridhpc_copilot.kube import PODS
from hybridhpc_copilot.passes import Copilot, Scope

NODES = ("c0", "c1", "c2")


def make_world(fault=None):
    """The API server double (in memory) and Slurm with three shared nodes, and a copilot that synced them."""
    kube = KubeDouble(listen=False).start()
    slurm = FakeSlurm([FakeNode(name, 4, 8000) for name in NODES], fault=fault)
    for name in NODES:
        kube.add_in_process(generic_node("k8s-" + name, name, finalizers=()))
    for pod in ("p1", "p2"):
        kube.add_in_process(pod_object(pod))
    copilot = Copilot(kube.client(), rest_slurm_of(slurm), core.Settings(configured={n: core.Capacity(4, 8000) for n in NODES}),
                      CLUSTER)
    assert copilot.sync(full=True).ok  # finalizers and ledgers everywhere
    copilot.pump()
    return kube, slurm, copilot


def admit(kube, node, entry):
    kube.update_in_process(node, lambda obj: obj["spec"]["admissions"].append(entry))


def state(kube, node, uid):
    return kube.peek(node)["status"][names.STATUS_ADMISSIONS][uid]["state"]


def looked_at(copilot) -> list:
    """The GenericNodes each round hands to the decisions."""
    seen, observe = [], copilot.observe

    def recording(*args, **kwargs):
        observed = observe(*args, **kwargs)
        seen.append(sorted(observed.generic_nodes))
        return observed

    copilot.observe = recording
    return seen


def test_an_event_pass_decides_only_for_the_generic_node_that_changed():
    kube, slurm, copilot = make_world()
    admit(kube, "k8s-c1", admission("a1", cpu="1", memory="1Gi"))
    copilot.pump()
    seen = looked_at(copilot)
    result = copilot.sync()
    assert result.ok and {a.node for a in result.actions} == {"k8s-c1"}
    assert seen and all(names_ == ["k8s-c1"] for names_ in seen)
    assert copilot.sync(full=True).ok and seen[-1] == ["k8s-c0", "k8s-c1", "k8s-c2"]
    assert state(kube, "k8s-c1", "a1") == names.GRANTED and slurm.nodes["c1"].gres == "k8scpu:3,k8smemory:6976"
    copilot.pump()  # only the echoes of its own writes
    assert copilot.changes.take() == (False, set(), set())


def test_a_slurm_change_the_poller_saw_brings_its_generic_node_in():
    kube, slurm, copilot = make_world()
    slurm.nodes["c2"].count_cpu = 1  # someone set the count by hand
    assert copilot.sync().rounds == 0  # nothing noted yet: nothing to look at
    copilot.poller.poll()
    result = copilot.sync()
    assert [(a.kind, a.node) for a in result.actions] == [("SetGres", "k8s-c2")]
    assert slurm.nodes["c2"].gres == "k8scpu:4,k8smemory:8000"


def test_pod_events_wake_only_the_generic_nodes_that_read_the_pod():
    kube, slurm, copilot = make_world()
    admit(kube, "k8s-c0", admission("a1", pod="p1", cpu="2", memory="1Gi"))
    copilot.pump()
    assert copilot.sync().ok and state(kube, "k8s-c0", "a1") == names.GRANTED
    copilot.pump()
    kube.delete_in_process("p2", PODS, "default")  # no admission names p2
    copilot.pump()
    assert copilot.changes.take() == (False, set(), set())
    kube.delete_in_process("p1", PODS, "default")
    copilot.pump()
    result = copilot.sync()
    assert {a.node for a in result.actions} == {"k8s-c0"} and "ReleaseAdmission" in [a.kind for a in result.actions]
    assert state(kube, "k8s-c0", "a1") == names.RELEASED and slurm.nodes["c0"].gres == "k8scpu:4,k8smemory:8000"


def test_a_slurm_node_no_generic_node_shares_any_more_gets_its_configured_counts_back():
    kube, slurm, copilot = make_world()
    admit(kube, "k8s-c0", admission("a1", cpu="2", memory="1Gi"))
    copilot.pump()
    assert copilot.sync().ok and slurm.nodes["c0"].gres == "k8scpu:2,k8smemory:6976"
    kube.update_in_process("k8s-c0", lambda obj: obj["spec"].update(type="Kubernetes"))  # no longer a shared Slurm node
    copilot.pump()
    result = copilot.sync()
    assert [(a.kind, a.slurm_node) for a in result.actions] == [("SetGres", "c0")]
    assert slurm.nodes["c0"].gres == "k8scpu:4,k8smemory:8000"


def test_generic_nodes_sharing_one_slurm_node_are_decided_together():
    kube, slurm, copilot = make_world()
    kube.add_in_process(generic_node("k8s-a-c1", "c1", finalizers=()))  # sorts first: it owns c1 now
    copilot.pump()
    copilot.sync()
    admit(kube, "k8s-c1", admission("a1"))
    copilot.pump()
    assert copilot.sync().ok
    ledger = kube.peek("k8s-c1")["status"][names.STATUS_ADMISSIONS]
    assert ledger["a1"]["state"] == names.DENIED and "shared through GenericNode k8s-a-c1" in ledger["a1"]["reason"]


def test_a_reservation_is_looked_at_again_by_passes_that_bring_nothing_new():
    down = {"set_node_gres": True}

    def fault(operation, _node):
        if down.get(operation):
            raise SlurmctldDown("slurmctld not answering")

    kube, slurm, copilot = make_world(fault)
    admit(kube, "k8s-c1", admission("a1"))
    copilot.pump()
    assert not copilot.sync().ok and state(kube, "k8s-c1", "a1") == names.RESERVED
    copilot.pump()
    copilot.changes.take()  # what the failed pass noted for a retry: gone, the reservation alone remains
    down["set_node_gres"] = False
    assert not copilot.sync().ok and state(kube, "k8s-c1", "a1") == names.RESERVED  # the failed GRES write waits its backoff
    copilot.executor.backoff.clock = lambda: time.monotonic() + copilot.executor.backoff.limit
    assert copilot.sync().ok and state(kube, "k8s-c1", "a1") == names.GRANTED


def test_among_many_nodes_an_event_pass_reads_only_its_own_from_slurm():
    kube, slurm = KubeDouble(window=2000, listen=False).start(), FakeSlurm([FakeNode("n%03d" % i, 4, 8000) for i in range(200)])
    for i in range(200):
        kube.add_in_process(generic_node("k8s-n%03d" % i, "n%03d" % i, finalizers=()))
    kube.add_in_process(pod_object("p1"))
    rest = FakeSlurmrestd(slurm, listen=False)
    copilot = Copilot(kube.client(), rest_slurm(rest), core.Settings(), CLUSTER)
    assert copilot.sync(full=True).ok
    copilot.pump()
    rest.requests.clear()
    admit(kube, "k8s-n007", admission("a1"))
    copilot.pump()
    assert copilot.sync().ok and state(kube, "k8s-n007", "a1") == names.GRANTED
    reads = [r.path.rsplit("/", 2)[-2:] for r in rest.calls("GET")]
    assert reads and all(read == ["node", "n007"] for read in reads), reads


def after_first_round(copilot, happen):
    """``happen()`` once the pass's first round carried its actions out (as the watch threads would note it)."""
    run_groups = copilot.executor.run_groups

    def then(groups):
        outcome = run_groups(groups)
        copilot.executor.run_groups = run_groups
        happen()
        return outcome

    copilot.executor.run_groups = then


def test_what_changes_while_a_pass_runs_joins_its_next_round():
    """In a burst the round that grants one batch of admissions reserves the next, on the same fresh Slurm read;
    the round after looks only at what is left to do (a1 was granted: its GenericNode is settled)."""
    kube, slurm, copilot = make_world()
    admit(kube, "k8s-c0", admission("a1", cpu="1", memory="1Gi"))
    copilot.pump()
    seen = looked_at(copilot)
    after_first_round(copilot, lambda: (admit(kube, "k8s-c1", admission("b1", pod="p2", cpu="1", memory="1Gi")), copilot.pump()))
    calls = len(slurm.calls)
    result = copilot.sync()
    assert result.ok and state(kube, "k8s-c0", "a1") == state(kube, "k8s-c1", "b1") == names.GRANTED
    assert seen == [["k8s-c0"], ["k8s-c0", "k8s-c1"], ["k8s-c1"]]
    assert [call[0] for call in slurm.calls[calls:]].count("node_states") == 3  # two passes read four times
    copilot.pump()
    assert copilot.changes.take() == (False, set(), set())


def test_what_changes_during_a_passs_last_round_is_left_to_the_next_pass():
    kube, slurm, copilot = make_world()
    copilot.max_rounds = 1
    admit(kube, "k8s-c0", admission("a1", cpu="1", memory="1Gi"))
    copilot.pump()
    after_first_round(copilot, lambda: (admit(kube, "k8s-c1", admission("b1", pod="p2", cpu="1", memory="1Gi")), copilot.pump()))
    assert copilot.sync().ok and state(kube, "k8s-c0", "a1") == names.RESERVED
    assert copilot.changes.take() == (False, {"k8s-c1"}, set())


def test_a_pass_leaves_a_look_at_everything_to_the_next_pass():
    kube, slurm, copilot = make_world()
    admit(kube, "k8s-c0", admission("a1", cpu="1", memory="1Gi"))
    copilot.pump()
    seen = looked_at(copilot)
    after_first_round(copilot, lambda: copilot.changes.note(["k8s-c1"], everything=True))  # as after a relist
    assert copilot.sync().ok and seen == [["k8s-c0"], ["k8s-c0"]]
    assert copilot.changes.take() == (True, {"k8s-c1"}, set())


def test_events_of_kubernetes_nodes_and_generic_nodes_that_share_no_slurm_node_run_no_round():
    kube, slurm, copilot = make_world()
    kube.add_in_process(generic_node("worker-1", "c0", finalizers=(), node_type="Other"))
    kube.add_in_process(node_object("worker-1"))
    kube.add_in_process(node_object("worker-2"))
    copilot.pump()
    calls = len(slurm.calls)
    result = copilot.sync()
    assert (result.ok, result.rounds, slurm.calls[calls:]) == (True, 0, [])


def test_an_event_pass_reads_the_placeholder_jobs_of_its_own_generic_nodes_and_of_those_that_share_nothing():
    kube, slurm, copilot = make_world()
    scope = Scope({"k8s-c1"}, {"c1"})
    wanted = copilot._owner_in(scope)
    assert [wanted(name) for name in ("k8s-c1", "k8s-c2", "k8s-gone")] == [True, False, True]


def test_an_admission_is_granted_in_two_rounds_and_the_pass_stops_there():
    """Reserve and lower the GRES, then read Slurm once and grant: the status written last holds no
    reservation and nothing else changed, so deciding again would find the same (a third round
    and its Slurm read were a quarter of a burst's cost)."""
    kube, slurm, copilot = make_world()
    admit(kube, "k8s-c1", admission("a1", cpu="1", memory="1Gi"))
    copilot.pump()
    seen = looked_at(copilot)
    result = copilot.sync()
    assert result.ok and state(kube, "k8s-c1", "a1") == names.GRANTED
    assert [a.kind for a in result.actions] == ["WriteStatus", "ReserveAdmission", "SetGres", "WriteStatus", "GrantAdmission"]
    assert result.rounds == 2 and len(seen) == 2
    copilot.pump()
    assert copilot.sync().actions == [] and copilot.sync(full=True).actions == []  # it was settled


@contextlib.contextmanager
def log_lines():
    """(level name, msg) of every line the copilot logs meanwhile, debug included."""
    lines: list[tuple[str, str]] = []
    logger = logging.getLogger("hybridhpc_copilot")
    handler = logging.Handler()
    handler.emit = lambda record: lines.append((record.levelname, record.getMessage()))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        yield lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def test_the_writes_that_carry_out_a_decision_log_at_debug_and_others_at_info():
    """An admission logs its decisions at info; the ledger writes and the GRES change behind them at
    debug. A GRES re-asserted with no decision behind it (someone changed it) stays at info."""
    kube, slurm, copilot = make_world()
    admit(kube, "k8s-c1", admission("a1", cpu="1", memory="1Gi"))
    copilot.pump()
    with log_lines() as lines:
        assert copilot.sync().ok and state(kube, "k8s-c1", "a1") == names.GRANTED
    assert [line for line in lines if line[0] == "INFO"] == [("INFO", "ReserveAdmission"), ("INFO", "GrantAdmission")]
    assert sorted(line for line in lines if line[0] == "DEBUG") == [("DEBUG", "SetGres"), ("DEBUG", "WriteStatus"), ("DEBUG", "WriteStatus")]
    slurm.nodes["c2"].count_cpu = 1  # someone set the count by hand
    copilot.poller.poll()
    with log_lines() as lines:
        assert copilot.sync().ok
    assert lines == [("INFO", "SetGres")]


def test_the_echo_of_a_write_that_comes_before_its_answer_is_no_change():
    """The watch often brings our own write back before the write's answer is stored: it is not a
    change somebody else made, and the next pass does not decide that GenericNode again for it."""
    kube, slurm, copilot = make_world()
    admit(kube, "k8s-c1", admission("a1", cpu="1", memory="1Gi"))
    copilot.pump()
    client = copilot.executor.kube
    write_ledger = client.write_ledger

    def echo_first(obj, status, resource_version=None):
        written = write_ledger(obj, status, resource_version)
        copilot.generic_nodes.apply("MODIFIED", copy.deepcopy(written))  # the watch thread was quicker
        return written

    client.write_ledger = echo_first
    assert copilot.sync().ok and state(kube, "k8s-c1", "a1") == names.GRANTED
    assert copilot.changes.take() == (False, set(), set())


def test_what_the_watch_says_while_a_write_is_on_its_way_goes_in_once_it_answers():
    noted = []
    informer = Informer(None, "genericnodes", on_change=lambda _kind, key: noted.append(key))

    def version(rv):
        return {"metadata": {"name": "g", "resourceVersion": str(rv)}}

    def cached(rv):  # as the informer keeps it
        return keep_generic_node(version(rv))

    def held():
        return informer.get("g").resource_version

    informer.store["g"] = cached(1)
    informer.writing("g")
    informer.apply("MODIFIED", version(2))
    assert noted == [] and held() == "1"  # held back
    informer.done_writing("g", cached(2))
    assert noted == []  # the echo of the write
    informer.put(version(2))
    informer.writing("g")
    informer.apply("MODIFIED", version(4))  # somebody wrote after us
    informer.done_writing("g", cached(3))
    assert noted == ["g"] and held() == "4"
    informer.writing("g")
    informer.apply("MODIFIED", version(5))
    informer.done_writing("g", None)  # the write failed: the event goes in as it came
    assert noted[1:] and set(noted) == {"g"} and held() == "5"


def test_a_reservation_slurm_need_not_change_for_takes_another_round_to_grant():
    """A status written with an admission still Reserved waits for Slurm to be read again, even
    when no Slurm action went with it: the same pass grants it."""
    kube, slurm, copilot = make_world()
    admit(kube, "k8s-c0", admission("a1", cpu="1", memory="1Gi"))
    copilot.pump()
    assert copilot.sync().ok and state(kube, "k8s-c0", "a1") == names.GRANTED
    kube.update_in_process("k8s-c0", lambda obj: obj["spec"]["admissions"].clear())
    admit(kube, "k8s-c0", admission("a2", cpu="1", memory="1Gi"))  # a1 gone, a2 the same size: Slurm's GRES stays
    copilot.pump()
    result = copilot.sync()
    assert "SetGres" not in [a.kind for a in result.actions]
    assert result.ok and state(kube, "k8s-c0", "a2") == names.GRANTED and result.rounds >= 2
