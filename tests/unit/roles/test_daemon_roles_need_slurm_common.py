# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A daemon role run without slurm_common before it stops at its first task, naming what is missing and the fix.

Runs ansible-playbook on localhost in check mode: nothing is changed, the
guard is the first task of each role.
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[3]
GUARDS = {"slurmd": "slurm_common_config", "slurmctld": "slurm_common_controllers",
          "power_save": "slurm_common_conf_server", "slurm_login": "slurm_common_login_sackd"}

PLAY = """
- name: {role} alone
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Run {role} without slurm_common
      block:
        - name: The role
          ansible.builtin.include_role:
            name: hybridhpc.slurm.{role}
            rolespec_validate: false
      rescue:
        - name: Say why it stopped
          ansible.builtin.debug:
            msg: "STOPPED {role}: {{{{ ansible_failed_task.name }}}}: {{{{ ansible_failed_result.msg }}}}"
"""


def test_each_daemon_role_stops_at_its_guard_without_slurm_common(tmp_path):
    playbook = tmp_path / "play.yml"
    playbook.write_text("".join(PLAY.format(role=role) for role in GUARDS))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    argv = [str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
            "-e", "ansible_python_interpreter=" + sys.executable, "--check", str(playbook)]
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    stopped = [line for line in done.stdout.splitlines() if '"msg": "STOPPED ' in line]
    for role, variable in GUARDS.items():
        expected = ("STOPPED %s: Require the facts slurm_common publishes: %s is not set: run hybridhpc.slurm.slurm_common"
                    " on this host first (playbooks/site.yml does)" % (role, variable))
        assert [line for line in stopped if expected in line], done.stdout
