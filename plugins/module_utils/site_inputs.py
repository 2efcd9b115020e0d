# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Up-front validation of every role's inputs.

The first play of site.yml (and of rolling_upgrade.yml) hands these functions
the variables as the inventory sets them, before any host changes. One
function per role; each returns problem strings ``"variable: what is wrong;
the fix"`` (an empty list: the inputs are valid).

``inputs`` is a flat mapping of variable name -> value; a missing variable
means the role's default applies and is not checked.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import json
import os
import re

from ansible_collections.hybridhpc.slurm.plugins.module_utils import accounting, copilot_rbac, elastic, pam_adopt, slurm_majors
from ansible_collections.hybridhpc.slurm.plugins.module_utils.cluster_plan import record_node_names
from ansible_collections.hybridhpc.slurm.plugins.module_utils.hostlist import HostlistError, expand
from ansible_collections.hybridhpc.slurm.plugins.module_utils.sacctmgr import (
    normalize_features,
    validate_cluster_name,
)

# Slurm's time strings (slurm.conf(5), MaxTime): minutes, minutes:seconds,
# hours:minutes:seconds, days-hours, days-hours:minutes, days-hours:minutes:seconds.
_TIME_RE = re.compile(r"^(\d+|\d+:\d+|\d+:\d+:\d+|\d+-\d+|\d+-\d+:\d+|\d+-\d+:\d+:\d+)$")
_TIME_WORDS = ("unlimited", "infinite")
TIME_HINT = ('use minutes, "minutes:seconds", "hours:minutes:seconds", "days-hours", '
             '"days-hours:minutes", "days-hours:minutes:seconds" or UNLIMITED')

# Sizes with an optional K/M/G/T/P suffix (gres.conf Count, MariaDB sizes).
_SIZE_RE = re.compile(r"^\d+[KMGTPkmgtp]?$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
_DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_OCTAL_MODE_RE = re.compile(r"^0?[0-7]{3,4}$")
_NO_BLANK_RE = re.compile(r"^[^\s#]+$")
_APPTAINER_KEY_RE = re.compile(r"^[a-z][a-z0-9_ ]*[a-z0-9_]$")
_MARIADB_KEY_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$")
_DB_NAME_RE = re.compile(r"^[A-Za-z0-9_$]{1,64}$")
_URL_RE = re.compile(r"^https?://[^\s/:]+(:\d+)?(/\S*)?$")
_LISTEN_TCP_RE = re.compile(r"^(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]+):(\d+)$")
_UPGRADE_BATCH_RE = re.compile(r"^([1-9][0-9]*|([1-9][0-9]?|100)%)$")
_PACKAGE_VERSION_RE = re.compile(r"^[A-Za-z0-9.:~+_-]*$")
_LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")

# slurm.conf keys whose value is a whole number (time in seconds, MB, counts).
SLURM_INT_KEYS = (
    "SlurmctldTimeout", "SlurmdTimeout", "MessageTimeout", "InactiveLimit", "KillWait", "MinJobAge",
    "MaxJobCount", "DefMemPerCPU", "DefMemPerNode", "MaxMemPerCPU", "MaxMemPerNode", "BatchStartTimeout",
    "TCPTimeout", "WaitTime", "ResumeTimeout", "SuspendTime", "SuspendTimeout", "ResumeRate", "SuspendRate",
)
# slurm.conf keys holding an absolute path on the hosts, and the role using them.
SLURM_PATH_KEYS = (
    ("StateSaveLocation", "slurmctld"), ("SlurmctldLogFile", "slurmctld"), ("SlurmctldPidFile", "slurmctld"),
    ("SlurmdSpoolDir", "slurmd"), ("SlurmdLogFile", "slurmd"), ("SlurmdPidFile", "slurmd"),
)
PARTITION_TIME_KEYS = ("MaxTime", "DefaultTime")
K8S_GRES = ("k8scpu", "k8smemory")
# HS256 keys: RFC 7518 3.2 wants at least the hash size (256 bits).
JWT_KEY_MIN_BYTES = 32


# ---------------------------------------------------------------- primitives

def _lower(mapping):
    return {str(k).lower(): v for k, v in (mapping or {}).items()} if isinstance(mapping, dict) else {}


def _is_int(value, low=None, high=None):
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and re.match(r"^-?\d+$", value.strip()):
        number = int(value)
    else:
        return False
    return (low is None or number >= low) and (high is None or number <= high)


def is_slurm_time(value):
    """True for a time string Slurm's time_str2mins accepts (MaxTime, DefaultTime).

    >>> is_slurm_time("2-12:00:00"), is_slurm_time("1h")
    (True, False)
    """
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 0 or value == -1
    text = str(value).strip()
    return text.lower() in _TIME_WORDS or text == "-1" or bool(_TIME_RE.match(text))


def is_port(value):
    """True for a TCP port number, 1-65535 (an int or a string of digits)."""
    return _is_int(value, 1, 65535)


def port_range(value):
    """(first, last) of a port or a "first-last" range; None when invalid."""
    if is_port(value):
        return int(value), int(value)
    match = re.match(r"^(\d+)-(\d+)$", str(value).strip()) if not isinstance(value, bool) else None
    if match and is_port(match.group(1)) and is_port(match.group(2)) and int(match.group(1)) <= int(match.group(2)):
        return int(match.group(1)), int(match.group(2))
    return None


def is_size(value):
    """True for a size Slurm or MariaDB takes: digits with an optional K/M/G/T/P suffix (500M, 12G)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) and value >= 0 or bool(_SIZE_RE.match(str(value).strip()))


def control_char_problems(value, var):
    """One problem per string (key or value) holding a newline or another control character.

    Such a character would end the line in the rendered file and let the
    rest of the value become a setting of its own.
    """
    problems = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and _CONTROL_RE.search(key):
                problems.append("%s: the key %r holds a newline or control character; remove it" % (var, key))
            problems += control_char_problems(item, "%s.%s" % (var, key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            problems += control_char_problems(item, "%s[%d]" % (var, i))
    elif isinstance(value, str) and _CONTROL_RE.search(value):
        problems.append(
            "%s: %r holds a newline or control character, which would start a new line in the rendered file; "
            "put the value on one line" % (var, value)
        )
    return problems


def duplicate_name_problems(records, var, key, kind):
    """One problem per record whose name (``key``, any case) an earlier record of ``var`` already has.

    Slurm compares these names as written (case-sensitive), as here.
    """
    problems, seen = [], {}
    for i, record in enumerate(records or []):
        if not isinstance(record, dict):
            continue
        name = _lower(record).get(key.lower())
        if name in (None, ""):
            continue
        name = str(name)
        if name in seen:
            problems.append(
                "%s[%d]: %s %s is already defined in %s[%d]; slurmctld refuses a slurm.conf with both (fatal: "
                "duplicate entry); merge the two entries or rename one" % (var, i, kind, name, var, seen[name]))
        else:
            seen[name] = i
    return problems


def _absolute(value, var, problems, allow_empty=False):
    if value in (None, "") and allow_empty:
        return
    if not isinstance(value, str) or not value.startswith("/") or _CONTROL_RE.search(value):
        problems.append("%s: %r must be an absolute path (starting with /)" % (var, value))


def _choice(inputs, var, choices, problems):
    if var in inputs and inputs[var] not in choices:
        problems.append("%s: %r is not one of %s; pick one of them" % (var, inputs[var], ", ".join(map(str, choices))))


def _int_var(inputs, var, problems, low=0, high=None, what="a whole number"):
    if var in inputs and inputs[var] is not None and not _is_int(inputs[var], low, high):
        bounds = " from %s" % low if high is None else " from %s to %s" % (low, high)
        problems.append("%s: %r must be %s%s" % (var, inputs[var], what, bounds))


def _port_var(inputs, var, problems):
    if var in inputs and inputs[var] is not None and not is_port(inputs[var]):
        problems.append("%s: %r is not a TCP port; give a number from 1 to 65535" % (var, inputs[var]))


def _bool_var(inputs, var, problems):
    if var in inputs and not isinstance(inputs[var], bool):
        problems.append("%s: %r must be true or false (a YAML boolean, unquoted)" % (var, inputs[var]))


def _mapping_var(inputs, var, problems):
    if var in inputs and inputs[var] is not None and not isinstance(inputs[var], dict):
        problems.append("%s: must be a mapping (key: value), got %r" % (var, inputs[var]))
        return False
    return True


def _file_on_controller(inputs, var, problems, isfile):
    path = inputs.get(var)
    if path in (None, ""):
        return
    if not isinstance(path, str) or _CONTROL_RE.search(path):
        problems.append("%s: %r is not a file path" % (var, path))
    elif not isfile(os.path.expanduser(path)):
        problems.append(
            "%s: %s does not exist on the Ansible controller; give the path of an existing file "
            "(or leave it empty to skip this part)" % (var, path)
        )


def _gres_name(item):
    return str(item).strip().split(":", 1)[0].split("(", 1)[0].strip()


def _gres_items(value):
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if str(v).strip()]
    return [g for g in str(value or "").split(",") if g.strip()]


def gres_types(inputs):
    """The GresTypes slurm.conf gets: slurm_config's, else the slurm_gres names (+ k8s GRES on shared clusters)."""
    config = _lower(inputs.get("slurm_config"))
    given = config.get("grestypes")
    if given not in (None, "", []):
        return set(_gres_items(given))
    names = set()
    for record in inputs.get("slurm_gres") or []:
        if isinstance(record, dict) and _lower(record).get("name"):
            names.add(str(_lower(record)["name"]))
    if inputs.get("k8s_gres"):
        names.update(K8S_GRES)
    return names


# ---------------------------------------------------------------- roles

def munge_problems(inputs):
    problems = []
    for var in ("munge_uid", "munge_gid"):
        _int_var(inputs, var, problems, 1, 2 ** 31 - 1, "a fixed numeric id")
    if "munge_key_file" in inputs:
        _absolute(inputs["munge_key_file"], "munge_key_file", problems)
    _bool_var(inputs, "munge_service_enabled", problems)
    return problems


def slurm_common_problems(inputs):
    """Cluster-wide slurm.conf model checks beyond cluster_model.cluster_problems."""
    problems = []
    name = inputs.get("slurm_cluster_name")
    config = inputs.get("slurm_config")
    lowered = _lower(config)
    given = lowered.get("clustername")
    if given not in (None, "") and name and str(given).lower() != str(name).lower():
        problems.append(
            "slurm_config.ClusterName: %r differs from slurm_cluster_name %r; remove ClusterName from "
            "slurm_config (it comes from slurm_cluster_name) or rename the cluster there" % (given, name)
        )
    for key in SLURM_INT_KEYS:
        value = lowered.get(key.lower())
        if value is not None and not _is_int(value, 0):
            problems.append("slurm_config.%s: %r must be a whole number" % (key, value))
    for var in ("slurm_config", "slurm_cgroup_config", "slurm_nodes", "slurm_partitions", "slurm_nodesets", "slurm_gres"):
        problems += control_char_problems(inputs.get(var), var)
    for var in ("slurm_config_dir", "slurm_log_dir"):
        if var in inputs:
            _absolute(inputs[var], var, problems)

    # Two records of one kind with one name: slurmctld's reconfigure dies on
    # them (fatal: duplicate entry for partition ...), and in a federation the
    # controllers it leaves locked stop answering (issue 44).
    problems += duplicate_name_problems(inputs.get("slurm_partitions"), "slurm_partitions", "PartitionName", "partition")
    problems += duplicate_name_problems(inputs.get("slurm_nodesets"), "slurm_nodesets", "NodeSet", "node set")
    partition_names = set()
    for i, part in enumerate(inputs.get("slurm_partitions") or []):
        record = _lower(part)
        if record.get("partitionname"):
            partition_names.add(str(record["partitionname"]))
        for key in PARTITION_TIME_KEYS:
            value = record.get(key.lower())
            if value is not None and not is_slurm_time(value):
                problems.append("slurm_partitions[%d].%s: Slurm cannot parse %r; %s" % (i, key, value, TIME_HINT))
    for part in inputs.get("slurm_k8s_partitions") or []:
        if part not in partition_names:
            problems.append(
                "slurm_k8s_partitions: %r is not in slurm_partitions (%s); name a partition of the cluster"
                % (part, ", ".join(sorted(partition_names)) or "none")
            )

    types = gres_types(inputs)
    for i, record in enumerate(inputs.get("slurm_gres") or []):
        gname = _lower(record).get("name")
        if gname and str(gname) not in types:
            problems.append(
                "slurm_gres[%d]: Name=%s is not in GresTypes (%s); add it to slurm_config.GresTypes or leave "
                "GresTypes out (it is derived from slurm_gres)" % (i, gname, ",".join(sorted(types)) or "empty")
            )
        count = _lower(record).get("count")
        if count is not None and not is_size(count):
            problems.append("slurm_gres[%d].Count: %r must be a number, optionally with K, M, G, T or P (10G)" % (i, count))
        gfile = _lower(record).get("file")
        if gfile is not None and not str(gfile).startswith("/"):
            problems.append("slurm_gres[%d].File: %r must be an absolute device path (/dev/nvidia[0-3])" % (i, gfile))
    for i, node in enumerate(inputs.get("slurm_nodes") or []):
        for item in _gres_items(_lower(node).get("gres")):
            if _gres_name(item) not in types:
                problems.append(
                    "slurm_nodes[%d].Gres: %s is not in GresTypes (%s); add a slurm_gres entry with Name=%s"
                    % (i, _gres_name(item), ",".join(sorted(types)) or "empty", _gres_name(item))
                )

    dbd_group = inputs.get("dbd_group")
    for host in inputs.get("slurm_dbd_hosts") or []:
        if dbd_group is not None and host not in dbd_group:
            problems.append("slurm_dbd_hosts: %s is not in the inventory group 'slurmdbd'; add it there or fix the name" % host)

    # Ports of the daemons of one cluster must differ (they may share hosts).
    ports = {}
    ctl = lowered.get("slurmctldport")
    if ctl is not None:
        rng = port_range(ctl)
        if rng is None:
            problems.append("slurm_config.SlurmctldPort: %r is not a port or a port range (6817 or 6817-6818)" % (ctl,))
        else:
            for p in range(rng[0], rng[1] + 1):
                ports.setdefault(p, "slurm_config.SlurmctldPort")
    else:
        ports[6817] = "slurm_config.SlurmctldPort"
    for key, var, default in (("slurmdport", "slurm_config.SlurmdPort", 6818),):
        value = lowered.get(key, default)
        if not is_port(value):
            problems.append("%s: %r is not a TCP port; give a number from 1 to 65535" % (var, value))
        elif int(value) in ports:
            problems.append("%s: port %s is also %s; give each daemon its own port" % (var, value, ports[int(value)]))
        else:
            ports[int(value)] = var
    srun = lowered.get("srunportrange")
    if srun is not None and (port_range(srun) is None or "-" not in str(srun)):
        problems.append("slurm_config.SrunPortRange: %r must be a range first-last (60001-63000)" % (srun,))
    for var, role_hosts in (("slurmdbd_port", "has_dbd"), ("slurmrestd_port", "has_restd")):
        value = inputs.get(var)
        if value is None or not inputs.get(role_hosts) or not is_port(value):
            continue
        if int(value) in ports:
            problems.append("%s: port %s is also %s; give each daemon its own port" % (var, value, ports[int(value)]))
        else:
            ports[int(value)] = var
    return problems


def slurm_node_problems(inputs):
    """Per-host inputs of a compute node (host_vars)."""
    problems = []
    _int_var(inputs, "slurm_node_memory_reserve_mb", problems, 0)
    _choice(inputs, "slurm_k8s_strategy", ("gres", "placeholder"), problems)
    _bool_var(inputs, "slurm_k8s_shared", problems)
    if _mapping_var(inputs, "slurm_node_params", problems):
        params = inputs.get("slurm_node_params") or {}
        problems += control_char_problems(params, "slurm_node_params")
        lowered = _lower(params)
        for key in ("CPUs", "RealMemory", "Sockets", "CoresPerSocket", "ThreadsPerCore", "TmpDisk"):
            value = lowered.get(key.lower())
            if value is not None and not _is_int(value, 1):
                problems.append("slurm_node_params.%s: %r must be a positive whole number" % (key, value))
        types = gres_types(inputs)
        for item in _gres_items(lowered.get("gres")):
            if _gres_name(item) not in types:
                problems.append(
                    "slurm_node_params.Gres: %s is not in GresTypes (%s); add a slurm_gres entry with Name=%s"
                    % (_gres_name(item), ",".join(sorted(types)) or "empty", _gres_name(item))
                )
    return problems


def gres_files_of_node(gres, node):
    """The device files the gres.conf records ``gres`` name for node ``node``, ranges expanded.

    A record without NodeName is for every node. Records that name no File
    (Count only, or AutoDetect) ask for none.
    """
    files = []
    for record in gres or []:
        lowered = _lower(record)
        names = lowered.get("nodename")
        try:
            if names not in (None, "") and node not in expand(names if isinstance(names, str) else ",".join(names)):
                continue
            gfile = lowered.get("file")
            if gfile not in (None, ""):
                files += [f for f in expand(str(gfile)) if f not in files]
        except HostlistError:
            # The cluster's own check names the bad hostlist.
            continue
    return files


def gres_file_problems(gres, node, missing):
    """One problem per gres.conf File of this node that does not exist here (``missing``: the facts step's)."""
    problems = []
    missing = set(missing or [])
    for i, record in enumerate(gres or []):
        absent = [f for f in gres_files_of_node([record], node) if f in missing]
        if absent:
            problems.append(
                "slurm_gres[%d].File: %s does not exist on %s; slurmd would refuse gres.conf there (fatal: can't "
                "stat gres.conf file) and keep its old configuration. Fix File or NodeName, or use AutoDetect"
                % (i, ", ".join(absent), node))
    return problems


def slurm_node_fact_problems(inputs, facts):
    """Checks that need the host's facts: gres.conf's device files, the memory reserve of derived nodes."""
    problems = gres_file_problems(inputs.get("slurm_gres"), inputs.get("node"), inputs.get("paths_missing"))
    if inputs.get("slurm_nodes"):
        return problems
    params = _lower(inputs.get("slurm_node_params"))
    reserve = inputs.get("slurm_node_memory_reserve_mb")
    total = (facts or {}).get("memtotal_mb")
    if params.get("realmemory") is None and _is_int(reserve, 0) and _is_int(total) and int(reserve) >= int(total):
        problems.append(
            "slurm_node_memory_reserve_mb: %s MB is not less than the %s MB this node has; lower it "
            "(RealMemory would be %s MB) or set slurm_node_params.RealMemory" % (reserve, total, int(total) - int(reserve))
        )
    return problems


def slurmdbd_problems(inputs):
    problems = []
    for var in ("slurmdbd_port", "slurmdbd_storage_port"):
        _port_var(inputs, var, problems)
    user = inputs.get("slurmdbd_storage_user")
    if user is not None and (not isinstance(user, str) or not _NO_BLANK_RE.match(user)):
        problems.append("slurmdbd_storage_user: %r must be a user name without blanks or '#'" % (user,))
    loc = inputs.get("slurmdbd_storage_loc")
    if loc is not None and (not isinstance(loc, str) or not _DB_NAME_RE.match(loc)):
        problems.append("slurmdbd_storage_loc: %r must be a database name (letters, digits, _ or $; up to 64)" % (loc,))
    host = inputs.get("slurmdbd_storage_host")
    if host is not None and (not isinstance(host, str) or not _NO_BLANK_RE.match(host)):
        problems.append("slurmdbd_storage_host: %r must be a host name or address" % (host,))
    problems += control_char_problems(inputs.get("slurmdbd_config"), "slurmdbd_config")
    dbd_port = _lower(inputs.get("slurmdbd_config")).get("dbdport")
    if dbd_port is not None and not is_port(dbd_port):
        problems.append("slurmdbd_config.DbdPort: %r is not a TCP port; give a number from 1 to 65535" % (dbd_port,))
    if _mapping_var(inputs, "slurmdbd_mariadb_settings", problems):
        settings = inputs.get("slurmdbd_mariadb_settings") or {}
        problems += control_char_problems(settings, "slurmdbd_mariadb_settings")
        for key, value in settings.items():
            if not isinstance(key, str) or not _MARIADB_KEY_RE.match(key):
                problems.append("slurmdbd_mariadb_settings: %r is not a MariaDB option name" % (key,))
            elif key.endswith("_size") and not is_size(value):
                problems.append("slurmdbd_mariadb_settings.%s: %r must be a size like 512M or 1G" % (key, value))
    return problems


def _daemon_paths(inputs, daemon, problems):
    """slurm_config's paths the daemon uses (SLURM_PATH_KEYS) must be absolute."""
    config = _lower(inputs.get("slurm_config"))
    for key, role in SLURM_PATH_KEYS:
        if role == daemon and config.get(key.lower()) is not None:
            _absolute(config[key.lower()], "slurm_config.%s" % key, problems)


def slurmctld_problems(inputs):
    problems = []
    _daemon_paths(inputs, "slurmctld", problems)
    _bool_var(inputs, "slurmctld_register_cluster", problems)
    _int_var(inputs, "slurmctld_hung_timeout", problems, 0, what="a number of seconds (0: never restart a hung slurmctld)")
    return problems


def is_serial(value):
    """A play's serial as site.yml's compute node play takes it: a whole number of hosts (1 or more), a
    percentage (1% to 100%), or a list of those (batches that grow)."""
    if isinstance(value, list):
        return bool(value) and all(is_serial(item) for item in value)
    if isinstance(value, str) and value.strip().endswith("%"):
        return _is_int(value.strip()[:-1], 1, 100)
    return _is_int(value, 1)


def slurmd_problems(inputs):
    problems = []
    _daemon_paths(inputs, "slurmd", problems)
    if inputs.get("slurmd_serial") is not None and not is_serial(inputs["slurmd_serial"]):
        problems.append("slurmd_serial: %r is not a number of hosts (1 or more), a percentage (1%%-100%%) or a list of"
                        " those; set e.g. -e slurmd_serial=10%%" % (inputs["slurmd_serial"],))
    _int_var(inputs, "slurmd_reregister_interval", problems, 1)
    if "slurmd_reregister_helper" in inputs:
        _absolute(inputs["slurmd_reregister_helper"], "slurmd_reregister_helper", problems)
    return problems


def slurmrestd_problems(inputs):
    problems = []
    key_b64 = inputs.get("slurmrestd_jwt_key_b64")
    if key_b64 not in (None, ""):
        try:
            key = base64.b64decode(str(key_b64), validate=True)
        except (binascii.Error, ValueError):
            key = None
        if key is None:
            problems.append("slurmrestd_jwt_key_b64: not valid base64; give the key as `base64 -w0 jwt_hs256.key`")
        elif len(key) < JWT_KEY_MIN_BYTES:
            problems.append(
                "slurmrestd_jwt_key_b64: the key is %d bytes; HS256 needs at least %d (`head -c 32 /dev/urandom | base64 -w0`)"
                % (len(key), JWT_KEY_MIN_BYTES)
            )
    jwks = inputs.get("slurmrestd_jwks")
    if jwks not in (None, ""):
        try:
            doc = json.loads(jwks) if isinstance(jwks, str) else jwks
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
            problems.append('slurmrestd_jwks: not a JWKS document; give the JSON text {"keys": [...]} of the identity provider')
        elif not inputs.get("slurm_jwt_jwks_file"):
            problems.append("slurm_jwt_jwks_file: slurmrestd_jwks is set but slurm_jwt_jwks_file is empty; give the path it goes to")
    listen = inputs.get("slurmrestd_listen")
    tcp_ports = []
    if listen is not None:
        if not isinstance(listen, list) or not listen:
            problems.append('slurmrestd_listen: must be a list of "host:port" or "unix:/path" entries')
        else:
            for i, entry in enumerate(listen):
                text = str(entry)
                match = _LISTEN_TCP_RE.match(text)
                if text.startswith("unix:"):
                    if not text[5:].startswith("/") or re.search(r"\s", text):
                        problems.append("slurmrestd_listen[%d]: %r needs an absolute socket path (unix:/run/slurmrestd/slurmrestd.socket)" % (i, text))
                elif match and is_port(match.group(2)):
                    tcp_ports.append(int(match.group(2)))
                else:
                    problems.append('slurmrestd_listen[%d]: %r is neither "host:port" (0.0.0.0:6820) nor "unix:/path"' % (i, text))
    port = inputs.get("slurmrestd_port")
    if port is not None and not is_port(port):
        problems.append("slurmrestd_port: %r is not a TCP port; give a number from 1 to 65535" % (port,))
    elif port is not None and tcp_ports and int(port) not in tcp_ports:
        problems.append(
            "slurmrestd_port: %s is not a port slurmrestd_listen opens (%s); make them agree"
            % (port, ", ".join(map(str, tcp_ports)))
        )
    user = inputs.get("slurmrestd_user")
    if user is not None and (user in ("root", "slurm") or not _NO_BLANK_RE.match(str(user))):
        problems.append("slurmrestd_user: %r; slurmrestd refuses root and SlurmUser, give it a user of its own" % (user,))
    for var in ("slurmrestd_uid", "slurmrestd_gid"):
        _int_var(inputs, var, problems, 1, 2 ** 31 - 1, "a fixed numeric id")
    uid = inputs.get("slurmrestd_uid")
    for other in ("slurm_uid", "munge_uid"):
        if uid is not None and inputs.get(other) is not None and str(uid) == str(inputs[other]):
            problems.append("slurmrestd_uid: equals %s (%s); slurmrestd needs its own user" % (other, uid))
    problems += control_char_problems(inputs.get("slurmrestd_extra_options"), "slurmrestd_extra_options")
    security = inputs.get("slurmrestd_security")
    if security is not None and security != "auto" and not (
        isinstance(security, list) and all(isinstance(s, str) and _NO_BLANK_RE.match(s) for s in security)
    ):
        problems.append("slurmrestd_security: %r must be auto or a list of SLURMRESTD_SECURITY words" % (security,))
    return problems


def apptainer_problems(inputs):
    problems = []
    _choice(inputs, "apptainer_install_method", ("package", "url"), problems)
    _choice(inputs, "apptainer_mode", ("userns", "setuid"), problems)
    url = inputs.get("apptainer_package_url")
    if inputs.get("apptainer_install_method") == "url" and not url:
        problems.append("apptainer_package_url: set it to an official release package (.deb or .rpm) when apptainer_install_method is url")
    elif url and not _URL_RE.match(str(url)):
        problems.append("apptainer_package_url: %r is not an http(s) URL" % (url,))
    if _mapping_var(inputs, "apptainer_conf", problems):
        conf = inputs.get("apptainer_conf") or {}
        problems += control_char_problems(conf, "apptainer_conf")
        for key, value in conf.items():
            if not isinstance(key, str) or not _APPTAINER_KEY_RE.match(key):
                problems.append("apptainer_conf: %r is not an apptainer.conf option name (lowercase words: 'mount home')" % (key,))
            if isinstance(value, dict):
                problems.append("apptainer_conf.%s: a mapping is not an apptainer.conf value; use a string or a list" % key)
    if inputs.get("apptainer_image_dir"):
        _absolute(inputs["apptainer_image_dir"], "apptainer_image_dir", problems)
    mode = inputs.get("apptainer_image_dir_mode")
    if mode is not None and not _OCTAL_MODE_RE.match(str(mode)):
        problems.append('apptainer_image_dir_mode: %r must be an octal mode in quotes ("0755")' % (mode,))
    return problems


def federation_problems(inputs):
    """Site-wide: ``clusters`` are the cluster names that have a slurmctld host."""
    problems = []
    clusters = list(inputs.get("clusters") or [])
    name = inputs.get("federation_name")
    if len(clusters) > 1:
        if not name:
            problems.append(
                "federation_name: the inventory has %d clusters (%s), which site.yml federates; set the federation's name"
                % (len(clusters), ", ".join(clusters))
            )
    if name:
        try:
            if validate_cluster_name(name) != name:
                raise ValueError("use lowercase")
        except ValueError as exc:
            problems.append("federation_name: %r is not a name sacctmgr accepts (%s)" % (name, exc))
    features = inputs.get("federation_cluster_features")
    if features is not None and not isinstance(features, dict):
        problems.append("federation_cluster_features: must map cluster names to feature lists, got %r" % (features,))
        features = {}
    for cluster, wanted in (features or {}).items():
        if cluster not in clusters:
            problems.append(
                "federation_cluster_features: %r is not a cluster of the inventory (%s); use a slurm_cluster_name of a "
                "host in group 'slurmctld'" % (cluster, ", ".join(clusters) or "none")
            )
        if not isinstance(wanted, list):
            problems.append("federation_cluster_features.%s: %r must be a list of feature names" % (cluster, wanted))
            continue
        try:
            normalize_features(wanted)
        except ValueError as exc:
            problems.append("federation_cluster_features.%s: %s" % (cluster, exc))
    _choice(inputs, "federation_name_resolution", ("auto", "hosts", "dns"), problems)
    _choice(inputs, "federation_firewall", ("auto", "firewalld", "ufw", "none"), problems)
    ports = inputs.get("federation_ports")
    if ports is not None:
        if not isinstance(ports, list):
            problems.append("federation_ports: must be a list of ports, got %r" % (ports,))
        else:
            for i, port in enumerate(ports):
                if not is_port(port):
                    problems.append("federation_ports[%d]: %r is not a TCP port; give a number from 1 to 65535" % (i, port))
    srun = inputs.get("federation_srun_port_range")
    if srun not in (None, "") and (port_range(srun) is None or "-" not in str(srun)):
        problems.append("federation_srun_port_range: %r must be a range first-last (60001-63000) or empty" % (srun,))
    for var in ("federation_preflight_timeout", "federation_sync_timeout"):
        _int_var(inputs, var, problems, 1)
    return problems


def _kube_common(inputs, prefix, problems, isfile):
    _file_on_controller(inputs, prefix + "_kubeconfig", problems, isfile)
    for var in (prefix + "_cluster_namespace", prefix + "_namespace"):
        value = inputs.get(var)
        if value is not None and not (isinstance(value, str) and _DNS_LABEL_RE.match(value)):
            problems.append(
                "%s: %r is not a Kubernetes namespace name (lowercase letters, digits and '-', up to 63)" % (var, value)
            )


def ack_operator_problems(inputs, isfile=os.path.isfile):
    problems = []
    _choice(inputs, "ack_operator_mode", ("bare_metal", "ack"), problems)
    _kube_common(inputs, "ack_operator", problems, isfile)
    _port_var(inputs, "ack_operator_slurmrestd_port", problems)
    _int_var(inputs, "ack_operator_jwt_token_lifespan", problems, 60, None, "seconds")
    user = inputs.get("ack_operator_jwt_token_user")
    if user is not None and not (isinstance(user, str) and _NO_BLANK_RE.match(user)):
        problems.append("ack_operator_jwt_token_user: %r must be a user name without blanks" % (user,))
    for var in ("ack_operator_kube_context", "ack_operator_chart_version", "ack_operator_cluster_chart_version"):
        value = inputs.get(var)
        if value not in (None, "") and not (isinstance(value, str) and _NO_BLANK_RE.match(value)):
            problems.append("%s: %r must be one word without blanks or newlines" % (var, value))
    if _mapping_var(inputs, "ack_operator_cluster_values", problems):
        problems += control_char_problems(inputs.get("ack_operator_cluster_values"), "ack_operator_cluster_values")
    _bool_var(inputs, "ack_operator_install_crd", problems)
    _bool_var(inputs, "ack_operator_enable_copilot", problems)
    if inputs.get("ack_operator_mode") == "ack":
        problems += ack_mode_problems(inputs)
    return problems


def ack_mode_problems(inputs):
    """What ACK's charts need of the model (module_utils/ack_values.py renders their values).

    The database password and the MUNGE key travel in the chart's values;
    ``slurmdbd_storage_pass_set`` says whether the password is set without
    handing it to the checks.
    """
    problems = []
    if inputs.get("accounting", True):
        if not inputs.get("slurmdbd_storage_pass_set"):
            problems.append(
                "slurmdbd_storage_pass: ACK's slurmdbd pod needs the database password in its slurmdbd.conf; "
                "set it (vaulted) or turn accounting off (slurm_accounting: false)"
            )
        host = inputs.get("slurmdbd_storage_host", "localhost")
        if str(host).lower() in _LOOPBACK_NAMES:
            problems.append(
                "slurmdbd_storage_host: %r; ACK's slurmdbd runs in a pod, where no database listens on loopback; "
                "give the database's address" % (host,)
            )
    if inputs.get("ack_operator_enable_copilot", True) is True and not inputs.get("k8s_gres"):
        problems.append(
            "ack_operator_enable_copilot: ACK's SlurmCopilot takes Kubernetes' share out of the count-only GRES "
            "k8scpu/k8smemory, which no shared host has; set slurm_k8s_strategy: gres on the shared hosts "
            "or ack_operator_enable_copilot: false"
        )
    if inputs.get("slurm_auth_jwt") is False:
        problems.append(
            "slurm_auth_jwt: ACK's slurmrestd and SlurmCopilot authenticate with JWT; set slurm_auth_jwt: true "
            "(or put a host of the cluster in group slurmrestd)"
        )
    if inputs.get("slurm_jwt_jwks_file"):
        problems.append(
            "slurm_jwt_jwks_file: ack mode mounts only the HS256 key into ACK's pods (/var/jwt/jwt_hs256.key); "
            "leave slurm_jwt_jwks_file empty or use ack_operator_mode: bare_metal"
        )
    return problems


def copilot_problems(inputs, isfile=os.path.isfile):
    problems = []
    _kube_common(inputs, "copilot", problems, isfile)
    _file_on_controller(inputs, "copilot_rbac_kubeconfig", problems, isfile)
    if "copilot_service_account" in inputs or "copilot_service_account_namespace" in inputs:
        problems += copilot_rbac.problems(inputs.get("copilot_service_account", "hybridhpc-copilot"),
                                          inputs.get("copilot_service_account_namespace", "hybridhpc-copilot"))
    _int_var(inputs, "copilot_token_lifespan", problems, 30, 86400, "seconds")
    _port_var(inputs, "copilot_metrics_port", problems)
    _int_var(inputs, "copilot_watchdog_sec", problems, 1)
    for var in ("copilot_uid", "copilot_gid"):
        _int_var(inputs, var, problems, 1, 2 ** 31 - 1, "a fixed numeric id")
    for var in ("copilot_install_dir", "copilot_config_dir"):
        if var in inputs:
            _absolute(inputs[var], var, problems)
    url = inputs.get("copilot_slurmrestd_url")
    if url not in (None, "") and not _URL_RE.match(str(url)):
        problems.append("copilot_slurmrestd_url: %r is not an http(s) URL (http://host:6820)" % (url,))
    address = inputs.get("copilot_metrics_address")
    if address is not None and not (isinstance(address, str) and _NO_BLANK_RE.match(address)):
        problems.append("copilot_metrics_address: %r must be an address (127.0.0.1)" % (address,))
    sandbox = inputs.get("copilot_namespace_sandboxing")
    if sandbox is not None and sandbox != "auto" and not isinstance(sandbox, bool):
        problems.append("copilot_namespace_sandboxing: %r must be auto, true or false" % (sandbox,))
    if _mapping_var(inputs, "copilot_config", problems):
        problems += control_char_problems(inputs.get("copilot_config"), "copilot_config")
    return problems


def upgrade_problems(inputs):
    """Inputs of playbooks/rolling_upgrade.yml; ``clusters`` are the inventory's cluster names."""
    problems = []
    clusters = list(inputs.get("clusters") or [])
    cluster = inputs.get("slurm_upgrade_cluster", "all")
    if cluster != "all" and cluster not in clusters:
        problems.append("slurm_upgrade_cluster: %r is not a cluster of the inventory; use all or one of %s" % (cluster, ", ".join(clusters)))
    batch = inputs.get("slurm_upgrade_batch", "10%")
    if isinstance(batch, bool) or not _UPGRADE_BATCH_RE.match(str(batch)):
        problems.append("slurm_upgrade_batch: %r must be a number of nodes (5) or a percentage (10%%)" % (batch,))
    _int_var(inputs, "slurm_upgrade_max_fail_percentage", problems, 0, 100, "a percentage")
    _int_var(inputs, "slurm_upgrade_drain_timeout", problems, 0, None, "seconds")
    _int_var(inputs, "slurm_upgrade_dbd_timeout", problems, 0, None, "seconds")
    _choice(inputs, "slurm_upgrade_on_timeout", ("proceed", "fail"), problems)
    version = inputs.get("slurm_upgrade_version", "")
    if not isinstance(version, str) or not _PACKAGE_VERSION_RE.match(version):
        problems.append("slurm_upgrade_version: %r is not a package version (23.11.10-1); leave it empty for the newest" % (version,))
    for var in ("slurm_upgrade_backup", "slurm_upgrade_force_restart"):
        if var in inputs and not isinstance(inputs[var], bool) and str(inputs[var]).lower() not in ("true", "false", "yes", "no"):
            problems.append("%s: %r must be true or false" % (var, inputs[var]))
    release = inputs.get("slurm_upgrade_default_release", "")
    if not isinstance(release, str) or not _PACKAGE_VERSION_RE.match(release):
        problems.append("slurm_upgrade_default_release: %r is not an apt release name (sid, bookworm-backports); "
                        "leave it empty for the default" % (release,))
    reason = inputs.get("slurm_upgrade_reason")
    if reason is not None and (not isinstance(reason, str) or not reason.strip() or _CONTROL_RE.search(reason)):
        problems.append("slurm_upgrade_reason: %r must be one line of text" % (reason,))
    return problems


def elastic_inputs_problems(inputs):
    """A cluster's elastic node sets, power saving and configless mode (module_utils/elastic.py)."""
    def expand_valid(text):
        try:
            return expand(text)
        except HostlistError:
            return []  # slurm_common's checks report it

    records = [r for r in inputs.get("slurm_nodes") or [] if isinstance(r, dict)]
    static = list(inputs.get("compute_hosts") or []) + record_node_names(records, expand_valid)
    return elastic.elastic_problems(
        inputs.get("slurm_elastic_nodesets") or [], inputs.get("slurm_power_save"), inputs.get("slurm_configless"),
        static, inputs.get("slurm_partitions"))


def power_save_role_problems(inputs):
    """The power_save role's own variables."""
    problems = []
    for var in ("power_save_reconcile_interval", "power_save_failed_retry_after", "power_save_resume_grace"):
        _int_var(inputs, var, problems, 1, None, "seconds")
    for var in ("power_save_log_file", "power_save_queue_dir", "power_save_state_dir", "power_save_environment_file"):
        if var in inputs:
            _absolute(inputs[var], var, problems, allow_empty=var == "power_save_environment_file")
    return problems


ROLE_CHECKS = {
    "accounting": accounting.accounting_problems,
    "elastic": elastic_inputs_problems,
    "power_save": power_save_role_problems,
    "munge": munge_problems,
    "slurm_common": slurm_common_problems,
    "slurm_node": slurm_node_problems,
    "slurm_node_facts": lambda inputs: slurm_node_fact_problems(inputs, inputs.get("facts")),
    "slurmdbd": slurmdbd_problems,
    "slurmctld": slurmctld_problems,
    "slurmd": slurmd_problems,
    "slurmrestd": slurmrestd_problems,
    "apptainer": apptainer_problems,
    "federation": federation_problems,
    "ack_operator": ack_operator_problems,
    "copilot": copilot_problems,
    "rolling_upgrade": upgrade_problems,
    "pam_slurm_adopt": pam_adopt.problems,
    # What the host's Slurm major lacks (module_utils/slurm_majors.py).
    "slurm_major": slurm_majors.problems,
}


def input_problems(inputs, roles):
    """Problems of ``inputs`` for each role named in ``roles`` (keys of ROLE_CHECKS)."""
    inputs = {k: v for k, v in (inputs or {}).items() if v is not None}
    problems = []
    for role in roles:
        if role not in ROLE_CHECKS:
            raise ValueError("unknown role %r; one of %s" % (role, ", ".join(sorted(ROLE_CHECKS))))
        problems += ROLE_CHECKS[role](inputs)
    return problems
