# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A task that never touches its host, run in ansible-playbook's own process instead of a forked worker.

Ansible (ansible-core 2.18) forks a worker for every task on every host. Most
of a compute node's steps in a no-op run of site.yml never reach the node:
set_fact, assert, the argument spec checks, and the configuration steps the
first play proved in sync (plugin_utils/step_action.py answers them from the
facts step's records). For those the fork, the worker's start and its
result's trip back are most of the controller's cost.

:func:`run` runs such a task with Ansible's own TaskExecutor, on a copy of
the task (the executor finalizes the task and its parent blocks in place, as
a worker does on its forked copy), and returns the result and the task's
fields exactly as a worker would send them. It runs only:

- actions that only compute on the controller (:data:`CONTROLLER_ONLY`:
  set_fact, assert, fail, debug, validate_argument_spec, the collection's
  role_arguments, include_role and include_tasks), and the configuration steps of step_action.py on a host
  whose facts step found steps in sync and that nothing changed since;
- tasks without a loop, delegate_to, run_once, async, until/retries or a
  timeout: those keep the worker, and its behaviour, as before.

A configuration step that turns out to need its host raises
:class:`NeedsWorker` before anything is sent, and the task goes to a worker.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pickle

from ansible.executor.task_executor import TaskExecutor
from ansible.plugins import loader as plugin_loader

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils import run_changes, step_action

STATE = {"active": False}


class NeedsWorker(BaseException):
    """Raised by an action run in-process that needs its host: the task goes to a worker instead.

    A BaseException: TaskExecutor turns any Exception into a failed result."""


def active():
    """True while :func:`run` runs a task in ansible-playbook's process (an action must not reach its host then)."""
    return STATE["active"]


# Actions that only compute on the controller, named one by one: Ansible's
# own "needs no connection" flag is also set on actions that wait or prompt
# (pause) or change the inventory for every host at once (add_host), and a
# task run here holds up every other host's.
CONTROLLER_ONLY = frozenset((
    "ansible.builtin.set_fact", "ansible.builtin.assert", "ansible.builtin.fail", "ansible.builtin.debug",
    "ansible.builtin.validate_argument_spec", "hybridhpc.slurm.role_arguments",
    # The executor only hands their arguments back; the strategy includes the file or role.
    "ansible.builtin.include_role", "ansible.builtin.include_tasks",
))
# The steps with records: run here only when the host's steps are in sync; a worker otherwise (step_action.py).
WHEN_IN_SYNC = frozenset("hybridhpc.slurm." + name for name in step_action.STEP_MODULES)


def _action(task):
    """The task's fully qualified action (``ansible.builtin.set_fact`` for ``set_fact``)."""
    # Includes are not modules: they have no resolved action, only the name
    # the task gives (include_role, ansible.builtin.include_role).
    action = task.resolved_action or task.action or ""
    if action.startswith("ansible.legacy."):
        action = action[len("ansible.legacy."):]
    if "." not in action:
        action = "ansible.builtin." + action
    return action


def _steps_in_sync(host_name, task_vars):
    read = task_vars.get(step_action.HOST_READ)
    return isinstance(read, dict) and bool(read.get("steps_in_sync")) and run_changes.unchanged(host_name)


def eligible(task, host_name, task_vars):
    """Whether this task may run in ansible-playbook's process for this host (see the module's docstring)."""
    if (task.loop or task.loop_with or task.delegate_to or task.run_once or task.async_val
            or task.until or task.retries is not None or task.timeout):
        return False
    action = _action(task)
    if action in WHEN_IN_SYNC:
        return _steps_in_sync(host_name, task_vars)
    return action in CONTROLLER_ONLY


def run(host, task, task_vars, play_context, loader, variable_manager, final_q):
    """``(result, task_fields)`` as a worker would send them, or None when the task needs a worker."""
    if not eligible(task, host.name, task_vars):
        return None
    # A worker changes its own copies: the task and its parent blocks (the
    # executor finalizes them in place) and the variables (the registered
    # result, the search path). The parent blocks' own task lists are not
    # copied: finalizing a block leaves its tasks as they are.
    own = task.copy(exclude_tasks=True)
    own_vars = dict(task_vars)
    if isinstance(own_vars.get("ansible_search_path"), list):
        own_vars["ansible_search_path"] = list(own_vars["ansible_search_path"])
    STATE["active"] = True
    try:
        result = TaskExecutor(host, own, own_vars, play_context, None, loader, plugin_loader, final_q,
                              variable_manager).run()
    except NeedsWorker:
        return None
    finally:
        STATE["active"] = False
    # Through pickle, as a worker's result crosses the queue: the result then
    # shares no object with the variables it was computed from.
    return pickle.loads(pickle.dumps((result, own.dump_attrs()), pickle.HIGHEST_PROTOCOL))
