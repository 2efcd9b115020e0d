#!/usr/bin/python
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

DOCUMENTATION = r"""
module: slurm_qos
short_description: Manage a Slurm QoS (quality of service) with sacctmgr
description:
  - Adds, updates or deletes a QoS in the Slurm accounting database
    (slurmdbd) through C(sacctmgr), idempotently.
  - Reads the QoS with C(sacctmgr show qos), compares every option given
    with what Slurm shows and runs C(sacctmgr add/modify/delete qos) only
    when something differs. In check mode nothing is written and
    RV(commands) lists what would run.
  - Options left unset are left as they are.
version_added: 0.2.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
  - hybridhpc.slurm.sacctmgr
options:
  name:
    description:
      - Name of the QoS. Slurm stores it in lower case.
    type: str
    required: true
  state:
    description:
      - V(present) adds the QoS when missing and sets the options given.
      - V(absent) deletes it. Slurm refuses while the QoS is the default QoS
        of an association (the module fails and says so); it is removed
        silently from QoS and preempt lists.
    type: str
    choices: [present, absent]
    default: present
  description:
    description:
      - Description. slurmdbd stores it in lower case, so it is compared in
        lower case. A new QoS gets its name as description.
    type: str
  priority:
    description: Priority added to the jobs' priority (C(Priority)); V(0) is Slurm's default.
    type: int
  preempt:
    description:
      - The exact list of QoS that jobs of this QoS may preempt (C(Preempt));
        V([]) clears it. The QoS must exist.
    type: list
    elements: str
  preempt_mode:
    description:
      - How jobs of this QoS are preempted (C(PreemptMode)), one of V(cancel),
        V(requeue), V(suspend), V(suspend,gang), or V(off)/V(cluster) for
        the cluster's C(PreemptMode) (Slurm shows both as V(cluster)).
    type: str
  flags:
    description:
      - The exact list of QoS flags; V([]) clears them. Case-insensitive;
        valid flags are DenyOnLimit, EnforceUsageThreshold, NoDecay,
        NoReserve, OverPartQOS, PartitionMaxNodes, PartitionMinNodes,
        PartitionTimeLimit, Relative, RequiresReservation, UsageFactorSafe.
    type: list
    elements: str
  usage_factor:
    description: Factor applied to the usage of the jobs (C(UsageFactor)); V(1) is Slurm's default.
    type: float
  max_jobs_per_user:
    description: Running jobs per user (C(MaxJobsPerUser)); V(-1) clears the limit.
    type: int
  max_submit_jobs_per_user:
    description: Running and pending jobs per user (C(MaxSubmitJobsPerUser)); V(-1) clears the limit.
    type: int
  max_wall:
    description:
      - Wall time limit of each job (C(MaxWallDurationPerJob)) in minutes, or a
        Slurm time such as V(1:00:00) or V(2-00:00:00); V(-1) or
        V(UNLIMITED) clears it. Compared in minutes (seconds round up).
    type: str
  max_tres_per_user:
    description:
      - TRES limits of all running jobs of one user (C(MaxTRESPerUser)), as a
        dict of TRES name to count (for example C(cpu) V(8), C(mem) V(16G), C(gres/gpu) V(2)).
      - The dict is the exact set, so a TRES limited now but missing from the
        dict is cleared (C(name=-1)); V({}) clears every limit.
      - mem takes megabytes or units V(M), V(G), V(T), V(P); it is compared
        the way sacctmgr prints it (V(16384) equals V(16G)). A TRES must be
        tracked by slurmdbd (C(AccountingStorageTRES) for V(gres/gpu)).
    type: dict
  max_tres_per_job:
    description: TRES limits of each job (C(MaxTRESPerJob)), an exact dict like O(max_tres_per_user).
    type: dict
  grp_tres:
    description: TRES limits of all running jobs of the QoS together (C(GrpTRES)), an exact dict.
    type: dict
  grp_jobs:
    description: Running jobs of the QoS together (C(GrpJobs)); V(-1) clears the limit.
    type: int
  grp_submit_jobs:
    description: Running and pending jobs of the QoS together (C(GrpSubmitJobs)); V(-1) clears the limit.
    type: int
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
seealso:
  - module: hybridhpc.slurm.slurm_account
  - module: hybridhpc.slurm.slurm_user
  - name: Slurm QOS
    description: What each QoS option does.
    link: https://slurm.schedmd.com/qos.html
  - name: sacctmgr manual
    description: QoS specifications of sacctmgr.
    link: https://slurm.schedmd.com/sacctmgr.html
"""

EXAMPLES = r"""
- name: A low-priority QoS that can be preempted
  hybridhpc.slurm.slurm_qos:
    name: scavenger
    description: preemptible jobs
    priority: 0
    preempt_mode: requeue
    usage_factor: 0.5

- name: A high-priority QoS with per-user limits
  hybridhpc.slurm.slurm_qos:
    name: high
    priority: 100
    preempt: [scavenger]
    flags: [DenyOnLimit]
    max_jobs_per_user: 4
    max_wall: 2-00:00:00
    max_tres_per_user: {cpu: 64, mem: 256G}

- name: Clear every TRES limit per job and the wall time limit
  hybridhpc.slurm.slurm_qos:
    name: high
    max_tres_per_job: {}
    max_wall: UNLIMITED

- name: Delete a QoS
  hybridhpc.slurm.slurm_qos:
    name: old
    state: absent
"""

RETURN = r"""
qos:
  description:
    - The QoS as C(sacctmgr show qos) reports it after the run (as it would
      be, in check mode), in the options' terms. Empty when absent.
    - Integer limits and times (minutes) are V(-1) when there is no limit;
      TRES limits are dicts of the values as sacctmgr prints them.
  returned: always
  type: dict
  sample:
    name: high
    description: high
    priority: 100
    preempt: [scavenger]
    preempt_mode: cluster
    flags: [DenyOnLimit]
    usage_factor: 1.0
    max_jobs_per_user: 4
    max_submit_jobs_per_user: -1
    max_wall: 2880
    max_tres_per_user: {cpu: "64", mem: 256G}
    max_tres_per_job: {}
    grp_tres: {}
    grp_jobs: -1
    grp_submit_jobs: -1
commands:
  description:
    - The C(sacctmgr) commands run, as argument lists; in check mode, the
      commands that would run. Empty when nothing needed to change.
  returned: always
  type: list
  elements: list
  sample:
    - [/usr/bin/sacctmgr, --immediate, modify, qos, where, name=high, set, maxjobsperuser=4, "maxtresperuser=cpu=64,mem=-1"]
diff:
  description: QoS before and after, when run with C(--diff).
  returned: when diff mode is on
  type: dict
  contains:
    before:
      description: The QoS before the run (C(state=absent) when it did not exist).
      type: dict
    after:
      description: The QoS after the run (expected, in check mode).
      type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils.sacctmgr import (
    run_module,
    sacctmgr_argument_spec,
)
from ansible_collections.hybridhpc.slurm.plugins.module_utils.sacctmgr_assoc import (
    ensure_qos,
    qos_argument_spec,
)


def main():
    argument_spec = sacctmgr_argument_spec()
    argument_spec.update(qos_argument_spec())
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    run_module(module, ensure_qos)


if __name__ == "__main__":
    main()
