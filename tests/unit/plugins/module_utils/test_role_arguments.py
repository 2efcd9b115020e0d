"""Every role's argument spec checked in one task (module_utils/role_arguments.py, action role_arguments).

site.yml starts its roles with ``rolespec_validate: false``: these tests hold
that the one check in its first play covers what the roles' own checks did.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from ansible_collections.hybridhpc.slurm.plugins.module_utils import role_arguments as ra

ROOT = pathlib.Path(__file__).resolve().parents[4]
ROLES = ROOT / "roles"
PLAYBOOKS = ROOT / "playbooks"
# The ansible-playbook of the Python running the tests (each core of the matrix has its own venv).
ANSIBLE_PLAYBOOK = pathlib.Path(sys.executable).parent / "ansible-playbook"


def role_file(role, *path):
    full = ROLES.joinpath(role, *path)
    return (yaml.safe_load(full.read_text()) or {}) if full.exists() else {}


SPEC_ROLES = ra.spec_roles(str(ROLES))


def test_every_role_has_a_spec():
    assert SPEC_ROLES == sorted(p.name for p in ROLES.iterdir() if (p / "tasks").is_dir())


def test_entry_points_sharing_one_spec_are_checked_once_main_first():
    main = {"options": {"a": {"type": "int"}}}
    specs = {"validate": main, "plan": {"options": {"b": {"type": "str"}}}, "main": main, "facts": main}
    assert ra.distinct_entry_points(specs) == [("main", main["options"]), ("plan", {"b": {"type": "str"}})]


def test_a_value_the_play_sets_is_checked_before_the_default():
    options = {"a": {}, "b": {}, "c": {}, "d": {}}
    sources = ra.option_sources(options, {"a": 5, "d": 4, "x": 0}, {"a": 1, "b": 2, "d": 4})
    assert sources == {"a": "inventory", "b": "default", "d": "default"}


def test_problems_name_the_variable_and_the_role():
    options = {"munge_uid": {"type": "int"}, "munge_key_file": {"type": "path"}}
    found = ra.problems("munge", "account", options, {"munge_uid": "many"}, {"munge_key_file": "cannot be resolved (x)"})
    assert found[0].startswith("munge_key_file: cannot be resolved (x); set it")
    assert "munge_uid" in found[1] and found[1].endswith("(role munge (account))")
    assert ra.problems("munge", "main", options, {"munge_uid": "5"}) == []


def test_unknown_choices_and_missing_required_values_are_refused():
    options = {"mode": {"type": "str", "choices": ["a", "b"]}, "name": {"type": "str", "required": True}}
    found = ra.problems("r", "main", options, {"mode": "c"})
    assert any("mode" in p for p in found) and any("name" in p for p in found)


@pytest.mark.parametrize("role", SPEC_ROLES)
def test_literal_defaults_hold_against_their_spec(role):
    """What the role's own check did for defaults the first play cannot template: the literal ones here."""
    defaults = role_file(role, "defaults", "main.yml")
    specs = role_file(role, "meta", "argument_specs.yml")["argument_specs"]
    for entry, options in ra.distinct_entry_points(specs):
        literal = {name: defaults[name] for name in options if name in defaults and "{{" not in json.dumps(defaults[name])}
        optional = {name: dict(option, required=False) for name, option in options.items()}  # the inventory sets those
        assert ra.problems(role, entry, optional, literal) == []


@pytest.mark.parametrize("role", SPEC_ROLES)
def test_role_vars_never_set_an_option(role):
    """The check layers the play's variables over role vars; that is Ansible's order only if role vars set no option."""
    variables = role_file(role, "vars", "main.yml")
    specs = role_file(role, "meta", "argument_specs.yml")["argument_specs"]
    options = {name for spec in specs.values() for name in (spec.get("options") or {})}
    assert not options & set(variables)


def site_role_starts():
    """Every role start in site.yml and the playbooks it imports: (playbook, play, task)."""
    starts = []
    for name in ("site.yml", "federation.yml", "ack.yml", "copilot.yml"):
        for play in yaml.safe_load((PLAYBOOKS / name).read_text()):
            assert "roles" not in play, "%s: %s starts roles with their own check; use import_role" % (name, play["name"])
            for task in play.get("pre_tasks", []) + play.get("tasks", []):
                start = task.get("ansible.builtin.include_role") or task.get("ansible.builtin.import_role")
                if start:
                    starts.append((name, play["name"], start))
    return starts


def test_site_checks_every_role_once_in_its_first_play():
    first = yaml.safe_load((PLAYBOOKS / "site.yml").read_text())[0]
    includes = [t["ansible.builtin.include_role"] for t in first["tasks"] if "ansible.builtin.include_role" in t]
    assert [i.get("tasks_from") for i in includes] == ["plan", "validate"]
    # A monitoring host that runs no Slurm daemon has its one role checked instead.
    own = [t for t in first["tasks"] if "hybridhpc.slurm.role_arguments" in t]
    assert [t["hybridhpc.slurm.role_arguments"] for t in own] == [{"roles": ["monitoring"]}]
    assert own[0]["when"] == "inventory_hostname not in __site_slurm_hosts" and "always" in own[0]["tags"]
    validate = yaml.safe_load((ROLES / "slurm_common" / "tasks" / "validate.yml").read_text())
    checks = [t["hybridhpc.slurm.role_arguments"] or {} for t in validate if "hybridhpc.slurm.role_arguments" in t]
    assert checks == [{"roles": ["slurm_common"]}, {"exclude": ["slurm_common"]}]
    assert all("always" in t["tags"] for t in validate if "hybridhpc.slurm.role_arguments" in t)


def test_later_roles_start_without_a_check_of_their_own():
    starts = site_role_starts()
    assert len(starts) >= 12
    for playbook, play, start in starts:
        if playbook == "site.yml" and start.get("tasks_from") == "plan":
            continue  # before the one check: plan's own spec is checked by Ansible
        flag = start.get("rolespec_validate")
        if playbook == "site.yml":
            assert flag is False, (play, start)
        else:  # also run alone: they check unless site.yml's first play did
            assert flag == "{{ not (__slurm_common_validated | default(false)) }}", (playbook, play, start)


def run_check(tmp_path, variables, roles=None):
    playbook = tmp_path / "check.yml"
    task = {"name": "check", "hybridhpc.slurm.role_arguments": {"roles": roles} if roles else {}}
    playbook.write_text(yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "vars": variables, "tasks": [task]}]))
    # No callbacks_enabled of the caller's (an empty ANSIBLE_CALLBACKS_ENABLED is an error from ansible-core 2.20).
    env = {key: value for key, value in os.environ.items() if key != "ANSIBLE_CALLBACKS_ENABLED"}
    env.update(ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="json", ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    done = subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", "localhost,", "-c", "local", str(playbook)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    result = json.loads(done.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    return done.returncode, result


def test_the_action_refuses_a_bad_value_naming_variable_and_role(tmp_path):
    code, result = run_check(tmp_path, {"slurm_cluster_name": "lab", "munge_uid": "many", "apptainer_mode": "nosuch"})
    assert code != 0 and result["failed"]
    assert any("munge_uid" in p and "(role munge" in p for p in result["argument_errors"])
    assert any("apptainer_mode" in p and "(role apptainer)" in p for p in result["argument_errors"])


def test_the_action_passes_the_defaults_and_resolves_templates(tmp_path):
    code, result = run_check(tmp_path, {"slurm_cluster_name": "lab", "__uid": 900, "munge_uid": "{{ __uid }}"})
    assert code == 0, result
    assert result["checked"] >= len(SPEC_ROLES)


def test_a_value_that_cannot_be_resolved_is_named(tmp_path):
    code, result = run_check(tmp_path, {"slurm_cluster_name": "lab", "munge_uid": "{{ nowhere_defined }}"}, roles=["munge"])
    assert code != 0
    assert result["argument_errors"][0].startswith("munge_uid: cannot be resolved before any host changes")
