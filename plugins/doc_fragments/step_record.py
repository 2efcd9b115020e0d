# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001


class ModuleDocFragment:

    # The record option of slurm_config_files and slurm_pam_adopt
    # (RECORD_OPTIONS and write_record() in module_utils/config_step.py).
    DOCUMENTATION = r"""
options:
  record:
    description:
      - Set by the module's action plugin, not in tasks. Where the step keeps its record once it ran (O(record.dir),
        a root-only directory), the step's name in it, and the digest of the task's arguments and the step's code.
      - On the next run the facts step (M(hybridhpc.slurm.slurm_host_facts) with
        O(hybridhpc.slurm.slurm_host_facts#module:step_records)) runs the step again in check mode from its record;
        when it would do nothing, the action plugin answers a task with the same digest without sending the module,
        unless the host changed since (see the module utility C(config_step)).
    type: dict
    suboptions:
      dir:
        description: The records' directory.
        type: path
        required: true
      step:
        description: The step's name (the record's file name without C(.json)).
        type: str
        required: true
      digest:
        description: The digest of the task's arguments and the step's code.
        type: str
        required: true
"""
