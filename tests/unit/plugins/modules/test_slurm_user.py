# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the slurm_user module.

sacctmgr calls are answered by Replay with output recorded from the lab's
real sacctmgr 24.11.5 (tests/unit/fixtures/sacctmgr/user_*, assoc_*_24.11.5.txt).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import json
import pathlib

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.hybridhpc.slurm.plugins.modules import slurm_user

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "sacctmgr"
SACCTMGR = "/usr/bin/sacctmgr"


def fixture(name):
    return (FIXTURES / name).read_text()


class Replay:
    """Answers each sacctmgr call with the next recorded (rc, stdout, stderr)."""

    def __init__(self, *results):
        self.results = list(results)
        self.calls = []

    def __call__(self, argv, **kwargs):
        self.calls.append(list(argv))
        return self.results.pop(0)

    @property
    def writes(self):
        return [c for c in self.calls if "--parsable2" not in c]


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


@pytest.fixture
def run_main(monkeypatch):
    """Run slurm_user.main() with args; sacctmgr calls go to a Replay."""

    def exit_json(self, **kwargs):
        raise ExitJson(kwargs)

    def fail_json(self, **kwargs):
        raise FailJson(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, arg, required=False, opt_dirs=None: SACCTMGR)

    def run(replay, args, check_mode=False, diff=False):
        monkeypatch.setattr(basic.AnsibleModule, "run_command",
                            lambda self, argv, **kwargs: replay(argv, **kwargs))
        module_args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
        monkeypatch.setattr(basic, "_ANSIBLE_ARGS",
                            to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": module_args})))
        with pytest.raises((ExitJson, FailJson)) as outcome:
            slurm_user.main()
        return outcome.type, outcome.value.args[0]

    return run


SHOW = (fixture("user_show_alice_24.11.5.txt"), fixture("assoc_show_alice_wopl_24.11.5.txt"))
ASSOCS = [
    {"account": "physics", "cluster": "acctbox"},
    {"account": "physics", "cluster": "acctbox", "partition": "debug"},
    {"account": "theory", "cluster": "acctbox"},
    {"account": "chem", "cluster": "acctbox2"},
    {"account": "physics", "cluster": "acctbox2", "partition": "debug"},
]
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
