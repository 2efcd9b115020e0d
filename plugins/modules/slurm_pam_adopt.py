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

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils import config_files, pam_stack

FACT_CONTENT = '{"enabled": true}'


class Host(object):
    """The node's files and commands as this module changes them: check mode and diffs in one place."""

    def __init__(self, module):
        self.module = module
        self.changed_files = []
        self.commands = []
        self.diffs = []

    @staticmethod
    def read(path):
        data = config_files.read_bytes(path)
        return None if data is None else data.decode("utf-8", "replace")

    def write(self, path, text, mode="0644"):
        """Make ``path`` hold ``text``, owned by root with ``mode``; True when something changed."""
        current = self.read(path)
        changed = current != text
        if changed:
            self._note(path, current or "", text)
            if self.module.check_mode and current is None:
                return True
            if not self.module.check_mode:
                config_files.write_atomically(self.module, path, text.encode("utf-8"), ".slurm_pam_adopt.")
        args = self.module.load_file_common_arguments(dict(path=path, owner="root", group="root", mode=mode))
        if self.module.set_fs_attributes_if_different(args, False):
            self._note(path, None, None)
            changed = True
        return changed

    def edit(self, path, text):
        """Replace the text of an existing file, keeping its owner and mode; True when it differed."""
        current = self.read(path)
        if current is None or current == text:
            return False
        self._note(path, current, text)
        if not self.module.check_mode:
            config_files.write_atomically(self.module, path, text.encode("utf-8"), ".slurm_pam_adopt.")
        return True

    def remove(self, path):
        if not os.path.lexists(path):
            return False
        self._note(path, "(present)\n", "(absent)\n")
        if not self.module.check_mode:
            os.unlink(path)
        return True

    def directory(self, path):
        if os.path.isdir(path):
            return False
        self._note(path, None, None)
        if not self.module.check_mode:
            os.makedirs(path, 0o755)
        return True

    def run(self, argv):
        """Run a command that changes the node (recorded; not run in check mode); fail with its output."""
        self.commands.append(" ".join(argv))
        if self.module.check_mode:
            return
        rc, out, err = self.module.run_command(argv, environ_update={"DEBIAN_FRONTEND": "noninteractive"})
        if rc != 0:
            self.module.fail_json(msg="%s failed (rc %d): %s" % (" ".join(argv), rc, (err or out).strip()))

    def _note(self, path, before, after):
        if path not in self.changed_files:
            self.changed_files.append(path)
        if self.module._diff and before is not None:
            self.diffs.append(dict(before_header=path, after_header=path, before=before, after=after))


def _session_texts(host, files):
    return {path: host.read(path) for path in files}


def _pam_systemd_off(module, host):
    params = module.params
    texts = _session_texts(host, params["session_files"])
    if not any(pam_stack.has_pam_systemd(text) for text in texts.values()):
        return "kept"
    if params["systemd_method"] == "pam-auth-update":
        # The marker first: a run that stops between the two still knows to enable it again.
        host.directory(os.path.dirname(params["systemd_marker"]))
        host.write(params["systemd_marker"], "pam-auth-update --disable systemd by hybridhpc.slurm role pam_slurm_adopt\n")
        host.run(["pam-auth-update", "--disable", "systemd"])
        outcome = "disabled"
    else:
        for path, text in texts.items():
            host.edit(path, pam_stack.comment_pam_systemd(text, params["comment_tag"]))
        outcome = "commented"
    if not module.check_mode:
        left = [path for path, text in _session_texts(host, params["session_files"]).items() if pam_stack.has_pam_systemd(text)]
        if left:
            module.fail_json(msg=(
                "pam_systemd is still in the session stack of sshd (%s; not added by the OS's profile): comment it out "
                "there, it would move adopted ssh sessions out of the job's cgroup" % ", ".join(left)))
    return outcome


def _pam_systemd_back(module, host):
    params = module.params
    if params["systemd_method"] == "pam-auth-update":
        if not os.path.exists(params["systemd_marker"]):
            return "kept"
        host.run(["pam-auth-update", "--enable", "systemd"])
        host.remove(params["systemd_marker"])
        return "enabled"
    outcome = "kept"
    for path, text in _session_texts(host, params["session_files"]).items():
        if text is not None and host.edit(path, pam_stack.uncomment_pam_systemd(text, params["comment_tag"])):
            outcome = "uncommented"
    return outcome


def present(module, host):
    params = module.params
    for name in ("account_lines", "sshd_dropin_content", "access_content"):
        if not params[name]:
            module.fail_json(msg="%s is required with state=present" % name)
    sshd_changed = host.write(params["sshd_dropin"], params["sshd_dropin_content"])
    if not (module.check_mode and sshd_changed):
        rc, out, err = module.run_command(["sshd", "-T"])
        if rc != 0 or not pam_stack.sshd_uses_pam(out):
            module.fail_json(msg=(
                "sshd runs with UsePAM no, so pam_slurm_adopt would never run; remove the UsePAM no that sshd reads "
                "before %s (sshd_config or an earlier file of sshd_config.d)%s"
                % (params["sshd_dropin"], (": " + err.strip()) if rc != 0 else "")))
    host.write(params["access_file"], params["access_content"])
    pam_systemd = _pam_systemd_off(module, host)
    pam_file = params["pam_file"]
    text = host.read(pam_file)
    if text is None:
        module.fail_json(msg="%s does not exist: is sshd installed?" % pam_file)
    text = pam_stack.put_block(text, params["account_lines"], params["block_marker"])
    if not pam_stack.adopt_is_last(text):
        module.fail_json(msg=(
            "%s: an account line comes after pam_slurm_adopt (%s); move it before the block marked "
            "hybridhpc.slurm pam_slurm_adopt" % (pam_file, pam_stack.account_lines(text)[-1])))
    host.edit(pam_file, text)
    host.directory(os.path.dirname(params["fact_file"]))
    host.write(params["fact_file"], FACT_CONTENT)
    return sshd_changed, pam_systemd


def absent(module, host):
    params = module.params
    pam_file = params["pam_file"]
    text = host.read(pam_file)
    if text is not None:
        host.edit(pam_file, pam_stack.remove_block(text, params["block_marker"]))
    host.remove(params["access_file"])
    sshd_changed = host.remove(params["sshd_dropin"])
    pam_systemd = _pam_systemd_back(module, host)
    host.remove(params["fact_file"])
    return sshd_changed, pam_systemd


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
    host = Host(module)
    step = present if module.params["state"] == "present" else absent
    sshd_changed, pam_systemd = step(module, host)
    result = dict(changed=bool(host.changed_files or host.commands), changed_files=host.changed_files, commands=host.commands,
                  sshd_changed=sshd_changed, pam_systemd=pam_systemd)
    if module._diff and host.diffs:
        result["diff"] = host.diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()
