#!/usr/bin/python
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

DOCUMENTATION = r"""
module: slurm_config_restore
short_description: Put back the Slurm files this host's cluster last accepted
description:
  - C(hybridhpc.slurm.slurm_config_files) keeps, under O(markers_dir), each file as the cluster accepted it before a
    change replaced it. When slurmctld rejects the change, this module writes those copies back over O(files) and
    removes the pending restart/reconfigure markers, which belonged to the rejected change.
  - A file without a kept copy (new in this run) is left as it is and named in RV(without_copy).
  - Returns, for each restored file, the lines of the rejected version the accepted one does not have.
version_added: 0.2.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  files:
    description: The files to put back (C(/etc/slurm/slurm.conf), ...).
    type: list
    elements: path
    required: true
  markers_dir:
    description: Where slurm_config_files keeps the markers and the accepted copies.
    type: path
    default: /var/lib/slurm
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Put back the configuration the cluster last accepted
  hybridhpc.slurm.slurm_config_restore:
    files: [/etc/slurm/slurm.conf, /etc/slurm/gres.conf]
"""

RETURN = r"""
restored:
  description: The files written back, each with the lines of the rejected version that went.
  returned: always
  type: dict
without_copy:
  description: The files of O(files) that differ from no kept copy because none was kept.
  returned: always
  type: list
  elements: str
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils import config_files, reconfigure_check


def main():
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type="list", elements="path", required=True),
            markers_dir=dict(type="path", default="/var/lib/slurm"),
        ),
        supports_check_mode=True,
    )
    markers_dir = module.params["markers_dir"]
    restored, without_copy = {}, []
    for dest in module.params["files"]:
        kept = config_files.read_bytes(config_files.accepted_path(markers_dir, dest))
        if kept is None:
            without_copy.append(dest)
            continue
        current = config_files.read_bytes(dest)
        if current == kept:
            continue
        kept_stat = os.stat(config_files.accepted_path(markers_dir, dest))
        private = config_files.kept_private(kept_stat)
        # A private file's lines (a key, a password) are never shown.
        restored[dest] = [] if private else reconfigure_check.changed_lines(
            kept.decode("utf-8", "replace"), (current or b"").decode("utf-8", "replace"))
        if not module.check_mode:
            # Over an existing file the move keeps its owner and mode. A file
            # that went missing comes back as it was kept: a private one
            # (slurm.key) with its owner and mode, the others readable, as
            # Slurm's files are, and runnable when the copy was (a Prolog).
            config_files.write_atomically(module, dest, kept, ".slurm_config_restore.")
            if current is None and private:
                os.chown(dest, kept_stat.st_uid, kept_stat.st_gid)
                os.chmod(dest, kept_stat.st_mode & 0o777)
            elif current is None:
                os.chmod(dest, (kept_stat.st_mode & 0o777) | 0o644)
    markers = [config_files.marker_path(markers_dir, name) for name in config_files.MARKERS]
    present = [path for path in markers if os.path.exists(path)]
    if not module.check_mode:
        for path in present:
            os.unlink(path)
    module.exit_json(changed=bool(restored or present), restored=restored, without_copy=without_copy)


if __name__ == "__main__":
    main()
