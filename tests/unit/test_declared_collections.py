"""Every collection the roles and playbooks call is declared where users look for it.

galaxy.yml's dependencies are installed with the collection: they must cover
every collection a role uses. requirements.yml (what a site installs with
`ansible-galaxy collection install -r`) must also cover the playbooks and the
lab's connection plugin.
"""

import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
FQCN = re.compile(r"^\s*(?:-\s+)?([a-z0-9_]+\.[a-z0-9_]+)\.[a-z0-9_]+:", re.M)
OWN = {"ansible.builtin", "hybridhpc.slurm"}


def used(*folders):
    found = {}
    for folder in folders:
        for path in (ROOT / folder).rglob("*.yml"):
            for name in FQCN.findall(path.read_text()):
                found.setdefault(name, str(path.relative_to(ROOT)))
    return {name: where for name, where in found.items() if name not in OWN}


def test_roles_use_only_collections_galaxy_yml_declares():
    declared = set(yaml.safe_load((ROOT / "galaxy.yml").read_text())["dependencies"])
    missing = {name: where for name, where in used("roles").items() if name not in declared}
    assert not missing, "used by roles, missing from galaxy.yml dependencies: %s" % missing


def test_requirements_yml_covers_roles_playbooks_and_the_lab_connection():
    declared = {c["name"] for c in yaml.safe_load((ROOT / "requirements.yml").read_text())["collections"]}
    needed = used("roles", "playbooks")
    needed["community.docker"] = "inventories/lab (ansible_connection)"
    missing = {name: where for name, where in needed.items() if name not in declared}
    assert not missing, "missing from requirements.yml: %s" % missing
    assert set(yaml.safe_load((ROOT / "galaxy.yml").read_text())["dependencies"]) <= declared
