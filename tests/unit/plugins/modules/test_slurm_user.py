# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the slurm_user module.

sacctmgr calls are answered by Replay with output recorded from the lab's
real sacctmgr 24.11.5 (tests/unit/fixtures/sacctmgr/user_*, assoc_*_24.11.5.txt).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pytest
from sacctmgr_module_harness import ALICE_ASSOCIATIONS, SACCTMGR, ExitJson, FailJson, Replay, fixture, module_runner

from ansible_collections.hybridhpc.slurm.plugins.modules import slurm_user


@pytest.fixture
def run_main(monkeypatch):
    """Run slurm_user.main() with args; sacctmgr calls go to a Replay."""
    return module_runner(monkeypatch, slurm_user)


SHOW = (fixture("user_show_alice_24.11.5.txt"), fixture("assoc_show_alice_wopl_24.11.5.txt"))
ASSOCS = ALICE_ASSOCIATIONS
SET_DEFAULT = [SACCTMGR, "--immediate", "modify", "user", "where", "name=alice", "cluster=acctbox", "set",
               "defaultaccount=physics"]


def reads():
    return [(0, out, "") for out in SHOW]


def test_same_associations_unchanged(run_main):
    kind, result = run_main(Replay(*reads()), {"name": "alice", "associations": ASSOCS})
    assert (kind, result["changed"], result["commands"]) == (ExitJson, False, [])
    assert result["user"]["default_accounts"] == {"acctbox": "theory", "acctbox2": "chem"}


def test_check_mode_reports_default_account_change(run_main):
    replay = Replay(*reads())
    kind, result = run_main(replay, {"name": "alice", "associations": ASSOCS[:3],
                                     "default_account": "physics"}, check_mode=True, diff=True)
    assert (kind, result["changed"], result["commands"]) == (ExitJson, True, [SET_DEFAULT])
    assert replay.writes == []
    assert result["diff"]["after"]["default_accounts"]["acctbox"] == "physics"


def test_absent_on_one_cluster(run_main):
    after_user = "\n".join(line for line in SHOW[0].splitlines() if "acctbox2" not in line) + "\n"
    after_assoc = "\n".join(line for line in SHOW[1].splitlines() if "acctbox2" not in line) + "\n"
    replay = Replay(*reads(), (0, " Deleting users...\n", ""), (0, after_user, ""), (0, after_assoc, ""))
    kind, result = run_main(replay, {"name": "alice", "state": "absent", "clusters": ["acctbox2"]})
    assert replay.writes == [[SACCTMGR, "--immediate", "delete", "user", "where", "name=alice",
                              "cluster=acctbox2"]]
    assert result["user"]["default_accounts"] == {"acctbox": "theory"}


def test_sacctmgr_refusal_fails_clearly(run_main):
    replay = Replay(*reads(), (1, fixture("user_default_not_assoc_24.11.5.txt"), ""))
    kind, result = run_main(replay, {"name": "alice", "associations": ASSOCS[:3],
                                     "default_account": "physics"})
    assert kind is FailJson
    assert "default_account must be one of the user's accounts" in result["msg"]
