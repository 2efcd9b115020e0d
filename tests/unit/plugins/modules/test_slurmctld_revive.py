# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurmctld_revive: a slurmctld systemd calls active but that does not answer is restarted, and only that one."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pytest
from ansible.module_utils import basic

from ansible_collections.hybridhpc.slurm.plugins.modules import slurmctld_revive

UP = "Slurmctld(primary) at ctl1 is UP\nSlurmctld(backup) at ctl2 is UP\n"
HUNG = "Slurmctld(primary) at ctl1 is DOWN\nSlurmctld(backup) at ctl2 is UP\n"


class Controller:
    """scontrol ping and systemctl of one controller: hung until restarted (or for good)."""

    def __init__(self, active=True, hung=False, stays_hung=False):
        self.active, self.hung, self.stays_hung = active, hung, stays_hung
        self.calls = []

    def __call__(self, argv, **_kwargs):
        self.calls.append(argv[1:])
        if argv[1:] == ["is-active", "--quiet", "slurmctld"]:
            return (0 if self.active else 3), "", ""
        if argv[1:] == ["restart", "slurmctld"]:
            self.hung = self.stays_hung
            return 0, "", ""
        if argv[1:] == ["ping"]:
            return (1 if self.hung else 0), (HUNG if self.hung else UP), ""
        raise AssertionError(argv)


@pytest.fixture
def run_module(monkeypatch, module_main):
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path", lambda self, name, *a, **k: "/usr/bin/" + name)
    monkeypatch.setattr(slurmctld_revive.time, "sleep", lambda _s: None)

    def run(controller, args, check_mode=False):
        monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kw: controller(argv, **kw))
        return module_main(slurmctld_revive.main, args, check_mode)

    return run


def test_an_answering_controller_is_left_alone(run_module):
    ctl = Controller()
    result = run_module(ctl, {"host": "ctl1"})
    assert not result["changed"] and result["answered"]
    assert ["restart", "slurmctld"] not in ctl.calls


def test_a_hung_controller_is_restarted_and_answers_again(run_module):
    ctl = Controller(hung=True)
    result = run_module(ctl, {"host": "ctl1", "timeout": 0})
    assert result["changed"] and not result["answered"] and "failed" not in result
    assert ["restart", "slurmctld"] in ctl.calls
    assert "ctl1 is UP" in result["ping"]


def test_only_this_hosts_line_counts(run_module):
    # ctl2 answers as backup; ctl1 (this host) does not: restarted.
    ctl = Controller(hung=True)
    assert run_module(ctl, {"host": "ctl1", "timeout": 0})["changed"]
    # Seen from ctl2, whose own line says UP: nothing to do.
    ctl = Controller(hung=True)
    assert not run_module(ctl, {"host": "ctl2", "timeout": 0})["changed"]


def test_a_stopped_slurmctld_is_the_service_tasks_business(run_module):
    ctl = Controller(active=False, hung=True)
    result = run_module(ctl, {"host": "ctl1", "timeout": 0})
    assert not result["changed"] and ctl.calls == [["is-active", "--quiet", "slurmctld"]]


def test_check_mode_restarts_nothing(run_module):
    ctl = Controller(hung=True)
    result = run_module(ctl, {"host": "ctl1", "timeout": 0}, check_mode=True)
    assert result["changed"] and ["restart", "slurmctld"] not in ctl.calls


def test_still_hung_after_the_restart_fails_with_the_ping(run_module):
    ctl = Controller(hung=True, stays_hung=True)
    result = run_module(ctl, {"host": "ctl1", "timeout": 0, "restart_timeout": 0})
    assert result["failed"] and "ctl1 is DOWN" in result["msg"]
