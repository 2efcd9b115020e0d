# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A module_utils module imported when a filter first uses it, not when Ansible loads the filter file.

Every Ansible worker process (one per task and host) looks its filters up
afresh, and finding one of the collection's filters loads every filter file
of the collection. Ansible compiles collection code from source on each
import (it keeps no bytecode cache), so filter files that import their
module_utils at the top made each worker compile all of them: about 50 ms of
CPU per worker, most of it site_inputs.py, which only the first play's
checks call. With a LazyModule, a worker compiles what the filters it runs
need.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import importlib

PACKAGE = "ansible_collections.hybridhpc.slurm.plugins.module_utils."


class LazyModule:
    """Stands for ``plugins/module_utils/<name>.py``; the first attribute read imports it."""

    __slots__ = ("_name", "_module")

    def __init__(self, name):
        self._name = PACKAGE + name
        self._module = None

    def load(self):
        """Import the module now."""
        if self._module is None:
            self._module = importlib.import_module(self._name)
        return self._module

    def __getattr__(self, attribute):
        # Only called for names the object itself lacks: the module's.
        return getattr(self.load(), attribute)

    def __repr__(self):
        return "<LazyModule %s%s>" % (self._name, "" if self._module is None else " (imported)")
