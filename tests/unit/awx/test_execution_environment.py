"""execution-environment.yml: `ansible-builder create` makes a valid build context offline.

`create` only writes the context (nothing is pulled or built). The context must
hold the Containerfile, awx/requirements.{yml,txt} and awx/bindep.txt, and the
collection's built tarball (what `make build` writes to build/), which the
galaxy stage installs from the context's _build/ directory: that install is
repeated here, offline, from the context. The test runs `create` on a copy of
the definition and awx/ beside a tarball it builds itself, as `make ee-context`
does, so the checkout's build/ is left alone.
"""

import importlib.util
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

pytest.importorskip("ansible_builder", reason="ansible-builder is not installed (requirements-dev.txt)")

from ansible.module_utils.compat.version import LooseVersion  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))

import installed_collection  # noqa: E402

BIN = pathlib.Path(sys.executable).parent
EE_FILE = ROOT / "execution-environment.yml"
GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())
REQS = yaml.safe_load((ROOT / "awx" / "requirements.yml").read_text())["collections"]


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    top = tmp_path_factory.mktemp("ee")
    shutil.copy(EE_FILE, top / EE_FILE.name)
    shutil.copytree(ROOT / "awx", top / "awx")
    installed_collection.build(top / "build")
    ctx = top / "context"
    res = subprocess.run(
        [BIN / "ansible-builder", "create", "-f", top / EE_FILE.name, "-c", ctx, "--output-filename", "Containerfile", "-v", "1"],
        check=False, capture_output=True, text=True, timeout=120, cwd=top,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return ctx


def test_containerfile_builds_from_the_named_base_image(context):
    containerfile = (context / "Containerfile").read_text()
    base = yaml.safe_load(EE_FILE.read_text())["images"]["base_image"]["name"]
    assert 'ARG EE_BASE_IMAGE="%s"' % base in containerfile
    assert "FROM $EE_BASE_IMAGE AS base" in containerfile
    assert "ansible-galaxy collection install" in containerfile
    assert "ansible-core==" in containerfile and "ansible-runner==" in containerfile


@pytest.mark.parametrize("name", ["requirements.yml", "requirements.txt", "bindep.txt"])
def test_requirement_files_are_copied(context, name):
    assert (context / "_build" / name).read_text() == (ROOT / "awx" / name).read_text()


def test_the_collection_goes_in_as_its_built_tarball(context):
    (entry,) = [r for r in REQS if r.get("type") in ("file", "dir", "url", "git")]
    assert entry["type"] == "file", "the EE installs the built tarball, not the source tree: %s" % entry
    # The requirement names the tarball of galaxy.yml's version (bump both together).
    assert pathlib.PurePath(entry["name"]).name == "hybridhpc-slurm-%s.tar.gz" % GALAXY["version"]
    tarball = context / "_build" / entry["name"]
    assert tarball.is_file(), "%s is not in the context" % entry["name"]
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    assert "MANIFEST.json" in names and "playbooks/site.yml" in names and "awx/credential_types/kubeconfig.yml" in names
    for role in (ROOT / "roles").iterdir():
        assert "roles/%s/meta/argument_specs.yml" % role.name in names, role.name
    assert "galaxy.yml" not in names, "a built tarball carries MANIFEST.json, not galaxy.yml"


def test_galaxy_stage_installs_the_collection_offline(context, tmp_path):
    """What the galaxy stage runs in /build, limited to the local collection (Galaxy is not reachable here)."""
    build = context / "_build"
    local = {"collections": [r for r in REQS if r.get("type") == "file"]}
    (build / "local-requirements.yml").write_text(yaml.safe_dump(local))
    # The build stage has no ansible.cfg and no installed copy: without this, a
    # developer's ANSIBLE_CONFIG (the Makefile exports the repo's, whose
    # collections_path already holds hybridhpc.slurm) makes galaxy skip it.
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env["ANSIBLE_COLLECTIONS_PATH"] = str(tmp_path / "collections")
    res = subprocess.run(
        [BIN / "ansible-galaxy", "collection", "install", "-r", "local-requirements.yml", "--offline", "--no-deps",
         "-p", tmp_path / "collections"],
        check=False, capture_output=True, text=True, timeout=120, cwd=build, env=env,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    installed = tmp_path / "collections" / "ansible_collections" / "hybridhpc" / "slurm"
    manifest = yaml.safe_load((installed / "MANIFEST.json").read_text())["collection_info"]
    assert (manifest["namespace"], manifest["name"], manifest["version"]) == ("hybridhpc", "slurm", GALAXY["version"])
    assert (installed / "roles" / "munge" / "tasks" / "main.yml").is_file()
    assert not list(installed.rglob("__pycache__")), "build_ignore of galaxy.yml applies to the install"


def test_collection_dependencies_come_from_the_pinned_ansible_bundle():
    """No Galaxy server: the EE pins the PyPI `ansible` bundle beside ansible-core, which ships the dependencies."""
    assert [r.get("type") for r in REQS] == ["file"], "awx/requirements.yml lists the tarball only: %s" % REQS
    ee = yaml.safe_load(EE_FILE.read_text())
    refs = ee["dependencies"]["ansible_core"]["package_pip"].split()
    pins = dict(ref.split("==", 1) for ref in refs)
    assert set(pins) == {"ansible-core", "ansible"}, refs
    core, bundle = LooseVersion(pins["ansible-core"]), LooseVersion(pins["ansible"])
    # ansible N requires ansible-core 2.(N+7): 14.x ships with 2.21.x.
    assert core.version[:2] == [2, bundle.version[0] + 7], refs
    assert "==" in ee["dependencies"]["ansible_runner"]["package_pip"]
    opts = ee["build_arg_defaults"]["ANSIBLE_GALAXY_CLI_COLLECTION_OPTS"].split()
    assert "--no-deps" in opts and "--offline" in opts


@pytest.mark.parametrize("name", sorted(GALAXY.get("dependencies", {})))
def test_installed_bundle_satisfies_galaxy_yml(name):
    """The collections the `ansible` bundle installed here meet galaxy.yml's minimums (in the EE: its bundle)."""
    spec = importlib.util.find_spec("ansible_collections.%s" % name)
    if spec is None:
        pytest.skip("%s is not installed here" % name)
    manifest = pathlib.Path(list(spec.submodule_search_locations)[0]) / "MANIFEST.json"
    installed = yaml.safe_load(manifest.read_text())["collection_info"]["version"]
    minimum = GALAXY["dependencies"][name].lstrip(">=")
    assert LooseVersion(installed) >= LooseVersion(minimum), (name, installed)


def test_python_requirements_are_pinned():
    lines = [ln.strip() for ln in (ROOT / "awx" / "requirements.txt").read_text().splitlines()]
    reqs = {ln.split("==")[0].lower(): ln for ln in lines if ln and not ln.startswith("#")}
    assert {"jmespath", "kubernetes", "httpx", "pymysql", "docker"} <= set(reqs)
    for line in reqs.values():
        assert "==" in line, "%s is not pinned" % line


def test_bindep_parses_and_covers_both_package_families():
    depends_mod = pytest.importorskip("bindep.depends")
    text = (ROOT / "awx" / "bindep.txt").read_text()
    depends = depends_mod.Depends(text)
    rpm = {r[0] for r in depends.active_rules(["platform:rpm", "default"])}
    dpkg = {r[0] for r in depends.active_rules(["platform:dpkg", "default"])}
    assert {"git", "openssh-clients", "rsync"} <= rpm
    assert {"git", "openssh-client", "rsync"} <= dpkg


def test_create_needs_nothing_but_the_checkout():
    """No file outside the repository is referenced (a CI runner has only the checkout)."""
    ee = yaml.safe_load(EE_FILE.read_text())
    for entry in ee.get("additional_build_files", []):
        src = pathlib.Path(entry["src"])
        assert not src.is_absolute() and ".." not in src.parts, entry
        # build/ holds what `make build` writes; everything else is in the checkout.
        assert src.parts[0] == "build" or list(ROOT.glob(str(src))), "%s matches nothing" % src
    for dep in ("galaxy", "python", "system"):
        assert (ROOT / ee["dependencies"][dep]).is_file()
