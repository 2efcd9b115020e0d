# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Service accounts with fixed ids: what to run for absent, right and wrong entries."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import os
import subprocess

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils.system_accounts import account_paths, plan

MUNGE = {"name": "munge", "uid": 64029, "gid": 64029, "home": "/nonexistent", "shell": "/usr/sbin/nologin"}


def test_absent_accounts_are_created_group_first():
    assert plan(MUNGE, None, None) == [
        ["groupadd", "--system", "--gid", "64029", "munge"],
        ["useradd", "--system", "--uid", "64029", "--gid", "munge", "--home-dir", "/nonexistent",
         "--no-create-home", "--shell", "/usr/sbin/nologin", "munge"],
    ]


def test_a_matching_account_needs_nothing():
    assert plan(MUNGE, ("munge", 64029), (64029, 64029, "/nonexistent", "/usr/sbin/nologin")) == []


def test_ids_made_by_a_package_are_fixed():
    commands = plan(MUNGE, ("munge", 101), (101, 101, "/var/lib/munge", "/usr/sbin/nologin"))
    assert commands == [
        ["groupmod", "--gid", "64029", "munge"],
        ["usermod", "--uid", "64029", "--gid", "munge", "--home", "/nonexistent", "--shell", "/usr/sbin/nologin", "munge"],
    ]


PACKAGE_MUNGE = (("munge", 101), (100, 101, "/nonexistent", "/usr/sbin/nologin"))


def test_files_the_package_ids_own_are_given_the_fixed_ones():
    commands = plan(MUNGE, *PACKAGE_MUNGE, paths=["/etc/munge", "/var/log/munge"])
    assert commands[-2:] == [
        ["chown", "-R", "--from=100", "64029", "--", "/etc/munge", "/var/log/munge"],
        ["chown", "-R", "--from=:101", ":64029", "--", "/etc/munge", "/var/log/munge"],
    ]
    # Only the id that changes; nothing when none does or the account is new.
    assert plan(MUNGE, ("munge", 64029), (100, 64029, "/nonexistent", "/usr/sbin/nologin"), paths=["/etc/munge"])[-1] == [
        "chown", "-R", "--from=100", "64029", "--", "/etc/munge"]
    assert plan(MUNGE, ("munge", 64029), (64029, 64029, "/var/lib/munge", "/bin/sh"), paths=["/etc/munge"])[-1][0] == "usermod"
    assert all(argv[0] != "chown" for argv in plan(MUNGE, None, None, paths=["/etc/munge"]))
    # An account with root's ids shares its files with root: nothing is given away.
    assert all(argv[0] != "chown" for argv in plan(MUNGE, ("munge", 0), (0, 0, "/nonexistent", "/usr/sbin/nologin"),
                                                   paths=["/etc/munge"]))


def test_the_account_paths_are_the_entries_of_the_state_roots_named_after_it(tmp_path):
    for path in ("etc/munge/munge.key", "etc/passwd", "var/log/munge/munged.log", "var/log/slurm/slurmd.log",
                 "var/lib/slurm-llnl/x"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    roots = [str(tmp_path / root) for root in ("etc", "var/lib", "var/log", "run")]
    assert account_paths("munge", roots) == [str(tmp_path / "etc/munge"), str(tmp_path / "var/log/munge")]
    assert account_paths("slurm", roots) == [str(tmp_path / "var/lib/slurm-llnl"), str(tmp_path / "var/log/slurm")]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to other ids needs root (CI and the lab run as root)")
def test_the_planned_chown_gives_only_the_old_ids_files_the_new_ones_and_follows_no_link(tmp_path):
    state = tmp_path / "var/lib/munge"
    state.mkdir(parents=True)
    (state / "seed").write_text("")
    (state / "root-owned").write_text("")
    outside = tmp_path / "outside"
    outside.write_text("")
    (state / "link").symlink_to(outside)
    for path in (state, state / "seed", outside):
        os.chown(path, 4100, 4101)
    os.lchown(state / "link", 4100, 4101)
    account = dict(MUNGE, uid=4200, gid=4201)
    for argv in plan(account, ("munge", 4101), (4100, 4101, "/nonexistent", "/usr/sbin/nologin"), [str(state)]):
        if argv[0] == "chown":
            subprocess.run(argv, check=True)

    def owner(path):
        stat = os.lstat(path)
        return stat.st_uid, stat.st_gid
    assert owner(state) == owner(state / "seed") == owner(state / "link") == (4200, 4201)
    assert owner(state / "root-owned") == (0, 0)
    # The link's target is not the account's: left as it was.
    assert owner(outside) == (4100, 4101)
