# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: linear
short_description: ansible.builtin.linear, deciding false conditions without forking a worker
description:
  - Runs tasks in lockstep exactly as C(ansible.builtin.linear) does, and behaves the same in every respect except
    one. Before it forks the worker of a conditional task for a host, it evaluates the task's condition in
    C(ansible-playbook)'s own process, as the worker would; when the condition is false, the host's result is the
    skipped result the worker would have returned, and no worker is forked.
  - Ansible forks a worker for every task on every host, skipped or not, and a skipped task costs the controller
    about as much as one that runs. A compute node skips 14 of its 31 steps in a no-op run of C(site.yml).
  - Tasks with a loop, C(delegate_to), C(run_once), and any condition whose evaluation raises an error go
    to a worker as before, so their results and errors are Ansible's own.
  - Enable it in C(ansible.cfg) (C(strategy = hybridhpc.slurm.linear)); the repository's own does. Without it the
    collection works the same, with more CPU on the controller.
version_added: 0.2.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
"""

from ansible.executor.task_result import TaskResult
from ansible.plugins.strategy.linear import StrategyModule as LinearStrategyModule

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils import early_skip


class StrategyModule(LinearStrategyModule):

    def _queue_task(self, host, task, task_vars, play_context):
        result = early_skip.skip_result(task, host, task_vars, play_context, self._loader)
        if result is None:
            return super(StrategyModule, self)._queue_task(host, task, task_vars, play_context)
        # What the worker does with a result, and the strategy with a worker:
        # the same callback, the same queued-task entry (results are matched to
        # their task through it) and the same result, pending until processed.
        self._queued_task_cache[(host.name, task._uuid)] = {
            "host": host, "task": task, "task_vars": task_vars, "play_context": play_context,
        }
        self._tqm.send_callback("v2_runner_on_start", host, task)
        task_result = TaskResult(host.name, task._uuid, result, task_fields=task.dump_attrs())
        self.normalize_task_result(task_result)
        with self._results_lock:
            self._results.append(task_result)
        self._pending_results += 1
        return None
