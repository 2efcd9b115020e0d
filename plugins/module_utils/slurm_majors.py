# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What differs between Slurm majors, as data, and which major a host runs.

Slurm releases twice a year (YY.MM); Debian ships one major per release:
bookworm 22.05, trixie 24.11, sid 26.05. Config keys, plugins and the REST
API change between majors. This module holds those differences as one table
(:data:`MAJORS`) and decides, in Python, which major a host runs and what an
inventory asks of a major that lacks it. Roles read the answers; they do not
branch on versions themselves.

Checked on the lab (Debian packages, November 2026) unless noted:

* 22.05.8 (bookworm): slurmrestd serves v0.0.36, v0.0.37, v0.0.38 (its
  ``GET /openapi/v3`` lists exactly these); no sackd package; libpam-slurm-adopt
  and slurm-wlm-jwt-plugin exist.
* 24.11.5 (trixie): slurmrestd serves v0.0.40, v0.0.41, v0.0.42; sackd exists.
* 26.05.5 (sid): slurmrestd serves v0.0.42, v0.0.43, v0.0.44, v0.0.45 (its
  ``GET /openapi/v3`` lists these, and the other versions answer 404); sackd
  exists; its slurmdbd unit runs as SlurmUser with /run/slurmdbd its runtime
  directory.
* Other majors: from SchedMD's release notes (not run here).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

# The major the collection was built and tested against first: the one a
# host is taken to run when nothing says otherwise (no apt, no slurm_version).
REFERENCE_MAJOR = "24.11"

# Per major: rest_versions: the data_parser versions slurmrestd serves, oldest
# first; sackd: sackd exists (login nodes of configless clusters run it);
# mariadb_settings: [mysqld] settings slurmdbd of this major asks for, under
# the role's slurmdbd_mariadb_settings (which win). 26.05's slurmdbd logs an
# error at start while innodb_snapshot_isolation is on (the default of MariaDB
# 11.6.2 and later, 11.8 in trixie and sid: "will cause slurmdbd to fatal when
# a write conflicts"); the loose- prefix makes an older MariaDB skip it.
# ctld_parameters_defunct: SlurmctldParameters values this major rejects as
# defunct (24.11.5 in the lab and 26.05 log 'The SlurmctldParameters option
# "cloud_reg_addrs" is defunct, please remove it' at every start and
# reconfigure; what it did is now always done).
_SNAPSHOT_OFF = {"loose-innodb_snapshot_isolation": "OFF"}
MAJORS = {
    "22.05": {"rest_versions": ("v0.0.36", "v0.0.37", "v0.0.38"), "sackd": False, "mariadb_settings": {}},
    "23.02": {"rest_versions": ("v0.0.37", "v0.0.38", "v0.0.39"), "sackd": False, "mariadb_settings": {}},
    "23.11": {"rest_versions": ("v0.0.38", "v0.0.39", "v0.0.40"), "sackd": True, "mariadb_settings": {}},
    "24.05": {"rest_versions": ("v0.0.39", "v0.0.40", "v0.0.41"), "sackd": True, "mariadb_settings": {}},
    "24.11": {"rest_versions": ("v0.0.40", "v0.0.41", "v0.0.42"), "sackd": True, "mariadb_settings": {},
              "ctld_parameters_defunct": ("cloud_reg_addrs",)},
    "25.05": {"rest_versions": ("v0.0.41", "v0.0.42", "v0.0.43"), "sackd": True, "mariadb_settings": {},
              "ctld_parameters_defunct": ("cloud_reg_addrs",)},
    "25.11": {"rest_versions": ("v0.0.42", "v0.0.43", "v0.0.44"), "sackd": True, "mariadb_settings": {},
              "ctld_parameters_defunct": ("cloud_reg_addrs",)},
    "26.05": {"rest_versions": ("v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"), "sackd": True,
              "mariadb_settings": _SNAPSHOT_OFF, "ctld_parameters_defunct": ("cloud_reg_addrs",)},
}

# The Slurm major of each Debian release's own archive (the fallback when a
# host's package index names no candidate yet: a new host, a fresh image).
DEBIAN_RELEASE_MAJOR = {"bookworm": "22.05", "trixie": "24.11", "forky": "26.05", "sid": "26.05"}

# The REST API versions the collection's client (module_utils/slurmrestd.py,
# its DEFAULT_VERSIONS newest first) and the copilot speak, oldest first: the
# job_state/state lists and update_node_msg of v0.0.40 and later. Written out,
# not imported: slurmrestd.py imports httpx, and every filter plugin that reads
# this table is imported again by each Ansible worker (a unit test keeps both
# lists equal and httpx out of the filters).
CLIENT_REST_VERSIONS = ("v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")

_VERSION_RE = re.compile(r"^(?:\d+:)?(\d{2})\.(\d{2})(?:[.~+-].*)?$")


def _key(major):
    year, month = major.split(".")
    return int(year), int(month)


def major_of(version):
    """The major (``"24.11"``) of a package or Slurm version (``"24.11.5-2"``, ``"1:22.05.8-4"``); None if none.

    >>> major_of("22.05.8-4+deb12u3")
    '22.05'
    """
    match = _VERSION_RE.match(str(version or "").strip())
    if not match:
        return None
    return "%s.%s" % match.groups()


def known(major):
    """The table's entry for a major: its own, else the newest older one's (None when older than the table)."""
    if major in MAJORS:
        return MAJORS[major]
    older = [m for m in MAJORS if _key(m) <= _key(major)]
    return MAJORS[max(older, key=_key)] if older else None


def apt_policy(text):
    """``{package: {"installed": v, "candidate": v}}`` from ``apt-cache policy PKG...`` (None for ``(none)``).

    A package the index does not know is absent from the answer.
    """
    found = {}
    current = None
    for line in (text or "").splitlines():
        if line and not line[0].isspace() and line.rstrip().endswith(":"):
            current = found.setdefault(line.rstrip()[:-1], {"installed": None, "candidate": None})
            continue
        word, _colon, value = line.strip().partition(":")
        value = value.strip()
        if current is not None and word.lower() in current and value and value != "(none)":
            current[word.lower()] = current[word.lower()] or value
    return found


def host_major(slurm_version=None, apt_policy_text=None, release=None, package="slurm-client", installed=None):
    """The Slurm major a host runs (or will run once installed), and where that came from.

    First found wins: the inventory's ``slurm_version``; the installed
    client package (what runs: site.yml installs, it does not upgrade), from
    ``installed`` (``{package: version}`` as dpkg has them) or the policy;
    the package index's candidate (what the install brings); the Debian
    release's own major; else :data:`REFERENCE_MAJOR`. Returns
    ``{"major": "24.11", "source": "...", "version": "24.11.5-1" or None}``.
    """
    if slurm_version not in (None, ""):
        major = major_of(slurm_version)
        if major is None:
            raise ValueError(
                "slurm_version: %r is not a Slurm version; set it like 24.11 or 24.11.5" % (slurm_version,)
            )
        return {"major": major, "source": "slurm_version", "version": str(slurm_version)}
    versions = dict(apt_policy(apt_policy_text).get(package) or {})
    versions["installed"] = (installed or {}).get(package) or versions.get("installed")
    for source in ("installed", "candidate"):
        major = major_of(versions.get(source))
        if major:
            return {"major": major, "source": source, "version": versions[source]}
    if release in DEBIAN_RELEASE_MAJOR:
        return {"major": DEBIAN_RELEASE_MAJOR[release], "source": "debian release %s" % release, "version": None}
    return {"major": REFERENCE_MAJOR, "source": "default", "version": None}


def package_available(apt_policy_text, package, index_package="slurm-client", installed=None):
    """Whether the package index offers ``package`` (True when it is installed): None when the index is not loaded
    (no candidate for Slurm either), or was not read."""
    if (installed or {}).get(package):
        return True
    policy = apt_policy(apt_policy_text)
    if (policy.get(package) or {}).get("candidate") or (policy.get(package) or {}).get("installed"):
        return True
    if (policy.get(index_package) or {}).get("candidate"):
        return False
    return None


def major_facts(slurm_version=None, apt_policy_text=None, release=None, installed=None):
    """What the roles need to know of a host's major: host_major's answer plus the table's entry.

    ``rest_versions`` (served), ``client_rest_versions`` (those the
    collection's client speaks, newest first), ``sackd``,
    ``mariadb_settings``, and ``pam_slurm_adopt_available``.
    """
    found = host_major(slurm_version, apt_policy_text, release, installed=installed)
    entry = known(found["major"]) or {}
    found.update({
        "rest_versions": list(rest_versions(found["major"])),
        "client_rest_versions": list(client_rest_versions(found["major"])),
        "sackd": bool(entry.get("sackd")),
        "mariadb_settings": dict(entry.get("mariadb_settings") or {}),
        "pam_slurm_adopt_available": package_available(apt_policy_text, "libpam-slurm-adopt", installed=installed),
    })
    return found


def rest_versions(major):
    """The data_parser versions slurmrestd of this major serves, oldest first (empty when unknown)."""
    entry = known(major)
    return tuple(entry["rest_versions"]) if entry else ()


OPENMETRICS_MAJOR = (25, 11)


def serves_openmetrics(major):
    """Whether this major's slurmctld serves its own metrics (MetricsType=metrics/openmetrics, 25.11 and later).

    False for what is no major (None, "", "x"): the first play may ask before a host's major is known.
    """
    try:
        return _key(".".join(str(major).split(".")[:2])) >= OPENMETRICS_MAJOR
    except ValueError:
        return False


def rest_openapi_plugins(major, accounting):
    """slurmrestd's ``-s`` (its OpenAPI plugins), or "" for all of them.

    With every plugin loaded, slurmrestd 24.11 exits at start on a cluster
    without slurmdbd ("fatal: Failure loading plugin path bindings: Requested
    operation not supported on this system", seen on the lab): without
    accounting it gets openapi/slurmctld only. 22.05 names its plugins per
    version (openapi/v0.0.38): left at all of them there.
    """
    if accounting:
        return ""
    key = _key(major) if known(major) else None
    return "openapi/slurmctld" if key is not None and key >= (23, 11) else ""


def client_rest_versions(major):
    """The versions both the collection's client and this major's slurmrestd speak, newest first."""
    return tuple(v for v in reversed(CLIENT_REST_VERSIONS) if v in rest_versions(major))


def problems(inputs):
    """What the inventory asks of a Slurm major that lacks it: ``"variable: what; the fix"`` strings.

    ``inputs``: ``major`` (of the host), ``host``, ``sackd`` (the host runs
    sackd: a login node of a configless cluster), ``rest_client`` (the
    host runs something that talks to slurmrestd through the collection's
    client: the copilot, the ACK operator), ``pam_slurm_adopt`` (wanted
    on this host) and ``pam_slurm_adopt_available`` (the package index
    knows libpam-slurm-adopt; None when unknown), ``controller_major``
    (the cluster's slurmctld, for every other host).
    """
    major = inputs.get("major")
    host = inputs.get("host", "this host")
    found = []
    entry = known(major) if major else None
    if major and entry is None:
        found.append(
            "slurm_version: %s runs Slurm %s, older than any this collection knows (oldest %s); "
            "install Slurm %s or newer" % (host, major, min(MAJORS, key=_key), min(MAJORS, key=_key))
        )
        return found
    if entry is None:
        return found
    if inputs.get("sackd") and not entry["sackd"]:
        found.append(
            "slurm_configless: %s is a login node of a configless cluster, which runs sackd, and sackd "
            "came with Slurm 23.11 (this host has %s); set slurm_configless: false for this cluster "
            "(login nodes then keep their own slurm.conf) or install Slurm 23.11 or newer" % (host, major)
        )
    if inputs.get("rest_client") and not client_rest_versions(major):
        found.append(
            "copilot_kubeconfig/ack_operator_kubeconfig: the copilot and the ACK operator talk to slurmrestd "
            "with data_parser %s-%s, and Slurm %s on %s serves %s; leave them unset for this cluster or "
            "install Slurm 23.11 or newer"
            % (CLIENT_REST_VERSIONS[0], CLIENT_REST_VERSIONS[-1], major, host, ", ".join(rest_versions(major)))
        )
    if inputs.get("pam_slurm_adopt") and inputs.get("pam_slurm_adopt_available") is False:
        found.append(
            "slurm_pam_slurm_adopt: %s has no libpam-slurm-adopt package in its sources (Slurm %s); "
            "add a source that ships it or set slurm_pam_slurm_adopt: false" % (host, major)
        )
    ctl = inputs.get("controller_major")
    if ctl and _key(major) > _key(ctl):
        found.append(
            "slurm_version: %s runs Slurm %s, newer than its cluster's slurmctld (%s); slurmctld must run "
            "the newest major of its cluster: upgrade the controllers first (playbooks/rolling_upgrade.yml)"
            % (host, major, ctl)
        )
    return found


def ctld_parameters_defunct(major):
    """SlurmctldParameters values ``major`` rejects as defunct (none for an unknown or empty major)."""
    return tuple(MAJORS.get(str(major or ""), {}).get("ctld_parameters_defunct", ()))
