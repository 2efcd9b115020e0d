# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A step's module without a round trip when the first play already proved the step has nothing to do.

The facts step of site.yml's first play (slurm_host_facts with step_records)
ran each recorded step again on the host in check mode, with the module's own
code, and returned the steps that would change nothing with their digests
(module_utils/config_step.py). A task whose arguments have that digest, on a
host that no task changed (or failed on) since (run_changes.py), gets the
result the module would return without the module being sent. Any other task
runs the module, which leaves the step's record for the next run.

The action plugins of slurm_config_files and slurm_pam_adopt are this class
with their module and their "nothing to do" result.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os

from ansible.plugins.action import ActionBase

from ansible_collections.hybridhpc.slurm.plugins.module_utils import config_step
from ansible_collections.hybridhpc.slurm.plugins.plugin_utils import run_changes

PLUGINS_DIR = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
# Where the facts step left its answer (roles/slurm_common/tasks/validate.yml registers it).
HOST_READ = "__slurm_common_host_read"
IN_SYNC_MSG = "in sync: the first play ran this step in check mode from its record and it changed nothing"

# The modules whose steps keep records (module_utils/config_step.py KINDS), each with its action plugin.
STEP_MODULES = ("slurm_config_files", "slurm_pam_adopt")

_CODE = {}


def code_digest(module_name):
    """The digest of the code a record stands for: the module and every module_utils file (a new collection
    version runs each step again once)."""
    if module_name not in _CODE:
        digest = hashlib.sha256()
        paths = [os.path.join(PLUGINS_DIR, "modules", module_name + ".py")]
        utils = os.path.join(PLUGINS_DIR, "module_utils")
        paths += [os.path.join(utils, name) for name in sorted(os.listdir(utils)) if name.endswith(".py")]
        for path in paths:
            with open(path, "rb") as handle:
                digest.update(handle.read())
        _CODE[module_name] = digest.hexdigest()
    return _CODE[module_name]


def preload():
    """Read the code of every module with records once, before Ansible forks the workers (the preload callback
    calls each action plugin's preload)."""
    return [code_digest(name) for name in STEP_MODULES]


def step_name(task):
    """The step's name on the host: its role and task name (stable from run to run)."""
    return hashlib.sha256(task.get_name().encode("utf-8")).hexdigest()[:24]


class StepAction(ActionBase):
    TRANSFERS_FILES = False
    MODULE = ""  # the module's short name, in hybridhpc.slurm

    @staticmethod
    def unchanged_result(args):
        """What the module returns for this step when it has nothing to do."""
        raise NotImplementedError

    def run(self, tmp=None, task_vars=None):
        result = super(StepAction, self).run(tmp, task_vars)
        task_vars = task_vars or {}
        args = dict(self._task.args)
        read = task_vars.get(HOST_READ)
        records_dir = read.get("step_records_dir") if isinstance(read, dict) else None
        if records_dir and "record" not in args and not self._task.async_val:
            step = step_name(self._task)
            digest = config_step.args_digest(args, code_digest(self.MODULE))
            host = task_vars.get("inventory_hostname")
            # A restart asked for (a change elsewhere in the cluster needs it) is
            # done, whatever the record: its digest does not tell it from a start.
            if ((read.get("steps_in_sync") or {}).get(step) == digest and run_changes.unchanged(host)
                    and not config_step.asks_restart(args)):
                result.update(self.unchanged_result(args), msg=IN_SYNC_MSG)
                return result
            args["record"] = {"dir": records_dir, "step": step, "digest": digest}
        # The strategy may have run this step in ansible-playbook's process
        # (in_process.py, which reads this module's step names): before
        # anything reaches the host, a worker runs the module instead.
        from ansible_collections.hybridhpc.slurm.plugins.plugin_utils import in_process

        if in_process.active():
            raise in_process.NeedsWorker()
        result.update(self._execute_module(module_name="hybridhpc.slurm." + self.MODULE, module_args=args,
                                           task_vars=task_vars))
        return result
