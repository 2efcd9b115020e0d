# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001


class ModuleDocFragment:

    # The accounts option of system_accounts and slurm_config_files
    # (ACCOUNT_OPTIONS and ensure() in module_utils/system_accounts.py).
    DOCUMENTATION = r"""
options:
  accounts:
    description:
      - System accounts, each a group and a user of the same name with fixed ids (the same on every node, as MUNGE
        credentials carry them). A missing one is created, one with other ids, home or shell is changed.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: User and group name.
        type: str
        required: true
      uid:
        description: User id, the same on every node.
        type: int
        required: true
      gid:
        description: Group id, the same on every node.
        type: int
        required: true
      home:
        description: Home directory (never created).
        type: str
        default: /nonexistent
      shell:
        description: Login shell.
        type: str
        default: /usr/sbin/nologin
"""
