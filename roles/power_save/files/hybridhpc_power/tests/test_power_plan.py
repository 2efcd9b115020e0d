"""reconcile.plan: every rule, and the cases where it must do nothing."""

from __future__ import annotations

import json
import pathlib

import pytest
from power_fakes import node

from hybridhpc_power import names, reconcile
from hybridhpc_power.providers.base import Instance
from hybridhpc_power.reconcile import Action, Pending, Settings, plan
from hybridhpc_power.slurm import parse_nodes

NOW = 10_000.0
OURS = names.REASON_RESUME_FAILED + "quota exceeded"
SETTINGS = Settings({"c1": "a", "c2": "a", "c3": "a", "d1": "b"}, failed_retry_after=300, resume_grace=60)

IDLE_UP = ("IDLE", "CLOUD")
ALLOC_UP = ("ALLOCATED", "CLOUD")
POWERED_DOWN = ("IDLE", "CLOUD", "POWERED_DOWN")
DOWN_POWERED_DOWN = ("DOWN", "CLOUD", "POWERED_DOWN")
POWERING_UP = ("IDLE", "CLOUD", "NOT_RESPONDING", "POWERING_UP")
ALLOC_POWERING_UP = ("ALLOCATED", "CLOUD", "NOT_RESPONDING", "POWERING_UP")
POWERING_DOWN = ("IDLE", "CLOUD", "POWERING_DOWN")
DOWN_POWERING_DOWN = ("DOWN", "CLOUD", "POWERING_DOWN")
DOWN_POWERING_UP = ("DOWN", "CLOUD", "NOT_RESPONDING", "POWERING_UP")


def machine(n: str, state: str = "running", id_: str | None = None) -> Instance:
    return Instance(n, id_ or "id-" + n, state)


def run(slurm_nodes, machines=None, queued=None, last_resume=None, settings=SETTINGS, listing_a=True):
    nodes = {n.name: n for n in slurm_nodes}
    instances = {"a": ({m.node: m for m in machines or ()} if listing_a else None), "b": {}}
    return plan(nodes, instances, Pending(queued or {}, last_resume or {}), NOW, settings)


def one(kind, nodes, why, nodeset="a"):
    return [Action(kind, nodeset, tuple(nodes), why)]


# -- leaked machines -----------------------------------------------------------
@pytest.mark.parametrize("flags", [POWERED_DOWN, DOWN_POWERED_DOWN, POWERING_DOWN, DOWN_POWERING_DOWN])
@pytest.mark.parametrize("state", ["running", "pending", "stopped", "stopping"])
def test_a_machine_of_a_powered_down_node_is_terminated(flags, state):
    got = run([node("c1", *flags)], [machine("c1", state)])
    assert [a for a in got if a.kind == reconcile.TERMINATE] == one(reconcile.TERMINATE, ["c1"], reconcile.WHY_LEAKED)


def test_a_terminated_machine_is_not_terminated_again():
    assert run([node("c1", *POWERED_DOWN)], [machine("c1", "terminated")]) == []


@pytest.mark.parametrize("action", [names.RESUME, names.SUSPEND, names.RESUME_FAIL])
def test_a_node_with_a_queued_request_is_left_to_the_worker(action):
    assert run([node("c1", *POWERED_DOWN)], [machine("c1")], queued={"c1": action}) == []


def test_leaked_machines_are_terminated_in_one_batch_per_nodeset():
    got = run([node("c1", *POWERED_DOWN), node("c2", *POWERED_DOWN), node("c3", *POWERED_DOWN)],
              [machine("c3"), machine("c1")])
    assert got == one(reconcile.TERMINATE, ["c1", "c3"], reconcile.WHY_LEAKED)


# -- orphans ------------------------------------------------------------------------
def test_a_machine_for_a_node_in_no_nodeset_is_terminated():
    got = run([node("c1", *IDLE_UP)], [machine("c1"), machine("old-7")])
    assert got == one(reconcile.TERMINATE, ["old-7"], reconcile.WHY_ORPHAN)


def test_an_orphan_listed_by_two_nodesets_sharing_a_daemon_is_terminated_once():
    shared = {"old-7": machine("old-7")}
    got = plan({}, {"a": dict(shared), "b": dict(shared)}, Pending(), NOW, SETTINGS)
    assert got == one(reconcile.TERMINATE, ["old-7"], reconcile.WHY_ORPHAN)


def test_a_node_of_another_nodeset_listed_by_a_shared_daemon_is_not_an_orphan():
    # d1 belongs to node set b; a's provider lists it too (same docker daemon).
    got = plan({"d1": node("d1", *IDLE_UP)}, {"a": {"d1": machine("d1")}, "b": {"d1": machine("d1")}}, Pending(), NOW, SETTINGS)
    assert got == []


# -- instance gone -------------------------------------------------------------------
@pytest.mark.parametrize("flags", [IDLE_UP, ALLOC_UP, ("MIXED", "CLOUD")])
@pytest.mark.parametrize("machines", [[], [machine("c1", "stopped")], [machine("c1", "terminated")], [machine("c1", "stopping")]])
def test_an_up_node_without_a_live_machine_goes_down(flags, machines):
    assert run([node("c1", *flags)], machines) == one(reconcile.INSTANCE_GONE, ["c1"], reconcile.WHY_GONE)


@pytest.mark.parametrize("state", ["running", "pending"])
def test_an_up_node_with_its_machine_is_left_alone(state):
    assert run([node("c1", *ALLOC_UP)], [machine("c1", state)]) == []


def test_an_up_node_is_left_alone_when_its_provider_cannot_list():
    # Unknown is not empty: a failed listing must not take every node down.
    assert run([node("c1", *ALLOC_UP)], listing_a=False) == []


def test_a_nodeset_missing_from_instances_counts_as_unknown():
    assert plan({"c1": node("c1", *ALLOC_UP)}, {}, Pending(), NOW, SETTINGS) == []


def test_an_up_node_drained_by_someone_else_is_never_touched():
    assert run([node("c1", "IDLE", "CLOUD", "DRAIN", reason="admin: bad dimm")]) == []


def test_an_up_node_drained_by_us_goes_down_when_its_machine_is_gone():
    got = run([node("c1", "IDLE", "CLOUD", "DRAIN", reason=names.REASON_PREFIX + " x")])
    assert got == one(reconcile.INSTANCE_GONE, ["c1"], reconcile.WHY_GONE)


@pytest.mark.parametrize("reason", ["admin: broken", "Not responding", ""])
def test_a_powered_up_node_down_for_someone_elses_reason_is_never_touched(reason):
    assert run([node("c1", "DOWN", "CLOUD", reason=reason)]) == []


def test_a_powered_up_node_down_with_our_reason_is_powered_down():
    # Our DOWN (instance gone) happened but the power down after it failed.
    got = run([node("c1", "DOWN", "CLOUD", reason=names.REASON_INSTANCE_GONE, changed=NOW)])
    assert got == one(reconcile.POWER_DOWN, ["c1"], reconcile.WHY_STUCK_DOWN)


# -- lost resume requests ------------------------------------------------------
@pytest.mark.parametrize("flags", [POWERING_UP, ALLOC_POWERING_UP])
@pytest.mark.parametrize("last", [None, NOW - 61, NOW - 60])
def test_a_node_powering_up_without_machine_or_request_is_resumed_again(flags, last):
    got = run([node("c1", *flags)], last_resume={} if last is None else {"c1": last})
    assert got == one(reconcile.RESUME_AGAIN, ["c1"], reconcile.WHY_LOST)


@pytest.mark.parametrize("last", [NOW - 59, NOW - 1, NOW])
def test_a_recent_resume_request_gets_its_grace_period(last):
    assert run([node("c1", *POWERING_UP)], last_resume={"c1": last}) == []


@pytest.mark.parametrize("state", ["running", "pending"])
def test_a_node_powering_up_with_a_machine_is_left_alone(state):
    assert run([node("c1", *POWERING_UP)], [machine("c1", state)]) == []


def test_a_node_powering_up_with_a_stopped_machine_is_resumed_again():
    got = run([node("c1", *POWERING_UP)], [machine("c1", "stopped")], last_resume={"c1": NOW - 600})
    assert got == one(reconcile.RESUME_AGAIN, ["c1"], reconcile.WHY_LOST)


def test_a_node_powering_up_with_a_queued_resume_is_left_alone():
    assert run([node("c1", *POWERING_UP)], queued={"c1": names.RESUME}) == []


def test_a_node_powering_up_is_left_alone_when_its_provider_cannot_list():
    assert run([node("c1", *POWERING_UP)], listing_a=False) == []


def test_our_down_while_powering_up_is_followed_by_a_power_down():
    got = run([node("c1", *DOWN_POWERING_UP, reason=OURS, changed=NOW)])
    assert got == one(reconcile.POWER_DOWN, ["c1"], reconcile.WHY_STUCK_DOWN)


def test_someone_elses_down_while_powering_up_is_left_to_slurm():
    assert run([node("c1", *DOWN_POWERING_UP, reason="admin")]) == []


# -- return to service ------------------------------------------------------------
@pytest.mark.parametrize("reason", [OURS, names.REASON_INSTANCE_GONE, names.REASON_RESUME_TIMEOUT, OURS + " : ResumeTimeout reached"])
@pytest.mark.parametrize("changed", [NOW - 300, NOW - 10_000, None])
def test_our_down_node_returns_to_service_after_failed_retry_after(reason, changed):
    got = run([node("c1", *DOWN_POWERED_DOWN, reason=reason, changed=changed)])
    assert got == one(reconcile.RETURN_TO_SERVICE, ["c1"], reconcile.WHY_RETRY)


@pytest.mark.parametrize("changed", [NOW - 299, NOW])
def test_our_down_node_waits_for_failed_retry_after(changed):
    assert run([node("c1", *DOWN_POWERED_DOWN, reason=OURS, changed=changed)]) == []


@pytest.mark.parametrize("reason", ["ResumeTimeout reached", "admin: disk", "hybridhpc-powerX", " hybridhpc-power: x", ""])
def test_a_down_node_with_someone_elses_reason_is_never_returned(reason):
    assert run([node("c1", *DOWN_POWERED_DOWN, reason=reason, changed=NOW - 10_000)]) == []


def test_a_node_still_powering_down_is_not_returned_yet():
    assert run([node("c1", *DOWN_POWERING_DOWN, reason=OURS, changed=NOW - 10_000)]) == []


def test_a_down_node_with_a_leaked_machine_is_cleaned_and_returned():
    got = run([node("c1", *DOWN_POWERED_DOWN, reason=OURS, changed=NOW - 10_000)], [machine("c1")])
    assert got == one(reconcile.TERMINATE, ["c1"], reconcile.WHY_LEAKED) + one(reconcile.RETURN_TO_SERVICE, ["c1"], reconcile.WHY_RETRY)


# -- nothing to do ------------------------------------------------------------------
@pytest.mark.parametrize("flags,machines", [
    (POWERED_DOWN, []),
    (POWERING_DOWN, []),
    (IDLE_UP, [machine("c1")]),
    (ALLOC_UP, [machine("c1", "pending")]),
    # POWER_DOWN: Slurm asked for a power down (SuspendProgram comes next), seen after POWER_DOWN_FORCE on idle#.
    (("IDLE", "CLOUD", "NOT_RESPONDING", "POWER_DOWN"), []),
    (("IDLE", "CLOUD", "POWER_DOWN"), [machine("c1")]),
])
def test_consistent_nodes_need_nothing(flags, machines):
    assert run([node("c1", *flags)], machines) == []


def test_nodes_in_no_nodeset_and_nodes_unknown_to_slurm_are_ignored():
    # "login1" is not ours; c2 is in a node set but Slurm does not know it (slurm.conf and the config disagree).
    assert run([node("login1", "DOWN", reason=OURS, changed=0), node("c1", *POWERED_DOWN)], [machine("c2")]) == []


def test_actions_come_in_apply_order_and_group_per_nodeset():
    slurm_nodes = [node("c1", *POWERED_DOWN), node("c2", *ALLOC_UP), node("c3", *DOWN_POWERED_DOWN, reason=OURS, changed=0),
                   node("d1", *POWERING_UP)]
    got = plan({n.name: n for n in slurm_nodes}, {"a": {"c1": machine("c1")}, "b": {}}, Pending(), NOW, SETTINGS)
    assert [(a.kind, a.nodeset, a.nodes) for a in got] == [
        (reconcile.TERMINATE, "a", ("c1",)),
        (reconcile.INSTANCE_GONE, "a", ("c2",)),
        (reconcile.RESUME_AGAIN, "b", ("d1",)),
        (reconcile.RETURN_TO_SERVICE, "a", ("c3",)),
    ]


def test_plan_reads_the_real_scontrol_fixture():
    text = (pathlib.Path(__file__).parent / "data" / "scontrol_show_nodes_24.11.json").read_text()
    nodes = parse_nodes(text)
    settings = Settings(dict.fromkeys(nodes, "a"), failed_retry_after=30, resume_grace=60)
    got = plan(nodes, {"a": {"cl-2": machine("cl-2"), "cl-5": machine("cl-5")}}, Pending(), 1795490258 + 31, settings)
    assert [(a.kind, a.nodes) for a in got] == [
        (reconcile.TERMINATE, ("cl-5",)),  # POWERING_DOWN with a machine
        (reconcile.RESUME_AGAIN, ("cl-3",)),  # POWERING_UP, no machine, no request known
        (reconcile.RETURN_TO_SERVICE, ("cl-1",)),  # DOWN~ with our reason, 31 s old
    ]


# -- scale --------------------------------------------------------------------------------
def test_ten_thousand_nodes_parse_and_plan_every_node():
    """Correct at scale; how fast is tests/bench/bench_power.py's (make bench-power), never a unit test's."""
    template = json.loads((pathlib.Path(__file__).parent / "data" / "scontrol_show_nodes_24.11.json").read_text())
    kinds = template["nodes"]
    nodes_json = []
    for i in range(10_000):
        entry = dict(kinds[i % len(kinds)])
        entry["name"] = "cl-%d" % i
        nodes_json.append(entry)
    text = json.dumps({**template, "nodes": nodes_json}, indent=2)  # scontrol indents: ~24 MB
    machines = {"cl-%d" % i: machine("cl-%d" % i) for i in range(0, 10_000, 2)}
    settings = Settings({"cl-%d" % i: "a" for i in range(10_000)}, failed_retry_after=30, resume_grace=60)
    nodes = parse_nodes(text)
    got = plan(nodes, {"a": machines}, Pending(), 1795490258 + 31, settings)
    assert len(nodes) == 10_000 and sum(len(a.nodes) for a in got) > 5_000
