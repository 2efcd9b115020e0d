#!/usr/bin/python
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

DOCUMENTATION = r"""
module: slurm_cluster
short_description: Manage a cluster in the Slurm accounting database with sacctmgr
description:
  - Adds, updates or deletes a cluster record in the Slurm accounting
    database (slurmdbd) through C(sacctmgr), idempotently.
  - Reads the cluster with C(sacctmgr show cluster), compares it with the
    wanted state and runs C(sacctmgr add/modify/delete cluster) only when
    something differs. In check mode nothing is written and RV(commands)
    lists what would run.
  - A slurmctld registers its own cluster with slurmdbd when it starts, so
    O(state=present) on such a cluster only manages its features and
    federation state.
version_added: 0.1.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - hybridhpc.slurm.sacctmgr
options:
  name:
    description:
      - Name of the cluster, as C(ClusterName) in C(slurm.conf).
      - Slurm stores cluster names in lower case; an upper-case name is
        lower-cased with a warning.
      - At most 40 characters (slurmdbd names database tables after the
        cluster), letters, digits, V(_) and V(-), starting with a letter or a
        digit.
    type: str
    required: true
  state:
    description:
      - V(present) adds the cluster when missing and sets O(features) and
        O(fedstate).
      - V(absent) deletes the cluster from the accounting database. Slurm
        refuses while jobs run on it, and a running slurmctld of that cluster
        registers it again.
    type: str
    choices: [present, absent]
    default: present
  features:
    description:
      - Cluster features, used by federated jobs (C(--cluster-constraint)) to
        choose clusters.
      - Compared and written in lower case, as the accounting database
        reports them. Names may not contain commas, blanks, V(|), V(=) or
        quotes, nor start with V(+) or V(-).
      - With O(features_mode=set), an empty list removes every feature.
      - When not given, the features are left as they are.
    type: list
    elements: str
  features_mode:
    description:
      - V(set) makes the cluster's features exactly O(features).
      - V(add) adds O(features) and keeps the other features.
      - V(remove) removes O(features) and keeps the other features.
    type: str
    choices: [set, add, remove]
    default: set
  fedstate:
    description:
      - State of the cluster in its federation.
      - V(ACTIVE) accepts and schedules federated jobs; V(INACTIVE) accepts
        and schedules no job; V(DRAIN) accepts no new job and lets the
        federated jobs finish (Slurm then shows C(DRAINED), which counts as
        reached); V(DRAIN+REMOVE) drains and then leaves the federation.
      - The cluster must be in a federation, or the module fails. The only
        exception is V(DRAIN+REMOVE) on a cluster in no federation, which is
        where that state ends, so nothing is done.
      - When not given, the federation state is left as it is.
    type: str
    choices: [ACTIVE, INACTIVE, DRAIN, DRAIN+REMOVE]
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
seealso:
  - name: sacctmgr manual
    description: Cluster specifications and format options of sacctmgr.
    link: https://slurm.schedmd.com/sacctmgr.html
  - name: Slurm federated scheduling
    description: How clusters, features and federation states work together.
    link: https://slurm.schedmd.com/federation.html
"""

EXAMPLES = r"""
- name: Make sure the accounting database knows the cluster
  hybridhpc.slurm.slurm_cluster:
    name: alpha

- name: Give the cluster exactly these features
  hybridhpc.slurm.slurm_cluster:
    name: alpha
    features: [gpu, x86_64]

- name: Add one feature, keep the others
  hybridhpc.slurm.slurm_cluster:
    name: alpha
    features: [bigmem]
    features_mode: add

- name: Remove every feature
  hybridhpc.slurm.slurm_cluster:
    name: alpha
    features: []

- name: Drain the cluster in its federation
  hybridhpc.slurm.slurm_cluster:
    name: beta
    fedstate: DRAIN

- name: Use a specific slurm.conf to reach slurmdbd
  hybridhpc.slurm.slurm_cluster:
    name: alpha
    features: [gpu]
    slurm_conf: /etc/slurm/slurm.conf

- name: Delete a retired cluster from accounting
  hybridhpc.slurm.slurm_cluster:
    name: oldcluster
    state: absent
"""

RETURN = r"""
cluster:
  description:
    - The cluster as C(sacctmgr show cluster) reports it after the run (as
      it would be, in check mode). Empty when the cluster is absent.
  returned: always
  type: dict
  contains:
    name:
      description: Cluster name (lower case).
      type: str
      sample: alpha
    control_host:
      description: Address slurmctld registered from; empty until it registers.
      type: str
      sample: 10.11.0.2
    control_port:
      description: Port slurmctld registered; 0 until it registers.
      type: int
      sample: 6817
    rpc:
      description: Slurm RPC protocol version of the registered slurmctld; 0 until it registers.
      type: int
      sample: 10752
    features:
      description: Sorted cluster features.
      type: list
      elements: str
      sample: [gpu, x86_64]
    federation:
      description: Federation the cluster belongs to; empty when none.
      type: str
      sample: hpcfed
    fed_state:
      description: Federation state, C(NA) when the cluster is in no federation.
      type: str
      sample: ACTIVE
    flags:
      description: Cluster flags (for example C(External)); empty when none.
      type: list
      elements: str
      sample: []
  sample:
    name: alpha
    control_host: 10.11.0.2
    control_port: 6817
    rpc: 10752
    features: [gpu, x86_64]
    federation: ""
    fed_state: NA
    flags: []
commands:
  description:
    - The C(sacctmgr) commands run, as argument lists; in check mode, the
      commands that would run. Empty when nothing needed to change.
  returned: always
  type: list
  elements: list
  sample:
    - [/usr/bin/sacctmgr, --immediate, modify, cluster, where, name=alpha, set, "features=gpu,x86_64"]
diff:
  description: Cluster before and after, when run with C(--diff).
  returned: when diff mode is on
  type: dict
  contains:
    before:
      description: The cluster before the run.
      type: dict
    after:
      description: The cluster after the run (expected, in check mode).
      type: dict
  sample:
    before: {name: alpha, state: present, features: [gpu], federation: "", fed_state: NA}
    after: {name: alpha, state: present, features: [gpu, x86_64], federation: "", fed_state: NA}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils.sacctmgr import (
    FEATURE_MODES,
    FEDSTATES,
    ensure_cluster,
    run_module,
    sacctmgr_argument_spec,
)


def main():
    argument_spec = sacctmgr_argument_spec()
    argument_spec.update(
        name={"type": "str", "required": True},
        state={"type": "str", "default": "present", "choices": ["present", "absent"]},
        features={"type": "list", "elements": "str"},
        features_mode={"type": "str", "default": "set", "choices": list(FEATURE_MODES)},
        fedstate={"type": "str", "choices": list(FEDSTATES)},
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    run_module(module, ensure_cluster)


if __name__ == "__main__":
    main()
