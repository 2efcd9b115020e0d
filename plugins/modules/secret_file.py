#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: secret_file
short_description: Write a binary secret (munge key, JWT key) given as base64
description:
  - Writes the decoded bytes of O(content_b64) to O(path) with the given owner,
    group and mode, atomically, only when the bytes or the attributes differ.
  - M(ansible.builtin.copy) with C(content) cannot carry arbitrary bytes (it goes
    through text), and its diff would show the secret; this module never
    returns or diffs the content, only its SHA-256.
version_added: 0.1.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  path:
    description: File to write.
    type: path
    required: true
  content_b64:
    description: The secret, base64 encoded. Never logged.
    type: str
    required: true
  owner:
    description: Owner of the file.
    type: str
    required: true
  group:
    description: Group of the file.
    type: str
    required: true
  mode:
    description: Octal mode, as a string.
    type: str
    default: "0400"
attributes:
  check_mode:
    support: full
  diff_mode:
    support: partial
    details: The diff shows the SHA-256, never the bytes.
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Install the cluster munge key
  hybridhpc.slurm.secret_file:
    path: /etc/munge/munge.key
    content_b64: "{{ munge_key_b64 }}"
    owner: munge
    group: munge
    mode: "0400"
  no_log: true
"""

RETURN = r"""
sha256:
  description: SHA-256 of the secret (safe to show; proves two nodes hold the same key).
  returned: always
  type: str
size:
  description: Size of the secret in bytes.
  returned: always
  type: int
"""

import hashlib

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils import config_files


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            content_b64=dict(type="str", required=True, no_log=True),
            owner=dict(type="str", required=True),
            group=dict(type="str", required=True),
            mode=dict(type="str", default="0400"),
        ),
        supports_check_mode=True,
    )
    path = module.params["path"]
    data = config_files.decode_b64(module.params["content_b64"])
    if data is None:
        module.fail_json(msg="content_b64: not valid base64 (path %s)" % path)
    wanted = hashlib.sha256(data).hexdigest()
    current_bytes = config_files.read_bytes(path)
    current = None if current_bytes is None else hashlib.sha256(current_bytes).hexdigest()
    content_changed = current != wanted
    result = dict(changed=False, path=path, sha256=wanted, size=len(data))

    if content_changed and not module.check_mode:
        config_files.write_atomically(module, path, data, ".secret_file.")

    file_args = module.load_file_common_arguments(
        dict(path=path, owner=module.params["owner"], group=module.params["group"], mode=module.params["mode"])
    )
    if module.check_mode and content_changed and current is None:
        attrs_changed = True
    else:
        attrs_changed = module.set_fs_attributes_if_different(file_args, False)
    result["changed"] = content_changed or attrs_changed
    if module._diff:
        result["diff"] = dict(
            before="sha256: %s\n" % (current or "(absent)"),
            after="sha256: %s\n" % wanted,
        )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
