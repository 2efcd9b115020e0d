"""The built tarball is the collection users get: it installs, and runs from the installed copy.

Built and installed once per module: `ansible-galaxy collection build` of the
working tree, then `ansible-galaxy collection install --offline` of that
tarball into a fresh collections path (never the repository link). Every
plugin and role must be documented from the installed copy, and every playbook
must load from it. tests/integration/test_awx_runner.py converges a lab from
an installed copy made the same way.
"""

import json
import pathlib
import sys
import tarfile

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))

import installed_collection  # noqa: E402

JUNK = (".lab-image", ".hypothesis", ".cache", ".collections", ".venv", "lab/", "inventories/lab", "ansible.cfg", "Makefile",
        "_vendor", "__pycache__", ".pytest_cache", ".ci/", "tests/output")


def plugin_names(kind):
    """Every plugin of a kind in the working tree (the installed copy must document each one)."""
    folder = ROOT / "plugins" / {"module": "modules"}.get(kind, kind)
    if kind == "filter":  # one documentation file per filter; the .py files hold several
        stems = [p.stem for p in folder.glob("*.yml")]
    else:
        stems = [p.stem for p in folder.glob("*.py") if p.stem != "__init__"]
    return sorted("hybridhpc.slurm." + s for s in stems)


@pytest.fixture(scope="module")
def tarball(tmp_path_factory):
    return installed_collection.build(tmp_path_factory.mktemp("build"))


@pytest.fixture(scope="module")
def installed(tarball, tmp_path_factory):
    path = tmp_path_factory.mktemp("collections")
    installed_collection.install(tarball, path)
    return path


def test_built_tarball_has_the_collection_and_no_junk(tarball):
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    for wanted in ("MANIFEST.json", "meta/runtime.yml", "roles/slurm_common/meta/argument_specs.yml",
                   "plugins/module_utils/hostlist.py", "playbooks/site.yml", "inventories/example/hosts.yml",
                   "roles/copilot/files/copilot/src/hybridhpc_copilot/core.py", "changelogs/changelog.yaml"):
        assert wanted in names, wanted
    leaks = [n for n in names if any(j in n for j in JUNK)]
    assert leaks == [], leaks


def test_no_link_in_the_tarball_points_outside_it(tarball):
    # `ansible-galaxy collection install` aborts on such a link ("linkname ... not found").
    assert installed_collection.links_leaving(tarball) == []


def test_the_tarball_installs_offline_into_a_fresh_path(installed):
    copy = installed / "ansible_collections" / "hybridhpc" / "slurm"
    manifest = json.loads((copy / "MANIFEST.json").read_text())["collection_info"]
    galaxy = yaml.safe_load((ROOT / "galaxy.yml").read_text())
    assert (manifest["namespace"], manifest["name"], manifest["version"]) == ("hybridhpc", "slurm", galaxy["version"])
    assert not copy.is_symlink() and (copy / "roles" / "munge" / "tasks" / "main.yml").is_file()


@pytest.mark.parametrize("kind", ["module", "filter", "lookup", "role"])
def test_every_plugin_and_role_is_documented_from_the_installed_copy(installed, kind):
    if kind == "role":
        names = sorted("hybridhpc.slurm." + p.name for p in (ROOT / "roles").iterdir() if p.is_dir())
    else:
        names = plugin_names(kind)
    assert names
    res = installed_collection.run([installed_collection.BIN / "ansible-doc", "-t", kind, "--json", *names],
                                   env=installed_collection.clean_env(installed), cwd=installed)
    assert res.returncode == 0, res.stdout + res.stderr
    docs = json.loads(res.stdout)
    missing = [n for n in names if not docs.get(n)]
    assert missing == [], "not documented from the installed copy: %s\n%s" % (missing, res.stderr)
    for name in names:
        where = docs[name]["entry_points"]["main"] if kind == "role" else docs[name]["doc"]
        assert where.get("short_description"), name


def test_every_playbook_loads_from_the_installed_copy(installed, tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text(yaml.safe_dump({"all": {"children": {
        "slurmctld": {"hosts": {"ctl1": {}}}, "slurmdbd": {"hosts": {"ctl1": {}}}, "slurmd": {"hosts": {"c1": {}}},
    }, "vars": {"slurm_cluster_name": "x"}}}))
    playbooks = sorted(p.stem for p in (ROOT / "playbooks").glob("*.yml"))
    assert "site" in playbooks
    # awx_configure needs awx.awx, which is no dependency of the collection (the ansible 14 bundle lacks it).
    awx = installed_collection.collection_present("awx.awx")
    left_out = [] if awx else ["awx_configure"]
    for name in (p for p in playbooks if p not in left_out):
        res = installed_collection.run([installed_collection.BIN / "ansible-playbook", "-i", inventory, "--syntax-check",
                                        "hybridhpc.slurm." + name], env=installed_collection.clean_env(installed), cwd=tmp_path)
        assert res.returncode == 0, "%s: %s%s" % (name, res.stdout, res.stderr)
    if left_out:
        pytest.skip("awx.awx is not installed: %s not loaded (every other playbook was)" % ", ".join(left_out))
