# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: preload
type: aggregate
short_description: Import the collection's filter and action plugins once, before Ansible forks its workers
description:
  - Ansible runs each task on each host in a worker process forked from C(ansible-playbook). A worker that templates
    one of the collection's filters loads the collection's filter files and the module_utils that filter uses, and
    Ansible compiles a collection's Python from source on every import (it keeps no bytecode for it). Every worker
    compiled them again.
  - When the playbook starts, this callback imports them once in C(ansible-playbook)'s own process, with the
    collection's action plugins; the workers forked from it find them already imported. An action plugin's
    C(preload()) reads there once what each of its workers would read again (role_arguments parses the roles'
    defaults, vars and argument specs, some fifty YAML files per host and task).
  - It also notes, for each task, the hosts it changed (or failed on). A step of
    M(hybridhpc.slurm.slurm_config_files) or M(hybridhpc.slurm.slurm_pam_adopt) whose record the first play found in sync is answered without running
    its module only on a host no task changed since; without this callback every step runs its module.
  - It compiles the collection's templates there too, each once per run, before the workers of the task that
    renders them fork (the task's strings and conditions, its role's defaults and vars, its play's vars). Ansible
    compiles a template each time it renders it, in a worker that lives for one task on one host, and the workers
    take the compiled code from here (plugin_utils/template_cache.py). An inventory's or another collection's
    templates are compiled as before, and so is any template that uses a filter whose result changes from call to
    call (C(random), C(shuffle), C(password_hash), C(strftime)), since Jinja folds such a call into the compiled code.
  - It keeps each filter and test once found (or not found). To find a collection's filter, or one of Jinja's own
    (C(default), C(select)), Ansible goes through every file of a collection's C(plugins/filter) and keeps nothing
    (about 0.5 ms for every lookup), and every template looks its filters up again (plugin_utils/jinja_plugin_cache.py).
  - Last, it leaves every object alive at that point out of the garbage collector's passes (C(gc.freeze()) after one
    collection). A worker is a fork of C(ansible-playbook), and a collection in it that walks those objects writes to
    the pages that hold them, which the kernel then copies for the worker.
  - It prints nothing and changes no result. Without it the collection works the same, with more CPU on the
    controller and the hosts.
  - Enable it in C(ansible.cfg) (C(callbacks_enabled = hybridhpc.slurm.preload)); the repository's own does.
version_added: 0.2.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
requirements: []
"""

import gc
import importlib
import os
import pkgutil
import sys

from ansible.plugins.callback import CallbackBase
from ansible.plugins.loader import action_loader, filter_loader, test_loader
from ansible.utils.display import Display

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils import jinja_plugin_cache, run_changes, template_cache
from ansible_collections.hybridhpc.slurm.plugins.plugin_utils.lazy_module import LazyModule

COLLECTION = "hybridhpc.slurm"
PLUGINS = "ansible_collections.hybridhpc.slurm.plugins."
# The collection's root (plugins/callback/ is two levels down), links resolved.
ROOT = os.path.realpath(os.path.join(os.path.dirname(__file__), "..", ".."))

display = Display()


def _plugin_files(kind):
    """The module names of the collection's ``plugins/<kind>/*.py``."""
    package = importlib.import_module(PLUGINS + kind)
    return sorted(name for _finder, name, is_package in pkgutil.iter_modules(package.__path__) if not is_package)


def preload():
    """Import every filter (through Ansible's filter loader, as a worker would), the module_utils each filter file
    names, and every action plugin; and Ansible's own filter and test plugins, which the first lookup of one of them
    loads all at once. Returns the fully qualified names of the collection's filters and action plugins loaded."""
    filter_loader.get("ansible.builtin.regex_replace")
    test_loader.get("ansible.builtin.version")
    loaded = []
    for name in _plugin_files("filter"):
        module = importlib.import_module(PLUGINS + "filter." + name)
        for filter_name in sorted(module.FilterModule().filters()):
            if filter_loader.get(COLLECTION + "." + filter_name) is not None:
                loaded.append(COLLECTION + "." + filter_name)
        for value in list(vars(module).values()):
            if isinstance(value, LazyModule):
                value.load()
    for name in _plugin_files("action"):
        plugin = action_loader.get(COLLECTION + "." + name, class_only=True)
        if plugin is not None:
            loaded.append(COLLECTION + "." + name)
            # What the plugin's own preload() reads once for every worker (role_arguments: the roles' files).
            warm = getattr(sys.modules.get(plugin.__module__), "preload", None)
            if callable(warm):
                warm()
    return loaded


def freeze_heap():
    """Leave every object alive now (Ansible, the inventory, the playbook, what preload() loaded) out of the
    garbage collector's passes, after one last collection.

    A worker is a fork of this process: a collection in it that walks those
    objects writes to the pages holding them and copies each one, and so does
    every full collection here. Only what is created after this point is
    walked (what that saves is measured in the README, "Converge speed").
    """
    gc.collect()
    gc.freeze()


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "hybridhpc.slurm.preload"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._roles_compiled = set()

    def v2_playbook_on_start(self, playbook):
        # The collection's templates, compiled here once for every worker
        # (plugin_utils/template_cache.py).
        template_cache.install()
        # The collection's filters and tests, found once for every template
        # and worker: preload() below finds each (plugin_utils/jinja_plugin_cache.py).
        jinja_plugin_cache.install()
        # From here on, which hosts each task changed: a configuration step
        # takes its record's word only on a host nothing changed since the
        # first play checked the records (plugin_utils/run_changes.py).
        run_changes.start()
        # Only an optimisation: a plugin that fails to import here fails the
        # same way in the task that uses it, with Ansible's own message there.
        try:
            loaded = preload()
        except Exception as error:  # pylint: disable=broad-except
            display.vvv("hybridhpc.slurm.preload: not preloaded: %s" % error)
        else:
            kept = [name for _kind, name in jinja_plugin_cache.FOUND if name.startswith(COLLECTION + ".")]
            display.vvv("hybridhpc.slurm.preload: %d filters and action plugins imported, %d of its filters kept found"
                        % (len(loaded), len(kept)))
        freeze_heap()

    def v2_playbook_on_play_start(self, play):
        self._compile(template_cache.play_sources, play, ROOT)

    # Before the task's first worker is forked (the strategy calls this first).
    def v2_playbook_on_task_start(self, task, is_conditional):
        self._compile(template_cache.task_sources, task, COLLECTION, ROOT, self._roles_compiled)

    def v2_playbook_on_handler_task_start(self, task):
        self._compile(template_cache.task_sources, task, COLLECTION, ROOT, self._roles_compiled)

    def _compile(self, find_sources, *args):
        try:
            template_cache.prefill(find_sources(*args))
        except Exception as error:  # pylint: disable=broad-except
            # Only an optimisation: the workers compile what is missing.
            display.vvv("hybridhpc.slurm.preload: templates not compiled: %s" % error)

    # Every result reaches ansible-playbook's own process here before the next
    # task's workers are forked from it.
    def v2_runner_on_ok(self, result):
        run_changes.record(result._host.get_name(), result._result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        run_changes.record(result._host.get_name(), dict(result._result, failed=True))

    def v2_runner_on_unreachable(self, result):
        run_changes.record(result._host.get_name(), dict(result._result, failed=True))
