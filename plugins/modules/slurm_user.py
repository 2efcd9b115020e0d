#!/usr/bin/python
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

DOCUMENTATION = r"""
module: slurm_user
short_description: Manage a Slurm user, its associations and default accounts with sacctmgr
description:
  - Adds, updates or deletes a user in the Slurm accounting database
    (slurmdbd) through C(sacctmgr), idempotently, with its associations
    (account, cluster, optional partition, fair-share, QoS, limits), its
    default account on each cluster and its admin level.
  - Reads the user with C(sacctmgr show user withassoc) and C(sacctmgr show
    assoc where user=NAME wopl), compares them with the options given and
    runs C(sacctmgr add/modify/delete user) only when something differs.
    In check mode nothing is written and RV(commands) lists what would run.
  - A user's first association creates the user.
version_added: 0.2.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - hybridhpc.slurm.sacctmgr
options:
  name:
    description: Login name of the user. Slurm stores it in lower case.
    type: str
    required: true
  state:
    description:
      - V(present) adds and updates the associations listed and sets
        O(default_account) and O(admin_level).
      - V(absent) deletes the user on every cluster, or only on O(clusters)
        when given.
    type: str
    choices: [present, absent]
    default: present
  admin_level:
    description: Slurm administration level of the user (C(AdminLevel)); left alone when not given.
    type: str
    choices: [none, operator, administrator]
  default_account:
    description:
      - Default account of the user on every cluster of O(associations)
        (Slurm keeps one per cluster). It must be one of the user's accounts
        on each of those clusters.
      - When not given, a cluster new to the user gets the account of its
        first association listed there; other defaults are left alone.
    type: str
  associations:
    description:
      - The user's associations. Each needs O(associations[].account) and
        O(associations[].cluster); the other settings, when not given, are
        left as they are (a new association inherits from its account).
    type: list
    elements: dict
    suboptions:
      account:
        description: Account of the association; it must exist on the cluster.
        type: str
        required: true
      cluster:
        description: Cluster of the association.
        type: str
        required: true
      partition:
        description: Partition of the association; none by default (all partitions).
        type: str
      fairshare:
        description: Fair-share shares, a whole number or V(parent).
        type: raw
      qos:
        description: The exact QoS list; V([]) inherits the account's list.
        type: list
        elements: str
      default_qos:
        description: Default QoS, in O(associations[].qos) when that is given; an empty string clears it.
        type: str
      grp_tres:
        description: Exact TRES limits of all running jobs together (C(GrpTRES)); V({}) clears them.
        type: dict
      grp_jobs:
        description: C(GrpJobs); V(-1) clears the limit.
        type: int
      grp_submit_jobs:
        description: C(GrpSubmitJobs); V(-1) clears the limit.
        type: int
      grp_wall:
        description: C(GrpWall), a Slurm time or minutes; V(-1) clears it.
        type: str
      max_jobs:
        description: C(MaxJobs); V(-1) clears the limit.
        type: int
      max_submit_jobs:
        description: C(MaxSubmitJobs); V(-1) clears the limit.
        type: int
      max_wall:
        description: C(MaxWallDurationPerJob), a Slurm time or minutes; V(-1) clears it.
        type: str
      max_tres_per_job:
        description: Exact TRES limits of each job (C(MaxTRESPerJob)); V({}) clears them.
        type: dict
  associations_mode:
    description:
      - V(set) removes the user's associations on the clusters named in
        O(associations) and O(clusters) that are not listed (a cluster left
        with none loses the user altogether).
      - V(add) only adds and updates the associations listed.
    type: str
    choices: [set, add]
    default: set
  clusters:
    description:
      - With O(state=present) and O(associations_mode=set), more clusters
        whose unlisted associations are removed (list a cluster here and no
        association on it to remove the user from it).
      - With O(state=absent), the clusters to delete the user from.
    type: list
    elements: str
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
notes:
  - The association settings mean the same as in M(hybridhpc.slurm.slurm_account)
    (TRES dicts are exact sets, times are compared in minutes, V(-1) clears a limit).
seealso:
  - module: hybridhpc.slurm.slurm_account
  - module: hybridhpc.slurm.slurm_qos
  - name: Slurm accounting
    description: Users, accounts and associations.
    link: https://slurm.schedmd.com/accounting.html
"""

EXAMPLES = r"""
- name: A user in two accounts on one cluster
  hybridhpc.slurm.slurm_user:
    name: alice
    default_account: theory
    associations:
      - {account: theory, cluster: alpha}
      - {account: physics, cluster: alpha, partition: gpu, max_jobs: 2, qos: [normal, high]}

- name: Add one association, keep the others
  hybridhpc.slurm.slurm_user:
    name: alice
    associations_mode: add
    associations:
      - {account: theory, cluster: beta}

- name: Make a user a Slurm operator
  hybridhpc.slurm.slurm_user:
    name: bob
    admin_level: operator

- name: Remove a user from one cluster
  hybridhpc.slurm.slurm_user:
    name: alice
    state: absent
    clusters: [beta]
"""

RETURN = r"""
user:
  description:
    - The user after the run (as it would be, in check mode); empty when absent.
  returned: always
  type: dict
  contains:
    name:
      description: User name.
      type: str
    admin_level:
      description: C(None), C(Operator) or C(Administrator).
      type: str
    default_accounts:
      description: Default account per cluster.
      type: dict
    associations:
      description:
        - Associations sorted by cluster, account and partition, with
          cluster, account, user, partition and the association settings
          (limits and times V(-1) when unset).
      type: list
      elements: dict
  sample:
    name: alice
    admin_level: None
    default_accounts: {alpha: theory}
    associations:
      - cluster: alpha
        account: theory
        user: alice
        partition: ""
        fairshare: 1
        qos: []
        default_qos: ""
        grp_tres: {}
        grp_jobs: -1
        grp_submit_jobs: -1
        grp_wall: -1
        max_jobs: -1
        max_submit_jobs: -1
        max_wall: -1
        max_tres_per_job: {}
commands:
  description:
    - The C(sacctmgr) commands run, as argument lists; in check mode, the
      commands that would run. Empty when nothing needed to change.
  returned: always
  type: list
  elements: list
  sample:
    - [/usr/bin/sacctmgr, --immediate, add, user, alice, account=theory, cluster=alpha, defaultaccount=theory]
diff:
  description: User before and after, when run with C(--diff).
  returned: when diff mode is on
  type: dict
  contains:
    before:
      description: The user before the run (C(state=absent) when it did not exist).
      type: dict
    after:
      description: The user after the run (expected, in check mode).
      type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils.sacctmgr import (
    run_module,
    sacctmgr_argument_spec,
)
from ansible_collections.hybridhpc.slurm.plugins.module_utils.sacctmgr_assoc import (
    ensure_user,
    user_argument_spec,
)


def main():
    argument_spec = sacctmgr_argument_spec()
    argument_spec.update(user_argument_spec())
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    run_module(module, ensure_user)


if __name__ == "__main__":
    main()
