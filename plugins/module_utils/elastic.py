# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Elastic node sets (cloud burst) and configless Slurm, in a cluster's model.

An elastic node set is a range of ``State=CLOUD`` nodes that exist only
while jobs need them: slurmctld powers them up through ``ResumeProgram`` and
down through ``SuspendProgram`` (Slurm's power saving), and the collection's
``hybridhpc-power`` tool hands that work to the set's provider (``docker``,
``aws`` or ``command``). A cluster with elastic nodes runs configless by
default: a new node then needs only the munge key and the controller's
address, and slurmd fetches slurm.conf and its companions from slurmctld.

Everything here is decided on the Ansible controller, per cluster:

* ``elastic_problems``: the inputs' errors, each naming the variable and the fix;
* ``configless``: whether the cluster runs configless;
* ``node_records``: the ``State=CLOUD`` node lines;
* ``power_save_settings``: the slurm.conf keys power saving needs (the
  user's own slurm_config keys win, except SlurmctldParameters, which are
  joined);
* ``conf_server``: the ``--conf-server`` value of the cluster's controllers;
* ``tool_config``: the hybridhpc-power configuration for the controllers.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.hybridhpc.slurm.plugins.module_utils.cluster_plan import record_node_names, truthy
from ansible_collections.hybridhpc.slurm.plugins.module_utils.hostlist import (
    HostlistError,
    compress,
    expand,
)

PROVIDERS = ("docker", "aws", "command")
# Options each provider cannot do without (the tool checks the rest).
PROVIDER_REQUIRED = {
    "docker": ("image", "network"),
    "aws": ("region", "launch_template", "munge_key_parameter"),
    "command": ("resume_command", "suspend_command"),
}
# The programs slurmctld runs (as SlurmUser) for power saving: each only
# queues the request for the tool's worker and returns at once.
PROGRAMS = {
    "ResumeProgram": "/usr/local/sbin/hybridhpc-power-resume",
    "SuspendProgram": "/usr/local/sbin/hybridhpc-power-suspend",
    "ResumeFailProgram": "/usr/local/sbin/hybridhpc-power-resume-fail",
}
POWER_SAVE_DEFAULTS = {
    "SuspendTime": 300,
    "SuspendTimeout": 60,
    "ResumeTimeout": 300,
    "ResumeRate": 100,
    "SuspendRate": 100,
    "SuspendExcNodes": [],
    "SuspendExcParts": [],
}
POWER_SAVE_INT_KEYS = ("SuspendTime", "SuspendTimeout", "ResumeTimeout", "ResumeRate", "SuspendRate")
# cloud_reg_addrs: a node that registers sets its own NodeAddr/NodeHostName
# (the provider learns addresses only after boot). Not idle_on_node_suspend: it
# turns a node DOWN for a failed resume into idle~ within SuspendTimeout, losing
# the reason; the tool's reconciler returns such nodes to service after
# power_save_failed_retry_after instead (verified on Slurm 24.11).
CLOUD_CTLD_PARAMETERS = ("cloud_reg_addrs",)
# Slurm forwards messages through a tree of slurmds; cloud nodes may not know
# each other's addresses, so slurmctld talks to every node itself
# (slurm.conf(5), TreeWidth; Slurm's cloud guide).
CLOUD_TREE_WIDTH = 65533
_SET_NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")
REQUIRED_NODE_KEYS = ("CPUs", "RealMemory")


def _lower_keys(mapping):
    return {str(k).lower(): v for k, v in (mapping or {}).items()}


def _is_int(value, low=0):
    if isinstance(value, bool):
        return False
    try:
        return int(str(value)) >= low and str(int(str(value))) == str(value).strip()
    except (TypeError, ValueError):
        return False


def _as_list(value):
    if value in (None, ""):
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [v for v in re.split(r",(?![^\[]*\])", str(value)) if v]


def expand_set(nodeset):
    """The node names of one set (raises HostlistError on a bad hostlist)."""
    return expand(str(nodeset.get("nodes") or ""))


def elastic_problems(nodesets, power_save, configless, static_nodes, partitions=None, var="slurm_elastic_nodesets"):
    """Problems of a cluster's elastic inputs: ``"variable: what is wrong; the fix"`` strings.

    ``static_nodes``: names of the cluster's other (always-on) nodes;
    ``partitions``: slurm_partitions (SuspendExcParts must name one of them).
    """
    problems = []
    if configless not in (None, "", True, False):
        problems.append("slurm_configless: %r must be true, false or left unset (unset: configless when the "
                        "cluster has elastic node sets)" % (configless,))
    if not isinstance(nodesets, (list, tuple)):
        return problems + ["%s: must be a list of node sets ({name, nodes, node, provider, options})" % var]
    if nodesets and configless not in (None, "") and not truthy(configless):
        problems.append("slurm_configless: false, but the cluster has elastic node sets, whose nodes get their configuration "
                        "from slurmctld (slurmd --conf-server); leave slurm_configless unset or set it to true")
    static = set(static_nodes or [])
    seen_names, seen_nodes = set(), {}
    for i, nodeset in enumerate(nodesets):
        where = "%s[%d]" % (var, i)
        if not isinstance(nodeset, dict):
            problems.append("%s: must be a mapping with name, nodes, node, provider and options" % where)
            continue
        unknown = sorted(set(nodeset) - {"name", "nodes", "node", "provider", "options"})
        if unknown:
            problems.append("%s: unknown keys %s; a node set has name, nodes, node (Slurm node parameters), "
                            "provider and options" % (where, ", ".join(unknown)))
        name = str(nodeset.get("name") or "")
        if not _SET_NAME_RE.match(name):
            problems.append("%s.name: %r must be 1-32 lowercase letters, digits or '-' (e.g. dy)" % (where, name))
        elif name in seen_names:
            problems.append("%s.name: %r is used twice; give each node set its own name" % (where, name))
        seen_names.add(name)
        try:
            names = expand_set(nodeset)
        except HostlistError as exc:
            problems.append("%s.nodes: %r is not a Slurm hostlist (%s); e.g. cloud-dy-[1-8]" % (where, nodeset.get("nodes"), exc))
            names = []
        if not names and nodeset.get("nodes") in (None, ""):
            problems.append("%s.nodes: missing; give the set's node names as a hostlist, e.g. cloud-dy-[1-8]" % where)
        for node in names:
            if node in static:
                problems.append("%s.nodes: %s is also an always-on node of the cluster (an inventory host or "
                                "slurm_nodes); give the elastic nodes their own names" % (where, node))
                break
            if node in seen_nodes:
                problems.append("%s.nodes: %s is also in %s; node sets must not overlap" % (where, node, seen_nodes[node]))
                break
            seen_nodes[node] = where
        params = nodeset.get("node")
        if not isinstance(params, dict):
            problems.append("%s.node: give the nodes' Slurm parameters as a mapping, at least CPUs and RealMemory "
                            "(the nodes do not exist until they start, so they cannot be measured)" % where)
        else:
            lowered = _lower_keys(params)
            for key in REQUIRED_NODE_KEYS:
                if key.lower() not in lowered:
                    problems.append("%s.node.%s: missing; elastic nodes must be described in advance" % (where, key))
                elif not _is_int(lowered[key.lower()], 1):
                    problems.append("%s.node.%s: %r must be a whole number above 0" % (where, key, lowered[key.lower()]))
            for key in ("nodename", "state"):
                if key in lowered:
                    problems.append("%s.node: remove %s (the collection sets NodeName from nodes and State=CLOUD)"
                                    % (where, "NodeName" if key == "nodename" else "State"))
            if "weight" in lowered and not _is_int(lowered["weight"], 0):
                problems.append("%s.node.Weight: %r must be a whole number" % (where, lowered["weight"]))
        provider = nodeset.get("provider")
        if provider not in PROVIDERS:
            problems.append("%s.provider: %r is not one of %s" % (where, provider, ", ".join(PROVIDERS)))
            continue
        options = nodeset.get("options")
        if options is None:
            options = {}
        if not isinstance(options, dict):
            problems.append("%s.options: must be a mapping of %s provider options" % (where, provider))
            continue
        for key in PROVIDER_REQUIRED[provider]:
            if options.get(key) in (None, "", []):
                problems.append("%s.options.%s: the %s provider needs it (see roles/power_save/README.md)" % (where, key, provider))
        if provider == "command":
            for key in ("resume_command", "suspend_command", "list_command"):
                value = options.get(key)
                if value in (None, "", []):
                    continue
                if not isinstance(value, (list, tuple)) or not str(value[0]).startswith("/"):
                    problems.append("%s.options.%s: give the command as a list whose first item is an absolute path "
                                    "(no shell: the hostlist is appended as the last argument)" % (where, key))
        for key in options:
            if re.search(r"(secret|password|token|access_key|munge_key)$", str(key), re.I) and key != "munge_key_parameter":
                problems.append("%s.options.%s: secrets do not belong in the provider options (they land in a "
                                "readable file); give credentials through the worker's environment file "
                                "(power_save_environment)" % (where, key))
    problems += power_save_problems(power_save, static, partitions)
    return problems


def power_save_problems(power_save, static_nodes=(), partitions=None, var="slurm_power_save"):
    problems = []
    if power_save in (None, ""):
        return problems
    if not isinstance(power_save, dict):
        return ["%s: must be a mapping of Slurm power saving keys (SuspendTime, ResumeTimeout, ...)" % var]
    known = {k.lower(): k for k in POWER_SAVE_DEFAULTS}
    for key, value in power_save.items():
        canonical = known.get(str(key).lower())
        if canonical is None:
            problems.append("%s.%s: not a power saving key; use %s (other slurm.conf keys go into slurm_config)"
                            % (var, key, ", ".join(POWER_SAVE_DEFAULTS)))
            continue
        if canonical in POWER_SAVE_INT_KEYS and not _is_int(value, 0):
            problems.append("%s.%s: %r must be a whole number of %s" % (
                var, canonical, value, "nodes per minute" if canonical.endswith("Rate") else "seconds"))
        if canonical == "SuspendExcNodes":
            for item in _as_list(value):
                try:
                    expand(item.split(":", 1)[0])
                except HostlistError as exc:
                    problems.append("%s.SuspendExcNodes: %r is not a Slurm hostlist (%s)" % (var, item, exc))
        if canonical == "SuspendExcParts" and partitions is not None:
            names = {str(_lower_keys(p).get("partitionname")) for p in partitions or []}
            for part in _as_list(value):
                if part not in names:
                    problems.append("%s.SuspendExcParts: %r is not in slurm_partitions (%s)" % (var, part, ", ".join(sorted(names))))
    return problems


def configless(setting, nodesets):
    """Whether the cluster runs configless: the setting when given, else when it has elastic node sets."""
    if setting in (None, ""):
        return bool(nodesets)
    return truthy(setting)


def node_records(nodesets):
    """The State=CLOUD node lines of the cluster's elastic sets, in set order."""
    records = []
    for nodeset in nodesets or []:
        record = {"NodeName": str(nodeset["nodes"]), "State": "CLOUD"}
        for key, value in (nodeset.get("node") or {}).items():
            record[key] = value
        records.append(record)
    return records


def _record_names(records):
    """Node names of records (or plain names), hostlist-compressed."""
    names = []
    for record in records or []:
        names.extend(expand(record) if isinstance(record, str) else record_node_names([record], expand))
    return [compress(names)] if names else []


def power_save_settings(config, nodesets, power_save, static_records, configless_on, defunct=()):
    """slurm.conf keys for power saving and configless, merged into ``config`` (the user's keys win).

    ``defunct``: SlurmctldParameters values the controllers' Slurm major
    rejects (slurm_majors.ctld_parameters_defunct); they are not added.

    ``config``: the cluster's merged slurm.conf settings; ``static_records``:
    the always-on node records or names (they are excluded from power saving:
    Slurm would otherwise power down any node idle for SuspendTime).
    """
    result = dict(config or {})
    present = {str(k).lower(): k for k in result}

    def setdefault(key, value):
        if key.lower() not in present and value not in (None, "", []):
            result[key] = value
            present[key.lower()] = key

    params = []
    if configless_on:
        params.append("enable_configless")
    if nodesets:
        params.extend(p for p in CLOUD_CTLD_PARAMETERS if p not in defunct)
    if params:
        key = present.get("slurmctldparameters", "SlurmctldParameters")
        own = _as_list(result.get(key))
        result[key] = own + [p for p in params if p not in own]
        present["slurmctldparameters"] = key
    if not nodesets:
        return result
    settings = dict(POWER_SAVE_DEFAULTS)
    for key, value in (power_save or {}).items():
        canonical = next((k for k in POWER_SAVE_DEFAULTS if k.lower() == str(key).lower()), key)
        settings[canonical] = value
    for key in ("SuspendTime", "SuspendTimeout", "ResumeTimeout", "ResumeRate", "SuspendRate"):
        setdefault(key, settings[key])
    excluded = _record_names(static_records) + _as_list(settings["SuspendExcNodes"])
    setdefault("SuspendExcNodes", ",".join(excluded))
    setdefault("SuspendExcParts", ",".join(_as_list(settings["SuspendExcParts"])))
    for key, path in PROGRAMS.items():
        setdefault(key, path)
    setdefault("TreeWidth", CLOUD_TREE_WIDTH)
    return result


def conf_server(controllers, config):
    """``--conf-server`` for slurmd/sackd: every controller (SlurmctldHost order) with slurmctld's port."""
    port = next((v for k, v in (config or {}).items() if str(k).lower() == "slurmctldport"), 6817)
    port = str(port).split("-", 1)[0]
    return ",".join("%s:%s" % (host, port) for host in controllers or [])


def tool_config(cluster, nodesets, server, munge_uid, munge_gid, settings):
    """The hybridhpc-power configuration (/etc/hybridhpc/power.json) for a cluster's controllers.

    ``settings``: the tool's own paths and timers (power_save role
    variables). Provider options get what every node needs to join: the
    controllers' address and the munge account's ids; an option the
    inventory sets wins.
    """
    sets = []
    for nodeset in nodesets or []:
        options = {"conf_server": server, "munge_uid": int(munge_uid), "munge_gid": int(munge_gid)}
        options.update(nodeset.get("options") or {})
        sets.append({
            "name": nodeset["name"],
            "nodes": compress(expand_set(nodeset)),
            "provider": nodeset["provider"],
            "options": options,
        })
    config = {"cluster": cluster}
    config.update(settings or {})
    config["nodesets"] = sets
    return config
