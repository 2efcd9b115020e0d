# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The text edits of sshd's PAM files for pam_slurm_adopt (module slurm_pam_adopt).

Pure functions over file texts, so every edit and every check is tested
without touching a host:

* the account block (the allowlist, then pam_slurm_adopt) between two marker
  lines, placed and removed the way ansible.builtin.blockinfile does: nodes the
  role configured with blockinfile keep their file byte for byte;
* whether pam_slurm_adopt is the last account module (Slurm's documentation);
* pam_systemd in the session stack: found, commented out with a tag, and put
  back (only the lines carrying the tag).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# The default marker and anchor of the role (blockinfile's before this module).
BLOCK_MARKER = "# {mark} hybridhpc.slurm pam_slurm_adopt (role pam_slurm_adopt)"
# After the last account line, or the include of common-account (Debian).
INSERT_AFTER = r"^\s*(-?account\s|@include\s+common-account)"
_ACCOUNT = re.compile(r"^\s*-?account\s")
_PAM_SYSTEMD = re.compile(r"^\s*-?session\s.*pam_systemd\.so")


def _markers(marker):
    return marker.replace("{mark}", "BEGIN"), marker.replace("{mark}", "END")


def _block_rows(rows, marker):
    """(first, last) row of the block between the marker lines (the last of each, as blockinfile finds them), or None."""
    begin, end = _markers(marker)
    start = stop = None
    for index, row in enumerate(rows):
        if row.rstrip("\n") == begin:
            start = index
        if row.rstrip("\n") == end:
            stop = index
    if start is None or stop is None:
        return None
    return min(start, stop), max(start, stop)


def put_block(text, lines, marker=BLOCK_MARKER, insert_after=INSERT_AFTER):
    """``text`` with ``lines`` between the marker lines: in place when the block exists, else after the anchor.

    The anchor is the last line ``insert_after`` matches (the end of the file
    when none does), as blockinfile places a new block.
    """
    begin, end = _markers(marker)
    rows = (text or "").splitlines(True)
    block = [begin + "\n"] + [line + "\n" for line in lines] + [end + "\n"]
    found = _block_rows(rows, marker)
    if found is not None:
        del rows[found[0]:found[1] + 1]
        where = found[0]
    else:
        anchor = re.compile(insert_after)
        where = None
        for index, row in enumerate(rows):
            if anchor.search(row):
                where = index + 1
        if where is None:
            where = len(rows)
    if where > 0 and not rows[where - 1].endswith("\n"):
        rows[where - 1] += "\n"
    rows[where:where] = block
    return "".join(rows)


def remove_block(text, marker=BLOCK_MARKER):
    """``text`` without the block between the marker lines (unchanged when there is none)."""
    rows = (text or "").splitlines(True)
    found = _block_rows(rows, marker)
    if found is None:
        return text
    del rows[found[0]:found[1] + 1]
    return "".join(rows)


def account_lines(text):
    """The account lines of a PAM file, in order (commented lines are not account lines)."""
    return [row for row in (text or "").splitlines() if _ACCOUNT.match(row)]


def adopt_is_last(text):
    """Whether pam_slurm_adopt is the last account module of ``text``."""
    rows = account_lines(text)
    return bool(rows) and "pam_slurm_adopt.so" in rows[-1]


def has_pam_systemd(text):
    """Whether ``text`` has an active pam_systemd session line."""
    return any(_PAM_SYSTEMD.match(row) for row in (text or "").splitlines())


def comment_pam_systemd(text, tag):
    """``text`` with each active pam_systemd session line commented out and tagged (``#<line><tag>``)."""
    rows = (text or "").splitlines(True)
    for index, row in enumerate(rows):
        body = row.rstrip("\n")
        if _PAM_SYSTEMD.match(body):
            rows[index] = "#" + body + tag + row[len(body):]
    return "".join(rows)


def uncomment_pam_systemd(text, tag):
    """``text`` with the pam_systemd lines ``comment_pam_systemd`` tagged made active again (others untouched)."""
    rows = (text or "").splitlines(True)
    for index, row in enumerate(rows):
        body = row.rstrip("\n")
        if body.startswith("#") and body.endswith(tag) and "pam_systemd.so" in body:
            rows[index] = body[1:len(body) - len(tag)] + row[len(body):]
    return "".join(rows)


def sshd_uses_pam(sshd_t_output):
    """Whether ``sshd -T`` (sshd's effective settings, lower-case keys) has UsePAM on."""
    return "usepam yes" in [line.strip().lower() for line in (sshd_t_output or "").splitlines()]
