# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001


class ModuleDocFragment:

    # Options shared by every module that drives sacctmgr
    # (see sacctmgr_argument_spec() in module_utils/sacctmgr.py).
    DOCUMENTATION = r"""
options:
  sacctmgr_path:
    description:
      - Path of the C(sacctmgr) executable.
      - By default C(sacctmgr) is looked up in E(PATH) and the usual system
        directories; the module fails when it is not installed.
    type: path
  slurm_conf:
    description:
      - Path of the C(slurm.conf) that C(sacctmgr) reads to find slurmdbd
        (C(AccountingStorageHost), C(AccountingStoragePort)). Passed to
        C(sacctmgr) as the E(SLURM_CONF) environment variable.
      - By default C(sacctmgr) uses its built-in location or an inherited
        E(SLURM_CONF), or configless mode.
    type: path
requirements:
  - C(sacctmgr) (Debian package C(slurm-client)) on the target host, able to
    reach slurmdbd with a working MUNGE setup.
  - The user running the module must be a Slurm administrator (root or the
    SlurmUser, or C(AdminLevel=Administrator) in the accounting database).
notes:
  - Commands are run with C(--immediate) so they commit without asking, as
    argument lists (never through a shell). Queries use C(--parsable2 --noheader).
"""

    # Association settings shared by slurm_account and slurm_user
    # (ASSOC_SETTINGS in module_utils/sacctmgr_assoc.py).
    ASSOCIATION = r"""
options:
  fairshare:
    description:
      - Fair-share shares of the association (C(Fairshare)), a whole number,
        or V(parent) to use the parent account's shares.
      - When not given, left as it is (Slurm's default is 1).
    type: raw
  qos:
    description:
      - The exact list of QoS the association may use (C(QOS)); the QoS
        must exist (M(hybridhpc.slurm.slurm_qos)).
      - An empty list makes the association inherit its parent's list.
      - When not given, left as it is.
    type: list
    elements: str
  default_qos:
    description:
      - QoS used when a job names none (C(DefaultQOS)); must be in O(qos)
        when O(qos) is given. An empty string clears it.
    type: str
  grp_tres:
    description:
      - TRES limits of all running jobs of the association together
        (C(GrpTRES)), as a dict of TRES name to count (for example C(cpu) V(64), C(mem) V(256G), C(gres/gpu) V(4)).
      - The dict is the exact set of limits, so a TRES limited now but missing
        from the dict is cleared; V({}) clears every limit.
      - mem accepts megabytes or V(M), V(G), V(T), V(P) units and is compared
        the way sacctmgr prints it (V(16384) equals V(16G)).
    type: dict
  grp_jobs:
    description: Running jobs of the association together (C(GrpJobs)); V(-1) clears the limit.
    type: int
  grp_submit_jobs:
    description: Running and pending jobs of the association together (C(GrpSubmitJobs)); V(-1) clears.
    type: int
  grp_wall:
    description:
      - Wall time of the association's running jobs together (C(GrpWall)).
      - A Slurm time (V(90), V(1:30:00), V(2-00:00:00)) or minutes;
        V(-1) or V(UNLIMITED) clears it. Compared in minutes.
    type: str
  max_jobs:
    description: Running jobs per user of the association (C(MaxJobs)); V(-1) clears the limit.
    type: int
  max_submit_jobs:
    description: Running and pending jobs per user (C(MaxSubmitJobs)); V(-1) clears the limit.
    type: int
  max_wall:
    description:
      - Wall time limit of each job (C(MaxWallDurationPerJob)), a Slurm time
        or minutes; V(-1) or V(UNLIMITED) clears it.
    type: str
  max_tres_per_job:
    description:
      - TRES limits of each job (C(MaxTRESPerJob)), an exact dict like
        O(grp_tres); V({}) clears every limit.
    type: dict
notes:
  - Every association option left unset is left as it is. Values are read
    with C(sacctmgr show assoc ... wopl), the association's own values, not
    the limits it inherits from its parents.
"""
