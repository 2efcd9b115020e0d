# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-cluster decisions of a multi-cluster site, made on the Ansible controller.

A site inventory holds several clusters; a play over ``slurmctld`` spans all
of them. Anything done "once" is done once per cluster, by that cluster's own
controller: ``run_once`` would act for the first cluster of the play only, and
the others would keep a changed slurm.conf that no daemon ever re-reads.

``cluster_actions`` answers, for one cluster, from the state every member host
recorded after rendering its files:

* ``actor``: the controller that acts for the cluster (its first controller in
  this run; None when --limit left all of them out: nothing is applied then,
  and the members' pending markers keep the change for the next run);
* ``reconfigure``: whether ``scontrol reconfigure`` must run (some member
  changed a file or kept a pending marker from an interrupted run);
* ``clear_markers``: the members whose pending-reconfigure marker the
  reconfigure settles (only members this run reached: a member left out by
  --limit did not get its new files, so its marker must stay).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# Inventory groups by what their hosts run; a host's cluster is its slurm_cluster_name.
CONTROLLER_GROUP = "slurmctld"
DBD_GROUP = "slurmdbd"
COMPUTE_GROUP = "slurmd"
LOGIN_GROUP = "login"
REST_GROUP = "slurmrestd"


def _members(groups, group, hosts):
    return [h for h in groups.get(group) or [] if h in hosts]


def cluster_members(cluster, groups, host_vars, dbd_hosts=None):
    """One cluster's members, every list in inventory order.

    ``groups``: the inventory's groups; ``host_vars(host)``: that host's
    variables (a mapping with slurm_cluster_name, slurm_k8s_shared,
    slurm_k8s_strategy). A cluster without a slurmdbd host of its own
    accounts to the shared one(s) (one slurmdbd for a whole federation),
    unless ``dbd_hosts`` (slurm_dbd_hosts) names them.

    Returns: name, hosts, controllers (the first is the primary), dbd_hosts,
    compute_hosts, login_hosts, rest_hosts, k8s_shared_hosts (Kubernetes
    shares them) and k8s_gres_hosts (those of them whose share is held by
    count-only GRES rather than placeholder jobs).
    """
    hosts = []
    k8s_shared, k8s_gres = [], []
    for host in groups.get("all") or []:
        hv = host_vars(host) or {}
        if hv.get("slurm_cluster_name") != cluster:
            continue
        hosts.append(host)
    members = set(hosts)
    compute = _members(groups, COMPUTE_GROUP, members)
    for host in compute:
        hv = host_vars(host) or {}
        if truthy(hv.get("slurm_k8s_shared", False)):
            k8s_shared.append(host)
            if hv.get("slurm_k8s_strategy", "gres") == "gres":
                k8s_gres.append(host)
    own_dbd = _members(groups, DBD_GROUP, members)
    return {
        "name": cluster,
        "hosts": hosts,
        "controllers": _members(groups, CONTROLLER_GROUP, members),
        "dbd_hosts": list(dbd_hosts) if dbd_hosts else (own_dbd or list(groups.get(DBD_GROUP) or [])),
        "compute_hosts": compute,
        "login_hosts": _members(groups, LOGIN_GROUP, members),
        "rest_hosts": _members(groups, REST_GROUP, members),
        "k8s_shared_hosts": k8s_shared,
        "k8s_gres_hosts": k8s_gres,
    }


def cluster_planner(cluster, groups, host_vars, play_hosts):
    """The host that decides the cluster's plan for the others, or None.

    The cluster's first controller (inventory order) that this play runs:
    its members and slurm.conf model are computed there once, and every other
    host of the cluster copies them. ``host_vars(host)`` is read for the
    controllers only: another host's variables cost a full variable
    computation each, so reading every host's per host grows with the square
    of the cluster. None (each host decides for itself) when the play runs no
    controller of the cluster (--limit).
    """
    play = set(play_hosts or [])
    for host in groups.get(CONTROLLER_GROUP) or []:
        if host in play and (host_vars(host) or {}).get("slurm_cluster_name") == cluster:
            return host
    return None


def acting_controller(controllers, play_hosts):
    """The first of the cluster's controllers (inventory order) that this run includes, or None."""
    play = set(play_hosts or [])
    for host in controllers or []:
        if host in play:
            return host
    return None


def cluster_actions(controllers, members, play_hosts, states):
    """What the cluster needs after its members rendered their files.

    ``play_hosts``: the hosts of the play that acts (the controllers' play).
    ``states`` maps a member host to what slurm_common recorded there:
    ``{"config_changed": bool, "restart_required": bool}`` (absent for
    members this run did not reach).
    """
    actor = acting_controller(controllers, play_hosts)
    # A member has a state only when this run rendered its files (set_fact facts are not cached).
    reached = [h for h in members or [] if h in states]
    changed = [h for h in reached if states[h].get("config_changed")]
    restarted = [h for h in reached if states[h].get("restart_required")]
    return {
        "actor": actor,
        "reconfigure": actor is not None and bool(changed),
        "clear_markers": reached if actor is not None and changed else [],
        "changed_hosts": changed,
        "restart_hosts": restarted,
    }


def member_states(members, hostvars):
    """``states`` for cluster_actions from the facts slurm_common set on each member (missing: not reached)."""
    states = {}
    for host in members or []:
        hv = hostvars.get(host) if hasattr(hostvars, "get") else hostvars[host]
        if not hv or "slurm_common_config_changed" not in hv:
            continue
        states[host] = {
            "config_changed": truthy(hv.get("slurm_common_config_changed")),
            "restart_required": truthy(hv.get("slurm_common_restart_required")),
        }
    return states


def controllers_restart(controllers, states):
    """Whether a configless member must restart: some controller's new slurm.conf needs a restart.

    Configless compute nodes keep no slurm.conf to compare, so they follow
    their controllers (``states`` as for cluster_actions; controllers this run
    did not reach do not count).
    """
    return any(states[c].get("restart_required") for c in controllers or [] if c in states)


def truthy(value):
    """Whether an inventory or fact value means true: a bool, or the text "true", "yes", "on", "1".

    set_fact of a folded Jinja expression gives a bool or the text
    "True"/"False"; the inventory's switches are checked as booleans in the
    first play, so other texts only reach this from hand-written facts.
    """
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def record_node_names(records, expand):
    """The node names of node records, in record order: each NodeName expanded with ``expand``, DEFAULT skipped."""
    names = []
    for record in records or []:
        name = next((v for k, v in record.items() if str(k).lower() == "nodename"), None)
        if name and name != "DEFAULT":
            names.extend(expand(name if isinstance(name, str) else ",".join(name)))
    return names


def nodes_leaving(running, records, expand):
    """Nodes slurmctld runs (``running``: names) that no node record of the new model has, in slurmctld's order.

    Those must be drained and emptied of jobs before the new slurm.conf is
    applied: a reconfigure drops them from the cluster, with whatever runs there.
    """
    kept = set(record_node_names(records, expand))
    leaving = []
    for name in running or []:  # sinfo -N lists a node once per partition
        if name and name not in kept and name not in leaving:
            leaving.append(name)
    return leaving


def rename_from(state_clustername, cluster):
    """The old name when slurmctld's state (StateSaveLocation/clustername) belongs to another cluster name, else None.

    slurmctld refuses to start over state of another ClusterName; a rename
    (allowed with slurm_allow_cluster_rename) empties the state first.
    """
    # Slurm 24.11 writes "name|cluster id" there; older releases the name alone.
    old = (state_clustername or "").split("|", 1)[0].strip().lower()
    return old if old and old != str(cluster or "").strip().lower() else None
