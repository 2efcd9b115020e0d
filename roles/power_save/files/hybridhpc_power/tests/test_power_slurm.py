"""The Slurm boundary: parsing scontrol's JSON (as 24.11.5 prints it) and the exact argv of each update."""

from __future__ import annotations

import json
import pathlib
import subprocess

import pytest

from hybridhpc_power import slurm
from hybridhpc_power.slurm import Scontrol, SlurmError, parse_nodes

FIXTURE = (pathlib.Path(__file__).parent / "data" / "scontrol_show_nodes_24.11.json").read_text()


def test_parse_nodes_reads_names_flags_reasons_and_times_from_real_output():
    nodes = parse_nodes(FIXTURE)
    assert sorted(nodes) == ["cl-1", "cl-2", "cl-3", "cl-4", "cl-5"]
    assert nodes["cl-1"].state == {"DOWN", "CLOUD", "NOT_RESPONDING", "POWERED_DOWN"}
    assert nodes["cl-1"].reason == "hybridhpc-power: resume failed: quota exceeded"
    assert nodes["cl-1"].reason_changed_at == 1795490258.0
    assert nodes["cl-1"].reason_is_ours and nodes["cl-1"].down and nodes["cl-1"].powered_down
    assert nodes["cl-2"].up and nodes["cl-2"].reason_changed_at is None  # {"set": true, "number": 0}
    assert nodes["cl-3"].powering_up and not nodes["cl-3"].up
    assert nodes["cl-5"].powering_down
    assert nodes["cl-1"].describe() == "DOWN+CLOUD+NOT_RESPONDING+POWERED_DOWN"


def test_parse_nodes_takes_bytes_and_old_style_state_strings():
    old = {"nodes": [{"name": "n1", "state": "IDLE", "state_flags": ["CLOUD", "POWERED_DOWN"], "reason": "x", "reason_changed_at": 17}]}
    node = parse_nodes(json.dumps(old).encode())["n1"]
    assert node.state == {"IDLE", "CLOUD", "POWERED_DOWN"} and node.reason_changed_at == 17.0


@pytest.mark.parametrize("text,message", [
    ("", "printed no JSON"),
    ("[]", "without a nodes list"),
    ('{"nodes": [], "errors": [{"description": "Unable to contact slurm controller", "error_number": 1}]}', "Unable to contact"),
])
def test_parse_nodes_rejects_what_is_not_a_node_list(text, message):
    with pytest.raises(SlurmError, match=message):
        parse_nodes(text)


def test_an_unknown_node_is_simply_absent():
    # What scontrol 24.11 prints (exit 0) for a node it does not know.
    text = '{"nodes": [], "errors": [], "warnings": [{"description": "No nodes to dump", "source": ""}]}'
    assert parse_nodes(text) == {}


class Runner:
    def __init__(self, stdout="", returncode=0, stderr="", raise_=None):
        self.argv = []
        self.stdout, self.returncode, self.stderr, self.raise_ = stdout, returncode, stderr, raise_

    def __call__(self, argv, **kwargs):
        assert kwargs["capture_output"] and kwargs["timeout"] == 7 and "shell" not in kwargs
        self.argv.append(argv)
        if self.raise_:
            raise self.raise_
        return subprocess.CompletedProcess(argv, self.returncode, self.stdout, self.stderr)


@pytest.mark.parametrize("call,argv", [
    (lambda s: s.mark_down(["c2", "c1", "c3"], "hybridhpc-power: resume failed: no capacity"),
     ["/sbin/scontrol", "update", "nodename=c[1-3]", "state=DOWN", "reason=hybridhpc-power: resume failed: no capacity"]),
    (lambda s: s.power_down(["c1", "c5"]), ["/sbin/scontrol", "update", "nodename=c[1,5]", "state=POWER_DOWN_FORCE"]),
    (lambda s: s.return_to_service(["c1"]), ["/sbin/scontrol", "update", "nodename=c1", "state=RESUME"]),
])
def test_updates_run_scontrol_with_an_argv_list_and_a_compressed_hostlist(call, argv):
    runner = Runner()
    call(Scontrol("/sbin/scontrol", 7, runner))
    assert runner.argv == [argv]


def test_nodes_reads_all_nodes_in_one_call_or_the_named_ones():
    runner = Runner(stdout=FIXTURE)
    scontrol = Scontrol("/sbin/scontrol", 7, runner)
    assert len(scontrol.nodes()) == 5
    scontrol.nodes(["cl-2", "cl-1"])
    assert runner.argv == [["/sbin/scontrol", "--json", "show", "nodes"], ["/sbin/scontrol", "--json", "show", "nodes", "cl-[1-2]"]]


def test_a_huge_sparse_hostlist_is_split_over_several_calls(monkeypatch):
    monkeypatch.setattr(slurm, "_MAX_HOSTLIST", 100)
    runner = Runner()
    nodes = ["n%d" % i for i in range(0, 200, 2)]  # no ranges: n[0,2,4,...]
    Scontrol("/sbin/scontrol", 7, runner).power_down(nodes)
    assert len(runner.argv) > 1 and all(len(a[2]) <= 100 + len("nodename=") for a in runner.argv)
    from hybridhpc_power import hostlists
    seen = [n for a in runner.argv for n in hostlists.expand(a[2][len("nodename="):])]
    assert sorted(seen) == sorted(nodes)


@pytest.mark.parametrize("runner,message", [
    (Runner(returncode=1, stderr="slurm_update error: Invalid node name specified\n"), r"scontrol update nodename=c1 failed \(exit 1\): slurm_update error"),
    (Runner(raise_=subprocess.TimeoutExpired("scontrol", 7)), "did not answer within 7s"),
    (Runner(raise_=FileNotFoundError(2, "No such file or directory")), r"cannot run /sbin/scontrol: No such file.*\"scontrol\" in the configuration"),
])
def test_failures_become_slurm_errors_that_say_what_happened(runner, message):
    with pytest.raises(SlurmError, match=message):
        Scontrol("/sbin/scontrol", 7, runner).return_to_service(["c1"])
