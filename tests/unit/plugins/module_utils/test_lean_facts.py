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

import ansible_collections.hybridhpc
from ansible_collections.hybridhpc.slurm.plugins.module_utils import lean_facts

ROOT = Path(__file__).resolve().parents[4]
SUBSET = ["min", "hardware", "virtual", "network"]
EVERY_LEAN_FACT = sorted(lean_facts.FACT_COLLECTORS)

GATHER_IN_A_FRESH_PROCESS = r"""
import json, sys
from ansible.module_utils import basic
basic._ANSIBLE_ARGS = json.dumps({"ANSIBLE_MODULE_ARGS": {}}).encode()
module = basic.AnsibleModule(argument_spec={})
from ansible_collections.hybridhpc.slurm.plugins.module_utils import lean_facts
filter_spec, subset = json.loads(sys.argv[1]), json.loads(sys.argv[2])
names = lean_facts.collectors_for(filter_spec, subset)
facts = lean_facts.gather(module, names, filter_spec, 10)
print(json.dumps({"names": names, "facts": facts,
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
