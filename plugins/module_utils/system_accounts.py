# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Service accounts (munge, slurm) with fixed ids on every node, in one step.

Daemons of a cluster must see the same uid/gid everywhere (MUNGE credentials
carry them; StateSaveLocation on shared storage keeps its owner), so the
accounts exist before any package would create them with whatever id is free.
One module call for every account of a host instead of a group and a user task
each; the commands are planned here from the current passwd/group entries.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import grp
import os
import pwd

# The suboptions of an account, for the modules that take a list of them
# (system_accounts, slurm_config_files).
ACCOUNT_OPTIONS = dict(
    name=dict(type="str", required=True),
    uid=dict(type="int", required=True),
    gid=dict(type="int", required=True),
    home=dict(type="str", default="/nonexistent"),
    shell=dict(type="str", default="/usr/sbin/nologin"),
)


# Where daemon packages keep their account's files: /etc/munge, /var/lib/munge,
# /var/log/slurm, /var/spool/slurmd, /run/munge, ... (an entry of one of these
# whose name starts with the account's).
STATE_ROOTS = ("/etc", "/var/lib", "/var/log", "/var/spool", "/var/cache", "/run")


def plan(account, group_entry, user_entry, paths=()):
    """The commands (argv lists) that make one account what `account` says.

    account: dict(name, uid, gid, home, shell); group_entry: (name, gid) of the
    group of that name, or None; user_entry: (uid, gid, home, shell) of the
    user of that name, or None; paths: the account's directories
    (account_paths()). When an id changes (a package created the account
    first, with whatever id was free), the files under paths that the old id
    owns are given the new one: usermod and groupmod leave them to the old
    number, and the daemon could no longer open its own key, state or log.
    """
    name = account["name"]
    commands = []
    if group_entry is None:
        commands.append(["groupadd", "--system", "--gid", str(account["gid"]), name])
    elif group_entry[1] != account["gid"]:
        commands.append(["groupmod", "--gid", str(account["gid"]), name])
    wanted = (account["uid"], account["gid"], account["home"], account["shell"])
    if user_entry is None:
        commands.append(["useradd", "--system", "--uid", str(account["uid"]), "--gid", name,
                         "--home-dir", account["home"], "--no-create-home", "--shell", account["shell"], name])
    elif tuple(user_entry) != wanted:
        commands.append(["usermod", "--uid", str(account["uid"]), "--gid", name,
                         "--home", account["home"], "--shell", account["shell"], name])
    # chown -R does not follow symbolic links (-P), and --from changes only what the old id owns.
    # Never from root's ids: an account that had them shares its files with root's.
    if paths and user_entry is not None and user_entry[0] not in (0, account["uid"]):
        commands.append(["chown", "-R", "--from=%d" % user_entry[0], str(account["uid"]), "--"] + list(paths))
    if paths and group_entry is not None and group_entry[1] not in (0, account["gid"]):
        commands.append(["chown", "-R", "--from=:%d" % group_entry[1], ":%d" % account["gid"], "--"] + list(paths))
    return commands


def account_paths(name, roots=STATE_ROOTS):
    """The directories and files of STATE_ROOTS named after the account (``munge``, ``slurm``, ``slurmd``, ...)."""
    paths = []
    for root in roots:
        try:
            entries = sorted(os.listdir(root))
        except OSError:
            continue
        paths.extend(os.path.join(root, entry) for entry in entries if entry.startswith(name))
    return paths


def group_entry(name):
    try:
        entry = grp.getgrnam(name)
    except KeyError:
        return None
    return entry.gr_name, entry.gr_gid


def user_entry(name):
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid, entry.pw_dir, entry.pw_shell


def ensure(module, accounts):
    """Make each account what it says (in check mode only plan); the commands, run or planned, in order.

    Fails the module (with the commands done so far) when one fails.
    """
    done = []
    for account in accounts:
        group, user = group_entry(account["name"]), user_entry(account["name"])
        changes_ids = (user is not None and user[0] != account["uid"]) or (group is not None and group[1] != account["gid"])
        paths = account_paths(account["name"]) if changes_ids else []
        for argv in plan(account, group, user, paths):
            done.append(argv)
            if module.check_mode:
                continue
            argv = [module.get_bin_path(argv[0], required=True)] + argv[1:]
            rc, _out, err = module.run_command(argv)
            if rc != 0:
                module.fail_json(msg="%s failed (rc %d): %s" % (" ".join(argv), rc, err.strip()), commands=done)
    return done
