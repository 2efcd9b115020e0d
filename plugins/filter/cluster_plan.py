# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-cluster decisions (module_utils/cluster_plan.py) for the daemon roles."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hybridhpc.slurm.plugins.module_utils.hostlist import expand
from ansible_collections.hybridhpc.slurm.plugins.plugin_utils.lazy_module import LazyModule

cluster_plan = LazyModule("cluster_plan")


def slurm_cluster_members(cluster, groups, hostvars, dbd_hosts=None):
    """One cluster's members (hosts, controllers, dbd, compute, login, REST, Kubernetes-shared), in inventory order."""
    return cluster_plan.cluster_members(cluster, groups, lambda host: hostvars[host] if host in hostvars else {}, dbd_hosts)


def slurm_cluster_planner(cluster, groups, hostvars, play_hosts):
    """The controller that decides the cluster's plan for its other hosts in this play, or None."""
    return cluster_plan.cluster_planner(cluster, groups, lambda host: hostvars[host] if host in hostvars else {}, play_hosts)


def slurm_cluster_actions(controllers, members, play_hosts, hostvars):
    """What one cluster needs (actor, reconfigure, markers to clear) from its members' recorded state."""
    return cluster_plan.cluster_actions(controllers, members, play_hosts, cluster_plan.member_states(members, hostvars))


def slurm_cluster_restart_required(controllers, hostvars):
    """Whether the cluster's controllers' new slurm.conf needs a restart (configless members follow them)."""
    return cluster_plan.controllers_restart(controllers, cluster_plan.member_states(controllers, hostvars))


def slurm_nodes_leaving(running, records):
    """Nodes slurmctld runs that the new node records drop (to drain and empty before the reconfigure)."""
    if isinstance(running, str):
        running = running.split()
    return cluster_plan.nodes_leaving(running, records, expand)


def slurm_cluster_renamed_from(state_clustername, cluster):
    """The cluster's old name when the controller's state belongs to another ClusterName, else None."""
    return cluster_plan.rename_from(state_clustername, cluster)


class FilterModule(object):
    def filters(self):
        return {
            "slurm_cluster_members": slurm_cluster_members,
            "slurm_cluster_actions": slurm_cluster_actions,
            "slurm_cluster_planner": slurm_cluster_planner,
            "slurm_nodes_leaving": slurm_nodes_leaving,
            "slurm_cluster_restart_required": slurm_cluster_restart_required,
            "slurm_cluster_renamed_from": slurm_cluster_renamed_from,
        }
