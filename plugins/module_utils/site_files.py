# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm's files beyond slurm.conf, cgroup.conf and gres.conf, as data: which file, with what, on which host.

Four inputs of slurm_common:

* ``slurm_topology``: the network as data (``type: tree`` with ``switches``,
  or ``type: block`` with ``blocks`` and ``block_sizes``). Rendered as
  topology.yaml where the major reads it and the cluster's nodes get it
  (25.05 and later; a configless cluster only from 25.11, the first major
  whose slurmctld serves it), else as topology.conf with ``TopologyPlugin``.
* ``slurm_job_tmp``: a private /tmp and /dev/shm per job, with the plugin of
  the major: ``job_container/tmpfs`` and job_container.conf before 25.11,
  ``namespace/linux`` and namespace.yaml from 25.11 (which removed
  JobContainerType); both add ``Contain`` to PrologFlags.
* ``slurm_scripts``: Prolog, Epilog, PrologSlurmctld, EpilogSlurmctld,
  TaskProlog, TaskEpilog, SrunProlog and SrunEpilog programs, written as
  ``<config dir>/scripts/<type>-<name>`` on the hosts that run them and named
  in slurm.conf by absolute path (Prolog and Epilog by a glob, which every
  supported major takes), so they run on every major
  and in configless mode too (configless ships only scripts named by a
  relative path, and only from 23.11 for Prolog/Epilog, 25.11 for the task
  ones).
* ``slurm_site_files``: Slurm's other files as text (plugstack.conf,
  acct_gather.conf, helpers.conf, oci.conf, mpi.conf, cli_filter.lua, ...).

Where a file goes follows who reads it and, on a configless cluster, what that
major's slurmctld serves (``CONFIGLESS_SLURMD`` and ``CONFIGLESS_CLIENT``,
read from Slurm's src/common/fetch_config.c at each release): a served file
is written on the controllers only; slurmd and the client commands read it
from slurmctld, in the directory of the slurm.conf they fetched. A file a
daemon reads from slurm.conf's directory that this major does not serve
cannot reach a configless node at all, so the first play refuses it there.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.hybridhpc.slurm.plugins.module_utils import cluster_plan, hostlist
from ansible_collections.hybridhpc.slurm.plugins.module_utils.pam_adopt import with_contain

# Who reads each file Slurm looks for beside slurm.conf (slurm.conf(5) and each
# file's own page): slurmctld, slurmd (and slurmstepd), client (srun, sbatch, ...).
READERS = {
    "acct_gather.conf": ("slurmctld", "slurmd"),
    "burst_buffer.conf": ("slurmctld",),
    "cli_filter.lua": ("client",),
    "helpers.conf": ("slurmctld", "slurmd"),
    "job_container.conf": ("slurmd",),
    "mpi.conf": ("slurmd",),
    "namespace.yaml": ("slurmd",),
    "oci.conf": ("slurmd", "client"),
    "plugstack.conf": ("slurmd", "client"),
    "scrun.lua": ("slurmd", "client"),
    "topology.conf": ("slurmctld", "client"),
    "topology.yaml": ("slurmctld", "client"),
}
# Files the collection writes itself, from their own variables.
OWN_FILES = {
    "slurm.conf": "slurm_config",
    "cgroup.conf": "slurm_cgroup_config",
    "gres.conf": "slurm_gres",
    "job_submit.lua": "slurm_k8s_job_submit",
    "topology.conf": "slurm_topology",
    "topology.yaml": "slurm_topology",
    "job_container.conf": "slurm_job_tmp",
    "namespace.yaml": "slurm_job_tmp",
}

# What slurmctld serves a configless slurmd and a configless client (sackd,
# the commands on a login node), by the first major of each list.
_CONFIGLESS_COMMON = ("slurm.conf", "acct_gather.conf", "cgroup.conf", "cli_filter.lua", "gres.conf", "helpers.conf",
                      "job_container.conf", "mpi.conf", "oci.conf", "plugstack.conf", "topology.conf")
CONFIGLESS_SLURMD = (
    ((22, 5), frozenset(_CONFIGLESS_COMMON + ("ext_sensors.conf", "knl_cray.conf"))),
    ((24, 5), frozenset(_CONFIGLESS_COMMON + ("scrun.lua",))),
    ((25, 11), frozenset(_CONFIGLESS_COMMON + ("scrun.lua", "namespace.yaml", "topology.yaml"))),
)
CONFIGLESS_CLIENT = (
    ((22, 5), frozenset(("slurm.conf", "cli_filter.lua", "plugstack.conf", "topology.conf"))),
    ((24, 5), frozenset(("slurm.conf", "cli_filter.lua", "plugstack.conf", "topology.conf", "oci.conf", "scrun.lua"))),
    ((25, 11), frozenset(("slurm.conf", "cli_filter.lua", "plugstack.conf", "topology.conf", "topology.yaml", "oci.conf",
                          "scrun.lua"))),
)

# Script types: where they run and whether slurm.conf takes several (a glob).
SCRIPT_TYPES = {
    "Prolog": ("slurmd", True),
    "Epilog": ("slurmd", True),
    "TaskProlog": ("slurmd", False),
    "TaskEpilog": ("slurmd", False),
    "PrologSlurmctld": ("slurmctld", False),
    "EpilogSlurmctld": ("slurmctld", False),
    "SrunProlog": ("client", False),
    "SrunEpilog": ("client", False),
}

# slurm_job_tmp's defaults: where the jobs' directories go, and which ones are private.
JOB_TMP_BASE = "/var/lib/slurm/job_tmp"
JOB_TMP_DIRS = ["/tmp", "/dev/shm"]
TOPOLOGY_YAML = (25, 5)
JOB_CONTAINER_DIRS = (23, 2)
NAMESPACE_LINUX = (25, 11)
# The first line of each file rendered here: slurm_config_files removes a
# retired file only when it has it (config_files.MANAGED_HEADER).
HEADER = "Managed by Ansible (hybridhpc.slurm): %s; edits are overwritten"
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_MODE_RE = re.compile(r"^0?[0-7]{3}$")


def _on(settings, key, default):
    """A switch of a mapping the inventory templated: a bool, or its text ("False" from a Jinja expression on 2.18)."""
    value = settings.get(key, default)
    return cluster_plan.truthy(value) if isinstance(value, str) else bool(value)


def major_key(major):
    """(year, month) of "24.11" (None for what is no major yet)."""
    try:
        year, month = str(major).split(".")[:2]
        return int(year), int(month)
    except (TypeError, ValueError):
        return None


def _served(table, major):
    key = major_key(major)
    if key is None:
        return frozenset()
    found = [names for first, names in table if first <= key]
    return found[-1] if found else table[0][1]


def configless_served(major, reader):
    """The files this major's slurmctld sends a configless slurmd (reader "slurmd") or client ("client")."""
    return _served(CONFIGLESS_SLURMD if reader == "slurmd" else CONFIGLESS_CLIENT, major)


def topology_file(major, configless):
    """topology.yaml where this cluster's nodes get it, else topology.conf."""
    key = major_key(major)
    if key is None or key < TOPOLOGY_YAML:
        return "topology.conf"
    if configless and key < NAMESPACE_LINUX:
        return "topology.conf"
    return "topology.yaml"


def _hostlist_text(value):
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return str(value)


def _yaml_scalar(value):
    # Quoted as YAML double-quoted strings; names and host lists need no escapes
    # beyond these (the first play refused anything else).
    return '"%s"' % str(value).replace("\\", "\\\\").replace('"', '\\"')


def render_topology(topology, name):
    """The text of ``name`` (topology.conf or topology.yaml) for ``slurm_topology``."""
    kind = topology.get("type", "tree")
    header = "# " + HEADER % "slurm_topology"
    if name == "topology.conf":
        lines = [header]
        if kind == "tree":
            for switch in topology.get("switches", []):
                line = "SwitchName=%s" % switch["name"]
                if switch.get("switches"):
                    line += " Switches=%s" % _hostlist_text(switch["switches"])
                if switch.get("nodes"):
                    line += " Nodes=%s" % _hostlist_text(switch["nodes"])
                if switch.get("link_speed"):
                    line += " LinkSpeed=%s" % switch["link_speed"]
                lines.append(line)
        else:
            for block in topology.get("blocks", []):
                lines.append("BlockName=%s Nodes=%s" % (block["name"], _hostlist_text(block["nodes"])))
            if topology.get("block_sizes"):
                lines.append("BlockSizes=%s" % ",".join(str(s) for s in topology["block_sizes"]))
        return "\n".join(lines) + "\n"
    lines = [header, "---", "- topology: default", "  cluster_default: true"]
    if kind == "tree":
        lines.append("  tree:")
        lines.append("    switches:")
        for switch in topology.get("switches", []):
            lines.append("      - switch: %s" % _yaml_scalar(switch["name"]))
            if switch.get("switches"):
                lines.append("        children: %s" % _yaml_scalar(_hostlist_text(switch["switches"])))
            if switch.get("nodes"):
                lines.append("        nodes: %s" % _yaml_scalar(_hostlist_text(switch["nodes"])))
    else:
        lines.append("  block:")
        if topology.get("block_sizes"):
            lines.append("    block_sizes: [%s]" % ", ".join(str(int(s)) for s in topology["block_sizes"]))
        lines.append("    blocks:")
        for block in topology.get("blocks", []):
            lines.append("      - block: %s" % _yaml_scalar(block["name"]))
            lines.append("        nodes: %s" % _yaml_scalar(_hostlist_text(block["nodes"])))
    return "\n".join(lines) + "\n"


def render_job_tmp(job_tmp, major):
    """(file name, text) of the per-job /tmp plugin's configuration for this major."""
    dirs = ",".join(job_tmp.get("dirs") or JOB_TMP_DIRS)
    base = job_tmp.get("base_path", JOB_TMP_BASE)
    shared = _on(job_tmp, "shared", False)
    key = major_key(major)
    header = "# " + HEADER % "slurm_job_tmp"
    if key is not None and key >= NAMESPACE_LINUX:
        lines = [header, "---", "defaults:", "  auto_base_path: true", "  base_path: %s" % _yaml_scalar(base),
                 "  dirs: %s" % _yaml_scalar(dirs)]
        if shared:
            lines.append("  shared: true")
        return "namespace.yaml", "\n".join(lines) + "\n"
    lines = [header, "AutoBasePath=true", "BasePath=%s" % base]
    # Dirs and Shared came with 23.02; 22.05's plugin makes /tmp and /dev/shm private, always.
    if key is None or key >= JOB_CONTAINER_DIRS:
        lines.append("Dirs=%s" % dirs)
        if shared:
            lines.append("Shared=true")
    return "job_container.conf", "\n".join(lines) + "\n"


def script_path(config_dir, kind, name):
    """Where a script of that type lives: one directory for all (the files step keeps only the wanted ones there),
    ``<type>-<name>``, so that Prolog's glob ``prolog-*`` takes only the Prolog scripts."""
    return "%s/scripts/%s-%s" % (config_dir.rstrip("/"), kind.lower(), name)


def settings(config, topology, job_tmp, scripts, major, configless, config_dir):
    """``config`` (the merged slurm.conf keys) with what the topology, the per-job /tmp and the scripts need.

    The inventory's own keys win where it set them (the first play refuses the
    conflicting ones)."""
    merged = dict(config or {})
    if topology and topology_file(major, configless) == "topology.conf":
        merged.setdefault("TopologyPlugin", "topology/%s" % topology.get("type", "tree"))
    if job_tmp and _on(job_tmp, "enabled", True):
        key = major_key(major)
        if key is not None and key >= NAMESPACE_LINUX:
            merged.setdefault("NamespaceType", "namespace/linux")
        else:
            merged.setdefault("JobContainerType", "job_container/tmpfs")
        merged = with_contain(merged)
    for kind in sorted({s["type"] for s in scripts or []}):
        several = SCRIPT_TYPES[kind][1]
        named = sorted(s["name"] for s in scripts if s["type"] == kind)
        path = script_path(config_dir, kind, "*" if several else named[0])
        merged.setdefault(kind, path)
    return merged


def files(topology, job_tmp, scripts, site_files, major, configless, config_dir):
    """Every file of the cluster: dicts of name (relative to config_dir), content, mode, owner, group and readers."""
    found = []
    if topology:
        name = topology_file(major, configless)
        found.append({"name": name, "content": render_topology(topology, name), "readers": READERS[name]})
    if job_tmp and _on(job_tmp, "enabled", True):
        name, text = render_job_tmp(job_tmp, major)
        found.append({"name": name, "content": text, "readers": READERS[name]})
    for entry in site_files or []:
        comment = "--" if entry["name"].endswith(".lua") else "#"
        text = "%s %s\n%s" % (comment, HEADER % "slurm_site_files", entry.get("content", ""))
        found.append({"name": entry["name"], "content": text, "mode": entry.get("mode", "0644"),
                      "owner": entry.get("owner", "root"), "group": entry.get("group", "root"),
                      "readers": READERS.get(entry["name"], ("slurmctld", "slurmd", "client"))})
        if _on(entry, "secret", False):
            found[-1]["secret"] = True
    for script in scripts or []:
        found.append({"name": script_path(config_dir, script["type"], script["name"])[len(config_dir.rstrip("/")) + 1:],
                      "content": script.get("content", ""), "mode": script.get("mode", "0755"), "script": True,
                      "readers": (SCRIPT_TYPES[script["type"]][0],)})
    for entry in found:
        entry.setdefault("mode", "0644")
        entry.setdefault("owner", "root")
        entry.setdefault("group", "root")
    return found


def host_files(all_files, major, configless, roles, local_config):
    """The entries of ``all_files`` this host writes.

    roles: what it runs of slurmctld, slurmd and sackd; every host of a cluster
    runs Slurm's commands (client). local_config: whether it keeps its own
    Slurm files (every host but the compute and sackd login nodes of a
    configless cluster). A controller of a configless cluster also writes what
    slurmctld serves the nodes; a configless node writes only its scripts
    (run from an absolute path), the rest it fetches with slurm.conf."""
    roles = set(roles) | {"client"}
    served = configless_served(major, "slurmd") | configless_served(major, "client") if configless else frozenset()
    wanted = []
    for entry in all_files:
        readers = set(entry["readers"])
        if entry.get("script"):
            if readers & roles:
                wanted.append(entry)
        elif local_config and (readers & roles or ("slurmctld" in roles and entry["name"] in served)):
            wanted.append(entry)
    return wanted


def _name_problems(var, name, problems):
    if not isinstance(name, str) or not _NAME_RE.match(name):
        problems.append("%s.name: %r: a file name (letters, digits, '.', '_', '-')" % (var, name))
        return False
    return True


def _secret_problems(var, entry, problems):
    """A secret file (a password in acct_gather.conf) is never diffed or logged, and no user reads it."""
    secret = entry.get("secret", False)
    if not isinstance(secret, bool) and str(secret).lower() not in ("true", "false", "yes", "no", "1", "0"):
        problems.append("%s.secret: %r: true or false" % (var, secret))
        return
    mode = entry.get("mode", "0644")
    if _on(entry, "secret", False) and isinstance(mode, str) and _MODE_RE.match(mode) and int(mode, 8) & 0o004:
        problems.append("%s.mode: %s lets every user read a secret file; give '0600' (or '0640' with a group "
                        "that needs it)" % (var, mode))


def _content_problems(var, entry, problems):
    content = entry.get("content")
    if not isinstance(content, str) or not content.strip():
        problems.append("%s.content: the file's text, a non-empty string (render a template with "
                        "lookup('ansible.builtin.template', ...) in the inventory)" % var)
        return
    mode = entry.get("mode", "0644")
    if not isinstance(mode, str) or not _MODE_RE.match(mode):
        problems.append("%s.mode: %r: an octal mode as a quoted string, such as '0644'" % (var, mode))


def _topology_problems(topology, node_names, problems):
    if not isinstance(topology, dict):
        problems.append("slurm_topology: a mapping (type, switches or blocks), or {} for none")
        return
    kind = topology.get("type", "tree")
    if kind not in ("tree", "block"):
        problems.append("slurm_topology.type: %r: tree or block" % (kind,))
        return
    allowed = {"type", "switches"} if kind == "tree" else {"type", "blocks", "block_sizes"}
    unknown = sorted(set(topology) - allowed)
    if unknown:
        problems.append("slurm_topology: unknown keys %s for type %s; known: %s" % (", ".join(unknown), kind, ", ".join(sorted(allowed))))
    items = topology.get("switches" if kind == "tree" else "blocks") or []
    var = "slurm_topology.%s" % ("switches" if kind == "tree" else "blocks")
    if not isinstance(items, list) or not items:
        problems.append("%s: a non-empty list" % var)
        return
    names, placed, children = [], {}, {}
    for i, item in enumerate(items):
        where = "%s[%d]" % (var, i)
        if not isinstance(item, dict) or not item.get("name") or not _NAME_RE.match(str(item.get("name"))):
            problems.append("%s.name: each entry needs a name (letters, digits, '.', '_', '-')" % where)
            continue
        name = str(item["name"])
        if name in names:
            problems.append("%s: %s is named twice" % (where, name))
        names.append(name)
        keys = {"name", "nodes", "switches", "link_speed"} if kind == "tree" else {"name", "nodes"}
        extra = sorted(set(item) - keys)
        if extra:
            problems.append("%s (%s): unknown keys %s; known: %s" % (where, name, ", ".join(extra), ", ".join(sorted(keys))))
        if kind == "tree" and item.get("nodes") and item.get("switches"):
            problems.append("%s (%s): a switch has nodes or switches below it, not both" % (where, name))
        if not item.get("nodes") and not (kind == "tree" and item.get("switches")):
            problems.append("%s (%s): give its nodes%s" % (where, name, " or switches" if kind == "tree" else ""))
        try:
            members = hostlist.expand(_hostlist_text(item["nodes"])) if item.get("nodes") else []
            below = hostlist.expand(_hostlist_text(item["switches"])) if item.get("switches") else []
        except ValueError as err:
            problems.append("%s (%s): %s" % (where, name, err))
            continue
        unknown_nodes = sorted(set(members) - set(node_names))
        if unknown_nodes:
            problems.append("%s (%s): %s not nodes of this cluster" % (where, name, hostlist.compress(unknown_nodes)))
        for node in members:
            if kind == "block" and node in placed:
                problems.append("%s (%s): node %s is also in block %s" % (where, name, node, placed[node]))
            placed.setdefault(node, name)
        children[name] = below
    if kind == "tree":
        for name, below in children.items():
            missing = sorted(set(below) - set(names))
            if missing:
                problems.append("slurm_topology.switches (%s): switches %s are not defined" % (name, ", ".join(missing)))
        # A switch reached from itself would loop Slurm's route search.
        for start in children:
            seen, todo = set(), list(children[start])
            while todo:
                current = todo.pop()
                if current == start:
                    problems.append("slurm_topology.switches (%s): a switch below itself" % start)
                    break
                if current not in seen:
                    seen.add(current)
                    todo.extend(children.get(current, []))
    unplaced = sorted(set(node_names) - set(placed))
    if unplaced:
        problems.append("slurm_topology: nodes %s are under no %s; Slurm cannot place multi-node jobs on them (every node "
                        "must be in the topology)" % (hostlist.compress(unplaced), "switch" if kind == "tree" else "block"))
    if kind == "block":
        sizes = topology.get("block_sizes") or []
        if not isinstance(sizes, list) or any(isinstance(s, bool) or not isinstance(s, int) or s <= 0 for s in sizes):
            problems.append("slurm_topology.block_sizes: a list of positive integers, got %r" % (sizes,))
        elif any(b <= a or b % a or (b // a) & (b // a - 1) for a, b in zip(sizes, sizes[1:])):
            problems.append("slurm_topology.block_sizes: %s: each size a power of two times the one before (BlockSizes)" % sizes)


def _job_tmp_problems(job_tmp, problems):
    if not isinstance(job_tmp, dict):
        problems.append("slurm_job_tmp: a mapping (enabled, base_path, dirs, shared), or {} for none")
        return
    unknown = sorted(set(job_tmp) - {"enabled", "base_path", "dirs", "shared"})
    if unknown:
        problems.append("slurm_job_tmp: unknown keys %s; known: base_path, dirs, enabled, shared" % ", ".join(unknown))
    base = job_tmp.get("base_path", JOB_TMP_BASE)
    dirs = job_tmp.get("dirs", JOB_TMP_DIRS)
    if not isinstance(base, str) or not base.startswith("/") or "," in base or " " in base:
        problems.append("slurm_job_tmp.base_path: %r: an absolute path without spaces or commas" % (base,))
    if not isinstance(dirs, list) or not dirs or any(not isinstance(d, str) or not d.startswith("/") or "," in d for d in dirs):
        problems.append("slurm_job_tmp.dirs: %r: a list of absolute paths" % (dirs,))
    elif isinstance(base, str) and any(base == d or base.startswith(d.rstrip("/") + "/") for d in dirs):
        problems.append("slurm_job_tmp.base_path: %s is inside %s, a directory it makes private; put it elsewhere "
                        "(on the node's local disk)" % (base, ", ".join(dirs)))


def problems(inputs):
    """Messages naming the variable and the fix, for the first play.

    inputs: topology, job_tmp, scripts, site_files, config (slurm_config), major,
    configless, node_names (the cluster's nodes), k8s_job_submit (the
    collection writes job_submit.lua)."""
    found = []
    topology = inputs.get("topology") or {}
    job_tmp = inputs.get("job_tmp") or {}
    scripts = inputs.get("scripts") or []
    site_files = inputs.get("site_files") or []
    config = {str(k).lower(): v for k, v in (inputs.get("config") or {}).items()}
    major, configless = inputs.get("major"), bool(inputs.get("configless"))
    if topology:
        _topology_problems(topology, list(inputs.get("node_names") or []), found)
        if "topologyplugin" in config:
            found.append("slurm_config.TopologyPlugin: set from slurm_topology's type; remove it from slurm_config")
    if job_tmp:
        _job_tmp_problems(job_tmp, found)
        key = major_key(major)
        if key is not None and key < JOB_CONTAINER_DIRS and (
                _on(job_tmp, "shared", False) or list(job_tmp.get("dirs") or JOB_TMP_DIRS) != JOB_TMP_DIRS):
            found.append("slurm_job_tmp: Slurm %s's job_container/tmpfs makes /tmp and /dev/shm private and takes no dirs "
                         "or shared (23.02 and later do); leave both out on this cluster" % major)
        for key in ("jobcontainertype", "namespacetype"):
            if key in config and _on(job_tmp, "enabled", True):
                found.append("slurm_config.%s: slurm_job_tmp chooses the plugin of the major; remove it from slurm_config"
                             % ("JobContainerType" if key == "jobcontainertype" else "NamespaceType"))
    if not isinstance(scripts, list):
        found.append("slurm_scripts: a list of {name, type, content}")
        scripts = []
    counts = {}
    for i, script in enumerate(scripts):
        var = "slurm_scripts[%d]" % i
        if not isinstance(script, dict):
            found.append("%s: a mapping (name, type, content, mode)" % var)
            continue
        unknown = sorted(set(script) - {"name", "type", "content", "mode"})
        if unknown:
            found.append("%s: unknown keys %s; known: content, mode, name, type" % (var, ", ".join(unknown)))
        kind = script.get("type")
        if kind not in SCRIPT_TYPES:
            found.append("%s.type: %r: one of %s" % (var, kind, ", ".join(sorted(SCRIPT_TYPES))))
            continue
        _name_problems(var, script.get("name"), found)
        _content_problems(var, dict(script, mode=script.get("mode", "0755")), found)
        if isinstance(script.get("content"), str) and script["content"].strip() and not script["content"].startswith("#!"):
            found.append("%s.content: starts without '#!': Slurm runs it as a program, and a failing %s %s"
                         % (var, kind, "drains the node" if SCRIPT_TYPES[kind][0] == "slurmd" else "fails the job"))
        if kind.lower() in config:
            found.append("slurm_config.%s: set by slurm_scripts; remove it from slurm_config" % kind)
        counts.setdefault(kind, []).append(str(script.get("name")))
    for kind, names in sorted(counts.items()):
        if len(names) != len(set(names)):
            found.append("slurm_scripts: two %s scripts named %s" % (kind, ", ".join(sorted({n for n in names if names.count(n) > 1}))))
        if len(names) > 1 and not SCRIPT_TYPES[kind][1]:
            found.append("slurm_scripts: %s takes one program, got %s; call the others from it" % (kind, ", ".join(names)))
    if not isinstance(site_files, list):
        found.append("slurm_site_files: a list of {name, content, mode, owner, group}")
        site_files = []
    seen = set()
    for i, entry in enumerate(site_files):
        var = "slurm_site_files[%d]" % i
        if not isinstance(entry, dict):
            found.append("%s: a mapping (name, content, mode, owner, group)" % var)
            continue
        unknown = sorted(set(entry) - {"name", "content", "mode", "owner", "group", "secret"})
        if unknown:
            found.append("%s: unknown keys %s; known: content, group, mode, name, owner, secret" % (var, ", ".join(unknown)))
        _secret_problems(var, entry, found)
        name = entry.get("name")
        if not _name_problems(var, name, found):
            continue
        if name in OWN_FILES:
            found.append("%s.name: %s is written from %s; set that instead" % (var, name, OWN_FILES[name]))
        elif name not in READERS:
            found.append("%s.name: %s is not a file Slurm reads beside slurm.conf; known: %s" % (var, name, ", ".join(
                sorted(n for n in READERS if n not in OWN_FILES))))
        if name in seen:
            found.append("%s.name: %s is listed twice" % (var, name))
        seen.add(name)
        _content_problems(var, entry, found)
        if configless and name in READERS and "slurmd" in READERS[name] and name not in configless_served(major, "slurmd"):
            found.append("%s.name: %s: a configless cluster's slurmctld on Slurm %s does not send it to the nodes, which "
                         "read it beside the slurm.conf they fetched; use a file-based cluster (slurm_configless: false)"
                         % (var, name, major))
    return found
