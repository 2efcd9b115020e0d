# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""step_action: a step in sync is answered from its record, except when it asks a daemon to restart."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

from unittest import mock

import pytest

from ansible_collections.hybridhpc.slurm.plugins.action import slurm_config_files
from ansible_collections.hybridhpc.slurm.plugins.module_utils import config_step
from ansible_collections.hybridhpc.slurm.plugins.plugin_utils import run_changes, step_action

ARGS = {"files": [{"dest": "/etc/default/slurmd", "content": "SLURMD_OPTIONS=\n"}],
        "service": {"name": "slurmd", "state": "started"}}


def run_step(args):
    """The action's result for a step whose record (digest of ``ARGS``) the facts step found in sync."""
    task = mock.MagicMock(args=dict(args), async_val=0, check_mode=False, diff=False)
    task.get_name.return_value = "slurmd : the step"
    action = slurm_config_files.ActionModule(
        task, mock.MagicMock(), mock.MagicMock(), loader=None, templar=None, shared_loader_obj=None)
    step = step_action.step_name(task)
    digest = config_step.args_digest(ARGS, step_action.code_digest("slurm_config_files"))
    task_vars = {"inventory_hostname": "c1", step_action.HOST_READ: {
        "step_records_dir": "/var/lib/hybridhpc/steps", "steps_in_sync": {step: digest}}}
    with mock.patch.object(action, "_execute_module", return_value={"ran": "module"}) as module:
        result = action.run(task_vars=task_vars)
    return result, module


@pytest.fixture(autouse=True)
def tracking():
    saved = dict(run_changes.STATE)
    run_changes.start()
    yield
    run_changes.STATE.update(saved)


def test_a_step_in_sync_is_answered_without_the_module():
    result, module = run_step(ARGS)
    assert not module.called and result["msg"].startswith("in sync")


def test_a_restart_asked_for_runs_the_module_though_the_record_is_in_sync():
    restart = dict(ARGS, service=dict(ARGS["service"], state="restarted"))
    result, module = run_step(restart)
    assert module.called and result["ran"] == "module"
    assert module.call_args.kwargs["module_args"]["service"]["state"] == "restarted"
