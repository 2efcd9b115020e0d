# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_pam_adopt without a round trip when the first play proved the step in sync (plugin_utils/step_action.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hybridhpc.slurm.plugins.module_utils import pam_step
from ansible_collections.hybridhpc.slurm.plugins.plugin_utils import step_action

# The preload callback calls it in ansible-playbook's own process: the code digests are read once.
preload = step_action.preload


class ActionModule(step_action.StepAction):
    MODULE = "slurm_pam_adopt"

    @staticmethod
    def unchanged_result(args):
        return pam_step.unchanged_result()
