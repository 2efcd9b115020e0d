"""The worker and the reconciler with a fake provider per node set and a fake Slurm."""

from __future__ import annotations

import io
import json
import os
import threading

import pytest
from power_fakes import FakeProvider, FakeSlurm, node

from hybridhpc_power import locking, names, queue, reconcile, state
from hybridhpc_power.config import from_dict
from hybridhpc_power.logs import TransitionLog
from hybridhpc_power.providers.base import Instance
from hybridhpc_power.service import Power

NOW = 5000.0
POWERING_UP = ("IDLE", "CLOUD", "NOT_RESPONDING", "POWERING_UP")
POWERED_DOWN = ("IDLE", "CLOUD", "POWERED_DOWN")


class World:
    def __init__(self, tmp_path, slurm_nodes=()):
        self.config = from_dict({
            "cluster": "t",
            "queue_dir": str(tmp_path / "queue"),
            "state_file": str(tmp_path / "lib" / "state.json"),
            "lock_file": str(tmp_path / "lock"),
            "log_file": str(tmp_path / "power.log"),
            "failed_retry_after": 300,
            "resume_grace": 60,
            "nodesets": [{"name": "a", "nodes": "c[1-4]", "provider": "command"},
                         {"name": "b", "nodes": "d[1-2]", "provider": "command"}],
        })
        os.makedirs(self.config.queue_dir)
        self.now = NOW
        self.slurm = FakeSlurm(slurm_nodes or [node(n, *POWERING_UP) for n in self.config.node_map()], clock=lambda: self.now)
        self.providers = {"a": FakeProvider("t"), "b": FakeProvider("t")}
        self.stream = io.StringIO()
        self.log = TransitionLog(self.config.log_file, self.stream, clock=lambda: self.now)
        self.power = Power(self.config, self.slurm, self.providers.__getitem__, self.log, clock=lambda: self.now)

    def request(self, action, *nodes, at=None):
        return queue.write(self.config.queue_dir, action, nodes, NOW - 1 if at is None else at)

    def lines(self):
        return self.stream.getvalue().splitlines()

    def state(self):
        return state.load(self.config.state_file)

    def queued(self):
        return sorted(os.listdir(self.config.queue_dir))


@pytest.fixture
def world(tmp_path):
    return World(tmp_path)


# -- resume ------------------------------------------------------------------------------
def test_resume_starts_machines_in_one_call_per_nodeset_and_empties_the_queue(world):
    world.request(names.RESUME, "c1", "c2")
    world.request(names.RESUME, "c3", "d1")
    assert world.power.work() == 0
    assert world.providers["a"].calls == [("resume", ["c1", "c2", "c3"])]
    assert world.providers["b"].calls == [("resume", ["d1"])]
    assert world.queued() == []
    assert world.slurm.updates() == []
    records = world.state()
    assert records["c1"]["result"] == "started" and records["c1"]["instance"] == world.providers["a"].machines["c1"].id
    assert records["c1"]["resume_requested"] == NOW - 1
    assert any("node=c2 action=resume result=started instance=i-" in line for line in world.lines())
    assert open(world.config.log_file).read() == world.stream.getvalue()


def test_a_partial_failure_marks_only_the_failed_nodes_down_then_powers_them_down(world):
    world.providers["a"].fail = {"c2": "InsufficientInstanceCapacity: none left", "c3": "InsufficientInstanceCapacity: none left",
                                 "c4": "image not found"}
    world.request(names.RESUME, "c1", "c2", "c3", "c4")
    assert world.power.work() == 0
    assert world.slurm.updates() == [
        ("mark_down", ["c2", "c3"], "hybridhpc-power: resume failed: InsufficientInstanceCapacity: none left"),
        ("mark_down", ["c4"], "hybridhpc-power: resume failed: image not found"),
        ("power_down", ["c2", "c3", "c4"]),
    ]
    assert world.slurm.state["c1"].powering_up and not world.slurm.state["c1"].down
    assert all(world.slurm.state[n].down and world.slurm.state[n].powering_down for n in ("c2", "c3", "c4"))
    assert world.state()["c4"] == {"action": "resume", "result": "failed", "reason": "image not found", "at": "1970-01-01T01:23:20.000000Z",
                                   "time": NOW, "resume_requested": NOW - 1}
    assert any('node=c4 action=resume result=failed reason="image not found"' in line for line in world.lines())


def test_a_whole_failed_provider_call_fails_every_node_and_the_exit_status(world):
    world.providers["a"].error = "AuthFailure: credentials expired"
    world.request(names.RESUME, "c1", "c2", "d1")
    assert world.power.work() == 1
    assert ("mark_down", ["c1", "c2"], "hybridhpc-power: resume failed: AuthFailure: credentials expired") in world.slurm.updates()
    assert ("power_down", ["c1", "c2"]) in world.slurm.updates()
    assert world.state()["d1"]["result"] == "started"  # the other node set is not held up
    assert world.queued() == []


def test_a_node_the_provider_forgets_to_report_counts_as_failed(world):
    class Forgetful(FakeProvider):
        def resume(self, nodes):
            result = super().resume(nodes)
            result.started.pop("c2")
            return result

    world.providers["a"] = Forgetful("t")
    world.request(names.RESUME, "c1", "c2")
    world.power.work()
    assert world.slurm.updates()[0] == ("mark_down", ["c2"], "hybridhpc-power: resume failed: the provider did not report this node")


def test_a_node_reported_both_started_and_failed_counts_as_started(world):
    class Confused(FakeProvider):
        def resume(self, nodes):
            result = super().resume(nodes)
            result.failed["c1"] = "retried after a throttling error"
            return result

    world.providers["a"] = Confused("t")
    world.request(names.RESUME, "c1", "c2")
    assert world.power.work() == 0
    assert world.slurm.updates() == [] and world.state()["c1"]["result"] == "started"


def test_a_crashing_provider_fails_its_nodes_with_a_short_reason(world, capsys):
    class Broken(FakeProvider):
        def resume(self, nodes):
            raise KeyError("boom")

    world.providers["a"] = Broken("t")
    world.request(names.RESUME, "c1")
    assert world.power.work() == 1
    assert world.slurm.updates()[0] == ("mark_down", ["c1"], "hybridhpc-power: resume failed: provider error: KeyError")
    assert "Traceback" in capsys.readouterr().err


def test_long_reasons_are_cut_for_slurm(world):
    world.providers["a"].fail = {"c1": "x" * 500}
    world.request(names.RESUME, "c1")
    world.power.work()
    reason = world.slurm.updates()[0][2]
    assert reason.startswith(names.REASON_RESUME_FAILED) and len(reason) <= len(names.REASON_RESUME_FAILED) + 100


def test_when_down_fails_the_node_is_still_powered_down(world):
    world.providers["a"].fail = {"c1": "nope"}
    world.slurm.fail = {"mark_down": "slurm_update error: Invalid node state specified"}
    world.request(names.RESUME, "c1")
    assert world.power.work() == 1
    assert [c[0] for c in world.slurm.updates()] == ["mark_down", "power_down"]
    assert any("node=c1 action=resume result=failed step=down" in line for line in world.lines())


# -- suspend and resume-fail ----------------------------------------------------------------
def test_suspend_removes_machines_in_one_call_and_records_it(world):
    world.providers["a"].resume(["c1", "c2"])
    world.providers["a"].calls.clear()
    world.request(names.SUSPEND, "c1", "c2")
    assert world.power.work() == 0
    assert world.providers["a"].calls == [("suspend", ["c1", "c2"])] and world.providers["a"].machines == {}
    assert world.slurm.updates() == []
    assert world.state()["c2"]["result"] == "stopped"
    assert any("node=c1 action=suspend result=stopped" in line for line in world.lines())


def test_a_failed_suspend_is_logged_and_left_to_the_reconciler(world):
    world.providers["a"].fail = {"c1": "API timeout"}
    world.request(names.SUSPEND, "c1")
    assert world.power.work() == 0
    assert world.state()["c1"]["result"] == "failed" and world.slurm.updates() == []
    assert world.queued() == []


def test_resume_then_suspend_in_the_queue_is_only_a_suspend(world):
    world.request(names.RESUME, "c1", "c2", at=NOW - 10)
    world.request(names.SUSPEND, "c1", at=NOW - 5)
    world.power.work()
    assert world.providers["a"].calls == [("suspend", ["c1"]), ("resume", ["c2"])]


def test_resume_fail_removes_machines_and_takes_over_slurms_resume_timeout_down(tmp_path):
    slurm_nodes = [node("c1", "DOWN", "CLOUD", "POWERED_DOWN", reason="ResumeTimeout reached", changed=NOW - 2),
                   node("c2", "DOWN", "CLOUD", "POWERED_DOWN", reason="hybridhpc-power: resume failed: x : ResumeTimeout reached"),
                   node("c3", "IDLE", "CLOUD", "POWERED_DOWN", reason="ResumeTimeout reached"),  # an admin resumed it already
                   node("c4", "DOWN", "CLOUD", "POWERED_DOWN", reason="admin: broken PSU")]
    world = World(tmp_path, slurm_nodes)
    world.providers["a"].resume(["c1"])
    world.request(names.RESUME_FAIL, "c1", "c2", "c3", "c4")
    assert world.power.work() == 0
    assert world.providers["a"].calls[-1] == ("suspend", ["c1", "c2", "c3", "c4"]) and "c1" not in world.providers["a"].machines
    assert world.slurm.updates() == [("mark_down", ["c1"], names.REASON_RESUME_TIMEOUT)]
    assert world.state()["c1"]["action"] == "resume-fail"


# -- the queue ---------------------------------------------------------------------------
def test_nodes_in_no_nodeset_are_logged_and_dropped(world):
    world.request(names.RESUME, "c1", "zz9")
    assert world.power.work() == 0
    assert world.providers["a"].calls == [("resume", ["c1"])]
    assert any("node=zz9 action=resume result=ignored" in line for line in world.lines())


def test_unreadable_requests_move_out_of_the_queue(world):
    with open(os.path.join(world.config.queue_dir, "1-bad.json"), "w") as handle:
        handle.write("{")
    assert world.power.work() == 1
    assert world.queued() == []
    assert os.listdir(os.path.join(os.path.dirname(world.config.state_file), "rejected")) == ["1-bad.json"]


def test_requests_arriving_while_working_are_handled_before_the_worker_exits(world):
    class Chatty(FakeProvider):
        def resume(self, nodes):
            if nodes == ["c1"]:
                queue.write(world.config.queue_dir, names.RESUME, ["c2"], NOW)
            return super().resume(nodes)

    world.providers["a"] = Chatty("t")
    world.request(names.RESUME, "c1")
    world.power.work()
    assert world.providers["a"].calls == [("resume", ["c1"]), ("resume", ["c2"])] and world.queued() == []


def test_a_worker_that_dies_before_removing_requests_redoes_them(world):
    world.request(names.RESUME, "c1")

    def die(path, nodes):
        raise SystemExit("killed")

    original = state.save
    state.save = die
    try:
        with pytest.raises(SystemExit):
            world.power.work()
    finally:
        state.save = original
    assert len(world.queued()) == 1
    world.power.work()
    assert world.queued() == [] and world.state()["c1"]["result"] == "started"


def test_state_keeps_the_last_resume_request_time_across_later_transitions(world):
    world.request(names.RESUME, "c1", at=NOW - 30)
    world.power.work()
    world.request(names.SUSPEND, "c1", at=NOW - 20)
    world.power.work()
    assert world.state()["c1"]["action"] == "suspend" and world.state()["c1"]["resume_requested"] == NOW - 30


# -- the reconciler ----------------------------------------------------------------------
def reconcile_world(tmp_path):
    slurm_nodes = [
        node("c1", *POWERED_DOWN),  # leaked machine
        node("c2", "ALLOCATED", "CLOUD"),  # machine gone
        node("c3", *POWERING_UP),  # lost request
        node("c4", "DOWN", "CLOUD", "POWERED_DOWN", reason=names.REASON_INSTANCE_GONE, changed=NOW - 301),  # retry
        node("d1", "IDLE", "CLOUD"),
        node("d2", "DOWN", "CLOUD", "POWERED_DOWN", reason="admin: keep out", changed=0),
    ]
    world = World(tmp_path, slurm_nodes)
    world.providers["a"].machines = {"c1": Instance("c1", "i-1", "running"), "old-1": Instance("old-1", "i-9", "running")}
    world.providers["b"].machines = {"d1": Instance("d1", "i-2", "running")}
    return world


def test_reconcile_applies_each_rule(tmp_path):
    world = reconcile_world(tmp_path)
    assert world.power.reconcile() == 0
    assert world.providers["a"].calls == [("instances", []), ("suspend", ["c1"]), ("suspend", ["old-1"])]  # leaked, then orphans
    assert world.slurm.updates() == [
        ("mark_down", ["c2"], names.REASON_INSTANCE_GONE),
        ("power_down", ["c2"]),
        ("return_to_service", ["c4"]),
    ]
    requests, _ = queue.read(world.config.queue_dir)
    assert [(r.action, r.nodes) for r in requests] == [("resume", ("c3",))]
    assert world.slurm.state["c4"].state == {"IDLE", "CLOUD", "POWERED_DOWN"}
    assert world.slurm.state["d2"].down  # someone else's DOWN stays
    assert world.state()["c2"]["result"] == "down"
    assert any("node=c3 action=resume-again result=requested" in line for line in world.lines())


def test_reconcile_dry_run_prints_the_plan_and_changes_nothing(tmp_path):
    world = reconcile_world(tmp_path)
    out = io.StringIO()
    assert world.power.reconcile(dry_run=True, out=out) == 0
    assert world.slurm.updates() == [] and world.queued() == []
    assert [c for c in world.providers["a"].calls if c[0] != "instances"] == []
    text = out.getvalue()
    assert "terminate nodeset=a nodes=old-1" in text and "instance-gone nodeset=a nodes=c2" in text
    assert "resume-again nodeset=a nodes=c3" in text and "return-to-service nodeset=a nodes=c4" in text


def test_reconcile_skips_machine_rules_for_a_nodeset_it_cannot_list(tmp_path):
    world = reconcile_world(tmp_path)
    world.providers["a"].list_error = "docker daemon did not answer"
    assert world.power.reconcile() == 1
    assert world.slurm.updates() == [("return_to_service", ["c4"])]  # the only rule that needs no machine list
    assert [c for c in world.providers["a"].calls if c[0] != "instances"] == []


def test_reconcile_uses_queued_resume_times_for_the_grace_period(tmp_path):
    world = World(tmp_path, [node("c3", *POWERING_UP)])
    world.request(names.RESUME, "c3", at=NOW - 1000)
    # Queued: left to the worker, whatever its age.
    world.power.reconcile()
    assert len(world.queued()) == 1 and world.slurm.updates() == []


def test_reconcile_does_nothing_when_slurm_cannot_be_read(tmp_path):
    world = reconcile_world(tmp_path)
    world.slurm.fail = {"nodes": "scontrol --json show nodes did not answer within 30s"}
    assert world.power.reconcile() == 1
    assert world.providers["a"].calls == [] and world.queued() == []


def test_reconcile_steps_aside_while_a_worker_holds_the_lock(tmp_path):
    world = reconcile_world(tmp_path)
    held, release = threading.Event(), threading.Event()

    def worker():
        with locking.hold(world.config.lock_file):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=worker)
    thread.start()
    held.wait(5)
    try:
        assert world.power.reconcile() == 0
        assert world.slurm.calls == [] and any("reconcile skipped" in line for line in world.lines())
    finally:
        release.set()
        thread.join()


def test_the_worker_waits_for_a_running_reconcile(tmp_path):
    world = World(tmp_path)
    world.request(names.RESUME, "c1")
    held, release = threading.Event(), threading.Event()
    order = []

    def reconciler():
        with locking.hold(world.config.lock_file):
            held.set()
            release.wait(5)
            order.append("reconcile done")

    thread = threading.Thread(target=reconciler)
    thread.start()
    held.wait(5)
    threading.Timer(0.2, release.set).start()
    world.power.work()
    order.append("worker done")
    thread.join()
    assert order == ["reconcile done", "worker done"]


# -- status ------------------------------------------------------------------------------
def test_status_shows_slurm_state_machine_and_last_transition(tmp_path):
    world = reconcile_world(tmp_path)
    world.request(names.RESUME, "c3")
    world.power.work()
    rows = {r["node"]: r for r in world.power.status()}
    assert rows["c3"]["slurm"] == "IDLE+CLOUD+NOT_RESPONDING+POWERING_UP"
    assert rows["c3"]["machine"]["state"] == "running" and rows["c3"]["last"]["result"] == "started"
    assert rows["d2"]["reason"] == "admin: keep out" and rows["d2"]["machine"] is None
    from hybridhpc_power.service import format_status
    text = format_status(list(rows.values()))
    assert text.splitlines()[0].split() == ["NODE", "NODESET", "SLURM", "MACHINE", "LAST", "TRANSITION"]
    assert json.dumps(list(rows.values()))  # --json works


def test_reconcile_plan_and_apply_cover_every_kind():
    assert set(reconcile.KINDS) == {reconcile.TERMINATE, reconcile.INSTANCE_GONE, reconcile.POWER_DOWN, reconcile.RESUME_AGAIN,
                                    reconcile.RETURN_TO_SERVICE}
