# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a sacctmgr module's main() in process, its sacctmgr calls answered by recorded output.

Shared by the tests of slurm_qos, slurm_account and slurm_user; the outputs
are from the lab's real sacctmgr 24.11.5 (tests/unit/fixtures/sacctmgr).
pytest puts this directory on sys.path for its test files (no __init__.py).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pathlib

import pytest
from ansible.module_utils import basic
from module_args import set_module_args

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "sacctmgr"
SACCTMGR = "/usr/bin/sacctmgr"


def fixture(name):
    return (FIXTURES / name).read_text()


# alice's associations as the recordings user_show_alice / assoc_show_alice_wopl show them.
ALICE_ASSOCIATIONS = [
    {"account": "physics", "cluster": "acctbox"},
    {"account": "physics", "cluster": "acctbox", "partition": "debug"},
    {"account": "theory", "cluster": "acctbox"},
    {"account": "chem", "cluster": "acctbox2"},
    {"account": "physics", "cluster": "acctbox2", "partition": "debug"},
]


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


def module_runner(monkeypatch, module):
    """``run(replay, args, check_mode, diff) -> (ExitJson|FailJson, result)`` for ``module.main()``."""

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
        set_module_args(monkeypatch, module_args)
        with pytest.raises((ExitJson, FailJson)) as outcome:
            module.main()
        return outcome.type, outcome.value.args[0]

    return run
