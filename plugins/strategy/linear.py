# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: linear
short_description: ansible.builtin.linear, without a forked worker for a skipped task or a controller-only one
description:
  - Runs tasks in lockstep exactly as C(ansible.builtin.linear) does, with the same results, events and stats, and
    forks fewer workers. Ansible forks a worker for every task on every host, skipped or not, even for a task that
    never reaches its host; the fork, the worker's start and its result's trip back cost the controller about as
    much as the task itself.
  - A false condition is decided in C(ansible-playbook)'s own process, as the worker would decide it (the same
    variables and connection variables); the host gets the skipped result the worker would have returned.
  - A task that only computes on the controller (C(set_fact), C(assert), C(fail), C(debug),
    C(validate_argument_spec), M(hybridhpc.slurm.role_arguments), C(include_role), C(include_tasks)) runs there with
    Ansible's own TaskExecutor on a
    copy of the task, as a worker would run it; so does a M(hybridhpc.slurm.slurm_config_files) or
    M(hybridhpc.slurm.slurm_pam_adopt) step the first play proved in sync, on a host nothing changed since. A step
    that turns out to need its host goes to a worker before anything is sent.
  - Such a task runs in C(ansible-playbook)'s process one host at a time. Its arguments are templated there too, so
    a lookup that waits (C(pipe), C(url)) in a C(set_fact) waits for each host in turn instead of in parallel
    workers; give a play with such tasks the strategy C(ansible.builtin.linear).
  - Tasks with a loop, C(delegate_to), C(run_once), C(async), C(until) or C(retries), or a C(timeout), and every
    other action, go to a worker as before; so does any task whose condition fails to evaluate in
    C(ansible-playbook)'s process, unless it is controller-only (it then fails there, with the executor's own error).
  - A compute node's no-op run of C(site.yml) forks 1 worker, for its facts step, instead of 33 (17 before
    controller-only tasks ran in C(ansible-playbook)'s process).
  - Enable it in C(ansible.cfg) (C(strategy = hybridhpc.slurm.linear)); the repository's own does. Without it the
    collection works the same, with more CPU on the controller.
version_added: 0.2.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
"""

from ansible.executor.task_result import TaskResult
from ansible.plugins.strategy.linear import StrategyModule as LinearStrategyModule

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils import early_skip, in_process


class StrategyModule(LinearStrategyModule):

    def _queue_task(self, host, task, task_vars, play_context):
        result = early_skip.skip_result(task, host, task_vars, play_context, self._loader)
        # A skip's task fields are the task's own; a task run here sends the
        # fields its executor finalized, as a worker does.
        task_fields = None
        if result is None:
            ran = in_process.run(host, task, task_vars, play_context, self._loader, self._variable_manager,
                                 self._final_q)
            if ran is None:
                return super(StrategyModule, self)._queue_task(host, task, task_vars, play_context)
            result, task_fields = ran
        # What the worker does with a result, and the strategy with a worker:
        # the same callback, the same queued-task entry (results are matched to
        # their task through it) and the same result, pending until processed.
        self._queued_task_cache[(host.name, task._uuid)] = {
            "host": host, "task": task, "task_vars": task_vars, "play_context": play_context,
        }
        self._tqm.send_callback("v2_runner_on_start", host, task)
        task_result = TaskResult(host.name, task._uuid, result,
                                 task_fields=task.dump_attrs() if task_fields is None else task_fields)
        self.normalize_task_result(task_result)
        with self._results_lock:
            self._results.append(task_result)
        self._pending_results += 1
        return None
