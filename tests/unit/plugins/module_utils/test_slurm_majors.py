# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm majors as data: which major a host runs, what it serves, what it lacks."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import slurm_majors as sm

# `apt-cache policy slurm-client libpam-slurm-adopt` as the lab's hosts print it.
POLICY_BOOKWORM_INSTALLED = """slurm-client:
  Installed: 22.05.8-4+deb12u3
  Candidate: 22.05.8-4+deb12u3
  Version table:
 *** 22.05.8-4+deb12u3 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
        500 http://deb.debian.org/debian-security bookworm-security/main amd64 Packages
        100 /var/lib/dpkg/status
libpam-slurm-adopt:
  Installed: (none)
  Candidate: 22.05.8-4+deb12u3
  Version table:
     22.05.8-4+deb12u3 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
        500 http://deb.debian.org/debian-security bookworm-security/main amd64 Packages
"""
POLICY_NEW_SID = """slurm-client:
  Installed: (none)
  Candidate: 26.05.5-1
  Version table:
     26.05.5-1 500
        500 http://deb.debian.org/debian sid/main amd64 Packages
"""
POLICY_UPGRADABLE = """slurm-client:
  Installed: 24.11.5-1
  Candidate: 26.05.5-1
"""
# A fresh lab image ships no package index: apt-cache prints nothing.
POLICY_NO_INDEX = ""


@pytest.mark.parametrize(
    ("version", "major"),
    [
        ("22.05.8-4+deb12u3", "22.05"),
        ("24.11.5-1", "24.11"),
        ("26.05.5-1", "26.05"),
        ("1:23.11.4-1", "23.11"),
        ("24.11", "24.11"),
        ("25.05~rc1-1", "25.05"),
        ("", None),
        (None, None),
        ("(none)", None),
        ("24", None),
        ("24.1", None),
    ],
)
def test_major_of(version, major):
    assert sm.major_of(version) == major


def test_apt_policy():
    assert sm.apt_policy(POLICY_BOOKWORM_INSTALLED) == {
        "slurm-client": {"installed": "22.05.8-4+deb12u3", "candidate": "22.05.8-4+deb12u3"},
        "libpam-slurm-adopt": {"installed": None, "candidate": "22.05.8-4+deb12u3"},
    }
    assert sm.apt_policy(POLICY_NEW_SID) == {"slurm-client": {"installed": None, "candidate": "26.05.5-1"}}
    assert sm.apt_policy(POLICY_NO_INDEX) == {}
    assert sm.apt_policy(None) == {}


def test_package_available():
    assert sm.package_available(POLICY_BOOKWORM_INSTALLED, "libpam-slurm-adopt") is True
    # The index is loaded (Slurm has a candidate) and does not know it.
    assert sm.package_available(POLICY_NEW_SID, "libpam-slurm-adopt") is False
    # No index: nobody knows yet.
    assert sm.package_available(POLICY_NO_INDEX, "libpam-slurm-adopt") is None
    # Installed (dpkg says so, apt-cache not read): available.
    assert sm.package_available("", "libpam-slurm-adopt", installed={"libpam-slurm-adopt": "24.11.5-4"}) is True
    assert sm.package_available("", "libpam-slurm-adopt", installed={"slurm-client": "24.11.5-4"}) is None


@pytest.mark.parametrize(
    ("kwargs", "major", "source"),
    [
        ({"slurm_version": "23.11.10"}, "23.11", "slurm_version"),
        ({"slurm_version": "23.11", "apt_policy_text": POLICY_BOOKWORM_INSTALLED}, "23.11", "slurm_version"),
        ({"apt_policy_text": POLICY_BOOKWORM_INSTALLED, "release": "bookworm"}, "22.05", "installed"),
        # What runs wins over what the index offers: site.yml installs, it does not upgrade.
        ({"apt_policy_text": POLICY_UPGRADABLE, "release": "forky"}, "24.11", "installed"),
        ({"apt_policy_text": POLICY_NEW_SID, "release": "trixie"}, "26.05", "candidate"),
        # A fresh image ships no package index: the release's own major.
        ({"apt_policy_text": POLICY_NO_INDEX, "release": "bookworm"}, "22.05", "debian release bookworm"),
        ({"apt_policy_text": None, "release": "forky"}, "26.05", "debian release forky"),
        ({"release": "rocky9"}, sm.REFERENCE_MAJOR, "default"),
        ({}, "24.11", "default"),
        # Installed as dpkg says, without apt-cache: what runs, whatever the release.
        ({"installed": {"slurm-client": "22.05.8-4+deb12u3"}, "release": "trixie"}, "22.05", "installed"),
        ({"installed": {"slurm-client": "24.11.5-4"}, "apt_policy_text": POLICY_NEW_SID}, "24.11", "installed"),
        ({"installed": {"libpam-slurm-adopt": "24.11.5-4"}, "apt_policy_text": POLICY_NEW_SID}, "26.05", "candidate"),
    ],
)
def test_host_major(kwargs, major, source):
    found = sm.host_major(**kwargs)
    assert (found["major"], found["source"]) == (major, source)


def test_host_major_refuses_a_bad_slurm_version():
    with pytest.raises(ValueError, match="slurm_version: 'latest' is not a Slurm version; set it like 24.11"):
        sm.host_major(slurm_version="latest")


@pytest.mark.parametrize(
    ("major", "versions"),
    [
        # Listed by each lab's slurmrestd in GET /openapi/v3.
        ("22.05", ("v0.0.36", "v0.0.37", "v0.0.38")),
        ("24.11", ("v0.0.40", "v0.0.41", "v0.0.42")),
        ("26.05", ("v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")),
        # A major between two of the table's takes the older one's entry.
        ("24.08", ("v0.0.39", "v0.0.40", "v0.0.41")),
        ("21.08", ()),
    ],
)
def test_rest_versions(major, versions):
    assert sm.rest_versions(major) == versions


def test_client_versions_newest_first():
    assert sm.client_rest_versions("24.11") == ("v0.0.42", "v0.0.41", "v0.0.40")
    assert sm.client_rest_versions("22.05") == ()
    assert sm.client_rest_versions("26.05")[0] == sm.CLIENT_REST_VERSIONS[-1]


def test_table_is_ordered_and_complete():
    for major, entry in sm.MAJORS.items():
        assert sm.major_of(major) == major
        assert {"rest_versions", "sackd", "mariadb_settings"} <= set(entry) <= {
            "rest_versions", "sackd", "mariadb_settings", "ctld_parameters_defunct"}
        assert list(entry["rest_versions"]) == sorted(entry["rest_versions"])
    assert sm.REFERENCE_MAJOR in sm.MAJORS
    assert set(sm.DEBIAN_RELEASE_MAJOR.values()) <= set(sm.MAJORS)


def test_no_problems_for_the_reference_major():
    assert sm.problems({"major": "24.11", "host": "h", "sackd": True, "rest_client": True,
                        "pam_slurm_adopt": True, "pam_slurm_adopt_available": True,
                        "controller_major": "24.11"}) == []


def test_sackd_before_23_11():
    found = sm.problems({"major": "22.05", "host": "login1", "sackd": True})
    assert len(found) == 1
    assert found[0].startswith("slurm_configless: login1 is a login node of a configless cluster")
    assert "sackd came with Slurm 23.11 (this host has 22.05)" in found[0]
    assert "set slurm_configless: false" in found[0]
    assert sm.problems({"major": "23.11", "host": "login1", "sackd": True}) == []


def test_rest_client_on_22_05():
    found = sm.problems({"major": "22.05", "host": "ctl1", "rest_client": True})
    assert len(found) == 1
    assert "serves v0.0.36, v0.0.37, v0.0.38" in found[0]
    assert found[0].startswith("copilot_kubeconfig/ack_operator_kubeconfig:")
    assert sm.problems({"major": "22.05", "host": "ctl1", "rest_client": False}) == []
    assert sm.problems({"major": "26.05", "host": "ctl1", "rest_client": True}) == []


def test_pam_slurm_adopt_needs_its_package():
    found = sm.problems({"major": "24.11", "host": "c1", "pam_slurm_adopt": True, "pam_slurm_adopt_available": False})
    assert found == ["slurm_pam_slurm_adopt: c1 has no libpam-slurm-adopt package in its sources (Slurm 24.11); "
                     "add a source that ships it or set slurm_pam_slurm_adopt: false"]
    # Unknown (no package index yet): not refused here; the install says so.
    assert sm.problems({"major": "24.11", "pam_slurm_adopt": True, "pam_slurm_adopt_available": None}) == []


def test_node_newer_than_its_controller():
    found = sm.problems({"major": "26.05", "host": "c1", "controller_major": "24.11"})
    assert len(found) == 1
    assert "newer than its cluster's slurmctld (24.11)" in found[0]
    assert sm.problems({"major": "24.11", "host": "c1", "controller_major": "26.05"}) == []


def test_older_than_the_table():
    found = sm.problems({"major": "21.08", "host": "old1", "sackd": True})
    assert found == ["slurm_version: old1 runs Slurm 21.08, older than any this collection knows (oldest 22.05); "
                     "install Slurm 22.05 or newer"]


def test_major_facts():
    facts = sm.major_facts(apt_policy_text=POLICY_BOOKWORM_INSTALLED, release="bookworm")
    assert facts == {
        "major": "22.05", "source": "installed", "version": "22.05.8-4+deb12u3",
        "rest_versions": ["v0.0.36", "v0.0.37", "v0.0.38"], "client_rest_versions": [],
        "sackd": False, "mariadb_settings": {}, "pam_slurm_adopt_available": True,
    }
    sid = sm.major_facts(apt_policy_text=POLICY_NEW_SID, release="forky")
    assert sid["client_rest_versions"] == ["v0.0.45", "v0.0.44", "v0.0.43", "v0.0.42"]
    assert sid["mariadb_settings"] == {"loose-innodb_snapshot_isolation": "OFF"}
    # The default (trixie, 24.11) asks MariaDB for nothing more than the role's settings.
    assert sm.major_facts(release="trixie")["mariadb_settings"] == {}
    # From dpkg's versions alone: the same answer as apt-cache's "Installed:" lines gave.
    assert sm.major_facts(apt_policy_text="", release="bookworm",
                          installed={"slurm-client": "22.05.8-4+deb12u3", "libpam-slurm-adopt": "22.05.8-4+deb12u3"}) == facts


def test_the_client_speaks_what_the_table_says():
    assert sm.CLIENT_REST_VERSIONS == ("v0.0.40", "v0.0.41", "v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45")


def test_client_versions_are_the_clients_own():
    from ansible_collections.hybridhpc.slurm.plugins.module_utils import slurmrestd

    assert sm.CLIENT_REST_VERSIONS == tuple(reversed(slurmrestd.DEFAULT_VERSIONS))


def test_slurmrestd_without_accounting_loads_the_slurmctld_plugin_only():
    from ansible_collections.hybridhpc.slurm.plugins.module_utils import slurm_majors as sm

    assert sm.rest_openapi_plugins("24.11", accounting=False) == "openapi/slurmctld"
    assert sm.rest_openapi_plugins("26.05", accounting=False) == "openapi/slurmctld"
    assert sm.rest_openapi_plugins("24.11", accounting=True) == ""
    assert sm.rest_openapi_plugins("22.05", accounting=False) == ""  # per-version plugin names there


def test_slurmctld_serves_its_own_metrics_from_25_11():
    from ansible_collections.hybridhpc.slurm.plugins.module_utils import slurm_majors as sm

    assert [sm.serves_openmetrics(m) for m in ("24.11", "25.05", "25.11", "26.05", None, "x")] == [False, False, True, True, False, False]
