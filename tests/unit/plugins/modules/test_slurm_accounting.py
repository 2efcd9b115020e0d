# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the slurm_accounting module (many QoS, accounts and users in one run).

sacctmgr calls are answered by Replay with output recorded from the lab's
real sacctmgr 24.11.5, the same recordings the one-object modules' tests use:
an entry here must run exactly the commands that module runs.
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pytest
from sacctmgr_module_harness import ALICE_ASSOCIATIONS, SACCTMGR, ExitJson, FailJson, Replay, fixture, module_runner

from ansible_collections.hybridhpc.slurm.plugins.module_utils import sacctmgr_batch
from ansible_collections.hybridhpc.slurm.plugins.modules import slurm_accounting


@pytest.fixture
def run_main(monkeypatch):
    """Run slurm_accounting.main() with args; sacctmgr calls go to a Replay."""
    return module_runner(monkeypatch, slurm_accounting)


GOLD = fixture("qos_show_gold_24.11.5.txt")
THEORY = (fixture("account_show_theory_24.11.5.txt"), fixture("assoc_show_theory_wopl_24.11.5.txt"))
ALICE = (fixture("user_show_alice_24.11.5.txt"), fixture("assoc_show_alice_wopl_24.11.5.txt"))
ALICE_ASSOCS = ALICE_ASSOCIATIONS
MODIFY_GOLD = [SACCTMGR, "--immediate", "modify", "qos", "where", "name=gold", "set",
               "maxwall=2880", "maxtresperuser=cpu=8,mem=-1"]
MOVE_THEORY = [SACCTMGR, "--immediate", "modify", "account", "where", "name=theory", "cluster=acctbox", "set",
               "parent=physics"]
GOLD_WANTED = {"name": "gold", "max_wall": "2-00:00:00", "max_tres_per_user": {"cpu": 8}}


def answers(*outputs):
    return [(0, out, "") for out in outputs]


def test_every_entry_runs_what_its_own_module_runs_in_one_run(run_main):
    replay = Replay(*answers(GOLD, *THEORY, *ALICE))
    kind, result = run_main(replay, {
        "users": [{"name": "alice", "associations": ALICE_ASSOCS}],
        "accounts": [{"name": "theory", "parent": "physics"}],
        "qos": [GOLD_WANTED],
    }, check_mode=True, diff=True)
    assert kind is ExitJson
    assert result["changed"] is True
    assert result["commands"] == [MODIFY_GOLD, MOVE_THEORY]
    assert [(c["option"], c["name"]) for c in result["changes"]] == [("qos", "gold"), ("accounts", "theory")]
    assert replay.writes == []
    assert [d["before_header"] for d in result["diff"]] == ["qos[0] (gold)", "accounts[0] (theory)"]
    assert result["diff"][1]["after"]["associations"]["acctbox"]["parent"] == "physics"


def test_in_sync_is_unchanged(run_main):
    kind, result = run_main(Replay(*answers(*ALICE)), {"users": [{"name": "alice", "associations": ALICE_ASSOCS}]})
    assert (kind, result["changed"], result["commands"], result["changes"]) == (ExitJson, False, [], [])


def test_present_first_qos_accounts_users_then_absent_users_accounts_qos():
    params = sacctmgr_batch.validated({
        "qos": [{"name": "old", "state": "absent"}, {"name": "short"}],
        "accounts": [{"name": "gone", "state": "absent"}, {"name": "science"}, {"name": "chem"}],
        "users": [{"name": "carol", "state": "absent"}, {"name": "alice"}],
    })
    order = [(option, params["name"]) for option, _index, params in sacctmgr_batch.steps(params)]
    assert order == [("qos", "short"), ("accounts", "science"), ("accounts", "chem"), ("users", "alice"),
                     ("users", "carol"), ("accounts", "gone"), ("qos", "old")]


def test_a_bad_entry_fails_before_anything_runs_and_is_named(run_main):
    replay = Replay()
    kind, result = run_main(replay, {"qos": [GOLD_WANTED],
                                     "accounts": [{"name": "science"}, {"name": "chem", "parnet": "science"}]})
    assert kind is FailJson
    assert result["msg"].startswith("accounts[1] (chem): ")
    assert "parnet" in result["msg"]
    assert replay.calls == []


def test_a_failing_entry_is_named_and_what_ran_before_it_is_reported(run_main):
    after = GOLD.replace("1-00:00:00|cpu=8,mem=16G", "2-00:00:00|cpu=8")
    replay = Replay(*answers(GOLD, " Modified qos...\n  gold\n", after, *ALICE),
                    (1, fixture("user_default_not_assoc_24.11.5.txt"), ""))
    kind, result = run_main(replay, {"qos": [GOLD_WANTED], "users": [
        {"name": "alice", "associations": ALICE_ASSOCS[:3], "default_account": "physics"}]})
    assert kind is FailJson
    assert result["msg"].startswith("users[0] (alice): ")
    assert "default_account must be one of the user's accounts" in result["msg"]
    assert result["commands"] == [MODIFY_GOLD]
    assert result["changed"] is True


def test_values_are_checked_as_the_one_object_module_checks_them(run_main):
    kind, result = run_main(Replay(*answers(*THEORY)), {"accounts": [{"name": "theory", "fairshare": "lots"}]})
    assert kind is FailJson
    assert result["msg"].startswith("accounts[0] (theory): ")
    assert "fairshare: expected a whole number" in result["msg"]
