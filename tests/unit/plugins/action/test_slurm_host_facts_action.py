# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The slurm_host_facts action plugin: the kept result while nothing the module read moved, else the module.

Runs ansible-playbook on localhost (local connection, pipelined) with the
repository's ansible.cfg: the probe is sent as a script, as to a node.
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import json
import os
import pathlib
import stat
import subprocess
import sys

from ansible_collections.hybridhpc.slurm.plugins.action import slurm_host_facts as action
from ansible_collections.hybridhpc.slurm.plugins.module_utils import host_probe

ROOT = pathlib.Path(__file__).resolve().parents[4]
FACTS = ["distribution", "distribution_release", "os_family", "pkg_mgr", "service_mgr", "architecture", "hostname",
         "fqdn", "default_ipv4", "processor_vcpus", "memtotal_mb", "local", "module_setup"]

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: The facts step
      hybridhpc.slurm.slurm_host_facts:
        filter: "{{ facts }}"
        file: "{{ base }}/slurm.conf"
        step_records: "{{ base }}/records"
      register: read
    - name: Say what it returned
      ansible.builtin.debug: {msg: "READ {{ read | to_json }}"}
"""


def facts_step(tmp_path, facts=None, check=False):
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAYBOOK)
    variables = {"base": str(tmp_path), "facts": facts or FACTS, "ansible_python_interpreter": sys.executable}
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    ansible_playbook = pathlib.Path(sys.executable).parent / "ansible-playbook"
    argv = [str(ansible_playbook), "-i", "localhost,", "-c", "local", "-e", json.dumps(variables), str(playbook)]
    done = subprocess.run(argv + (["--check"] if check else []), cwd=ROOT, env=env, capture_output=True, text=True,
                          check=False, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    line = [text for text in done.stdout.splitlines() if '"msg": "READ ' in text][0]
    return json.loads(line.split('"msg": "READ ', 1)[1].rsplit('"', 1)[0].encode().decode("unicode_escape"))


def test_the_next_run_takes_the_kept_result_until_something_the_module_read_moves(tmp_path):
    (tmp_path / "records").mkdir()
    (tmp_path / "slurm.conf").write_text("ClusterName=a\n")
    first = facts_step(tmp_path)
    assert first["probe"] == "no kept result"
    kept = tmp_path / "records.host-facts"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600

    second = facts_step(tmp_path)
    assert second["probe"] == "hit" and first["unwatched"] == [] == second["unwatched"]
    for key in ("ansible_facts", "dpkg_installed", "installed_versions", "steps_in_sync", "step_records_dir",
                "apt_policy", "file"):
        assert second[key] == first[key], key
    assert set(second["ansible_facts"]) == {"ansible_" + name for name in FACTS if name != "module_setup"} | {
        "module_setup"}

    # The file is read again on every run; a change to it is no change to what the module read.
    (tmp_path / "slurm.conf").write_text("ClusterName=b\n")
    third = facts_step(tmp_path)
    assert third["probe"] == "hit" and third["file"] != first["file"]

    # A step record appears: what the checks listed moved, so the module runs and keeps again.
    (tmp_path / "records" / "step.json").write_text("{}")
    assert facts_step(tmp_path)["probe"] == "the host changed"
    assert facts_step(tmp_path)["probe"] == "hit"
    # Other arguments: another key.
    assert facts_step(tmp_path, facts=FACTS[:-2])["probe"] == "the task's arguments or the collection changed"


def test_facts_the_probe_cannot_follow_remove_the_kept_result_and_check_mode_keeps_none(tmp_path):
    (tmp_path / "records").mkdir()
    facts_step(tmp_path, check=True)
    assert not (tmp_path / "records.host-facts").exists()
    facts_step(tmp_path)
    assert (tmp_path / "records.host-facts").exists()
    # Gathered by the lean collectors with no command, but from sched_getaffinity, which no file shows.
    unwatched = FACTS + ["processor_nproc"]
    result = facts_step(tmp_path, facts=unwatched)
    assert result["probe"] == "the task's arguments or the collection changed"
    assert result["unwatched"] == ["facts processor_nproc"]
    assert not (tmp_path / "records.host-facts").exists()
    assert facts_step(tmp_path, facts=unwatched)["probe"] == "no kept result"


def test_the_script_sent_is_host_probe_run_on_the_request(tmp_path):
    with host_probe.Observer() as observer:
        host_probe.host_observations(observer)
    path = str(tmp_path / "kept")
    host_probe.write_cache(path, "k", observer, {"changed": False, "ansible_facts": {"ansible_x": 1}})
    script = action.probe_script({"cache": path, "key": "k", "file": None})
    # -I: as the plugin runs it (no PYTHON* variables, no user site): the script needs only the standard library.
    done = subprocess.run([sys.executable, "-I", "-"], input=script, capture_output=True, text=True, check=True)
    answer = action.parse_answer(0, done.stdout)
    assert answer["result"]["ansible_facts"] == {"ansible_x": 1}


def test_an_answer_that_is_not_the_probes_is_a_miss():
    assert action.parse_answer(1, "") == {"miss": "the probe did not run (rc 1)"}
    assert action.parse_answer(0, "Traceback ...") == {"miss": "the probe's answer is not JSON"}
    assert action.parse_answer(0, '{"result": 1}') == {"miss": "the probe's answer is not one"}
    assert action.parse_answer(0, 'motd\n{"miss": "no kept result"}\n') == {"miss": "no kept result"}


def test_the_key_follows_the_arguments_and_the_interpreter_but_not_the_cache_option():
    args = {"filter": FACTS, "step_records": "/var/lib/hybridhpc/steps"}
    key = action.cache_key(args, "/usr/bin/python3")
    assert action.cache_key(dict(args, cache={"path": "x", "key": "y"}), "/usr/bin/python3") == key
    assert action.cache_key(dict(args, filter=FACTS[:-1]), "/usr/bin/python3") != key
    assert action.cache_key(args, "/usr/bin/python3.13") != key
    assert action.cache_path("/var/lib/hybridhpc/steps/") == "/var/lib/hybridhpc/steps.host-facts"
