# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_host_facts: setup's facts, apt-cache policy and a file, read in one module run.

Runs the module in-process on this machine (read-only), next to Ansible's own
setup module with the same subset: the first play's checks and the node
records must see the same facts as before.
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import base64
import shutil
import subprocess

import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.modules import setup

from ansible_collections.hybridhpc.slurm.plugins.module_utils import host_packages, slurm_majors
from ansible_collections.hybridhpc.slurm.plugins.modules import slurm_host_facts

SUBSET = ["min", "hardware", "virtual", "network"]


@pytest.fixture
def run(module_main):
    return module_main


def test_the_facts_are_setups_for_the_same_subset(run):
    ours = run(slurm_host_facts.main, {"gather_subset": SUBSET})
    theirs = run(setup.main, {"gather_subset": SUBSET})
    assert not ours["changed"]
    # Per-interface facts come and go with the machine's interfaces (containers start and stop here).
    interfaces = set(ours["ansible_facts"]["ansible_interfaces"]) | set(theirs["ansible_facts"]["ansible_interfaces"])
    per_interface = {"ansible_interfaces"} | {"ansible_" + name.replace("-", "_").replace(".", "_") for name in interfaces}
    assert set(ours["ansible_facts"]) - per_interface == set(theirs["ansible_facts"]) - per_interface
    for key in ("ansible_distribution", "ansible_distribution_release", "ansible_os_family", "ansible_pkg_mgr",
                "ansible_processor_vcpus", "ansible_memtotal_mb", "ansible_default_ipv4", "ansible_hostname"):
        assert ours["ansible_facts"].get(key) == theirs["ansible_facts"].get(key), key


def test_a_filter_keeps_only_the_facts_it_names_as_setups_filter_does(run):
    patterns = ["distribution*", "ansible_os_family", "processor_vcpus", "local"]
    ours = run(slurm_host_facts.main, {"gather_subset": SUBSET, "filter": patterns})["ansible_facts"]
    theirs = run(setup.main, {"gather_subset": SUBSET, "filter": patterns})["ansible_facts"]
    assert set(ours) == set(theirs)
    assert {"ansible_distribution", "ansible_distribution_release", "ansible_os_family", "ansible_processor_vcpus",
            "ansible_local"} <= set(ours)
    assert "ansible_devices" not in ours and "ansible_mounts" not in ours and "ansible_pkg_mgr" not in ours
    unfiltered = run(slurm_host_facts.main, {"gather_subset": SUBSET})["ansible_facts"]
    assert {key: unfiltered[key] for key in ours if key != "ansible_local"} == {k: v for k, v in ours.items() if k != "ansible_local"}


def test_mounts_are_read_only_when_the_filter_keeps_them(run, monkeypatch):
    from ansible.module_utils.facts.hardware import linux
    calls = []

    def mounts(self):
        calls.append(1)
        return {"mounts": [{"mount": "/"}]}
    monkeypatch.setattr(linux.LinuxHardware, "get_mount_facts", mounts)
    facts = run(slurm_host_facts.main, {"gather_subset": SUBSET, "filter": ["processor_*", "memtotal_mb"]})
    assert calls == [] and facts["ansible_facts"]["ansible_memtotal_mb"] > 0
    assert linux.LinuxHardware.get_mount_facts is mounts  # put back after the run
    for kept in (["ansible_mounts"], ["m*"], []):
        facts = run(slurm_host_facts.main, {"gather_subset": SUBSET, "filter": kept})
        assert facts["ansible_facts"]["ansible_mounts"] == [{"mount": "/"}], kept
    assert len(calls) == 3


def test_a_file_is_read_as_slurp_reads_it_and_a_missing_one_is_said(run, tmp_path):
    conf = tmp_path / "slurm.conf"
    conf.write_bytes(b"ClusterName=a\n\xff")
    found = run(slurm_host_facts.main, {"gather_subset": ["min"], "file": str(conf)})
    assert found["file"] == {"exists": True, "content": base64.b64encode(b"ClusterName=a\n\xff").decode()}
    missing = run(slurm_host_facts.main, {"gather_subset": ["min"], "file": str(tmp_path / "none")})
    assert missing["file"] == {"exists": False, "content": ""}
    assert "file" not in run(slurm_host_facts.main, {"gather_subset": ["min"]})


@pytest.fixture(name="commands")
def fixture_commands(monkeypatch):
    """Every command the module runs."""
    seen = []
    original = AnsibleModule.run_command

    def recorded(module, args, *rest, **kwargs):
        seen.append(list(args))
        return original(module, args, *rest, **kwargs)

    monkeypatch.setattr(AnsibleModule, "run_command", recorded)
    return seen


@pytest.mark.skipif(shutil.which("apt-cache") is None, reason="apt-cache policy needs an apt host")
def test_apt_cache_policy_is_read_only_when_a_package_asked_is_not_installed(run, commands):
    asked = run(slurm_host_facts.main, {"gather_subset": ["min"], "apt_policy": ["dpkg", "no-such-package-here"]})
    assert asked["apt_policy"].startswith("dpkg:") and "Installed:" in asked["apt_policy"]
    assert list(asked["installed_versions"]) == ["dpkg"]
    assert [args[0] for args in commands if args[0] in ("apt-cache", "dpkg-query")] == ["dpkg-query", "apt-cache"]
    del commands[:]
    nothing = run(slurm_host_facts.main, {"gather_subset": ["min"]})
    assert nothing["apt_policy"] == "" and nothing["installed_versions"] == {}
    assert not [args for args in commands if args[0] in ("apt-cache", "dpkg-query")]


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="dpkg-query needs an apt host")
def test_packages_all_installed_give_their_versions_without_apt_cache(run, commands):
    asked = run(slurm_host_facts.main, {"gather_subset": ["min"], "apt_policy": ["dpkg", "coreutils"]})
    assert asked["apt_policy"] == ""
    assert not [args for args in commands if args[0] == "apt-cache"]
    for package in ("dpkg", "coreutils"):
        version = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package], capture_output=True, text=True,
                                 check=True).stdout
        assert asked["installed_versions"][package] == version
    # What the roles make of it: the installed version decides, as apt-cache's "Installed:" line did.
    policy = run(slurm_host_facts.main, {"gather_subset": ["min"], "apt_policy": ["dpkg", "no-such-package-here"]})
    assert slurm_majors.apt_policy(policy["apt_policy"])["dpkg"]["installed"] == asked["installed_versions"]["dpkg"]


def test_a_bad_subset_names_the_option(run):
    result = run(slurm_host_facts.main, {"gather_subset": ["no-such-subset"]})
    assert result.get("failed") and result["msg"].startswith("gather_subset:")


@pytest.mark.skipif(shutil.which("dpkg-query") is None, reason="dpkg-query needs an apt host")
def test_dpkg_lists_what_is_installed_in_the_format_the_roles_read(run):
    listed = run(slurm_host_facts.main, {"gather_subset": ["min"], "dpkg_installed": True})["dpkg_installed"]
    assert slurm_host_facts.DPKG_QUERY_FORMAT == host_packages.DPKG_QUERY_FORMAT
    assert host_packages.missing(listed, ["dpkg", "no-such-package-here"]) == ["no-such-package-here"]
    assert run(slurm_host_facts.main, {"gather_subset": ["min"]})["dpkg_installed"] == ""
