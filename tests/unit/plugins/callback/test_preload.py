# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preload callback imports in ansible-playbook's process what every worker would otherwise compile again.

Each check runs in a fresh interpreter: this test process has imported most
of the collection already.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[4]
COLLECTIONS = ROOT / ".collections"
PLUGINS = "ansible_collections.hybridhpc.slurm.plugins."
HEAVY = ("httpx", "kubernetes", "boto3", "botocore", "prometheus_client")

PRELOAD = """
import json, sys
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
_AnsibleCollectionFinder(paths=[%r])._install()
PLUGINS = "ansible_collections.hybridhpc.slurm.plugins."
from ansible_collections.hybridhpc.slurm.plugins.callback.preload import preload
loaded = preload()
parsed = sys.modules[PLUGINS + "action.role_arguments"]._PARSED
print(json.dumps({"loaded": loaded, "modules": sorted(sys.modules), "parsed": sorted(parsed)}))
""" % str(COLLECTIONS)


def run_preload():
    done = subprocess.run([sys.executable, "-c", PRELOAD], cwd=ROOT, capture_output=True, text=True, check=False,
                          env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def filter_names():
    """Every filter of the collection: each has its documentation file, plugins/filter/<name>.yml."""
    return {path.stem for path in (ROOT / "plugins" / "filter").glob("*.yml")}


def lazy_module_utils():
    """The module_utils the filter files import when a filter first runs (their LazyModule names)."""
    names = set()
    for path in (ROOT / "plugins" / "filter").glob("*.py"):
        names.update(re.findall(r'LazyModule\("([a-z0-9_]+)"\)', path.read_text()))
    return names


def test_every_filter_and_action_plugin_is_loaded():
    result = run_preload()
    actions = {"hybridhpc.slurm.role_arguments", "hybridhpc.slurm.slurm_config_files", "hybridhpc.slurm.slurm_pam_adopt",
               "hybridhpc.slurm.slurm_host_facts"}
    expected = {"hybridhpc.slurm." + name for name in filter_names()} | actions
    assert len(expected) > 30
    assert set(result["loaded"]) == expected


def test_the_module_utils_the_filters_use_are_imported():
    modules = set(run_preload()["modules"])
    wanted = {PLUGINS + "module_utils." + name for name in lazy_module_utils()}
    assert PLUGINS + "module_utils.site_inputs" in wanted
    assert wanted <= modules, "not imported: %s" % sorted(wanted - modules)
    assert PLUGINS + "action.role_arguments" in modules


def test_the_role_files_role_arguments_reads_are_parsed_once_before_the_workers_fork():
    parsed = {p.split("/roles/", 1)[1] for p in run_preload()["parsed"]}
    specs = {path.relative_to(ROOT / "roles").as_posix() for path in (ROOT / "roles").glob("*/meta/argument_specs.yml")}
    assert len(specs) > 10 and specs <= parsed
    assert "slurm_common/defaults/main.yml" in parsed


def test_no_heavy_library_is_imported_in_ansible_playbook():
    modules = set(run_preload()["modules"])
    assert not [name for name in HEAVY if name in modules]


def test_the_repository_configuration_runs_it_in_ansible_playbook(tmp_path):
    """ansible.cfg enables it, and ansible-playbook runs it before the first task."""
    playbook = tmp_path / "play.yml"
    playbook.write_text("- hosts: localhost\n  gather_facts: false\n  tasks:\n"
                        "    - ansible.builtin.debug: {msg: '{{ [1] | hybridhpc.slurm.slurm_packages_covered([1]) }}'}\n")
    ansible_playbook = pathlib.Path(sys.executable).parent / "ansible-playbook"
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0")
    done = subprocess.run([str(ansible_playbook), "-vvv", "-i", "localhost,", "-c", "local", str(playbook)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    count = re.search(r"hybridhpc\.slurm\.preload: (\d+) filters and action plugins imported, (\d+) of its filters kept found",
                      done.stdout)
    assert count, done.stdout
    assert int(count.group(1)) == len(filter_names()) + 4
    # Each filter found once, for every template of the run (plugin_utils/jinja_plugin_cache.py).
    assert int(count.group(2)) == len(filter_names())


FREEZE = """
import gc, json
from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder
_AnsibleCollectionFinder(paths=[%r])._install()
from ansible_collections.hybridhpc.slurm.plugins.callback.preload import CallbackModule
before = gc.get_freeze_count()
CallbackModule().v2_playbook_on_start(None)
print(json.dumps({"before": before, "after": gc.get_freeze_count()}))
""" % str(COLLECTIONS)


def test_the_heap_at_the_start_is_left_out_of_the_collectors_passes():
    # Workers are forks: the objects alive when the playbook starts are frozen, so a collection in a worker
    # does not walk (and copy) the pages that hold them.
    done = subprocess.run([sys.executable, "-c", FREEZE], cwd=ROOT, capture_output=True, text=True, check=False,
                          env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")})
    assert done.returncode == 0, done.stderr
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts["before"] == 0
    # Ansible and the collection's plugins: tens of thousands of objects, not a few.
    assert counts["after"] > 20000, counts
