# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Service accounts with fixed ids: what to run for absent, right and wrong entries."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

from ansible_collections.hybridhpc.slurm.plugins.module_utils.system_accounts import plan

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
