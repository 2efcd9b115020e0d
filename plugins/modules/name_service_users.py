#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: name_service_users
short_description: Resolve users through the host's name service (files, SSSD), waiting for a directory that just started
description:
  - Returns each name of O(names) with its C([uid, gid]) as the host's NSS resolves it (C(getent passwd)), or null.
  - With O(timeout), asks again until every name resolves or the time is up, as SSSD that was just restarted
    answers "no such user" while it connects to its servers.
  - Read-only.
version_added: 0.4.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
options:
  names:
    description: The user names.
    type: list
    elements: str
    required: true
  timeout:
    description: Seconds to keep asking while a name does not resolve; 0 asks once.
    type: int
    default: 0
"""

EXAMPLES = r"""
- name: The accounting's users, as SSSD resolves them
  hybridhpc.slurm.name_service_users:
    names: [alice, bob]
    timeout: 30
"""

RETURN = r"""
users:
  description: Each name with its C([uid, gid]), or null where the name service does not know it.
  returned: always
  type: dict
  sample: {alice: [20001, 20001], carol: null}
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils.user_ids import resolve as user_ids


def main():
    module = AnsibleModule(
        argument_spec=dict(names=dict(type="list", elements="str", required=True),
                           timeout=dict(type="int", default=0)),
        supports_check_mode=True,
    )
    deadline = time.monotonic() + max(0, module.params["timeout"])
    while True:
        users = {name: user_ids(name) for name in module.params["names"]}
        if all(ids is not None for ids in users.values()) or time.monotonic() >= deadline:
            break
        time.sleep(1)
    module.exit_json(changed=False, users=users)


if __name__ == "__main__":
    main()
