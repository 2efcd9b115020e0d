#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: slurm_pam_adopt
short_description: Put pam_slurm_adopt in sshd's PAM stack, or take it out, in one step
description:
  - With O(state=present), in this order, as Slurm's pam_slurm_adopt documentation asks
    - keeps UsePAM on in sshd with a drop-in read first, and fails unless C(sshd -T) says C(usepam yes);
    - writes the pam_access allowlist;
    - takes pam_systemd out of the session stack sshd uses (C(pam-auth-update --disable systemd) on Debian, after
      writing a marker that remembers it; commenting the lines out, tagged, elsewhere) and fails when some is left;
    - puts the allowlist and pam_slurm_adopt at the end of sshd's account stack, between marker lines, and fails
      unless pam_slurm_adopt is the last account module;
    - records a local fact that the node has the module.
  - With O(state=absent), undoes exactly that, the account lines first (users are no longer refused). The package
    stays installed.
  - One round trip where the role used about twenty tasks. The account block is placed as
    C(ansible.builtin.blockinfile) places it, so a node configured by that task is left as it is.
version_added: 0.3.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  state:
    description: Whether sshd's account stack uses pam_slurm_adopt.
    type: str
    choices: [present, absent]
    default: present
  pam_file:
    description: sshd's PAM file.
    type: path
    default: /etc/pam.d/sshd
  account_lines:
    description: The account lines put between the markers (the allowlist, then pam_slurm_adopt). Required with O(state=present).
    type: list
    elements: str
    default: []
  block_marker:
    description: The marker lines' text, C({mark}) becoming BEGIN and END.
    type: str
    default: "# {mark} hybridhpc.slurm pam_slurm_adopt (role pam_slurm_adopt)"
  sshd_dropin:
    description: The sshd drop-in that keeps UsePAM on.
    type: path
    required: true
  sshd_dropin_content:
    description: Its text. Required with O(state=present).
    type: str
  access_file:
    description: The pam_access file of the allowlist.
    type: path
    required: true
  access_content:
    description: Its text. Required with O(state=present).
    type: str
  systemd_method:
    description:
      - How pam_systemd leaves the session stack. V(pam-auth-update) disables the systemd profile of Debian's
        generator; V(comment) comments the lines out in O(session_files), with O(comment_tag).
    type: str
    choices: [pam-auth-update, comment]
    required: true
  session_files:
    description: The files of the session stack sshd uses.
    type: list
    elements: path
    required: true
  systemd_marker:
    description: The file that records that this module disabled the systemd profile (V(pam-auth-update) only).
    type: path
    required: true
  comment_tag:
    description: The text appended to the lines V(comment) comments out (only those are put back).
    type: str
    default: " # disabled by hybridhpc.slurm pam_slurm_adopt"
  fact_file:
    description: The local fact that records that the node has pam_slurm_adopt.
    type: path
    required: true
attributes:
  check_mode:
    support: full
  diff_mode:
    support: partial
    details: Files this module writes or removes; not the files C(pam-auth-update) regenerates.
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Put pam_slurm_adopt in sshd's PAM stack
  hybridhpc.slurm.slurm_pam_adopt:
    account_lines:
      - account    sufficient   pam_access.so accessfile=/etc/security/access-slurm-adopt.conf nodefgroup
      - account    required     pam_slurm_adopt.so action_no_jobs=deny
    sshd_dropin: /etc/ssh/sshd_config.d/00-hybridhpc-pam-slurm-adopt.conf
    sshd_dropin_content: "UsePAM yes\n"
    access_file: /etc/security/access-slurm-adopt.conf
    access_content: "+:root:ALL\n-:ALL:ALL\n"
    systemd_method: pam-auth-update
    session_files: [/etc/pam.d/sshd, /etc/pam.d/common-session]
    systemd_marker: /var/lib/slurm/hybridhpc-pam_systemd-disabled
    fact_file: /etc/ansible/facts.d/hybridhpc_pam_slurm_adopt.fact
  register: pam_adopt
"""

RETURN = r"""
changed_files:
  description: The files written or removed (or that would be, in check mode).
  returned: always
  type: list
  elements: str
commands:
  description: The commands run (or that would be, in check mode), such as C(pam-auth-update --disable systemd).
  returned: always
  type: list
  elements: str
sshd_changed:
  description: The sshd drop-in changed or went away; sshd must reload to read it.
  returned: always
  type: bool
pam_systemd:
  description: What happened to pam_systemd (V(kept), V(disabled), V(enabled), V(commented), V(uncommented)).
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils import pam_stack, pam_step


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type="str", choices=["present", "absent"], default="present"),
            pam_file=dict(type="path", default="/etc/pam.d/sshd"),
            account_lines=dict(type="list", elements="str", default=[]),
            block_marker=dict(type="str", default=pam_stack.BLOCK_MARKER),
            sshd_dropin=dict(type="path", required=True),
            sshd_dropin_content=dict(type="str"),
            access_file=dict(type="path", required=True),
            access_content=dict(type="str"),
            systemd_method=dict(type="str", choices=["pam-auth-update", "comment"], required=True),
            session_files=dict(type="list", elements="path", required=True),
            systemd_marker=dict(type="path", required=True),
            comment_tag=dict(type="str", default=" # disabled by hybridhpc.slurm pam_slurm_adopt"),
            fact_file=dict(type="path", required=True),
        ),
        supports_check_mode=True,
    )
    params = dict(module.params)
    result = pam_step.converge(module, params)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
