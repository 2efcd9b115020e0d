# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one Slurm configuration model.

slurm.conf, slurmdbd.conf, cgroup.conf and gres.conf are all rendered from
plain data:

* a mapping of arbitrary ``Key: value`` pairs, merged case-insensitively over
  role defaults; ``None`` (YAML ``null``) removes a default;
* list values become repeated lines for keys Slurm lets repeat
  (``SlurmctldHost`` for HA, ``Include``...) and comma-joined values otherwise;
* records (nodes, partitions, nodesets, gres lines) are mappings whose first
  key names the record (``NodeName=...``), rendered one per line.

Booleans follow Slurm's ``YES``/``NO`` spelling.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# Keys that Slurm reads once per line and allows several times (slurm.conf(5)).
REPEATABLE_KEYS = frozenset(
    k.lower()
    for k in (
        "SlurmctldHost",
        "Include",
        "DownNodes",
        "FrontendName",
        "NodeSet",
        "SwitchName",
        "AccountingStorageExternalHost",
    )
)

# slurm.conf keys whose change `scontrol reconfigure` cannot apply: since 23.11
# reconfigure re-executes the daemons but keeps their listening ports and
# authentication mechanism (scontrol(1), "reconfigure").
RESTART_KEYS = frozenset(
    k.lower()
    for k in (
        "SlurmctldPort",
        "SlurmdPort",
        "AuthType",
        "AuthAltTypes",
        "AuthAltParameters",
        "AuthInfo",
        "CredType",
        "SlurmctldHost",
        "PluginDir",
        # Plugins a daemon loads once: slurmctld's topology (src/interfaces/topology.c
        # says it cannot change on reconfigure), slurmd's per-job namespace.
        "TopologyPlugin",
        "JobContainerType",
        "NamespaceType",
    )
)

# Record keys whose value is a host list: a list given there is compressed.
HOSTLIST_RECORD_KEYS = frozenset(("nodename", "nodes", "nodeset"))

_KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


class SlurmConfError(ValueError):
    """The configuration model cannot be rendered; the message says why."""


def format_value(value, key=""):
    """Render one value the way Slurm spells it.

    >>> format_value(True)
    'YES'
    >>> format_value(["a", "b"])
    'a,b'
    """
    if isinstance(value, bool):
        return "YES" if value else "NO"
    if isinstance(value, (list, tuple)):
        return ",".join(format_value(v, key) for v in value)
    if isinstance(value, dict):
        raise SlurmConfError(
            "%s: a mapping is not a Slurm value; use a string or a list" % (key or "value")
        )
    text = "%s" % (value,)
    if "\n" in text:
        raise SlurmConfError("%s: values cannot contain a newline" % (key or "value"))
    return text


def check_key(key, where="slurm_config"):
    if not isinstance(key, str) or not _KEY_RE.match(key):
        raise SlurmConfError(
            "%s: %r is not a Slurm option name (letters, digits, '_', starting with a letter)"
            % (where, key)
        )


def merge(defaults, overrides):
    """Merge ``overrides`` over ``defaults``, matching keys case-insensitively.

    The spelling of the override wins; a ``None`` or empty-string value
    removes the key (an empty value is how templates say "not set").
    """
    result = {}
    index = {}
    for source in (defaults or {}, overrides or {}):
        for key, value in source.items():
            lowered = key.lower()
            if lowered in index:
                del result[index[lowered]]
            index[lowered] = key
            result[key] = value
    return {k: v for k, v in result.items() if v is not None and v != "" and v != []}


def render_settings(settings, where="slurm_config", repeatable=REPEATABLE_KEYS):
    """Return ``Key=value`` lines for a mapping, in the mapping's order."""
    lines = []
    for key, value in (settings or {}).items():
        check_key(key, where)
        if value is None:
            continue
        if isinstance(value, (list, tuple)) and key.lower() in repeatable:
            for item in value:
                lines.append("%s=%s" % (key, format_value(item, "%s.%s" % (where, key))))
        else:
            lines.append("%s=%s" % (key, format_value(value, "%s.%s" % (where, key))))
    return lines


def _record_value(key, value, compress, where=""):
    if isinstance(value, (list, tuple)) and key.lower() in HOSTLIST_RECORD_KEYS and compress:
        return compress(list(value))
    return format_value(value, "%s.%s" % (where, key) if where else key)


def render_record(record, name_key, where, compress=None):
    """Render one record (a node, partition, nodeset or gres line) as one line."""
    if not isinstance(record, dict):
        raise SlurmConfError("%s: each entry must be a mapping, got %r" % (where, record))
    keys = list(record)
    name_keys = [k for k in keys if k.lower() == name_key.lower()]
    if not name_keys or record[name_keys[0]] in (None, "", []):
        raise SlurmConfError("%s: every entry needs %s" % (where, name_key))
    first = name_keys[0]
    parts = ["%s=%s" % (name_key, _record_value(name_key, record[first], compress, where))]
    for key in keys:
        if key == first or record[key] is None:
            continue
        check_key(key, where)
        value = record[key]
        if value == "" or value == []:
            continue
        parts.append("%s=%s" % (key, _record_value(key, value, compress, where)))
    return " ".join(parts)


def render_records(records, name_key, where, compress=None):
    return [render_record(r, name_key, "%s[%d]" % (where, i), compress) for i, r in enumerate(records or [])]


def render_gres(records, compress=None, where="slurm_gres"):
    """gres.conf lines: a record with NodeName is rendered NodeName-first, the others Name-first."""
    return [render_record(r, "NodeName" if any(k.lower() == "nodename" for k in r) else "Name",
                          "%s[%d]" % (where, i), compress)
            for i, r in enumerate(records or [])]


def render_slurm_conf(settings, nodes=None, partitions=None, nodesets=None, compress=None):
    """Render slurm.conf text (without the managed-by header)."""
    out = render_settings(settings)
    if nodesets:
        out.append("")
        out.extend(render_records(nodesets, "NodeSet", "slurm_nodesets", compress))
    if nodes:
        out.append("")
        out.extend(render_records(nodes, "NodeName", "slurm_nodes", compress))
    if partitions:
        out.append("")
        out.extend(render_records(partitions, "PartitionName", "slurm_partitions", compress))
    return "\n".join(out) + "\n"


def parse_conf(text):
    """Parse slurm.conf-style text into ``{lowercase key: [values...]}``.

    Records (NodeName=..., PartitionName=...) are kept whole under their
    record key so a changed node line counts as a change of ``nodename``.
    Comments and blank lines are ignored.
    """
    parsed = {}
    for raw in (text or "").splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or "=" not in line:
            continue
        key, _sep, value = line.partition("=")
        key = key.strip().lower()
        if key in ("nodename", "partitionname", "nodeset", "name"):
            value = line
        parsed.setdefault(key, []).append(value.strip())
    return parsed


def changed_keys(old_text, new_text):
    """Lowercase keys whose values differ between two rendered files."""
    old, new = parse_conf(old_text), parse_conf(new_text)
    return sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))


def needs_restart(old_text, new_text):
    """True when the change between two slurm.conf texts needs a daemon restart.

    A file that did not exist before counts as a restart (the daemons, if any
    run, run without it).
    """
    if not (old_text or "").strip():
        return True
    return any(k in RESTART_KEYS for k in changed_keys(old_text, new_text))


def derive_nodes(hosts, compress, extra_keys=("Sockets", "CoresPerSocket", "ThreadsPerCore")):
    """Group hosts with identical node parameters into hostlist-compressed records.

    ``hosts`` maps a Slurm node name to its parameter mapping (``CPUs``,
    ``RealMemory``, ``Gres``...). Hosts whose parameters are equal share one
    ``NodeName=`` line; the order of lines follows the first host of each group.
    """
    groups = []
    by_params = {}
    for name, params in hosts.items():
        key = tuple(sorted((k, format_value(v, k)) for k, v in params.items() if v is not None))
        if key not in by_params:
            by_params[key] = ([], params)
            groups.append(key)
        by_params[key][0].append(name)
    records = []
    for key in groups:
        names, params = by_params[key]
        record = {"NodeName": compress(names)}
        for k in ("CPUs",) + tuple(extra_keys) + ("RealMemory",):
            if params.get(k) is not None:
                record[k] = params[k]
        for k, v in params.items():
            if k not in record and v is not None:
                record[k] = v
        records.append(record)
    return records


def node_params_from_facts(facts, reserve_mb=0, overrides=None):
    """Slurm node parameters from Ansible hardware facts.

    RealMemory keeps ``reserve_mb`` back for the OS: a node that reports less
    memory than configured goes INVALID, so never round up.
    """
    def fact(name):
        return facts.get("ansible_" + name, facts.get(name))

    vcpus = fact("processor_vcpus")
    sockets = fact("processor_count")
    cores = fact("processor_cores")
    threads = fact("processor_threads_per_core")
    mem = fact("memtotal_mb")
    params = {}
    if vcpus:
        params["CPUs"] = int(vcpus)
    if sockets and cores and threads and vcpus and int(sockets) * int(cores) * int(threads) == int(vcpus):
        params["Sockets"] = int(sockets)
        params["CoresPerSocket"] = int(cores)
        params["ThreadsPerCore"] = int(threads)
    if mem:
        params["RealMemory"] = max(int(mem) - int(reserve_mb or 0), 1)
    params.update(overrides or {})
    return params


K8S_GRES = ("k8scpu", "k8smemory")


def add_k8s_gres(params):
    """Add count-only k8scpu/k8smemory GRES sized to the node's CPUs and memory.

    The copilot lowers them by what Kubernetes holds on the node; every Slurm
    job consumes them (job_submit.lua), so Slurm never allocates what a pod has.
    Existing GRES of the node are kept (a Gres string replaces all of them).
    """
    if not params.get("CPUs") or not params.get("RealMemory"):
        raise SlurmConfError("a node shared with Kubernetes needs CPUs and RealMemory to size its k8scpu/k8smemory GRES")
    existing = [g for g in str(params.get("Gres") or "").split(",") if g and g.split(":")[0] not in K8S_GRES]
    gres = existing + ["k8scpu:%d" % int(params["CPUs"]), "k8smemory:%d" % int(params["RealMemory"])]
    result = dict(params)
    result["Gres"] = ",".join(gres)
    return result


def k8s_capacity(records, expand):
    """Configured k8scpu/k8smemory per Slurm node, from node records.

    The copilot must never set a node's GRES above these counts (a count
    above slurm.conf's drains the node INVALID_REG at its next registration).
    """
    capacity = {}
    for record in records or []:
        counts = {}
        for item in str(record.get("Gres") or "").split(","):
            parts = item.split(":")
            if parts[0] in K8S_GRES and len(parts) >= 2:
                counts[parts[0]] = int(parts[-1])
        if set(counts) != set(K8S_GRES):
            continue
        names = record["NodeName"]
        for name in expand(names if isinstance(names, str) else ",".join(names)):
            capacity[name] = dict(counts)
    return capacity
