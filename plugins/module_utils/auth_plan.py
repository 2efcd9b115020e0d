# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which authentication a cluster runs, and what it keeps accepting while it moves.

A cluster authenticates with MUNGE (``auth/munge``) or with Slurm's own
``auth/slurm`` and its shared ``slurm.key`` (23.11 and later), chosen per
cluster by ``slurm_auth_type``. Moving from one to the other on a running
cluster cannot be done in one restart without losing work:

* a job's slurmstepd keeps the authentication its slurmd had when it started
  it, and sends the job's completion to slurmctld with it;
* only slurmctld and slurmdbd load ``AuthAltTypes`` (src/interfaces/auth.c);
  slurmd and the client commands speak one type.

So the run that switches writes ``AuthType`` (and ``CredType``) of the new
type and keeps the old one in ``AuthAltTypes`` of slurmctld and slurmdbd, with
its daemon (munged) or key in place, and records when it did (``since``,
before slurmctld restarts). A later run drops the old type only when no job
can still hold it: every running job started after ``since`` and after its
nodes' slurmd (which, answering slurmctld, speaks the new type). Anything unknown (slurmctld not
answering, no record) keeps the old type: one more restart later, never a lost
job.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii

TYPES = ("munge", "slurm")
# auth/slurm's first major (Slurm 23.11 release notes).
SLURM_AUTH_SINCE = (23, 11)
# HS256 keys shorter than the hash are weak; slurm.jwks asks for more than 16 bytes.
KEY_MIN_BYTES = 32
# Keys the collection sets from slurm_auth_type: a copy in slurm_config would disagree with it.
OWN_KEYS = ("AuthType", "CredType")
RECORD_FILE = "/var/lib/slurm/hybridhpc-auth-transition.json"


def plugin(auth_type):
    return "auth/%s" % auth_type


def type_of(plugin_name):
    """'munge' for 'auth/munge' (or 'munge'); None for anything that is not MUNGE or auth/slurm."""
    name = (plugin_name or "").strip().lower()
    if name.startswith("auth/"):
        name = name[len("auth/"):]
    return name if name in TYPES else None


def _major_tuple(major):
    try:
        return tuple(int(p) for p in str(major).split(".")[:2])
    except ValueError:
        return None


def input_problems(auth_type, key_b64, config=None, dbd_config=None, key_source_host=None, play_hosts=None):
    """The first play's checks of one cluster's authentication inputs (no host needed)."""
    problems = []
    if auth_type == "slurm" and not key_b64 and play_hosts is not None and key_source_host not in play_hosts:
        problems.append(
            "slurm_auth_key_source_host: %r is not a host of this run, and slurm_auth_key_b64 is empty: no host "
            "can make or read slurm.key; name a controller of the play, or give the key in slurm_auth_key_b64"
            % (key_source_host,))
    if auth_type not in TYPES:
        problems.append(
            "slurm_auth_type: %r is not an authentication type; give 'munge' (the default) or 'slurm' "
            "(Slurm's own auth/slurm with slurm.key, Slurm 23.11 and later)" % (auth_type,)
        )
    if key_b64 not in (None, ""):
        if not isinstance(key_b64, str):
            problems.append("slurm_auth_key_b64: give the key as a base64 string (base64 -w0 slurm.key), from a vault")
        else:
            try:
                key = base64.b64decode(key_b64, validate=True)
            except (binascii.Error, ValueError):
                problems.append("slurm_auth_key_b64: not base64; give `base64 -w0 /etc/slurm/slurm.key`, from a vault")
            else:
                if len(key) < KEY_MIN_BYTES:
                    problems.append(
                        "slurm_auth_key_b64: the key is %d bytes; give at least %d random bytes "
                        "(e.g. `dd if=/dev/random bs=1024 count=1 | base64 -w0`)" % (len(key), KEY_MIN_BYTES)
                    )
    for name, settings in (("slurm_config", config), ("slurmdbd_config", dbd_config)):
        for key in (settings or {}):
            if isinstance(key, str) and key.lower() in (k.lower() for k in OWN_KEYS):
                problems.append(
                    "%s.%s: the collection sets it from slurm_auth_type; remove it and set slurm_auth_type "
                    "('munge' or 'slurm') instead" % (name, key)
                )
    return problems


def major_problems(auth_type, major):
    """auth/slurm where the cluster's Slurm has it."""
    if auth_type != "slurm" or not major:
        return []
    found = _major_tuple(major)
    if found is None or found >= SLURM_AUTH_SINCE:
        return []
    return [
        "slurm_auth_type: 'slurm' needs Slurm %d.%d or later (auth/slurm); this cluster runs %s: keep 'munge', "
        "or upgrade Slurm first" % (SLURM_AUTH_SINCE + (major,))
    ]


def federation_problems(clusters):
    """Clusters of one inventory share slurmdbd and talk controller to controller: one type, one key.

    clusters: cluster name -> {'auth_type': ..., 'key_b64': ...} (one entry per cluster).
    """
    problems = []
    types = {name: (c or {}).get("auth_type") for name, c in sorted((clusters or {}).items())}
    if len(set(types.values())) > 1:
        problems.append(
            "slurm_auth_type differs between the clusters (%s): federated clusters and clusters sharing a slurmdbd "
            "verify each other's requests; give every cluster the same slurm_auth_type"
            % ", ".join("%s: %s" % item for item in types.items())
        )
    keys = {(c or {}).get("key_b64") or "" for c in (clusters or {}).values()}
    if len(keys) > 1:
        problems.append(
            "slurm_auth_key_b64 differs between the clusters (%s): their controllers and slurmdbd check each other's "
            "credentials with one slurm.key; give it once for all clusters (group_vars/all), or leave it empty "
            "everywhere to have one made" % ", ".join(sorted(clusters))
        )
    return problems


def _seconds(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def old_type_holders(since, nodes, jobs):
    """Why the old type must still be accepted: [] when no job can still hold it.

    since: epoch seconds of the switch (before slurmctld restarted with the new type);
    nodes: {name: slurmd start (epoch seconds), or None for a node without slurmd (powered down, down)};
    jobs: [{'id', 'start' (epoch seconds), 'nodes': [names]}], the running, suspended and completing jobs.
    """
    since = _seconds(since)
    if since is None:
        return ["no record of when the switch happened"]
    # A slurmd that answers slurmctld, which speaks the new type since the
    # switch, speaks it too (one started before the switch had its slurm.conf
    # from an interrupted run): only the jobs its predecessor started can hold
    # the old type.
    reasons = []
    for job in jobs or []:
        start = _seconds(job.get("start"))
        starts = [_seconds((nodes or {}).get(n)) for n in job.get("nodes") or []]
        newest = max([since] + [s for s in starts if s is not None])
        if start is None or start < newest:
            reasons.append("job %s started before its nodes' slurmd took the new type" % job.get("id"))
    return reasons


def _settled(wanted, state):
    """Whether a cluster's controller runs the wanted type for good: no switch now, none left pending."""
    current = (state or {}).get("current") or {}
    if not current:
        return True
    return type_of(current.get("type")) == wanted and not state.get("pending_restart")


def plan(wanted, state=None, peers=()):
    """The cluster's authentication for this run.

    wanted: slurm_auth_type. state: what the cluster's first controller reads
    (module slurm_auth_state): {'current': {'type', 'alt'}, 'record': {'to',
    'since'} or None, 'nodes', 'jobs', 'pending_restart'}, or None (no
    controller in the play, or a new cluster). peers: the same of the other
    clusters of the inventory (a federation): while one of them switches, or
    its slurmctld has a restart pending (an interrupted run), it may still speak
    the old type to this cluster's slurmctld, which keeps accepting it.

    Returns {'type', 'AuthType', 'CredType', 'accept': [old plugin] or [],
    'record': True when this run switches (the controller records the time
    before slurmctld restarts), 'uses': the types whose key or daemon every
    host needs, 'reasons': why the old type is still accepted}.
    """
    wanted = wanted if wanted in TYPES else "munge"
    other = "slurm" if wanted == "munge" else "munge"
    state = state or {}
    current = state.get("current") or {}
    current_type = type_of(current.get("type"))
    current_alt = {type_of(a) for a in current.get("alt") or []}
    accept, record, reasons = [], False, []
    if current_type and current_type != wanted:
        # The switch: the running daemons speak the old type until each restarts.
        accept, record, reasons = [other], True, ["this run switches from %s" % current_type]
    elif current_type == wanted and other in current_alt:
        rec = state.get("record") or {}
        if type_of(rec.get("to")) != wanted:
            # A switch whose record was lost (or never written: the run stopped first): from now on.
            accept, record, reasons = [other], True, ["no record of when the switch happened"]
        elif state.get("jobs") is None or state.get("nodes") is None:
            accept, reasons = [other], ["slurmctld did not list its nodes and jobs"]
        else:
            reasons = old_type_holders(rec.get("since"), state.get("nodes"), state.get("jobs"))
            if state.get("pending_restart"):
                reasons.append("slurmctld has a restart pending")
            reasons += ["another cluster of the federation has not switched yet"
                        for peer in peers or () if not _settled(wanted, peer)][:1]
            accept = [other] if reasons else []
    uses = sorted({wanted} | set(accept))
    return {
        "type": wanted,
        "AuthType": plugin(wanted),
        "CredType": "cred/%s" % wanted,
        "accept": [plugin(t) for t in accept],
        "record": record,
        "uses": uses,
        "reasons": reasons,
    }


def alt_types(auth, jwt):
    """AuthAltTypes of slurmctld and slurmdbd: the type still accepted, then auth/jwt; None when neither."""
    types = list((auth or {}).get("accept") or []) + (["auth/jwt"] if jwt else [])
    return ",".join(types) or None


# What the cluster's first controller reads (module slurm_auth_state).

def conf_auth(text):
    """{'type': AuthType, 'alt': [AuthAltTypes]} of a slurm.conf's text (None where unset); {} for no file."""
    if text is None:
        return {}
    found = {}
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if "=" not in line:
            continue
        key, value = (part.strip() for part in line.split("=", 1))
        if key.lower() in ("authtype", "authalttypes"):
            found[key.lower()] = value
    return {"type": found.get("authtype") or "auth/munge",
            "alt": [v.strip() for v in (found.get("authalttypes") or "").split(",") if v.strip()]}


def in_transition(current, wanted):
    """Whether the controller must list its nodes and jobs: the running slurm.conf accepts the other type."""
    alt = {type_of(a) for a in (current or {}).get("alt") or []}
    return bool(current) and type_of(current.get("type")) == wanted and bool(alt & (set(TYPES) - {wanted}))


def _epoch(text, to_epoch):
    text = (text or "").strip()
    if not text or text in ("None", "N/A", "Unknown", "(null)"):
        return None
    try:
        return to_epoch(text)
    except ValueError:
        return None


def parse_nodes(scontrol_one_liners, to_epoch):
    """`scontrol -o show node`: {node: slurmd start (epoch seconds), or None where no slurmd answers}.

    A node that is down, not responding or powered down runs no job that could
    hold the old type, and when its slurmd starts again it reads the new one.
    """
    nodes = {}
    for line in scontrol_one_liners.splitlines():
        fields = dict(token.split("=", 1) for token in line.split() if "=" in token)
        if "NodeName" not in fields:
            continue
        state = fields.get("State", "").upper()
        responding = not any(word in state for word in ("DOWN", "NOT_RESPONDING", "POWERING_UP"))
        nodes[fields["NodeName"]] = _epoch(fields.get("SlurmdStartTime"), to_epoch) if responding else None
    return nodes


def parse_jobs(squeue_lines, to_epoch, expand):
    """`squeue -h -o '%i|%S|%N'` of the running, suspended and completing jobs: [{'id', 'start', 'nodes'}]."""
    jobs = []
    for line in squeue_lines.splitlines():
        parts = line.strip().split("|")
        if len(parts) != 3 or not parts[0]:
            continue
        nodes = expand(parts[2]) if parts[2].strip() else []
        jobs.append({"id": parts[0], "start": _epoch(parts[1], to_epoch), "nodes": nodes})
    return jobs


# TLS (TLSType, Slurm 25.05 and later): only where the host has the plugin.
TLS_SINCE = (25, 5)
# Where distributions install Slurm's plugins (Debian's multiarch slurm-wlm, RPMs' lib64/slurm).
PLUGIN_DIRS = ("/usr/lib/x86_64-linux-gnu/slurm-wlm", "/usr/lib/aarch64-linux-gnu/slurm-wlm", "/usr/lib64/slurm",
               "/usr/lib/slurm")


def _setting(config, key):
    for name, value in (config or {}).items():
        if isinstance(name, str) and name.lower() == key.lower():
            return value
    return None


def tls_plugin(config):
    """The TLS plugin slurm_config asks for ('s2n' for TLSType=tls/s2n), or None (none, or tls/none)."""
    value = _setting(config, "TLSType")
    name = str(value or "").strip().lower()
    if name.startswith("tls/"):
        name = name[len("tls/"):]
    return name if name and name != "none" else None


def tls_plugin_paths(config):
    """The files one of which must exist on every Slurm host for slurm_config's TLSType ([] without TLS)."""
    name = tls_plugin(config)
    if not name:
        return []
    plugin_dir = _setting(config, "PluginDir")
    dirs = [d for d in str(plugin_dir).split(":") if d] if plugin_dir else list(PLUGIN_DIRS)
    return ["%s/tls_%s.so" % (d.rstrip("/"), name) for d in dirs]


def tls_problems(config, major, paths_missing, host):
    """TLSType where this host's Slurm has it: 25.05 or later, and its plugin installed."""
    name = tls_plugin(config)
    if not name:
        return []
    found = _major_tuple(major) if major else None
    if found is not None and found < TLS_SINCE:
        return ["slurm_config.TLSType: TLS needs Slurm %d.%02d or later; %s runs %s: remove TLSType" % (
            TLS_SINCE + (host, major))]
    candidates = tls_plugin_paths(config)
    if candidates and set(candidates) <= set(paths_missing or []):
        return ["slurm_config.TLSType: tls/%s: %s has no tls_%s.so (looked in %s); Debian's Slurm packages build "
                "no TLS plugin but tls_none: remove TLSType, or install a Slurm built with it" % (
                    name, host, name, ", ".join(c.rsplit("/", 1)[0] for c in candidates))]
    return []
