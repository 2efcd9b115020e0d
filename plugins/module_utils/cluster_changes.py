# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dangerous changes to a converged cluster, refused unless explicitly allowed.

The first play reads each host's current slurm.conf (read-only) and hands the
texts here with the inventory's view of the cluster. Three changes lose
state or jobs if made by accident, so each needs its own opt-in variable:

* renaming a cluster (a host's slurm.conf says ClusterName=X, the inventory
  now says Y): slurmctld's state and the accounting records stay under X;
  ``slurm_allow_cluster_rename: true``;
* moving a compute node from another cluster of the inventory to this one:
  its running jobs belong to the other cluster; ``slurm_allow_node_move: true``;
* removing the cluster's only controller(s) (no host named in the current
  SlurmctldHost lines is still a controller of the cluster): the new one
  starts without the StateSaveLocation; ``slurm_allow_controller_change: true``.

Hosts without a slurm.conf are new and never refused.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.hybridhpc.slurm.plugins.module_utils.slurm_conf import parse_conf

RENAME_VAR = "slurm_allow_cluster_rename"
MOVE_VAR = "slurm_allow_node_move"
CONTROLLER_VAR = "slurm_allow_controller_change"

_CONTROLLER_KEYS = ("slurmctldhost", "controlmachine", "backupcontroller")


def current_state(text):
    """ClusterName (lowercase, or None) and controller host names of a slurm.conf text.

    >>> current_state("ClusterName=Lab\\nSlurmctldHost=ctl1(10.0.0.1)\\nSlurmctldHost=ctl2\\n")
    ('lab', ['ctl1', 'ctl2'])
    """
    parsed = parse_conf(text)
    names = parsed.get("clustername") or [None]
    name = names[-1].strip().lower() if names[-1] else None
    controllers = []
    for key in _CONTROLLER_KEYS:
        for value in parsed.get(key, []):
            host = re.split(r"[(\s]", value.strip(), maxsplit=1)[0]
            if host and host not in controllers:
                controllers.append(host)
    return name, controllers


def cluster_change_problems(change):
    """Refusals for one cluster; empty when nothing dangerous happens or it is allowed.

    ``change`` keys: cluster (the inventory's slurm_cluster_name), controllers
    (the cluster's slurmctld hosts in the inventory), compute_hosts, current
    ({host: current slurm.conf text, empty or missing for new hosts}),
    other_clusters (the inventory's other cluster names), node_names
    ({host: Slurm node name} where it differs), and the opt-ins
    allow_cluster_rename, allow_node_move, allow_controller_change.
    """
    cluster = str(change.get("cluster") or "").lower()
    controllers = list(change.get("controllers") or [])
    compute = set(change.get("compute_hosts") or [])
    others = {str(c).lower() for c in change.get("other_clusters") or []}
    aliases = change.get("node_names") or {}
    known_controllers = set(controllers) | {aliases.get(h, h) for h in controllers}

    renamed, moved, old_controllers, converged = {}, {}, [], False
    for host, text in sorted((change.get("current") or {}).items()):
        if not (text or "").strip():
            continue
        name, ctl_hosts = current_state(text)
        if name is None:
            continue
        if name == cluster:
            converged = True
            old_controllers += [c for c in ctl_hosts if c not in old_controllers]
        elif name in others and host in compute and host not in controllers:
            moved.setdefault(name, []).append(host)
        else:
            renamed.setdefault(name, []).append(host)

    problems = []
    if renamed and not change.get("allow_cluster_rename"):
        for old, hosts in sorted(renamed.items()):
            problems.append(
                "slurm_cluster_name: %s already runs as cluster %r (ClusterName in its slurm.conf), the inventory "
                "now says %r; renaming loses the controller state and splits the accounting records. Put back "
                "slurm_cluster_name: %s, or set %s: true to rename it"
                % (", ".join(hosts), old, cluster, old, RENAME_VAR)
            )
    if moved and not change.get("allow_node_move"):
        for old, hosts in sorted(moved.items()):
            problems.append(
                "slurm_cluster_name: compute node(s) %s belong to cluster %r (their slurm.conf), the inventory puts "
                "them in %r; their running jobs would be lost. Drain them in %r first and set %s: true to move them"
                % (", ".join(hosts), old, cluster, old, MOVE_VAR)
            )
    if converged and old_controllers and not (set(old_controllers) & known_controllers) \
            and not change.get("allow_controller_change"):
        problems.append(
            "groups['slurmctld']: cluster %r runs its controller on %s (SlurmctldHost in slurm.conf), which the "
            "inventory no longer has as a controller of %r (now: %s); the new controller would start without the "
            "cluster's state. Keep one of them in group 'slurmctld', or set %s: true"
            % (cluster, ", ".join(old_controllers), cluster, ", ".join(controllers) or "none", CONTROLLER_VAR)
        )
    return problems
