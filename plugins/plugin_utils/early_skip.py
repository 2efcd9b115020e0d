# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A task's false condition decided in ansible-playbook's own process, without forking a worker.

Ansible (ansible-core 2.18) forks a worker for every task on every host, and
the worker's first step is the task's condition: a skipped task costs a fork,
the worker's start and its result's trip back, about as much controller CPU as
a task that runs. A compute node skips 14 of its 31 steps on a no-op.

:func:`skip_result` evaluates the condition the way the worker would (the same
variables, the same connection variables added by the play context, the same
templar) and, when it is false, returns the result the worker would have
returned. Whenever the worker could decide differently or say more (a loop,
delegation, run_once, an error while evaluating), it returns None
and the worker runs as before, so errors keep their usual form.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleError
from ansible.template import Templar


def decidable(task):
    """Whether a false condition of this task can be decided before any worker: a plain conditional task."""
    return bool(
        task.when
        and not task.loop
        and not task.loop_with
        and not task.delegate_to
        and not task.run_once
    )


def skip_result(task, host, task_vars, play_context, loader):
    """The worker's result when this task's condition is false on this host; None when a worker must run it."""
    if not decidable(task):
        return None
    # As TaskExecutor._execute: the templar over the task's variables, and the
    # condition evaluated over a copy that has the play context's connection
    # variables (ansible_host, ansible_user, ...) added.
    templar = Templar(loader=loader, variables=task_vars)
    evaluated_vars = task_vars.copy()
    try:
        context = play_context.set_task_and_variable_override(task=task, variables=task_vars, templar=templar)
        context.post_validate(templar=templar)
        if not context.remote_addr:
            context.remote_addr = host.address
        context.update_vars(evaluated_vars)
        holds, false_condition = task.evaluate_conditional_with_result(templar, evaluated_vars)
    except AnsibleError:
        # The worker raises it again, in Ansible's own words.
        return None
    if holds:
        return None
    return dict(changed=False, skipped=True, skip_reason="Conditional result was False",
                false_condition=false_condition, _ansible_no_log=context.no_log)
