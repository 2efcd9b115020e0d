# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-cluster decisions (module_utils/cluster_plan.py) for the daemon roles."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hybridhpc.slurm.plugins.module_utils import cluster_plan
from ansible_collections.hybridhpc.slurm.plugins.module_utils.hostlist import expand


def slurm_cluster_actions(controllers, members, play_hosts, hostvars):
    """What one cluster needs (actor, reconfigure, markers to clear) from its members' recorded state."""
    return cluster_plan.cluster_actions(controllers, members, play_hosts, cluster_plan.member_states(members, hostvars))


def slurm_nodes_leaving(running, records):
    """Nodes slurmctld runs that the new node records drop (to drain and empty before the reconfigure)."""
    if isinstance(running, str):
        running = running.split()
    return cluster_plan.nodes_leaving(running, records, expand)


class FilterModule(object):
    def filters(self):
        return {"slurm_cluster_actions": slurm_cluster_actions, "slurm_nodes_leaving": slurm_nodes_leaving}
