# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_config_files without a round trip when the first play proved the step in sync (plugin_utils/step_action.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hybridhpc.slurm.plugins.module_utils import config_step
from ansible_collections.hybridhpc.slurm.plugins.plugin_utils import step_action

# The preload callback calls it in ansible-playbook's own process: the code digests are read once.
preload = step_action.preload


class ActionModule(step_action.StepAction):
    MODULE = "slurm_config_files"
    unchanged_result = staticmethod(config_step.unchanged_result)
