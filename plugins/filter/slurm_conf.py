# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the one Slurm configuration model (module_utils/slurm_conf.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii

from ansible.errors import AnsibleFilterError

from ansible_collections.hybridhpc.slurm.plugins.module_utils.hostlist import HostlistError, compress, expand
from ansible_collections.hybridhpc.slurm.plugins.plugin_utils.lazy_module import LazyModule

ack_values = LazyModule("ack_values")
cluster_changes = LazyModule("cluster_changes")
cluster_model = LazyModule("cluster_model")
site_inputs = LazyModule("site_inputs")
slurm_conf = LazyModule("slurm_conf")


def _sorted_compress(names):
    return compress(names, sort=True)


def _wrap(func):
    def wrapper(*args, **kwargs):
        try:
            return func(*args, **kwargs)
        except (slurm_conf.SlurmConfError, ack_values.AckValuesError, HostlistError) as exc:
            raise AnsibleFilterError(str(exc)) from exc

    wrapper.__name__ = func.__name__
    wrapper.__doc__ = func.__doc__
    return wrapper


def slurm_conf_render(settings, nodes=None, partitions=None, nodesets=None):
    """Full slurm.conf body from settings, node, partition and nodeset records."""
    return slurm_conf.render_slurm_conf(settings, nodes, partitions, nodesets, compress=_sorted_compress)


def slurm_conf_lines(settings, where="config"):
    """``Key=value`` lines of one mapping (slurmdbd.conf, cgroup.conf)."""
    return "\n".join(slurm_conf.render_settings(settings, where=where)) + "\n"


def slurm_conf_records(records, name_key, where="records"):
    """One line per record (gres.conf: name_key='Name' or 'NodeName')."""
    lines = slurm_conf.render_records(records, name_key, where, compress=_sorted_compress)
    return "\n".join(lines) + ("\n" if lines else "")


def slurm_conf_merge(defaults, overrides):
    """Case-insensitive merge; a null override removes the default."""
    return slurm_conf.merge(defaults, overrides)


def slurm_conf_needs_restart(old_text, new_text):
    """True when the change needs a daemon restart rather than a reconfigure."""
    return slurm_conf.needs_restart(old_text, new_text)


def slurm_nodes_from_hosts(hosts, hostvars, reserve_mb=0):
    """Node records derived from each host's facts and ``slurm_node_params``."""
    per_host = {}
    for host in hosts:
        hv = hostvars[host]
        facts = hv.get("ansible_facts") or {}
        if not facts.get("processor_vcpus") and not (hv.get("slurm_node_params") or {}).get("CPUs"):
            raise AnsibleFilterError(
                "slurm_nodes: no hardware facts for %s; run the play over every slurmd host "
                "(not --limit) once, enable fact caching, or set slurm_nodes explicitly" % host
            )
        name = hv.get("slurm_node_name") or host
        params = slurm_conf.node_params_from_facts(
            facts, reserve_mb=hv.get("slurm_node_memory_reserve_mb", reserve_mb), overrides=hv.get("slurm_node_params")
        )
        if hv.get("slurm_k8s_shared") and hv.get("slurm_k8s_strategy", "gres") == "gres":
            params = slurm_conf.add_k8s_gres(params)
        per_host[name] = params
    return slurm_conf.derive_nodes(per_host, _sorted_compress)


def slurm_k8s_capacity(nodes):
    """Configured k8scpu/k8smemory per Slurm node of shared nodes' records."""
    return slurm_conf.k8s_capacity(nodes, expand)


def slurm_k8s_copilot_nodes(nodes, hosts, hostvars):
    """The copilot's ``nodes`` setting: GRES counts of the gres-strategy nodes, the strategy of the others."""
    out = dict(slurm_conf.k8s_capacity(nodes, expand))
    for host in hosts:
        hv = hostvars[host]
        strategy = hv.get("slurm_k8s_strategy", "gres")
        if hv.get("slurm_k8s_shared") and strategy != "gres":
            out[hv.get("slurm_node_name") or host] = {"strategy": strategy}
    return out


def slurm_ack_cluster_values(model):
    """Values of ACK's ack-slurm-cluster chart for one cluster (module_utils/ack_values.py)."""
    return ack_values.cluster_values(model, compress=_sorted_compress)


def slurm_cluster_problems(model):
    """Problems in a cluster model, each naming the variable and the fix."""
    return cluster_model.cluster_problems(model)


def slurm_input_problems(inputs, roles):
    """Problems in the inputs of the named roles (module_utils/site_inputs.py), each naming the variable and the fix."""
    try:
        return site_inputs.input_problems(inputs, roles)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def slurm_gres_files(gres, node):
    """The device files gres.conf names for a node (ranges expanded): the facts step checks they exist there."""
    return site_inputs.gres_files_of_node(gres, node)


def slurm_cluster_change_problems(change):
    """Refused dangerous changes (rename, node move, controller removal) of one cluster.

    ``change['current_b64']`` maps a host to its current slurm.conf as slurp
    returns it (base64; empty for a host without one).
    """
    change = dict(change)
    current = {}
    for host, content in (change.pop("current_b64", None) or {}).items():
        try:
            current[host] = base64.b64decode(content or "").decode("utf-8", "replace")
        except (binascii.Error, ValueError) as exc:
            raise AnsibleFilterError("current slurm.conf of %s is not base64: %s" % (host, exc)) from exc
    change.setdefault("current", {}).update(current)
    return cluster_changes.cluster_change_problems(change)


class FilterModule(object):
    def filters(self):
        return {
            f.__name__: _wrap(f)
            for f in (
                slurm_conf_render,
                slurm_conf_lines,
                slurm_conf_records,
                slurm_conf_merge,
                slurm_conf_needs_restart,
                slurm_nodes_from_hosts,
                slurm_cluster_problems,
                slurm_input_problems,
                slurm_cluster_change_problems,
                slurm_gres_files,
                slurm_k8s_capacity,
                slurm_k8s_copilot_nodes,
                slurm_ack_cluster_values,
            )
        }
