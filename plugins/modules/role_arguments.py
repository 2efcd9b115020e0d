#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: role_arguments
short_description: Check every role's argument spec for this host in one task
description:
  - Checks the play's variables against the C(meta/argument_specs.yml) of each
    of the collection's roles (every entry point), with Ansible's own checker.
    A value is refused here exactly when the role's own check at its start
    would refuse it.
  - The first play of C(playbooks/site.yml) runs it for every host, before any
    host changes; the later plays then start their roles with
    C(rolespec_validate=false) instead of one check task per role and host.
  - A variable the play sets whose template cannot be resolved yet is refused
    with its name; a role default that names a fact an earlier role publishes
    is left to that role.
  - Runs on the Ansible controller only (an action plugin).
version_added: 0.2.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - ansible.builtin.action_common_attributes.flow
options:
  roles:
    description: The roles to check; all of the collection's roles with an argument spec when empty.
    type: list
    elements: str
    default: []
  exclude:
    description: Roles not to check (the ones O(roles) names or all).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  action:
    support: full
  async:
    support: none
  bypass_host_loop:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Check every role's variables before any host changes
  hybridhpc.slurm.role_arguments:

- name: Check two roles only
  hybridhpc.slurm.role_arguments:
    roles: [munge, slurmd]

- name: Check every role but one
  hybridhpc.slurm.role_arguments:
    exclude: [slurm_common]
"""

RETURN = r"""
checked:
  description: How many distinct argument specs were checked.
  returned: always
  type: int
  sample: 16
argument_errors:
  description: One line per problem, naming the variable and the role.
  returned: failure
  type: list
  elements: str
  sample: ["argument 'munge_uid' is of type <class 'str'> and we were unable to convert to int (role munge)"]
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec={"roles": {"type": "list", "elements": "str", "default": []},
                                          "exclude": {"type": "list", "elements": "str", "default": []}}, supports_check_mode=True)
    module.fail_json(msg="hybridhpc.slurm.role_arguments runs on the controller, as an action plugin")


if __name__ == "__main__":
    main()
