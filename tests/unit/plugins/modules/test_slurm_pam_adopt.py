# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_pam_adopt: sshd's PAM stack for pam_slurm_adopt in one step, and back.

Runs the module on real files in a temporary directory. The two commands it
runs, ``sshd -T`` and ``pam-auth-update``, would read or rewrite this machine's
own sshd and PAM setup, so here they are answered by a recorder; the lab runs
them for real (extensions/molecule/accounting/verify_pam.yml).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import os
import pathlib

import pytest
from ansible.module_utils import basic

from ansible_collections.hybridhpc.slurm.plugins.modules import slurm_pam_adopt

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the module makes root-owned files")

SSHD = (pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "pam" / "sshd.debian-trixie").read_text()
SESSION = "session required pam_unix.so\nsession optional pam_systemd.so\n"
LINES = [
    "account    sufficient   pam_access.so accessfile=ACCESS nodefgroup",
    "account    required     pam_slurm_adopt.so action_no_jobs=deny",
]


class Commands(object):
    """What the module ran, and sshd -T's answer; pam-auth-update edits common-session as Debian's would."""

    def __init__(self, session_file):
        self.ran = []
        self.usepam = "yes"
        self.session_file = session_file
        self.leave_pam_systemd = False

    def __call__(self, argv, **kwargs):
        self.ran.append(list(argv))
        if argv[:2] == ["sshd", "-T"]:
            return 0, "port 22\nusepam %s\n" % self.usepam, ""
        if argv[:2] == ["pam-auth-update", "--disable"] and not self.leave_pam_systemd:
            self.session_file.write_text(SESSION.replace("session optional pam_systemd.so\n", ""))
        if argv[:2] == ["pam-auth-update", "--enable"]:
            self.session_file.write_text(SESSION)
        return 0, "", ""


@pytest.fixture
def node(tmp_path):
    (tmp_path / "pam.d").mkdir()
    (tmp_path / "pam.d" / "sshd").write_text(SSHD)
    (tmp_path / "pam.d" / "common-session").write_text(SESSION)
    return tmp_path


@pytest.fixture
def run_module(monkeypatch, module_main, node):
    commands = Commands(node / "pam.d" / "common-session")
    monkeypatch.setattr(basic.AnsibleModule, "run_command", lambda self, argv, **kwargs: commands(argv, **kwargs))

    def run(args, check_mode=False, diff=False):
        return module_main(slurm_pam_adopt.main, args, check_mode, diff)

    run.commands = commands
    return run


def args(node, state="present", method="comment"):
    return {
        "state": state,
        "pam_file": str(node / "pam.d" / "sshd"),
        "account_lines": LINES if state == "present" else [],
        "sshd_dropin": str(node / "sshd_config.d" / "00-pam.conf"),
        "sshd_dropin_content": "UsePAM yes\n" if state == "present" else None,
        "access_file": str(node / "access.conf"),
        "access_content": "+:root:ALL\n-:ALL:ALL\n" if state == "present" else None,
        "systemd_method": method,
        "session_files": [str(node / "pam.d" / "sshd"), str(node / "pam.d" / "common-session")],
        "systemd_marker": str(node / "state" / "pam_systemd-disabled"),
        "fact_file": str(node / "facts.d" / "pam.fact"),
    }


def snapshot(node):
    return {str(p.relative_to(node)): p.read_text() for p in sorted(node.rglob("*")) if p.is_file()}


def test_present_puts_every_piece_in_place_once(run_module, node):
    (node / "sshd_config.d").mkdir()
    result = run_module(args(node))
    assert result["changed"] and result["sshd_changed"] and result["pam_systemd"] == "commented"
    sshd = (node / "pam.d" / "sshd").read_text()
    assert "\n".join(LINES) in sshd and sshd.index("@include common-account") < sshd.index(LINES[1])
    assert "#session optional pam_systemd.so # disabled by" in (node / "pam.d" / "common-session").read_text()
    assert (node / "access.conf").read_text() == "+:root:ALL\n-:ALL:ALL\n"
    assert oct((node / "access.conf").stat().st_mode & 0o777) == "0o644"
    assert (node / "facts.d" / "pam.fact").read_text() == '{"enabled": true}'
    before = snapshot(node)
    again = run_module(args(node))
    assert not again["changed"] and again["changed_files"] == [] and not again["sshd_changed"]
    assert again["pam_systemd"] == "kept" and snapshot(node) == before


def test_check_mode_changes_nothing_and_says_what_would_change(run_module, node):
    (node / "sshd_config.d").mkdir()
    before = snapshot(node)
    result = run_module(args(node), check_mode=True, diff=True)
    assert result["changed"] and snapshot(node) == before
    assert str(node / "pam.d" / "sshd") in result["changed_files"]
    assert any(d["after_header"] == str(node / "access.conf") for d in result["diff"])
    # sshd -T is not asked about a drop-in that is not there yet
    assert ["sshd", "-T"] not in run_module.commands.ran


def test_absent_gives_back_the_files_as_they_were(run_module, node):
    (node / "sshd_config.d").mkdir()
    before = snapshot(node)
    run_module(args(node))
    result = run_module(args(node, state="absent"))
    assert result["changed"] and result["sshd_changed"] and result["pam_systemd"] == "uncommented"
    assert snapshot(node) == before
    assert not run_module(args(node, state="absent"))["changed"]


def test_debian_disables_the_systemd_profile_after_writing_its_marker_and_enables_it_back(run_module, node):
    (node / "sshd_config.d").mkdir()
    result = run_module(args(node, method="pam-auth-update"))
    assert result["pam_systemd"] == "disabled" and result["commands"] == ["pam-auth-update --disable systemd"]
    assert (node / "state" / "pam_systemd-disabled").exists()
    assert "pam_systemd" not in (node / "pam.d" / "common-session").read_text()
    assert run_module(args(node, method="pam-auth-update"))["commands"] == []
    back = run_module(args(node, state="absent", method="pam-auth-update"))
    assert back["pam_systemd"] == "enabled" and back["commands"] == ["pam-auth-update --enable systemd"]
    assert not (node / "state" / "pam_systemd-disabled").exists()
    assert (node / "pam.d" / "common-session").read_text() == SESSION


def test_without_the_marker_the_systemd_profile_is_left_alone(run_module, node):
    # pam_systemd was never there (or an admin disabled it): nothing to give back
    (node / "pam.d" / "common-session").write_text("session required pam_unix.so\n")
    (node / "sshd_config.d").mkdir()
    run_module(args(node, method="pam-auth-update"))
    result = run_module(args(node, state="absent", method="pam-auth-update"))
    assert result["pam_systemd"] == "kept" and result["commands"] == []


def test_pam_systemd_that_stays_fails_the_run(run_module, node):
    (node / "sshd_config.d").mkdir()
    run_module.commands.leave_pam_systemd = True
    result = run_module(args(node, method="pam-auth-update"))
    assert result.get("failed") and "pam_systemd is still in the session stack" in result["msg"]
    assert "pam_slurm_adopt" not in (node / "pam.d" / "sshd").read_text()


def test_sshd_without_pam_fails_before_the_account_stack_changes(run_module, node):
    (node / "sshd_config.d").mkdir()
    run_module.commands.usepam = "no"
    result = run_module(args(node))
    assert result.get("failed") and "UsePAM no" in result["msg"] and "00-pam.conf" in result["msg"]
    assert (node / "pam.d" / "sshd").read_text() == SSHD


def test_an_account_line_after_the_block_fails_and_leaves_the_file(run_module, node):
    (node / "sshd_config.d").mkdir()
    run_module(args(node))
    # an admin (or a package) adds an account line after the block
    sshd = node / "pam.d" / "sshd"
    sshd.write_text(sshd.read_text() + "account required pam_time.so\n")
    edited = sshd.read_text()
    result = run_module(args(node))
    assert result.get("failed") and "account required pam_time.so" in result["msg"]
    assert sshd.read_text() == edited


def test_a_step_that_ran_does_nothing_until_the_stack_drifts(run_module, node):
    """A present (then absent) step: nothing to do on the next run, and a change after an edit of each file it
    keeps (in check mode too); the run after that does nothing again."""
    from ansible_collections.hybridhpc.slurm.plugins.module_utils import pam_stack

    (node / "sshd_config.d").mkdir()
    tag = " # disabled by hybridhpc.slurm pam_slurm_adopt"
    drifts = {
        # Each file the step keeps, as it would be without the step.
        "present": {"pam.d/sshd": SSHD, "pam.d/common-session": SESSION, "access.conf": "+:ALL:ALL\n",
                    "sshd_config.d/00-pam.conf": "UsePAM no\n"},
        "absent": {"pam.d/sshd": pam_stack.put_block(SSHD, LINES),
                   "pam.d/common-session": pam_stack.comment_pam_systemd(SESSION, tag),
                   "access.conf": "+:root:ALL\n", "sshd_config.d/00-pam.conf": "UsePAM yes\n"},
    }
    for state in ("present", "absent"):
        assert run_module(args(node, state))["changed"]
        quiet = run_module(args(node, state))
        assert not quiet["changed"] and quiet["commands"] == [] and quiet["pam_systemd"] == "kept", state
        for name, text in drifts[state].items():
            (node / name).write_text(text)
            assert run_module(args(node, state), check_mode=True)["changed"], "%s: %s drifted unnoticed" % (state, name)
            assert run_module(args(node, state))["changed"], "%s: %s drifted unnoticed" % (state, name)
            assert not run_module(args(node, state))["changed"], "%s: %s not put back" % (state, name)
