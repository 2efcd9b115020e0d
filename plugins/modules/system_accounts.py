#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: system_accounts
short_description: System users and their groups with fixed ids, several in one step
description:
  - For each account, makes a system group with O(accounts[].gid) and a system user with O(accounts[].uid) in it
    (no home directory created), or fixes the ids, home and shell of existing ones with groupmod/usermod.
  - One call for every service account of a host (munge, slurm) instead of a group and a user task each.
  - Run it before installing the packages that would otherwise create the accounts with whatever id is free.
version_added: 0.2.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - hybridhpc.slurm.system_accounts
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: MUNGE's and Slurm's accounts before their packages
  hybridhpc.slurm.system_accounts:
    accounts:
      - {name: munge, uid: 64029, gid: 64029}
      - {name: slurm, uid: 64030, gid: 64030}
"""

RETURN = r"""
commands:
  description: The commands run (or that would run, in check mode).
  returned: always
  type: list
  elements: list
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils import system_accounts


def main():
    module = AnsibleModule(
        argument_spec=dict(
            accounts=dict(type="list", elements="dict", default=[], options=system_accounts.ACCOUNT_OPTIONS),
        ),
        supports_check_mode=True,
    )
    done = system_accounts.ensure(module, module.params["accounts"])
    module.exit_json(changed=bool(done), commands=done)


if __name__ == "__main__":
    main()
