# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_config_files without a round trip when the first play already proved the step has nothing to do.

The facts step of site.yml's first play (slurm_host_facts with step_records)
ran each recorded step again on the host in check mode, with the module's own
code, and returned the steps that would change nothing with their digests
(module_utils/config_step.py). A task whose arguments have that digest, on a
host that no task changed (or failed on) since, gets the result the module
would return without the module being sent: on a compute node, four module
runs of each no-op converge. Any other task runs the module, which leaves the
step's record for the next run.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os

from ansible.plugins.action import ActionBase

from ansible_collections.hybridhpc.slurm.plugins.module_utils import config_step
from ansible_collections.hybridhpc.slurm.plugins.plugin_utils import run_changes

MODULE = "hybridhpc.slurm.slurm_config_files"
PLUGINS_DIR = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
# Where the facts step left its answer (roles/slurm_common/tasks/validate.yml registers it).
HOST_READ = "__slurm_common_host_read"

_CODE = []


def code_digest():
    """The digest of the code a record stands for: the module and every module_utils file (a new collection
    version runs each step again once)."""
    if not _CODE:
        digest = hashlib.sha256()
        paths = [os.path.join(PLUGINS_DIR, "modules", "slurm_config_files.py")]
        utils = os.path.join(PLUGINS_DIR, "module_utils")
        paths += [os.path.join(utils, name) for name in sorted(os.listdir(utils)) if name.endswith(".py")]
        for path in paths:
            with open(path, "rb") as handle:
                digest.update(handle.read())
        _CODE.append(digest.hexdigest())
    return _CODE[0]


def preload():
    """Read the code once, before Ansible forks the workers (called by the preload callback)."""
    return code_digest()


def step_name(task):
    """The step's name on the host: its role and task name (stable from run to run)."""
    return hashlib.sha256(task.get_name().encode("utf-8")).hexdigest()[:24]


def unchanged_result(args):
    """What the module returns for this step when it has nothing to do."""
    units = ([args["service"]["name"]] if args.get("service") else []) + [
        unit.get("name") for unit in args.get("services") or []]
    return dict(changed=False, account_commands=[], changed_files=[], removed_files=[], restart_required=False,
                config_changed=False, service_actions=[], unit_actions={name: [] for name in units},
                msg="in sync: the first play ran this step in check mode from its record and it changed nothing")


class ActionModule(ActionBase):
    TRANSFERS_FILES = False

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        args = dict(self._task.args)
        read = task_vars.get(HOST_READ) or {}
        records_dir = read.get("step_records_dir") if isinstance(read, dict) else None
        if records_dir and "record" not in args and not self._task.async_val:
            step = step_name(self._task)
            digest = config_step.args_digest(args, code_digest())
            host = task_vars.get("inventory_hostname")
            if (read.get("steps_in_sync") or {}).get(step) == digest and run_changes.unchanged(host):
                result.update(unchanged_result(args))
                return result
            args["record"] = {"dir": records_dir, "step": step, "digest": digest}
        result.update(self._execute_module(module_name=MODULE, module_args=args, task_vars=task_vars))
        return result
