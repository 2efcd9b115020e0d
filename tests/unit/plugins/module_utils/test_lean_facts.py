# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""lean_facts: the roles' facts from only the collectors that make them, equal to setup's.

The gathering runs in a fresh interpreter (as a module does on a host), where
``ansible.module_utils.facts`` is not imported yet: that is the path whose
imports it saves, and the facts must still be setup's for the same filter.
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible.modules import setup
from module_args import SCRIPT_PRELUDE

import ansible_collections.hybridhpc
from ansible_collections.hybridhpc.slurm.plugins.module_utils import lean_facts

ROOT = Path(__file__).resolve().parents[4]
SUBSET = ["min", "hardware", "virtual", "network"]
EVERY_LEAN_FACT = sorted(lean_facts.FACT_COLLECTORS)

GATHER_IN_A_FRESH_PROCESS = SCRIPT_PRELUDE + r"""
import json, sys
module = basic.AnsibleModule(argument_spec={})
commands = []
run_command = module.run_command
def recording(args, *a, **k):
    commands.append([str(arg) for arg in args] if isinstance(args, list) else str(args).split())
    return run_command(args, *a, **k)
module.run_command = recording
from ansible_collections.hybridhpc.slurm.plugins.module_utils import lean_facts
filter_spec, subset = json.loads(sys.argv[1]), json.loads(sys.argv[2])
names = lean_facts.collectors_for(filter_spec, subset)
facts = lean_facts.gather(module, names, filter_spec, 10)
print(json.dumps({"names": names, "facts": facts, "commands": commands,
                  "imported": sorted(m for m in sys.modules if m.startswith("ansible.module_utils.facts"))}))
"""


def gather_fresh(filter_spec, subset=None):
    # The directory this test imported the collection from (ansible_collections/hybridhpc/slurm).
    collections_root = str(Path(list(ansible_collections.hybridhpc.__path__)[0]).parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [collections_root, os.environ.get("PYTHONPATH")])))
    res = subprocess.run([sys.executable, "-c", GATHER_IN_A_FRESH_PROCESS, json.dumps(filter_spec), json.dumps(subset or SUBSET)],
                         capture_output=True, text=True, check=False, cwd=ROOT, env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.parametrize("filter_spec", [
    EVERY_LEAN_FACT,
    ["ansible_processor_vcpus", "memtotal_mb"],
    ["pkg_mgr"],
    ["module_setup"],
])
def test_the_facts_are_setups_for_the_same_filter(module_main, filter_spec):
    ours = gather_fresh(filter_spec)
    theirs = module_main(setup.main, {"gather_subset": SUBSET, "filter": filter_spec})["ansible_facts"]
    assert ours["facts"] == theirs
    # Each fact asked is there (this machine has them all; module_setup keeps no prefix).
    assert len(theirs) == len(filter_spec)


def test_only_the_collectors_asked_are_imported():
    imported = gather_fresh(["processor_vcpus", "pkg_mgr"])["imported"]
    assert "ansible.module_utils.facts.default_collectors" not in imported
    assert "ansible.module_utils.facts.compat" not in imported
    assert not [m for m in imported if m.rsplit(".", 1)[-1] in ("aix", "sunos", "darwin", "freebsd", "hpux")]
    assert "ansible.module_utils.facts.hardware.linux" in imported


def test_the_roles_default_facts_take_the_lean_path():
    """A fact added to slurm_common_host_facts that lean_facts does not know would quietly cost every host the whole collector set."""
    defaults = yaml.safe_load((ROOT / "roles" / "slurm_common" / "defaults" / "main.yml").read_text())
    assert lean_facts.collectors_for(defaults["slurm_common_host_facts"], SUBSET) == [
        "distribution", "hardware", "local", "network", "pkg_mgr", "platform", "service_mgr", "virtual"]


@pytest.mark.parametrize(("filter_spec", "subset", "names"), [
    (["ansible_pkg_mgr"], SUBSET, ["distribution", "pkg_mgr", "platform"]),
    (["module_setup"], SUBSET, ["distribution", "platform"]),
    (["processor_vcpus"], ["all"], ["distribution", "hardware", "platform"]),
    (["processor_vcpus"], None, ["distribution", "hardware", "platform"]),
    # Setup would not gather them: the lean path must not either.
    (["processor_vcpus"], ["min"], None),
    (["default_ipv4"], ["min", "hardware"], None),
    (["virtualization_type"], ["min", "!virtual"], None),
    # Patterns and facts it does not know go the whole way.
    (["distribution*"], SUBSET, None),
    (["ansible_mounts"], SUBSET, None),
    (["pkg_mgr", "devices"], SUBSET, None),
    # No filter: every fact.
    ([], SUBSET, None),
])
def test_the_lean_path_applies_only_when_it_gathers_what_setup_keeps(filter_spec, subset, names):
    assert lean_facts.collectors_for(filter_spec, subset) == names


IP_O_ADDR = """1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever
1: lo    inet 192.0.2.10/32 scope global lo\\       valid_lft forever preferred_lft forever
1: lo    inet6 ::1/128 scope host noprefixroute \\       valid_lft forever preferred_lft forever
2: eth0    inet 10.1.0.5/24 brd 10.1.0.255 scope global eth0\\       valid_lft forever preferred_lft forever
2: eth0    inet6 2001:db8::5/64 scope global \\       valid_lft forever preferred_lft forever
3: ppp0    inet 10.9.0.1 peer 10.9.0.2/32 scope global ppp0\\       valid_lft forever preferred_lft forever
7: veth1a2b    inet6 fe80::1/64 scope link \\       valid_lft forever preferred_lft forever
"""


class IpModule:
    def __init__(self, rc=0, out=IP_O_ADDR):
        self.rc, self.out, self.commands = rc, out, []

    def run_command(self, args, **kwargs):
        self.commands.append(args)
        return self.rc, self.out, ""


@pytest.mark.parametrize("addresses, holders", [
    # The default route's source address on the interface of the route, both families.
    (["10.1.0.5", "2001:db8::5"], ["eth0"]),
    # An address held by lo (a routed address on the loopback): LinuxNetwork completes it from lo.
    (["192.0.2.10", None], ["lo"]),
    (["10.9.0.1", None], ["ppp0"]),
    # No default route: nothing to complete, no interface read.
    ([None, None], []),
    (["10.1.0.6", None], []),
])
def test_holders_of_names_the_interfaces_of_the_default_addresses(addresses, holders):
    module = IpModule()
    assert lean_facts.holders_of(module, "/sbin/ip", addresses) == holders
    assert module.commands == ([["/sbin/ip", "-o", "addr", "show"]] if any(addresses) else [])


def test_holders_of_says_none_when_ip_cannot_tell():
    assert lean_facts.holders_of(IpModule(rc=1, out=""), "/sbin/ip", ["10.1.0.5"]) is None


def test_only_the_interfaces_of_the_default_addresses_are_read():
    """setup reads every interface (two ip runs each, ethtool where installed); the lean path only the holders'.

    The facts are still setup's (test_the_facts_are_setups_for_the_same_filter, on this machine's interfaces)."""
    gathered = gather_fresh(["default_ipv4", "default_ipv6"])
    default = gathered["facts"]["ansible_default_ipv4"]
    read = sorted({argv[-1] for argv in gathered["commands"] if argv[1:3] == ["addr", "show"] and "dev" in argv})
    if default.get("interface"):
        assert read == [default["interface"]], read
    else:
        assert read == []
    assert not [argv for argv in gathered["commands"] if argv[1:4] == ["-4", "route", "show"]]
