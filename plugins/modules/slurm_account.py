#!/usr/bin/python
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

DOCUMENTATION = r"""
module: slurm_account
short_description: Manage a Slurm account and its per-cluster associations with sacctmgr
description:
  - Adds, updates or deletes an account in the Slurm accounting database
    (slurmdbd) through C(sacctmgr), idempotently, with its association on
    each cluster (parent account, fair-share, QoS and limits).
  - Reads the account with C(sacctmgr show account) and its own
    associations with C(sacctmgr show assoc where account=NAME user= wopl),
    compares them with the options given and runs C(sacctmgr add/modify/delete
    account) only when something differs. In check mode nothing is written
    and RV(commands) lists what would run.
  - The same settings apply to the account's association on every cluster
    of O(clusters). Options left unset are left as they are.
version_added: 0.2.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - hybridhpc.slurm.sacctmgr
  - hybridhpc.slurm.sacctmgr.association
options:
  name:
    description:
      - Name of the account. Slurm stores it in lower case.
      - V(root), the account every cluster gets when it registers, can only have its association settings changed (for
        example the QoS list and default QoS every association inherits), on the clusters in O(clusters); its
        associations on other clusters are left alone, and it is never created, moved or deleted.
    type: str
    required: true
  state:
    description:
      - V(present) creates the account and its associations, and sets the options given.
      - V(absent) deletes the account on every cluster. Slurm refuses while
        it is a user's default account or jobs run under it; the module
        fails and says what to do.
    type: str
    choices: [present, absent]
    default: present
  clusters:
    description:
      - The exact list of clusters the account has an association on. The
        account's associations on other clusters are deleted.
      - Required when the account does not exist yet. When not given, the
        clusters are left as they are and the settings apply to all of them.
    type: list
    elements: str
  parent:
    description:
      - Parent account on every cluster of O(clusters). An account on
        another parent is moved (C(modify account ... set parent=)).
      - When not given, the account stays where it is; a new association
        gets the parent the account already has elsewhere, or V(root).
    type: str
  description:
    description:
      - Description. slurmdbd stores it in lower case, so it is compared in
        lower case. A new account gets its name.
    type: str
  organization:
    description:
      - Organization, stored in lower case. A new account gets its parent's
        name (its own name under root).
    type: str
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
seealso:
  - module: hybridhpc.slurm.slurm_qos
  - module: hybridhpc.slurm.slurm_user
  - name: Slurm accounting
    description: Accounts, associations and their hierarchy.
    link: https://slurm.schedmd.com/accounting.html
  - name: Slurm resource limits
    description: What each association limit does.
    link: https://slurm.schedmd.com/resource_limits.html
"""

EXAMPLES = r"""
- name: A department account on two clusters
  hybridhpc.slurm.slurm_account:
    name: physics
    clusters: [alpha, beta]
    description: physics department
    fairshare: 100

- name: A group under it with limits and QoS
  hybridhpc.slurm.slurm_account:
    name: theory
    parent: physics
    clusters: [alpha]
    qos: [normal, high]
    default_qos: normal
    grp_tres: {cpu: 512, mem: 2T}
    grp_jobs: 100
    max_wall: 2-00:00:00

- name: Remove every per-job TRES limit
  hybridhpc.slurm.slurm_account:
    name: theory
    max_tres_per_job: {}

- name: Delete an account
  hybridhpc.slurm.slurm_account:
    name: oldgroup
    state: absent
"""

RETURN = r"""
account:
  description:
    - The account after the run (as it would be, in check mode); empty when absent.
    - Integer limits and times (minutes) are V(-1) when there is no limit.
  returned: always
  type: dict
  contains:
    name:
      description: Account name.
      type: str
    description:
      description: Description (lower case).
      type: str
    organization:
      description: Organization (lower case).
      type: str
    clusters:
      description: Sorted clusters the account has an association on.
      type: list
      elements: str
    associations:
      description:
        - The account's association per cluster, keyed by cluster name,
          with cluster, account, parent and the association options
          (fairshare, qos, default_qos, grp_tres, grp_jobs, grp_submit_jobs,
          grp_wall, max_jobs, max_submit_jobs, max_wall, max_tres_per_job).
      type: dict
  sample:
    name: theory
    description: theory group
    organization: physics
    clusters: [alpha]
    associations:
      alpha:
        cluster: alpha
        account: theory
        parent: physics
        fairshare: 1
        qos: [high, normal]
        default_qos: normal
        grp_tres: {cpu: "512", mem: 2T}
        grp_jobs: 100
        grp_submit_jobs: -1
        grp_wall: -1
        max_jobs: -1
        max_submit_jobs: -1
        max_wall: 2880
        max_tres_per_job: {}
commands:
  description:
    - The C(sacctmgr) commands run, as argument lists; in check mode, the
      commands that would run. Empty when nothing needed to change.
  returned: always
  type: list
  elements: list
  sample:
    - [/usr/bin/sacctmgr, --immediate, modify, account, where, name=theory, cluster=alpha, set, parent=physics]
diff:
  description: Account before and after, when run with C(--diff).
  returned: when diff mode is on
  type: dict
  contains:
    before:
      description: The account before the run (C(state=absent) when it did not exist).
      type: dict
    after:
      description: The account after the run (expected, in check mode).
      type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils.sacctmgr import (
    run_module,
    sacctmgr_argument_spec,
)
from ansible_collections.hybridhpc.slurm.plugins.module_utils.sacctmgr_assoc import (
    account_argument_spec,
    ensure_account,
)


def main():
    argument_spec = sacctmgr_argument_spec()
    argument_spec.update(account_argument_spec())
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    run_module(module, ensure_account)


if __name__ == "__main__":
    main()
