#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: shared_filesystems_state
short_description: What is mounted at the paths of shared_filesystems_mounts now, and what lies under them
description:
  - For each mount of O(mounts), whether its path is a mount point, whether of its C(src) (for a bind mount, the
    same device and directory as C(src)), what it is mounted from, and the names in the directory.
  - And the state of the Slurm daemons' units, for the fix a refusal gives.
  - Read-only; the role shared_filesystems runs it in the first play, before any host changes, so that a mount
    that would hide slurmctld's saved state is refused there.
version_added: 0.5.0
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
    platforms: linux
options:
  mounts:
    description: The mounts (C(path), C(src), C(fstype)), as the filter C(hybridhpc.slurm.shared_filesystems_mounts) gives them.
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Read what is mounted at the shared filesystems' paths
  hybridhpc.slurm.shared_filesystems_state:
    mounts: "{{ shared_filesystems_mounts | hybridhpc.slurm.shared_filesystems_mounts }}"
"""

RETURN = r"""
paths:
  description: Each path with C(mounted), C(from_src), C(source) (what it is mounted from, or null) and C(entries)
    (the names in it, at most 100; empty when it does not exist).
  returned: always
  type: dict
  sample: {/var/lib/slurm/slurmctld: {mounted: false, from_src: false, source: null, entries: [job_state, node_state]}}
services:
  description: The C(ActiveState) of each Slurm daemon's unit (C(inactive) where it is not installed).
  returned: always
  type: dict
  sample: {slurmctld: active, slurmd: inactive}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils import shared_filesystems

MAX_ENTRIES = 100


def entries(path):
    try:
        return sorted(os.listdir(path))[:MAX_ENTRIES]
    except OSError:
        return []


def services(module):
    systemctl = module.get_bin_path("systemctl")
    if systemctl is None:
        return {}
    units = ["%s.service" % u for u in shared_filesystems.UNITS]
    rc, out, _err = module.run_command([systemctl, "show", "--property=ActiveState", "--"] + units)
    if rc != 0:
        return {}
    states = [line.partition("=")[2] for line in out.splitlines() if line.startswith("ActiveState=")]
    return dict(zip(shared_filesystems.UNITS, states))


def main():
    module = AnsibleModule(argument_spec=dict(mounts=dict(type="list", elements="dict", required=True)),
                           supports_check_mode=True)
    with open("/proc/self/mountinfo") as handle:
        mountinfo = shared_filesystems.parse_mountinfo(handle.read())
    paths = {}
    for mount in module.params["mounts"]:
        path = str(mount.get("path") or "")
        state = shared_filesystems.mounted_from(mountinfo, path, str(mount.get("src") or ""),
                                                str(mount.get("fstype") or ""))
        # Under a mount, the names of the mounted filesystem; else those of the directory it would hide.
        state["entries"] = entries(path)
        paths[path] = state
    module.exit_json(changed=False, paths=paths, services=services(module))


if __name__ == "__main__":
    main()
