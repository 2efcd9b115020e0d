# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_config_files without a round trip when the first play proved the step in sync (plugin_utils/step_action.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils import step_action

# The preload callback calls it in ansible-playbook's own process: the code digests are read once.
preload = step_action.preload


class ActionModule(step_action.StepAction):
    MODULE = "slurm_config_files"

    @staticmethod
    def unchanged_result(args):
        units = ([args["service"]["name"]] if args.get("service") else []) + [
            unit.get("name") for unit in args.get("services") or []]
        return dict(changed=False, account_commands=[], changed_files=[], removed_files=[], restart_required=False,
                    config_changed=False, service_actions=[], unit_actions={name: [] for name in units})
