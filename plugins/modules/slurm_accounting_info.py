#!/usr/bin/python
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

DOCUMENTATION = r"""
module: slurm_accounting_info
short_description: Read every QoS, account and user of a Slurm accounting database
description:
  - Reads the Slurm accounting database (slurmdbd) through C(sacctmgr show qos), C(show account), C(show user withassoc)
    and C(show assoc wopl) and returns every QoS, account (with its association per cluster) and user (with its
    associations), in the same form as M(hybridhpc.slurm.slurm_qos), M(hybridhpc.slurm.slurm_account) and
    M(hybridhpc.slurm.slurm_user) return them.
  - Read-only; never changes anything (runs the same in check mode).
  - The role slurm_accounting uses it to find what the inventory does not list (C(slurm_accounting_purge)).
version_added: 0.3.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - hybridhpc.slurm.sacctmgr
options:
  clusters:
    description:
      - Only associations on these clusters (the accounts and users that have none there are left out, QoS are
        global and always listed). Unset - every cluster.
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: What the accounting database holds
  hybridhpc.slurm.slurm_accounting_info:
    clusters: [onprem, cloud]
  register: accounting

- name: Users with an association on cloud
  ansible.builtin.debug:
    msg: "{{ accounting.users | map(attribute='name') | list }}"
"""

RETURN = r"""
qos:
  description: Every QoS, sorted by name (the view of M(hybridhpc.slurm.slurm_qos)).
  returned: always
  type: list
  elements: dict
  sample: [{name: normal, priority: 10, max_jobs_per_user: -1, max_wall: -1, flags: []}]
accounts:
  description:
    - Every account but root, sorted by name (the view of M(hybridhpc.slurm.slurm_account)) - C(name),
      C(description), C(organization), C(clusters) and C(associations) by cluster (C(parent) and the settings).
  returned: always
  type: list
  elements: dict
users:
  description:
    - Every user, sorted by name (the view of M(hybridhpc.slurm.slurm_user)) - C(name), C(admin_level),
      C(default_accounts) by cluster and C(associations) (each C(cluster), C(account), C(partition) and the settings).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils.sacctmgr import (
    run_module,
    sacctmgr_argument_spec,
)
from ansible_collections.hybridhpc.slurm.plugins.module_utils.sacctmgr_assoc import read_database


def read(runner, params, check_mode=False, diff=False):
    """Read everything; ``check_mode`` and ``diff`` change nothing for a read."""
    result = read_database(runner, params.get("clusters"))
    result.update(changed=False, warnings=[])
    return result


def main():
    argument_spec = sacctmgr_argument_spec()
    argument_spec.update(clusters={"type": "list", "elements": "str"})
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    run_module(module, read)


if __name__ == "__main__":
    main()
