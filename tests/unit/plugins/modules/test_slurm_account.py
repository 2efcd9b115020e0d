# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the slurm_account module.

sacctmgr calls are answered by Replay with output recorded from the lab's
real sacctmgr 24.11.5 (tests/unit/fixtures/sacctmgr/account_*, assoc_*_24.11.5.txt).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import json
import pathlib

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.hybridhpc.slurm.plugins.modules import slurm_account

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
    """Run slurm_account.main() with args; sacctmgr calls go to a Replay."""

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
            slurm_account.main()
        return outcome.type, outcome.value.args[0]

    return run


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
