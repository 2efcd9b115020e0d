#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

DOCUMENTATION = r"""
module: slurm_token_file
short_description: Keep a Slurm JWT for a service in a file, renewed before it expires
description:
  - Reads the token stored in O(path); when there is none, it is for another
    user, or less than a third of O(lifespan) is left, mints a new one with
    C(scontrol token username=NAME lifespan=SECONDS) on the target host and
    writes it atomically (mode 0400 by default). Otherwise nothing changes.
  - For long-running readers of slurmrestd (the slurm exporter) that should not
    hold the JWT signing key. A run at least every two thirds of O(lifespan)
    keeps the token valid.
  - The token is never returned or logged; only when it expires.
  - Run it where C(scontrol) may mint tokens for other users (as root on a
    controller), with C(AuthAltTypes=auth/jwt) in slurm.conf.
version_added: 0.2.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  path:
    description: The token file.
    type: path
    required: true
  username:
    description: The Slurm user the token is for.
    type: str
    required: true
  lifespan:
    description: Seconds a new token stays valid.
    type: int
    required: true
  owner:
    description: Owner of the file (the service's user).
    type: str
    required: true
  group:
    description: Group of the file.
    type: str
  mode:
    description: Mode of the file.
    type: raw
    default: "0400"
  scontrol_path:
    description: Path of C(scontrol); looked up in E(PATH) by default.
    type: path
attributes:
  check_mode:
    support: full
    details:
      - Reports whether a token would be minted; mints and writes nothing.
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Keep the exporter's slurmrestd token fresh
  hybridhpc.slurm.slurm_token_file:
    path: /etc/hybridhpc-slurm-exporter/token
    username: slurm-exporter
    lifespan: 2592000
    owner: slurm-exporter
  no_log: true
"""

RETURN = r"""
expires_at:
  description: When the stored token expires (Unix time), after this run.
  returned: success, except in check mode when a token would be minted
  type: int
  sample: 1795490258
renewed:
  description: Why a new token was minted; absent when the stored one was kept.
  returned: when changed
  type: str
  sample: the stored token expires in 3600 s (renewed with a third of its 2592000 s left)
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils.scontrol_token import (
    SCONTROL,
    TokenError,
    mint_token,
    needs_renewal,
    stored_claims,
)


def read(path):
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read()
    except FileNotFoundError:
        return ""


def main():
    module = AnsibleModule(
        argument_spec={
            "path": {"type": "path", "required": True},
            "username": {"type": "str", "required": True},
            "lifespan": {"type": "int", "required": True},
            "owner": {"type": "str", "required": True},
            "group": {"type": "str"},
            "mode": {"type": "raw", "default": "0400"},
            "scontrol_path": {"type": "path"},
        },
        supports_check_mode=True,
    )
    p = module.params
    claims = stored_claims(read(p["path"]))
    reason = needs_renewal(claims, int(time.time()), p["lifespan"], p["username"])
    file_args = {"path": p["path"], "owner": p["owner"], "group": p["group"], "mode": p["mode"]}
    if reason is None:
        changed = module.set_fs_attributes_if_different(module.load_file_common_arguments(file_args), False)
        module.exit_json(changed=changed, expires_at=claims["exp"])
    if module.check_mode:
        module.exit_json(changed=True, renewed=reason)
    scontrol = p["scontrol_path"] or module.get_bin_path(SCONTROL, required=True)

    def run(argv, **kwargs):
        return module.run_command(argv, check_rc=False, **kwargs)

    try:
        minted = mint_token(run, scontrol, p["username"], p["lifespan"])
    except ValueError as err:
        module.fail_json(msg=str(err))
    except TokenError as err:
        module.fail_json(msg=err.msg, rc=err.rc, stderr=err.stderr)
    directory = os.path.dirname(p["path"]) or "."
    temp = os.path.join(directory, ".%s.tmp" % os.path.basename(p["path"]))
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o400)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(minted["token"] + "\n")
    module.set_fs_attributes_if_different(module.load_file_common_arguments(dict(file_args, path=temp)), False)
    os.rename(temp, p["path"])
    for warning in minted["warnings"]:
        module.warn(warning)
    module.exit_json(changed=True, expires_at=minted["expires_at"], renewed=reason)


if __name__ == "__main__":
    main()
