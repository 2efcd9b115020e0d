# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_users resolve to one uid and gid on every host (the first play's check).

Slurm runs a job as the uid the submitting host gave it: a user whose uid
differs between hosts runs as someone else on the compute node, and files on
a shared filesystem change hands; a user the compute or login node cannot
resolve cannot run there. Each host resolves the names through its own name
service (slurm_host_facts ``users``: local files, SSSD, LDAP) and is compared
with one reference host of the play, so a federation's clusters are held to
one directory too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pwd


def resolve(name):
    """[uid, gid] of a user as this host's name service resolves it (NSS: files, sss, ldap), None when unknown."""
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return [entry.pw_uid, entry.pw_gid]


def problems(names, mine, host, must_resolve, reference=None, reference_host=None):
    """Messages for this host.

    names: the slurm_users names; mine: this host's {name: [uid, gid] or None};
    must_resolve: whether users run here (a compute or login node); reference
    and reference_host: another host's answer and its name (None for none).
    """
    found = []
    for name in names:
        ids = (mine or {}).get(name)
        if ids is None:
            if must_resolve:
                found.append("slurm_users: %s does not resolve on %s (getent passwd %s finds no one), where its jobs run "
                             "or it logs in: create the user there, or point the host at the site's directory (SSSD)"
                             % (name, host, name))
            continue
        other = (reference or {}).get(name)
        if other is not None and list(other) != list(ids):
            found.append("slurm_users: %s is uid %s gid %s on %s but uid %s gid %s on %s: give it one uid and gid on every "
                         "host (one directory), or its jobs run as another user and shared files change hands"
                         % (name, other[0], other[1], reference_host, ids[0], ids[1], host))
    return found
