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
