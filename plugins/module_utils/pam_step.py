# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The slurm_pam_adopt step: sshd's PAM stack with pam_slurm_adopt (present) or without it (absent).

converge() is the whole step, as the module runs it. The text edits are
pam_stack's.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

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


def _pam_systemd_off(module, host, params):
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


def _pam_systemd_back(module, host, params):
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


def present(module, host, params):
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
    pam_systemd = _pam_systemd_off(module, host, params)
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


def absent(module, host, params):
    pam_file = params["pam_file"]
    text = host.read(pam_file)
    if text is not None:
        host.edit(pam_file, pam_stack.remove_block(text, params["block_marker"]))
    host.remove(params["access_file"])
    sshd_changed = host.remove(params["sshd_dropin"])
    pam_systemd = _pam_systemd_back(module, host, params)
    host.remove(params["fact_file"])
    return sshd_changed, pam_systemd


def converge(module, params):
    """Run the step (in check mode: say what it would do); the module's result."""
    host = Host(module)
    step = present if params["state"] == "present" else absent
    sshd_changed, pam_systemd = step(module, host, params)
    result = dict(changed=bool(host.changed_files or host.commands), changed_files=host.changed_files,
                  commands=host.commands, sshd_changed=sshd_changed, pam_systemd=pam_systemd)
    if module._diff and host.diffs:
        result["diff"] = host.diffs
    return result
