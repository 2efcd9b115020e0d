# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The text edits of sshd's PAM files for pam_slurm_adopt.

The account block must land exactly where ansible.builtin.blockinfile puts it
(nodes the role configured with blockinfile keep their file): each case runs
Ansible's own blockinfile module on the same text and compares. The sshd file
is Debian trixie's (tests/unit/fixtures/pam/sshd.debian-trixie).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pathlib

import pytest
from ansible.modules import blockinfile

from ansible_collections.hybridhpc.slurm.plugins.module_utils import pam_stack

SSHD = (pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "pam" / "sshd.debian-trixie").read_text()
LINES = [
    "account    sufficient   pam_access.so accessfile=/etc/security/access-slurm-adopt.conf nodefgroup",
    "account    required     pam_slurm_adopt.so action_no_jobs=deny log_level=info",
]
TAG = " # disabled by hybridhpc.slurm pam_slurm_adopt"


@pytest.fixture
def with_blockinfile(module_main, tmp_path):
    """``text`` after Ansible's blockinfile (the role's task before this module) with the role's marker and anchor."""

    def run(text, lines, state="present"):
        path = tmp_path / "sshd"
        path.write_text(text)
        result = module_main(blockinfile.main, {
            "path": str(path), "marker": pam_stack.BLOCK_MARKER, "insertafter": pam_stack.INSERT_AFTER,
            "block": "\n".join(lines) + "\n" if lines else "", "state": state})
        assert not result.get("failed"), result
        return path.read_text()

    return run


@pytest.mark.parametrize("text", [
    SSHD,
    # no anchor: at the end
    "auth required pam_unix.so\nsession required pam_unix.so\n",
    # the last account line is the anchor, not the first
    "account required pam_nologin.so\n@include common-account\naccount optional pam_foo.so\nsession x\n",
    # no newline at the end of the anchor line
    "auth x\naccount required pam_unix.so",
    "",
])
def test_the_block_lands_where_blockinfile_puts_it(with_blockinfile, text):
    assert pam_stack.put_block(text, LINES) == with_blockinfile(text, LINES)


def test_an_existing_block_is_rewritten_in_place_like_blockinfile(with_blockinfile):
    placed = with_blockinfile(SSHD, LINES)
    # an admin moved the block up: new options replace it where it is
    moved = pam_stack.BLOCK_MARKER.replace("{mark}", "BEGIN")
    lines = placed.splitlines(True)
    start = lines.index(moved + "\n")
    block, rest = lines[start:start + 4], lines[:start] + lines[start + 4:]
    moved_text = "".join(block + rest)
    new = [LINES[0], LINES[1].replace("log_level=info", "log_level=debug")]
    assert pam_stack.put_block(moved_text, new) == with_blockinfile(moved_text, new)
    assert pam_stack.put_block(placed, LINES) == placed


def test_removing_the_block_gives_back_the_file_blockinfile_leaves(with_blockinfile):
    placed = with_blockinfile(SSHD, LINES)
    assert pam_stack.remove_block(placed) == with_blockinfile(placed, [], state="absent") == SSHD
    assert pam_stack.remove_block(SSHD) == SSHD


def test_pam_slurm_adopt_must_be_the_last_account_module():
    placed = pam_stack.put_block(SSHD, LINES)
    assert pam_stack.adopt_is_last(placed)
    assert not pam_stack.adopt_is_last(SSHD)
    # an account line after the block (a commented one does not count)
    assert not pam_stack.adopt_is_last(placed + "account required pam_time.so\n")
    assert pam_stack.adopt_is_last(placed + "# account required pam_time.so\n")
    assert pam_stack.adopt_is_last(placed + "-account optional pam_x.so\n") is False


SESSION = (
    "session\t[default=1]\tpam_permit.so\n"
    "session\trequired\tpam_unix.so\n"
    "session\toptional\tpam_systemd.so\n"
    "-session optional pam_systemd.so debug\n"
    "# session optional pam_systemd.so (an admin's comment)\n"
)


def test_pam_systemd_is_commented_out_with_a_tag_and_only_tagged_lines_come_back():
    assert pam_stack.has_pam_systemd(SESSION)
    off = pam_stack.comment_pam_systemd(SESSION, TAG)
    assert not pam_stack.has_pam_systemd(off)
    assert "#session\toptional\tpam_systemd.so" + TAG + "\n" in off
    assert "#-session optional pam_systemd.so debug" + TAG + "\n" in off
    # twice is once
    assert pam_stack.comment_pam_systemd(off, TAG) == off
    # back exactly as it was: the admin's own comment stays a comment
    assert pam_stack.uncomment_pam_systemd(off, TAG) == SESSION
    assert pam_stack.uncomment_pam_systemd(SESSION, TAG) == SESSION


def test_usepam_is_read_from_sshd_t():
    assert pam_stack.sshd_uses_pam("port 22\nusepam yes\n")
    assert not pam_stack.sshd_uses_pam("port 22\nusepam no\n")
    assert not pam_stack.sshd_uses_pam("")
