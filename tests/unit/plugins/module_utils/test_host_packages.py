# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One package transaction per host: which packages, and which ones a run installed."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pathlib

import pytest
import yaml

from ansible_collections.hybridhpc.slurm.plugins.filter.host_packages import (
    FilterModule,
    slurm_packages_newly_installed,
)
from ansible_collections.hybridhpc.slurm.plugins.module_utils.host_packages import (
    APPTAINER_DEFAULTS,
    apptainer_fallback_files,
    covered,
    fresh,
    host_apt_sources,
    host_components,
    host_packages,
    login_sackd,
    missing,
    newly_installed,
    packages,
    units_enabled_with_munge,
)

DEBIAN = {"distribution": "Debian", "os_family": "Debian"}
UBUNTU = {"distribution": "Ubuntu", "os_family": "Debian"}
ROCKY = {"distribution": "Rocky", "os_family": "RedHat"}
GROUPS = {
    "slurmctld": ["onprem-ctl1", "cloud-ctl1"],
    "slurmdbd": ["onprem-ctl1"],
    "slurmd": ["onprem-c1", "cloud-c1"],
    "slurmrestd": ["onprem-ctl1"],
}


def test_each_host_gets_the_packages_of_its_groups():
    assert host_packages(host_components("onprem-ctl1", GROUPS, {}, True), DEBIAN, {}) == [
        "mariadb-server", "munge", "python3-pymysql", "slurm-client", "slurm-wlm-jwt-plugin", "slurmctld", "slurmdbd", "slurmrestd",
    ]
    assert host_packages(host_components("onprem-c1", GROUPS, {}, True), DEBIAN, {}) == ["munge", "slurm-client", "slurmd"]
    assert host_packages(host_components("cloud-ctl1", GROUPS, {}, False), DEBIAN, {}) == ["munge", "slurm-client", "slurmctld"]


def test_munge_s_step_enables_slurmd_on_compute_nodes_only():
    assert units_enabled_with_munge("onprem-c1", GROUPS) == [{"name": "slurmd", "state": "enabled"}]
    # Controllers enable their daemons in their own steps (once per cluster).
    assert units_enabled_with_munge("onprem-ctl1", GROUPS) == []
    assert units_enabled_with_munge("login1", {}) == []
    assert FilterModule().filters()["slurm_units_enabled_with_munge"]("cloud-c1", GROUPS) == [
        {"name": "slurmd", "state": "enabled"}]


def test_the_jwt_plugin_goes_only_where_tokens_are_made_or_checked():
    assert "jwt" in host_components("cloud-ctl1", GROUPS, {}, True)
    assert "jwt" not in host_components("onprem-c1", GROUPS, {}, True)


def test_mariadb_only_with_a_local_database():
    assert "mariadb" not in host_components("onprem-ctl1", GROUPS, {"slurmdbd_storage_host": "db.example.org"}, False)
    assert "mariadb" in host_components("onprem-ctl1", GROUPS, {"slurmdbd_storage_host": "127.0.0.1"}, False)
    assert "mariadb" not in host_components("onprem-ctl1", GROUPS, {"slurmdbd_manage_mariadb": "false"}, False)
    assert "mariadb" in host_components("onprem-ctl1", GROUPS, {"slurmdbd_manage_mariadb": True,
                                                                "slurmdbd_storage_host": "db.example.org"}, False)


def test_inventory_overrides_replace_a_component_names():
    names = host_packages(host_components("onprem-c1", GROUPS, {}, False), DEBIAN, {"slurmd_packages": ["slurmd-custom"]})
    assert names == ["munge", "slurm-client", "slurmd-custom"]


def test_names_per_os_family():
    assert packages("slurmd", ROCKY) == ["slurm-slurmd"]
    assert packages("slurmd", UBUNTU) == ["slurmd"]
    assert packages("jwt", ROCKY) == []
    with pytest.raises(ValueError, match="set the \\*_packages variables"):
        packages("slurmd", {"distribution": "Archlinux", "os_family": "Archlinux"})


def test_a_role_skips_its_install_only_when_the_transaction_holds_all_of_it():
    assert covered(["slurmd"], ["slurm-client", "slurmd"])
    assert not covered(["slurmd", "extra"], ["slurm-client", "slurmd"])
    assert not covered(["slurmd"], [])


APT_STDOUT = """Reading package lists...
Setting up slurm-client (24.11.5-4) ...
Setting up slurmd:amd64 (24.11.5-4) ...
Setting up libmunge2:amd64 (0.5.16-1) ...
"""


def test_newly_installed_reads_apt_dnf_and_check_mode_output():
    wanted = ["slurm-client", "slurmd", "slurmctld"]
    assert newly_installed({"changed": True, "stdout": APT_STDOUT}, wanted) == ["slurm-client", "slurmd"]
    assert newly_installed({"changed": True, "stdout": "Inst slurmctld (24.11.5-4 Debian:13)\n"}, wanted) == ["slurmctld"]
    dnf = {"changed": True, "results": ["Installed: slurm-slurmd-24.11.5-1.el9.x86_64"]}
    assert newly_installed(dnf, ["slurm-slurmd", "slurm"]) == ["slurm-slurmd"]
    assert newly_installed({"changed": False, "stdout": APT_STDOUT}, wanted) == []


def test_the_filter_merges_results_and_ignores_skipped_ones():
    results = [{"changed": False, "skipped": True}, {"changed": True, "stdout": APT_STDOUT}]
    assert slurm_packages_newly_installed(results, ["slurmd"]) == ["slurmd"]
    assert slurm_packages_newly_installed({}, ["slurmd"]) == []
    assert set(FilterModule().filters()) == {
        "slurm_packages", "slurm_host_packages", "slurm_packages_covered", "slurm_packages_newly_installed",
        "slurm_packages_fresh", "slurm_login_sackd", "slurm_auth_sackd", "slurm_units_enabled_with_munge", "slurm_packages_missing",
        "slurm_host_apt_sources", "slurm_apptainer_fallback_files",
    }


def test_a_role_is_fresh_when_it_or_the_transaction_installed_its_packages_now():
    assert fresh(["slurmd"], {"changed": True}, [])
    assert fresh(["slurmd"], {"changed": False, "skipped": True}, ["munge", "slurmd"])
    assert not fresh(["slurmd"], {"changed": False, "skipped": True}, ["munge"])
    assert not fresh(["slurmd"], {}, None)


LOGIN_GROUPS = {"slurmctld": ["ctl"], "slurmd": ["c1"], "login": ["login1", "ctl"], "slurmdbd": ["dbd"]}
ELASTIC = [{"name": "dy", "nodes": "dy-[1-2]", "node": {"CPUs": 1, "RealMemory": 100}, "provider": "docker"}]


def test_login_hosts_of_configless_clusters_run_sackd():
    assert login_sackd("login1", LOGIN_GROUPS, {"slurm_configless": True})
    # configless by default with elastic node sets
    assert login_sackd("login1", LOGIN_GROUPS, {"slurm_elastic_nodesets": ELASTIC})
    assert "sackd" in host_components("login1", LOGIN_GROUPS, {"slurm_configless": True}, jwt=False)


def test_file_based_clusters_and_daemon_hosts_keep_slurm_conf():
    assert not login_sackd("login1", LOGIN_GROUPS, {})
    assert not login_sackd("login1", LOGIN_GROUPS, {"slurm_configless": False, "slurm_elastic_nodesets": []})
    # a controller that is also a login node keeps its own copy
    assert not login_sackd("ctl", LOGIN_GROUPS, {"slurm_configless": True})
    assert not login_sackd("c1", LOGIN_GROUPS, {"slurm_configless": True})
    assert "sackd" not in host_components("login1", LOGIN_GROUPS, {}, jwt=False)


def test_only_packages_dpkg_lists_as_installed_count_as_present():
    # dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' slurmd munge apptainer slurm-client=24.11.1-1 fuse3
    output = "ii  slurmd\nii  munge\nrc  apptainer\niU  fuse3\n"
    wanted = ["slurmd", "munge", "apptainer", "slurm-client=24.11.1-1", "fuse3", "never-heard-of"]
    assert missing(output, wanted) == ["apptainer", "slurm-client=24.11.1-1", "fuse3", "never-heard-of"]
    assert missing("ii  slurmd\nii  munge\n", ["slurmd", "munge"]) == []
    assert missing("", ["slurmd"]) == ["slurmd"] and missing(None, []) == []


def test_pam_slurm_adopt_joins_the_transaction_of_compute_nodes_with_the_switch_on():
    on = {"slurm_pam_slurm_adopt": True}
    assert host_packages(host_components("onprem-c1", GROUPS, on, False), DEBIAN, on) == [
        "libpam-slurm-adopt", "munge", "slurm-client", "slurmd"]
    assert "slurm-pam_slurm" in host_packages(host_components("onprem-c1", GROUPS, on, False), ROCKY, on)
    # the role's override names the package, as for every other component
    named = {"slurm_pam_slurm_adopt": True, "pam_slurm_adopt_packages": ["pam-adopt-site"]}
    assert "pam-adopt-site" in host_packages(host_components("onprem-c1", GROUPS, named, False), DEBIAN, named)
    # the host's own switch wins over its cluster's, both ways ("false" as a text too)
    host_off = {"slurm_pam_slurm_adopt": True, "pam_slurm_adopt_enabled": "false"}
    assert "pam_slurm_adopt" not in host_components("onprem-c1", GROUPS, host_off, False)
    assert "pam_slurm_adopt" in host_components("onprem-c1", GROUPS, {"pam_slurm_adopt_enabled": True}, False)


def test_pam_slurm_adopt_never_on_controllers_login_nodes_or_with_the_switch_off():
    on = {"slurm_pam_slurm_adopt": True}
    assert "pam_slurm_adopt" not in host_components("onprem-c1", GROUPS, {}, False)
    assert "pam_slurm_adopt" not in host_components("onprem-ctl1", GROUPS, on, False)
    # a compute node that is also a login node: the role refuses it, so nothing is installed
    assert "pam_slurm_adopt" not in host_components("c1", {"slurmd": ["c1"], "login": ["c1"]}, on, False)


APPTAINER_ROLE = pathlib.Path(__file__).resolve().parents[4] / "roles" / "apptainer"
TRIXIE = dict(DEBIAN, distribution_release="trixie")
APPTAINER_NAMES = ["apptainer", "squashfs-tools", "squashfuse", "fuse3", "fuse2fs"]


def compute_node_packages(host_vars):
    return host_packages(host_components("onprem-c1", GROUPS, host_vars, False, TRIXIE), TRIXIE, host_vars)


def test_apptainer_joins_the_transaction_of_debian_compute_nodes():
    assert compute_node_packages({}) == sorted(APPTAINER_NAMES + ["munge", "slurm-client", "slurmd"])
    # The inventory's user packages, as the role installs them.
    assert "fuse-overlayfs" in compute_node_packages({"apptainer_user_packages": ["fuse-overlayfs"]})
    assert "fuse3" not in compute_node_packages({"apptainer_user_packages": ["fuse-overlayfs"]})


@pytest.mark.parametrize("host_vars, facts, host", [
    ({"apptainer_enabled": False}, TRIXIE, "onprem-c1"),
    ({"apptainer_enabled": "no"}, TRIXIE, "onprem-c1"),
    ({"apptainer_install_method": "url"}, TRIXIE, "onprem-c1"),
    ({}, dict(UBUNTU, distribution_release="noble"), "onprem-c1"),  # the PPA comes first: the role installs
    ({}, ROCKY, "onprem-c1"),  # EPEL comes first: the role installs
    ({}, TRIXIE, "onprem-ctl1"),  # site.yml runs the role on compute nodes only
])
def test_apptainer_stays_with_its_role_elsewhere(host_vars, facts, host):
    assert "apptainer" not in host_components(host, GROUPS, host_vars, False, facts)
    assert host_apt_sources(host, GROUPS, host_vars, facts) == []


def test_without_facts_the_components_are_the_daemons_only():
    assert "apptainer" not in host_components("onprem-c1", GROUPS, {}, False)


def test_the_fallback_source_and_pin_come_before_the_transaction_on_releases_without_apptainer():
    files = host_apt_sources("onprem-c1", GROUPS, {}, TRIXIE)
    assert [f["dest"] for f in files] == ["/etc/apt/sources.list.d/hybridhpc-apptainer-sid.sources",
                                          "/etc/apt/preferences.d/hybridhpc-apptainer"]
    source, pin = (f["content"] for f in files)
    assert "Suites: sid\n" in source and "URIs: http://deb.debian.org/debian\n" in source
    # No translated descriptions: a second sid index, fetched and parsed for nothing.
    assert "Languages: none\n" in source
    # Everything from sid below the release; apptainer alone above it.
    assert "Package: *\nPin: release n=sid\nPin-Priority: 100\n" in pin
    assert "Package: apptainer\nPin: release n=sid\nPin-Priority: 990\n" in pin
    # A release that has apptainer needs no source; the inventory's suite and mirror are used.
    assert host_apt_sources("onprem-c1", GROUPS, {}, dict(DEBIAN, distribution_release="forky")) == []
    mirrored = host_apt_sources("onprem-c1", GROUPS, {"apptainer_debian_fallback_suite": "unstable",
                                                      "apptainer_debian_mirror": "http://mirror.example/debian"}, TRIXIE)
    assert mirrored[0]["dest"].endswith("hybridhpc-apptainer-unstable.sources")
    assert "URIs: http://mirror.example/debian\n" in mirrored[0]["content"]


def test_slurm_common_and_the_apptainer_role_write_the_same_files():
    """Both write the source and pin: with the role's defaults they must agree, or each run would flip them."""
    defaults = yaml.safe_load((APPTAINER_ROLE / "defaults" / "main.yml").read_text())
    for name, value in APPTAINER_DEFAULTS.items():
        assert defaults[name] == value, name
    role = apptainer_fallback_files(TRIXIE, defaults["apptainer_install_method"],
                                    defaults["apptainer_debian_releases_without_package"],
                                    defaults["apptainer_debian_fallback_suite"], defaults["apptainer_debian_mirror"])
    assert role == host_apt_sources("onprem-c1", GROUPS, {}, TRIXIE)


def test_the_transaction_installs_what_the_apptainer_role_would():
    """The role skips its install when the transaction covers its names: they must be the same names."""
    names = yaml.safe_load((APPTAINER_ROLE / "vars" / "main.yml").read_text())
    for facts in (DEBIAN, UBUNTU, ROCKY):
        assert names["__apptainer_packages"] + names["__apptainer_build_packages"] == packages("apptainer", facts)
