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


def plan(account, group_entry, user_entry):
    """The commands (argv lists) that make one account what `account` says.

    account: dict(name, uid, gid, home, shell); group_entry: (name, gid) of the
    group of that name, or None; user_entry: (uid, gid, home, shell) of the
    user of that name, or None.
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
    return commands
