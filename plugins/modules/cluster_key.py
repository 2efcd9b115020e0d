#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: cluster_key
short_description: Create a cluster key on its source host when it has none, and read it, in one step
description:
  - When O(path) does not exist, writes O(size) random bytes there (C(os.urandom)), readable by its owner only from
    the first moment (C(0600), the user running the module), creating its directory (C(0755)) when missing. An
    existing key is never changed, whatever its size.
  - Returns the key, base64-encoded, so that the other hosts of the cluster install the same key (the munge key, the
    JWT signing key). Run it with C(no_log), as the examples do.
  - One module run where there were two (a command that creates the key, C(ansible.builtin.slurp) that reads it).
  - In check mode a missing key is reported as created and nothing is returned.
version_added: 0.2.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  path:
    description: The key file.
    type: path
    required: true
  size:
    description: The size in bytes of a new key (at least 32).
    type: int
    required: true
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Create the munge key on its source host when none is given, and read it
  hybridhpc.slurm.cluster_key:
    path: /etc/munge/munge.key
    size: 1024
  register: munge_source_key
  no_log: true
"""

RETURN = r"""
content:
  description: The key, base64-encoded (absent in check mode when the key does not exist yet).
  returned: unless in check mode with no key
  type: str
sha256:
  description: SHA-256 of the key (safe to show).
  returned: unless in check mode with no key
  type: str
size:
  description: The key's size in bytes.
  returned: unless in check mode with no key
  type: int
"""

import base64
import hashlib
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils import config_files

MIN_SIZE = 32


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            size=dict(type="int", required=True),
        ),
        supports_check_mode=True,
    )
    path, size = module.params["path"], module.params["size"]
    if size < MIN_SIZE:
        module.fail_json(msg="size: a key of %d bytes is too short; give %d or more" % (size, MIN_SIZE))
    result = dict(changed=False, path=path)
    if not os.path.exists(path):
        result["changed"] = True
        if module.check_mode:
            module.exit_json(**result)
        # A new host may not have the directory yet (/etc/slurm before Slurm's packages): root's, like /etc's.
        directory = os.path.dirname(path) or "."
        if not os.path.isdir(directory):
            os.makedirs(directory)
            os.chmod(directory, 0o755)
        config_files.write_atomically(module, path, os.urandom(size), ".cluster_key.")
    try:
        with open(path, "rb") as handle:
            key = handle.read()
    except (IOError, OSError) as exc:
        module.fail_json(msg="could not read %s: %s" % (path, exc))
    result.update(content=base64.b64encode(key).decode("ascii"), sha256=hashlib.sha256(key).hexdigest(), size=len(key))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
