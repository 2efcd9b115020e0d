# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_host_facts: the last run's result when nothing it read on the host changed since.

The module, given ``cache``, keeps its result on the host with what it read
(module_utils/host_probe.py). This plugin first sends that file, which uses
only Python's standard library, as a script over the connection (one round
trip, like the module's, without Ansible's module machinery on the host): it
observes the same things again and answers with the kept result when they are
all as they were and the key (the task's arguments, the collection's code,
Ansible's version and the interpreter) is the same. Otherwise, or when the
probe cannot run (no pipelining, an interpreter not known yet, async), the
module runs, and keeps its result for the next run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import shlex

from ansible import __version__ as ansible_version
from ansible.plugins.action import ActionBase

from ansible_collections.hybridhpc.slurm.plugins.module_utils import host_probe
from ansible_collections.hybridhpc.slurm.plugins.plugin_utils import step_action

MODULE = "slurm_host_facts"
HIT = "hit"
_SOURCE = {}


def probe_source():
    """host_probe.py's text, read once per process."""
    if "text" not in _SOURCE:
        with open(host_probe.__file__.replace(".pyc", ".py"), "r") as handle:
            _SOURCE["text"] = handle.read()
    return _SOURCE["text"]


def preload():
    """Read once in ansible-playbook's process, before it forks the workers (the preload callback)."""
    return [probe_source(), step_action.code_digest(MODULE)]


def cache_path(records_dir):
    """Beside the step records' directory, not in it: the checks list that directory."""
    return records_dir.rstrip("/") + ".host-facts"


def cache_key(args, interpreter):
    """What a kept result answers: these arguments, this collection's code, this Ansible, this interpreter."""
    kept = {key: value for key, value in args.items() if key != "cache"}
    text = json.dumps({"args": kept, "code": step_action.code_digest(MODULE), "ansible": ansible_version,
                       "python": interpreter}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def probe_script(request):
    """host_probe.py run as a script on request."""
    return "%s\nmain(json.loads(%r))\n" % (probe_source(), json.dumps(request, sort_keys=True))


def parse_answer(rc, stdout):
    """The probe's answer, or a miss that says why it could not answer."""
    if rc != 0:
        return {"miss": "the probe did not run (rc %s)" % rc}
    try:
        answer = json.loads(stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"miss": "the probe's answer is not JSON"}
    if not isinstance(answer, dict) or not (isinstance(answer.get("result"), dict) or "miss" in answer):
        return {"miss": "the probe's answer is not one"}
    return answer


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def _interpreter(self, task_vars):
        """The host's Python as the module would be run with it; None until known (the module discovers it)."""
        python = task_vars.get("ansible_python_interpreter")
        if not python:
            python = (task_vars.get("ansible_facts") or {}).get("discovered_interpreter_python")
        if not python:
            return None
        python = self._templar.template(python)
        return python if isinstance(python, str) and python.startswith("/") else None

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        args = dict(self._task.args)
        records = args.get("step_records")
        probe = ""
        python = self._interpreter(task_vars) if records and "cache" not in args else None
        if python and not self._task.async_val and self._is_pipelining_enabled("new"):
            path = cache_path(records)
            key = cache_key(args, python)
            request = {"cache": path, "key": key, "file": args.get("file")}
            run = self._low_level_execute_command("%s -I -" % shlex.quote(python), sudoable=True,
                                                  in_data=probe_script(request).encode("utf-8"))
            answer = parse_answer(run.get("rc"), run.get("stdout", ""))
            if "result" in answer:
                result.update(answer["result"])
                result.update(changed=False, probe=HIT)
                return result
            probe = answer["miss"]
            args["cache"] = {"path": path, "key": key}
        result.update(self._execute_module(module_name="hybridhpc.slurm." + MODULE, module_args=args,
                                           task_vars=task_vars))
        if not result.get("failed"):
            result["probe"] = probe
        return result
