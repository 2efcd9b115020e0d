# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the slurm_qos module.

sacctmgr calls are answered by Replay with output recorded from the lab's
real sacctmgr 24.11.5 (tests/unit/fixtures/sacctmgr/qos_*_24.11.5.txt).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pytest
from sacctmgr_module_harness import SACCTMGR, ExitJson, FailJson, Replay, fixture, module_runner

from ansible_collections.hybridhpc.slurm.plugins.modules import slurm_qos

WRITTEN = " Modified qos...\n  gold\n"


@pytest.fixture
def run_main(monkeypatch):
    """Run slurm_qos.main() with args; sacctmgr calls go to a Replay."""
    return module_runner(monkeypatch, slurm_qos)


GOLD = fixture("qos_show_gold_24.11.5.txt")
WANTED = {"name": "gold", "max_wall": "2-00:00:00", "max_tres_per_user": {"cpu": 8}}
MODIFY = [SACCTMGR, "--immediate", "modify", "qos", "where", "name=gold", "set",
          "maxwall=2880", "maxtresperuser=cpu=8,mem=-1"]


def test_modify_runs_the_planned_command_and_rereads(run_main):
    after = GOLD.replace("1-00:00:00|cpu=8,mem=16G", "2-00:00:00|cpu=8")
    replay = Replay((0, GOLD, ""), (0, WRITTEN, ""), (0, after, ""))
    kind, result = run_main(replay, WANTED, diff=True)
    assert kind is ExitJson
    assert result["changed"] is True
    assert result["commands"] == [MODIFY]
    assert replay.writes == [MODIFY]
    assert result["qos"]["max_wall"] == 2880
    assert result["qos"]["max_tres_per_user"] == {"cpu": "8"}
    assert result["diff"]["before"]["max_wall"] == 1440
    assert result["diff"]["after"]["max_wall"] == 2880


def test_check_mode_reports_the_same_command_and_writes_nothing(run_main):
    replay = Replay((0, GOLD, ""))
    kind, result = run_main(replay, WANTED, check_mode=True)
    assert kind is ExitJson
    assert result["changed"] is True
    assert result["commands"] == [MODIFY]
    assert replay.writes == []
    assert result["qos"]["max_wall"] == 2880
    assert "diff" not in result


def test_second_run_is_unchanged(run_main):
    replay = Replay((0, GOLD, ""))
    kind, result = run_main(replay, {"name": "gold", "max_wall": 1440, "flags": ["NoDecay", "DenyOnLimit"],
                                     "max_tres_per_user": {"cpu": 8, "mem": "16G"}})
    assert (kind, result["changed"], result["commands"]) == (ExitJson, False, [])


def test_add_when_missing(run_main):
    replay = Replay((0, "", ""), (0, " Adding QOS(s)\n  freshq\n", ""),
                    (0, fixture("qos_show_fresh_24.11.5.txt"), ""))
    kind, result = run_main(replay, {"name": "FreshQ"}, diff=True)
    assert result["commands"] == [[SACCTMGR, "--immediate", "add", "qos", "freshq"]]
    assert result["diff"] == {"before": {"name": "freshq", "state": "absent"},
                              "after": dict(result["qos"], state="present")}


def test_absent_refused_while_default_qos_fails_clearly(run_main):
    replay = Replay((0, GOLD, ""), (1, fixture("qos_delete_default_qos_24.11.5.txt"), ""))
    kind, result = run_main(replay, {"name": "gold", "state": "absent"})
    assert kind is FailJson
    assert "still the default QoS" in result["msg"]
    assert result["rc"] == 1
    assert result["cmd"] == [SACCTMGR, "--immediate", "delete", "qos", "where", "name=gold"]


@pytest.mark.parametrize("args,message", [
    ({"flags": ["Bogus"]}, "flags: unknown QoS flag 'Bogus'"),
    ({"preempt_mode": "sometimes"}, "preempt_mode: unknown mode"),
    ({"max_wall": "1h"}, "max_wall: invalid time '1h'"),
    ({"max_tres_per_job": {"mem": "lots"}}, "max_tres_per_job: invalid mem value"),
])
def test_bad_input_fails_before_writing(run_main, args, message):
    replay = Replay((0, GOLD, ""))
    kind, result = run_main(replay, dict(args, name="gold"))
    assert kind is FailJson
    assert message in result["msg"]
    assert replay.writes == []
