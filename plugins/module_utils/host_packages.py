# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which distro packages a host needs, from its groups: one transaction per host.

One package transaction per host instead of one per role saves a round trip
and a package-manager start (about a second each) for every role on every run.
The names live here only: the roles take theirs from the same table
(filter slurm_packages), so the transaction and the roles cannot disagree.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hybridhpc.slurm.plugins.module_utils import elastic
from ansible_collections.hybridhpc.slurm.plugins.module_utils.cluster_plan import truthy

# Component -> package names, per OS family (Ubuntu uses Debian's names).
PACKAGES = {
    "Debian": {
        "munge": ["munge"],
        "client": ["slurm-client"],
        "slurmctld": ["slurmctld"],
        "slurmd": ["slurmd"],
        "slurmdbd": ["slurmdbd"],
        "mariadb": ["mariadb-server", "python3-pymysql"],
        "slurmrestd": ["slurmrestd"],
        "jwt": ["slurm-wlm-jwt-plugin"],
        "sackd": ["sackd"],
        "pam_slurm_adopt": ["libpam-slurm-adopt"],
        # The runtime and the image build tools (the apptainer role's; its
        # user packages come from apptainer_user_packages).
        "apptainer": ["apptainer", "squashfs-tools"],
    },
    "RedHat": {
        "munge": ["munge"],
        "client": ["slurm"],
        "slurmctld": ["slurm-slurmctld"],
        "slurmd": ["slurm-slurmd"],
        "slurmdbd": ["slurm-slurmdbd"],
        "mariadb": ["mariadb-server", "python3-PyMySQL"],
        "slurmrestd": ["slurm-slurmrestd"],
        # EPEL/OpenHPC build auth/jwt into the main package.
        "jwt": [],
        "sackd": ["slurm-sackd"],
        # Slurm's own RPM (slurm.spec) packages the module as slurm-pam_slurm.
        "pam_slurm_adopt": ["slurm-pam_slurm"],
        "apptainer": ["apptainer", "squashfs-tools"],
    },
}

# The inventory variable that replaces a component's list (the roles' *_packages).
OVERRIDES = {
    "munge": "munge_packages",
    "client": "slurm_common_packages",
    "slurmctld": "slurmctld_packages",
    "slurmd": "slurmd_packages",
    "slurmdbd": "slurmdbd_packages",
    "mariadb": "slurmdbd_mariadb_packages",
    "slurmrestd": "slurmrestd_packages",
    "jwt": "slurmrestd_jwt_packages",
    "sackd": "slurm_login_sackd_packages",
    "pam_slurm_adopt": "pam_slurm_adopt_packages",
    "apptainer": None,
}

# The apptainer role's defaults (roles/apptainer/defaults/main.yml; a test
# keeps them equal): slurm_common reads the inventory, where another role's
# defaults are not.
APPTAINER_DEFAULTS = {
    "apptainer_install_method": "package",
    "apptainer_debian_releases_without_package": ["bullseye", "bookworm", "trixie"],
    "apptainer_debian_fallback_suite": "sid",
    "apptainer_debian_mirror": "http://deb.debian.org/debian",
    "apptainer_user_packages": ["squashfuse", "fuse3", "fuse2fs"],
}

LOCAL_DATABASE = ("localhost", "127.0.0.1")


def family(facts):
    """The table's OS family for these facts (Debian, RedHat); ValueError if none."""
    for name in (facts.get("distribution"), facts.get("os_family")):
        if name in PACKAGES:
            return name
    if facts.get("distribution") == "Ubuntu":
        return "Debian"
    raise ValueError(
        "no package names for %s (os_family %s): set the *_packages variables of the roles"
        % (facts.get("distribution"), facts.get("os_family"))
    )


def packages(component, facts, override=None):
    """One component's package names: the inventory's override, else the table's."""
    if override:
        return list(override)
    return list(PACKAGES[family(facts)][component])


def host_components(host, groups, host_vars, jwt, facts=None, auth=None):
    """The components a host runs, from its groups (MUNGE and the client tools on every host).

    `auth` is the cluster's authentication plan (module_utils/auth_plan.py):
    where it needs sackd (auth_sackd), the package comes with the rest.

    `jwt` is whether the host's cluster uses auth/jwt: the plugin goes where
    tokens are made or checked (slurmctld, slurmdbd, slurmrestd hosts).
    `host_vars` gives slurmdbd_manage_mariadb / slurmdbd_storage_host when the
    inventory sets them (the slurmdbd role's defaults: MariaDB is managed when
    the database is local).
    """
    def member(group):
        return host in (groups.get(group) or [])

    # MUNGE too: auth/munge is how every Slurm host here authenticates (site.yml
    # creates the munge account first, then the munge role installs the key).
    components = ["munge", "client"]
    for daemon in ("slurmctld", "slurmdbd", "slurmd", "slurmrestd"):
        if member(daemon):
            components.append(daemon)
    if member("slurmdbd"):
        manage = host_vars.get("slurmdbd_manage_mariadb")
        if manage is None:
            manage = host_vars.get("slurmdbd_storage_host", "localhost") in LOCAL_DATABASE
        if truthy(manage):
            components.append("mariadb")
    if jwt and (member("slurmctld") or member("slurmdbd") or member("slurmrestd")):
        components.append("jwt")
    if login_sackd(host, groups, host_vars) or auth_sackd(host, groups, auth):
        components.append("sackd")
    if pam_slurm_adopt(host, groups, host_vars):
        components.append("pam_slurm_adopt")
    if facts is not None and apptainer_in_transaction(host, groups, host_vars, facts):
        components.append("apptainer")
    return components


def units_enabled_with_munge(host, groups):
    """The units munge's step enables beside munge, each ``{"name", "state": "enabled"}``: slurmd on a compute node.

    Each ``systemctl enable`` reloads systemd's units (about 0.1 s of a node's CPU), and a node whose image has
    munge and slurmd disabled paid two on its first run, one in munge's step and one in slurmd's. In one
    ``systemctl enable`` (module_utils/systemd_unit.step_commands) it pays one. slurmd's package is in place by
    then (this host's one transaction, before munge's step), and enabled is what Debian's package leaves it at
    install; the slurmd role's step starts it once its configuration is in place, and enables it itself when
    this did not (a unit not installed yet is left to it). Controllers keep their own enables: one per cluster,
    not one per node.
    """
    return [{"name": "slurmd", "state": "enabled"}] if host in (groups.get("slurmd") or []) else []


def apptainer_in_transaction(host, groups, host_vars, facts):
    """Whether the host's one transaction installs Apptainer too.

    Where site.yml runs the apptainer role (compute nodes, unless
    apptainer_enabled is off) with the package method, on Debian: Apptainer
    and the Slurm packages then share one index refresh, one package-manager
    start and one dpkg run, which on a new compute node was most of its
    install time. Its fallback suite's source comes first (host_apt_sources).
    Ubuntu adds a PPA and EL enables EPEL before the install: the role still
    installs there itself.
    """
    if host not in (groups.get("slurmd") or []):
        return False
    if not truthy(host_vars.get("apptainer_enabled", True)):
        return False
    method = host_vars.get("apptainer_install_method", APPTAINER_DEFAULTS["apptainer_install_method"])
    return method == "package" and facts.get("distribution") == "Debian"


def apptainer_fallback_files(facts, method, releases_without, suite, mirror):
    """The apt source and pin that take Apptainer alone from the fallback suite ([] where the release has it).

    Both the apptainer role and slurm_common's transaction write these, so
    their content has one author. The source downloads no translated
    descriptions (Languages: none): on a new host that is a second index of
    the size of the suite's package list, fetched and parsed for nothing.
    """
    if method != "package" or facts.get("distribution") != "Debian" \
            or facts.get("distribution_release") not in (releases_without or []):
        return []
    header = "# Ansible managed (hybridhpc.slurm): Apptainer from %s, nothing else.\n" % suite
    source = (header
              + "Types: deb\n"
              + "URIs: %s\n" % mirror
              + "Suites: %s\n" % suite
              + "Components: main\n"
              + "Languages: none\n"
              + "Check-Valid-Until: no\n"
              + "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
    pin = (header
           + "Package: *\n"
           + "Pin: release n=%s\n" % suite
           + "Pin-Priority: 100\n"
           + "\n"
           + "Package: apptainer\n"
           + "Pin: release n=%s\n" % suite
           + "Pin-Priority: 990\n")
    return [{"dest": "/etc/apt/sources.list.d/hybridhpc-apptainer-%s.sources" % suite, "content": source},
            {"dest": "/etc/apt/preferences.d/hybridhpc-apptainer", "content": pin}]


def host_apt_sources(host, groups, host_vars, facts):
    """The apt sources and pins the host's transaction needs in place first (Apptainer's fallback suite)."""
    if not apptainer_in_transaction(host, groups, host_vars, facts):
        return []

    def setting(name):
        return host_vars.get(name, APPTAINER_DEFAULTS[name])

    # apptainer_in_transaction() took only the package method.
    return apptainer_fallback_files(facts, "package", setting("apptainer_debian_releases_without_package"),
                                    setting("apptainer_debian_fallback_suite"), setting("apptainer_debian_mirror"))


def pam_slurm_adopt(host, groups, host_vars):
    """Whether a host gets pam_slurm_adopt: a compute node, no login node, with the switch on.

    The switch is the host's pam_slurm_adopt_enabled when the inventory sets
    it, else its cluster's slurm_pam_slurm_adopt (the role's default). The
    package only ships the PAM module: the pam_slurm_adopt role still decides
    when sshd's stack uses it. A host the role would refuse (a login node)
    gets nothing here, so the role's own check fails before any install.
    """
    if host not in (groups.get("slurmd") or []) or host in (groups.get("login") or []):
        return False
    switch = host_vars.get("pam_slurm_adopt_enabled")
    if switch is None:
        switch = host_vars.get("slurm_pam_slurm_adopt", False)
    return truthy(switch)


def login_sackd(host, groups, host_vars):
    """Whether a login host runs sackd: its cluster is configless and it runs no daemon of its own.

    sackd fetches slurm.conf from slurmctld (--conf-server) for the client
    commands, as slurmd does on configless compute nodes; a login host that
    is also a controller, slurmdbd or REST host keeps a local copy instead.
    """
    if host not in (groups.get("login") or []):
        return False
    if any(host in (groups.get(g) or []) for g in ("slurmctld", "slurmd", "slurmdbd", "slurmrestd")):
        return False
    return elastic.configless(host_vars.get("slurm_configless"), host_vars.get("slurm_elastic_nodesets") or [])


def auth_sackd(host, groups, auth):
    """Where the cluster's authentication needs sackd: "login", "compute" or None.

    With auth/slurm, the client commands of a host that runs no Slurm daemon
    (a login node) get their credentials from sackd's socket, as slurmd,
    slurmctld and slurmdbd serve them on their hosts. While a cluster moves
    back from auth/slurm to MUNGE, the jobs that started under auth/slurm keep
    asking for credentials on their node's socket, which slurmd no longer
    serves once it speaks MUNGE: sackd serves it on compute nodes until those
    jobs end (auth_plan.plan's ``accept``).
    """
    auth = auth or {}
    uses = auth.get("uses") or []
    if "slurm" not in uses:
        return None
    if host in (groups.get("slurmd") or []):
        return "compute" if auth.get("type") == "munge" else None
    if host not in (groups.get("login") or []):
        return None
    if any(host in (groups.get(g) or []) for g in ("slurmctld", "slurmdbd", "slurmrestd")):
        return None
    return "login" if auth.get("type") == "slurm" else None


def host_packages(components, facts, host_vars):
    """The sorted, de-duplicated package names of these components (inventory overrides applied)."""
    names = set()
    for component in components:
        override = OVERRIDES[component]
        names.update(packages(component, facts, host_vars.get(override) if override else None))
    if "apptainer" in components:
        names.update(host_vars.get("apptainer_user_packages", APPTAINER_DEFAULTS["apptainer_user_packages"]) or [])
    return sorted(names)


def covered(wanted, installed):
    """True when every wanted package is in the host's transaction (the role's own install is then skipped)."""
    return bool(installed) and set(wanted) <= set(installed)


# dpkg-query's format for missing(): "<want><status><error> <name>", "ii" when installed.
DPKG_QUERY_FORMAT = "${db:Status-Abbrev} ${Package}\n"


def missing(dpkg_query_output, wanted):
    """The wanted packages dpkg does not list as installed ("ii"), in the order wanted.

    ``dpkg_query_output``: ``dpkg-query -W -f DPKG_QUERY_FORMAT <wanted...>``
    (a name dpkg never heard of is absent from it). A name apt resolves
    itself (a version ``name=1.2``, a pattern, an architecture other than the
    host's) counts as missing, so apt still decides about it. On a no-op run
    nothing is missing and the apt module, which opens the whole package cache
    (a second or more of CPU a host), is not run at all.
    """
    installed = set()
    for line in (dpkg_query_output or "").splitlines():
        words = line.split()
        if len(words) == 2 and words[0] == "ii":
            installed.add(words[1])
    return [name for name in wanted or [] if name not in installed]


def newly_installed(result, candidates):
    """Which candidate packages the install `result` (apt or dnf/yum) installed now.

    The daemon roles use it to tell a first start (the daemon starts with the
    new configuration: no restart, no reconfigure) from a change to a running
    daemon. apt reports "Setting up <name>:<arch> (<version>)" lines, or "Inst
    <name>" in check mode; dnf reports "Installed: <name>-<version>".
    """
    if not result or not result.get("changed"):
        return []
    names = set()
    for line in (result.get("stdout") or "").splitlines():
        words = line.split()
        if len(words) >= 2 and (words[0:2] == ["Setting", "up"] or words[0] == "Inst"):
            word = words[2] if words[0] == "Setting" and len(words) > 2 else words[1]
            names.add(word.split(":", 1)[0])
    found = [c for c in candidates if c in names]
    for entry in result.get("results") or []:
        if not isinstance(entry, str):
            continue
        for prefix in ("Installed: ", "Installed "):
            if entry.startswith(prefix):
                # name-[epoch:]version-release.arch
                name = entry[len(prefix):].strip().rsplit("-", 2)[0]
                if name in candidates and name not in found:
                    found.append(name)
    return sorted(set(found))


def fresh(wanted, own_result, fresh_list):
    """True when a role's packages were installed in this run, by its own task or by the host's transaction.

    A daemon installed now starts with the new configuration: its role
    neither restarts nor reconfigures it (and in check mode it is not there to start).
    """
    if (own_result or {}).get("changed"):
        return True
    return any(name in (fresh_list or []) for name in wanted)
