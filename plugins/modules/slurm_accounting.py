#!/usr/bin/python
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

DOCUMENTATION = r"""
module: slurm_accounting
short_description: Manage many Slurm QoS, accounts and users with sacctmgr in one run
description:
  - Brings QoS, accounts and users of a Slurm accounting database (slurmdbd) to what each entry says, in one
    module run. An entry is what M(hybridhpc.slurm.slurm_qos), M(hybridhpc.slurm.slurm_account) or
    M(hybridhpc.slurm.slurm_user) take (without their C(sacctmgr_path) and C(slurm_conf)), checked against
    that module's options and applied as that module applies it, so the result is the same as a loop over those
    modules, without a module run per entry.
  - The order is the one sacctmgr needs. First the entries with C(state=present) - QoS, then accounts, then
    users - then those with C(state=absent) the other way round - users, accounts, QoS. Within each, the given
    order, so give accounts parents first (and the root account, whose default QoS every association inherits,
    before the others).
  - Every entry is checked before anything is written. A failing sacctmgr call stops the run there; the entries
    before it stay applied and the failure names the entry (C(users[2] (alice))).
  - In check mode nothing is written and RV(commands) lists what would run.
  - The role slurm_accounting applies its whole plan with it.
version_added: 0.4.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - hybridhpc.slurm.sacctmgr
options:
  qos:
    description: QoS, each with the options of M(hybridhpc.slurm.slurm_qos).
    type: list
    elements: dict
    default: []
  accounts:
    description: Accounts, each with the options of M(hybridhpc.slurm.slurm_account).
    type: list
    elements: dict
    default: []
  users:
    description: Users, each with the options of M(hybridhpc.slurm.slurm_user).
    type: list
    elements: dict
    default: []
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: The site's QoS, accounts and users in one step
  hybridhpc.slurm.slurm_accounting:
    qos:
      - {name: short, priority: 100, max_wall: "1:00:00"}
      - {name: legacy, state: absent}
    accounts:
      - {name: science, parent: root, clusters: [onprem, cloud], fairshare: 100}
      - {name: chem, parent: science, clusters: [onprem, cloud]}
    users:
      - name: alice
        default_account: chem
        associations:
          - {cluster: onprem, account: chem}
          - {cluster: cloud, account: chem}
"""

RETURN = r"""
commands:
  description:
    - The C(sacctmgr) commands run, as argument lists, in order; in check mode, the commands that would run.
      On failure, those that ran before it.
  returned: always
  type: list
  elements: list
  sample:
    - [/usr/bin/sacctmgr, --immediate, add, qos, short, priority=100]
changes:
  description: The entries that changed (or would, in check mode), in the order they were applied.
  returned: always
  type: list
  elements: dict
  contains:
    option:
      description: V(qos), V(accounts) or V(users).
      type: str
    name:
      description: The QoS, account or user.
      type: str
    state:
      description: The entry's state.
      type: str
    commands:
      description: Its commands.
      type: list
      elements: list
  sample:
    - {option: qos, name: short, state: present, commands: [[/usr/bin/sacctmgr, --immediate, add, qos, short]]}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils.sacctmgr import (
    SacctmgrError,
    runner_from_module,
    sacctmgr_argument_spec,
)
from ansible_collections.hybridhpc.slurm.plugins.module_utils.sacctmgr_batch import apply


def main():
    argument_spec = sacctmgr_argument_spec()
    argument_spec.update(
        qos={"type": "list", "elements": "dict", "default": []},
        accounts={"type": "list", "elements": "dict", "default": []},
        users={"type": "list", "elements": "dict", "default": []},
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    runner = runner_from_module(module)
    entries = {option: module.params[option] for option in ("qos", "accounts", "users")}
    try:
        result = apply(runner, entries, check_mode=module.check_mode, diff=module._diff)
    except ValueError as err:
        module.fail_json(msg=str(err), changed=bool(runner.executed), commands=runner.executed)
    except SacctmgrError as err:
        module.fail_json(msg=str(err), changed=bool(runner.executed), commands=runner.executed, **err.to_dict())
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
