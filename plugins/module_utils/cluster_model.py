# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Up-front validation of a cluster's inventory model.

``cluster_problems(model)`` runs once, on the Ansible controller, before any
host is touched. Each problem names the variable at fault and the fix, so a
wrong inventory fails in seconds with a message an admin can act on.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import re

from ansible_collections.hybridhpc.slurm.plugins.module_utils.elastic import expand_set
from ansible_collections.hybridhpc.slurm.plugins.module_utils.hostlist import (
    HostlistError,
    expand,
)
from ansible_collections.hybridhpc.slurm.plugins.module_utils.sacctmgr import validate_cluster_name
from ansible_collections.hybridhpc.slurm.plugins.module_utils.slurm_conf import (
    SlurmConfError,
    render_records,
    render_settings,
)

# munged refuses keys shorter than 32 bytes; mungekey(8) caps them at 1024.
MUNGE_KEY_MIN_BYTES = 32
MUNGE_KEY_MAX_BYTES = 1024

# slurmdbd.conf cuts a value at '#', and whitespace ends it.
SLURMDBD_PASS_FORBIDDEN = re.compile(r"[#\s]")

NUMERIC_NODE_KEYS = ("CPUs", "RealMemory", "Sockets", "CoresPerSocket", "ThreadsPerCore", "Boards")


def _decode_munge_key(key_b64):
    try:
        return base64.b64decode(key_b64, validate=True)
    except (binascii.Error, ValueError, TypeError):
        return None


def _expand_or_problem(text, var, problems):
    try:
        return expand(text)
    except HostlistError as exc:
        problems.append("%s: %s is not a valid Slurm hostlist (%s)" % (var, text, exc))
        return []


def check_cluster_name(name, var="slurm_cluster_name"):
    try:
        normalized = validate_cluster_name(name)
    except ValueError as exc:
        return ["%s: %s" % (var, exc)]
    if normalized != name:
        return ["%s: %r must be lowercase (Slurm lowercases ClusterName, so accounting would know it as %r); set %r"
                % (var, name, normalized, normalized)]
    return []


def check_munge_key(key_b64, var="munge_key_b64"):
    if key_b64 in (None, ""):
        return []
    key = _decode_munge_key(key_b64)
    if key is None:
        return ["%s: not valid base64; give the key as `base64 -w0 /etc/munge/munge.key`" % var]
    if not MUNGE_KEY_MIN_BYTES <= len(key) <= MUNGE_KEY_MAX_BYTES:
        return [
            "%s: the key is %d bytes; munge needs %d to %d bytes (create one with "
            "`mungekey -c -b 1024 -k FILE`)" % (var, len(key), MUNGE_KEY_MIN_BYTES, MUNGE_KEY_MAX_BYTES)
        ]
    return []


def check_nodes(nodes, var="slurm_nodes"):
    problems = []
    seen = {}
    for i, node in enumerate(nodes or []):
        where = "%s[%d]" % (var, i)
        if not isinstance(node, dict):
            problems.append("%s: must be a mapping with NodeName and CPUs" % where)
            continue
        lowered = {k.lower(): v for k, v in node.items()}
        name = lowered.get("nodename")
        if not name:
            problems.append("%s: NodeName is missing" % where)
            continue
        names = _expand_or_problem(name if isinstance(name, str) else ",".join(name), where + ".NodeName", problems)
        for n in names:
            if n in seen:
                problems.append("%s: node %s is already defined in %s" % (where, n, seen[n]))
            else:
                seen[n] = where
        if name != "DEFAULT" and lowered.get("cpus") in (None, ""):
            problems.append(
                "%s: node %s has no CPUs; set CPUs (and RealMemory) or leave slurm_nodes "
                "empty to derive nodes from facts" % (where, name)
            )
        for key in NUMERIC_NODE_KEYS:
            value = lowered.get(key.lower())
            if value is not None and (isinstance(value, bool) or not str(value).isdigit()):
                problems.append("%s: %s=%r must be a positive integer" % (where, key, value))
    return problems, set(seen)


def check_partitions(partitions, known_nodes, var="slurm_partitions"):
    problems = []
    defaults = []
    for i, part in enumerate(partitions or []):
        where = "%s[%d]" % (var, i)
        if not isinstance(part, dict):
            problems.append("%s: must be a mapping with PartitionName and Nodes" % where)
            continue
        lowered = {k.lower(): v for k, v in part.items()}
        if not lowered.get("partitionname"):
            problems.append("%s: PartitionName is missing" % where)
        if lowered.get("default") in (True, "YES", "yes", "Yes"):
            defaults.append(lowered.get("partitionname"))
        nodes = lowered.get("nodes")
        if nodes in (None, "", "ALL") or not known_nodes:
            continue
        text = nodes if isinstance(nodes, str) else ",".join(nodes)
        names = _expand_or_problem(text, where + ".Nodes", problems)
        unknown = [n for n in names if n not in known_nodes]
        if unknown:
            problems.append(
                "%s: Nodes lists %s, which no node definition has; add them to the "
                "slurmd group (or slurm_nodes)" % (where, ", ".join(sorted(unknown)[:5]))
            )
    if len(defaults) > 1:
        problems.append("%s: %s are all Default=YES; only one partition can be the default" % (var, ", ".join(map(str, defaults))))
    return problems


def check_config(mapping, var):
    try:
        render_settings(mapping, where=var)
    except SlurmConfError as exc:
        return [str(exc)]
    return []


def elastic_node_names(nodesets):
    """The node names of the elastic node sets (``slurm_elastic_nodesets``); sets the elastic checks refuse
    (no mapping, a bad hostlist) give none here."""
    names = []
    for nodeset in nodesets if isinstance(nodesets, (list, tuple)) else []:
        try:
            names += expand_set(nodeset) if isinstance(nodeset, dict) else []
        except HostlistError:
            continue
    return names


def cluster_problems(model):
    """Return every problem found in a cluster model (empty list: valid).

    ``model`` keys: cluster_name, controllers, dbd_hosts, compute_hosts,
    accounting (bool), nodes, elastic_nodesets, partitions, config, dbd_config, gres,
    munge_key_b64, dbd_storage_pass, slurm_uid, munge_uid.
    """
    problems = []
    problems += check_cluster_name(model.get("cluster_name"))
    if not model.get("controllers"):
        problems.append(
            "groups['slurmctld']: no controller for cluster %r; put one host in the "
            "inventory group 'slurmctld' (with slurm_cluster_name: %s)"
            % (model.get("cluster_name"), model.get("cluster_name"))
        )
    if model.get("accounting", True) and not model.get("dbd_hosts"):
        problems.append(
            "groups['slurmdbd']: accounting is on but no host is in group 'slurmdbd'; add one "
            "or set slurm_accounting: false"
        )
    elastic = elastic_node_names(model.get("elastic_nodesets"))
    # A burst cluster may have no always-on node at all: its elastic nodes are its nodes.
    if not model.get("compute_hosts") and not model.get("nodes") and not elastic:
        problems.append("groups['slurmd']: no compute node; add hosts to group 'slurmd', define slurm_nodes, "
                        "or give the cluster elastic nodes (slurm_elastic_nodesets)")
    for host in model.get("compute_hosts") or []:
        try:
            if expand(host) != [host]:
                problems.append("groups['slurmd']: %r expands to several names; one inventory host is one node" % host)
        except HostlistError as exc:
            problems.append("groups['slurmd']: %r is not a valid node name (%s)" % (host, exc))

    node_problems, known = check_nodes(model.get("nodes"))
    problems += node_problems
    known |= set(model.get("compute_hosts") or []) | set(elastic)
    problems += check_partitions(model.get("partitions"), known)
    problems += check_config(model.get("config"), "slurm_config")
    problems += check_config(model.get("dbd_config"), "slurmdbd_config")
    problems += check_config(model.get("cgroup_config"), "slurm_cgroup_config")
    try:
        render_records(model.get("gres"), "Name", "slurm_gres")
    except SlurmConfError as exc:
        problems.append(str(exc))
    problems += check_munge_key(model.get("munge_key_b64"))

    password = model.get("dbd_storage_pass")
    if password and SLURMDBD_PASS_FORBIDDEN.search(str(password)):
        problems.append(
            "slurmdbd_storage_pass: contains '#' or whitespace, which slurmdbd.conf cannot hold; "
            "choose a password without them"
        )
    for var in ("slurm_uid", "munge_uid"):
        value = model.get(var)
        if value is not None and (isinstance(value, bool) or not str(value).isdigit() or not 0 < int(value) < 2 ** 31):
            problems.append("%s: %r must be a fixed numeric id, the same on every node" % (var, value))
    if model.get("slurm_uid") is not None and model.get("slurm_uid") == model.get("munge_uid"):
        problems.append("munge_uid: equals slurm_uid (%s); the two daemons need distinct users" % model.get("slurm_uid"))
    return problems
