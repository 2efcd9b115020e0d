# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the slurm_account module.

sacctmgr calls are answered by Replay with output recorded from the lab's
real sacctmgr 24.11.5 (tests/unit/fixtures/sacctmgr/account_*, assoc_*_24.11.5.txt).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pytest
from sacctmgr_module_harness import SACCTMGR, ExitJson, FailJson, Replay, fixture, module_runner

from ansible_collections.hybridhpc.slurm.plugins.modules import slurm_account


@pytest.fixture
def run_main(monkeypatch):
    """Run slurm_account.main() with args; sacctmgr calls go to a Replay."""
    return module_runner(monkeypatch, slurm_account)


SHOW = (fixture("account_show_theory_24.11.5.txt"), fixture("assoc_show_theory_wopl_24.11.5.txt"))
MOVE = [SACCTMGR, "--immediate", "modify", "account", "where", "name=theory", "cluster=acctbox", "set",
        "parent=physics"]


def reads():
    return [(0, out, "") for out in SHOW]


def test_check_mode_reports_the_move_and_writes_nothing(run_main):
    replay = Replay(*reads())
    kind, result = run_main(replay, {"name": "theory", "parent": "physics"}, check_mode=True, diff=True)
    assert (kind, result["changed"], result["commands"]) == (ExitJson, True, [MOVE])
    assert replay.writes == []
    assert result["diff"]["after"]["associations"]["acctbox"]["parent"] == "physics"


def test_apply_then_reread(run_main):
    moved = fixture("assoc_show_theory_wopl_24.11.5.txt").replace("|chem|", "|physics|")
    replay = Replay(*reads(), (0, " Modified account associations...\n", ""),
                    (0, SHOW[0], ""), (0, moved, ""))
    kind, result = run_main(replay, {"name": "theory", "parent": "physics"})
    assert replay.writes == [MOVE]
    assert result["account"]["associations"]["acctbox"]["parent"] == "physics"


def test_same_values_unchanged(run_main):
    kind, result = run_main(Replay(*reads()), {"name": "theory", "parent": "chem", "grp_jobs": 10,
                                               "grp_tres": {"cpu": 64}, "max_wall": "24:00:00"})
    assert (kind, result["changed"], result["commands"]) == (ExitJson, False, [])


def test_delete_refused_fails_clearly(run_main):
    replay = Replay(*reads(), (1, fixture("account_delete_default_24.11.5.txt"), ""))
    kind, result = run_main(replay, {"name": "theory", "state": "absent"})
    assert kind is FailJson
    assert "default account" in result["msg"] and "slurm_user" in result["msg"]


def test_bad_fairshare_fails_before_writing(run_main):
    replay = Replay(*reads())
    kind, result = run_main(replay, {"name": "theory", "fairshare": "lots"})
    assert kind is FailJson
    assert "fairshare: expected a whole number" in result["msg"]
    assert replay.writes == []
