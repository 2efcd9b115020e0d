# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The slurm_config_files action plugin answers a step in sync from its record, and only then.

Runs ansible-playbook on localhost with the repository's ansible.cfg (the
preload callback notes which hosts each task changed): the first play's facts
step checks the records, a later play has the step.
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import grp
import json
import os
import pathlib
import pwd
import subprocess
import sys

from ansible_collections.hybridhpc.slurm.plugins.action import slurm_config_files as action
from ansible_collections.hybridhpc.slurm.plugins.plugin_utils import run_changes

ROOT = pathlib.Path(__file__).resolve().parents[4]
USER = pwd.getpwuid(os.getuid()).pw_name
GROUP = grp.getgrgid(os.getgid()).gr_name

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: Read the records
      hybridhpc.slurm.slurm_host_facts:
        gather_subset: ['!all']
        filter: [pkg_mgr]
        step_records: "{{ records }}"
      register: __slurm_common_host_read

- hosts: localhost
  gather_facts: false
  tasks:
    - name: Something else that changes the host
      ansible.builtin.command: "true"
      changed_when: true
      when: touch_first | default(false) | bool
    - name: The step
      hybridhpc.slurm.slurm_config_files:
        directories: [{path: "{{ base }}/etc", owner: "%(user)s", group: "%(group)s"}]
        files:
          - {dest: "{{ base }}/etc/a.conf", content: "{{ text | default('a=1') }}\\n", owner: "%(user)s", group: "%(group)s"}
      register: step
    - name: Say what the step returned
      ansible.builtin.debug: {msg: "STEP {{ step | to_json }}"}
""" % {"user": USER, "group": GROUP}


def converge(tmp_path, config=None, **extra):
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    variables = dict({"base": str(tmp_path), "records": str(tmp_path / "records"),
                      "ansible_python_interpreter": sys.executable}, **extra)
    env = dict(os.environ, ANSIBLE_CONFIG=str(config or ROOT / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    ansible_playbook = pathlib.Path(sys.executable).parent / "ansible-playbook"
    done = subprocess.run([str(ansible_playbook), "-i", "localhost,", "-c", "local", "-e", json.dumps(variables),
                           str(playbook)], cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    line = [text for text in done.stdout.splitlines() if '"msg": "STEP ' in text][0]
    return json.loads(line.split('"msg": "STEP ', 1)[1].rsplit('"', 1)[0].encode().decode("unicode_escape"))


def test_the_second_run_takes_the_record_and_a_drift_or_new_input_runs_the_module(tmp_path):
    first = converge(tmp_path)
    assert first["changed"] and "in sync" not in first.get("msg", "")
    second = converge(tmp_path)
    assert not second["changed"] and second["msg"].startswith("in sync")
    (tmp_path / "etc" / "a.conf").write_text("a=2\n")
    repaired = converge(tmp_path)
    assert repaired["changed"] and repaired["changed_files"] == [str(tmp_path / "etc" / "a.conf")]
    assert (tmp_path / "etc" / "a.conf").read_text() == "a=1\n"
    new_input = converge(tmp_path, text="a=3")
    assert new_input["changed"] and (tmp_path / "etc" / "a.conf").read_text() == "a=3\n"


def test_a_host_changed_earlier_in_the_run_runs_the_module(tmp_path):
    converge(tmp_path)
    result = converge(tmp_path, touch_first=True)
    assert not result["changed"] and "in sync" not in result.get("msg", "")


def test_without_the_preload_callback_every_step_runs_its_module(tmp_path):
    config = tmp_path / "ansible.cfg"
    text = (ROOT / "ansible.cfg").read_text().replace("= ./.collections", "= %s/.collections" % ROOT)
    config.write_text(text.replace(", hybridhpc.slurm.preload\n", "\n"))
    assert [line for line in config.read_text().splitlines() if line.startswith("callbacks_enabled")] == [
        "callbacks_enabled = ansible.builtin.timer, ansible.posix.profile_tasks"]
    converge(tmp_path, config)
    result = converge(tmp_path, config)
    assert not result["changed"] and "in sync" not in result.get("msg", "")


def test_the_answer_has_every_key_the_module_returns(tmp_path):
    module_keys = set(converge(tmp_path)) - {"diff"}
    answer = converge(tmp_path)
    assert set(answer) == module_keys | {"msg"} or set(answer) == module_keys
    args = {"service": {"name": "munge"}, "services": [{"name": "power.path"}]}
    assert action.ActionModule.unchanged_result(args)["unit_actions"] == {"munge": [], "power.path": []}


def test_a_changed_or_failed_result_marks_the_host_and_the_hosts_it_was_delegated_to():
    saved = dict(run_changes.STATE)
    try:
        run_changes.STATE.update(tracking=False, changed=set())
        assert not run_changes.unchanged("c1")
        run_changes.start()
        run_changes.record("c1", {"changed": False})
        assert run_changes.unchanged("c1")
        run_changes.record("ctl", {"changed": True, "results": [
            {"_ansible_delegated_vars": {"ansible_delegated_host": "c2"}}]})
        run_changes.record("c3", {"failed": True})
        assert not run_changes.unchanged("ctl") and not run_changes.unchanged("c2")
        assert not run_changes.unchanged("c3") and run_changes.unchanged("c1")
    finally:
        run_changes.STATE.update(saved)
