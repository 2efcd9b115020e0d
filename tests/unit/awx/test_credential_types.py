"""The AWX credential types of awx/credential_types/ against the roles that read them.

Each type's injectors are rendered as AWX renders them (tests/awx_injectors.py);
every extra var they set must be an option of a role's meta/argument_specs.yml,
``no_log`` there when it carries a secret input, and every environment variable
must be one the collection or one of its dependency collections reads.
"""

import importlib.util
import os
import pathlib
import stat
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))

import awx_injectors  # noqa: E402

TYPES_DIR = ROOT / "awx" / "credential_types"
TYPE_FILES = sorted(TYPES_DIR.glob("*.yml"))


def load(path):
    return awx_injectors.load_credential_type(path)


def role_options():
    """{option: [(role, entry point, spec)]} over every role's argument_specs."""
    options = {}
    for spec_file in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        role = spec_file.parents[1].name
        specs = yaml.safe_load(spec_file.read_text())["argument_specs"]
        for entry, spec in specs.items():
            for name, option in (spec.get("options") or {}).items():
                options.setdefault(name, []).append((role, entry, option))
    return options


OPTIONS = role_options()


def injected_extra_vars():
    cases = []
    for path in TYPE_FILES:
        ctype = load(path)
        for name, tmpl in ctype["injectors"].get("extra_vars", {}).items():
            cases.append(pytest.param(path.name, name, tmpl, id="%s:%s" % (path.stem, name)))
    return cases


def injected_env():
    cases = []
    for path in TYPE_FILES:
        for name in load(path)["injectors"].get("env", {}):
            cases.append(pytest.param(path.name, name, id="%s:%s" % (path.stem, name)))
    return cases


def test_there_are_credential_types():
    names = {load(p)["name"] for p in TYPE_FILES}
    assert len(names) == len(TYPE_FILES), "two files define the same credential type name"
    assert {"Slurm MUNGE key", "Slurm accounting database", "Slurm JWT key", "Kubernetes kubeconfig (hybridhpc)"} <= names


@pytest.mark.parametrize("path", TYPE_FILES, ids=lambda p: p.stem)
def test_awx_would_accept_the_type(path):
    assert awx_injectors.check_credential_type(load(path)) == []


@pytest.mark.parametrize("path", TYPE_FILES, ids=lambda p: p.stem)
def test_secret_inputs_are_secret_and_never_plain_env(path):
    ctype = load(path)
    secrets = awx_injectors.secret_fields(ctype)
    assert secrets, "a credential type without a secret input belongs in the inventory, not in a credential"
    for name, tmpl in ctype["injectors"].get("env", {}).items():
        # Environment variables land in the job's environment (and in `ps`):
        # a secret goes into a file, the variable carries its path.
        assert not awx_injectors.template_fields(tmpl) & secrets, "%s puts a secret in the environment" % name


@pytest.mark.parametrize("type_file,name,tmpl", injected_extra_vars())
def test_injected_extra_var_is_a_role_option(type_file, name, tmpl):
    ctype = load(TYPES_DIR / type_file)
    if name not in OPTIONS:
        owner = name.split("_", 1)[0]
        if not (ROOT / "roles" / owner / "meta" / "argument_specs.yml").exists():
            pytest.skip("%s: role %s has no meta/argument_specs.yml yet (being written); checked once it has" % (name, owner))
        pytest.fail("%s (set by %s) is not an option of any role's meta/argument_specs.yml" % (name, type_file))
    carries_secret = bool(awx_injectors.template_fields(tmpl) & awx_injectors.secret_fields(ctype))
    for role, entry, option in OPTIONS[name]:
        if carries_secret:
            assert option.get("no_log") is True, "%s carries a secret but roles/%s (%s) does not mark it no_log" % (name, role, entry)
        if "tower.filename" in tmpl:
            assert option.get("type", "str") in ("str", "path"), "%s is a file path, roles/%s says %s" % (name, role, option.get("type"))


def test_every_secret_role_option_has_a_credential_type():
    injected = set()
    for path in TYPE_FILES:
        injected.update(load(path)["injectors"].get("extra_vars", {}))
    secrets = {name for name, uses in OPTIONS.items() if any(o.get("no_log") for _r, _e, o in uses)}
    missing = sorted(secrets - injected)
    assert not missing, "no_log role options without an AWX credential type in awx/credential_types/: %s" % missing


def dependency_collection_dirs():
    # awx/requirements.yml lists the collection's tarball; its dependencies are
    # galaxy.yml's (the EE gets them from the `ansible` bundle).
    with open(ROOT / "awx" / "requirements.yml", encoding="utf-8") as handle:
        reqs = yaml.safe_load(handle)["collections"]
    with open(ROOT / "galaxy.yml", encoding="utf-8") as handle:
        names = list(yaml.safe_load(handle).get("dependencies", {}))
    names += [r["name"] for r in reqs if r.get("type") not in ("dir", "file") and r["name"] not in names]
    dirs = []
    for name in names:
        spec = importlib.util.find_spec("ansible_collections.%s" % name)
        assert spec is not None, "collection %s is not installed here (the ansible package bundles it)" % name
        dirs.append(pathlib.Path(list(spec.submodule_search_locations)[0]))
    return dirs


def reads_env(base, name):
    for path in base.rglob("*"):
        if path.suffix in (".py", ".yml", ".yaml", ".j2") and path.is_file():
            if name in path.read_text(errors="replace"):
                return path
    return None


@pytest.mark.parametrize("type_file,name", injected_env())
def test_injected_env_var_is_read_by_something(type_file, name):
    places = [ROOT / "roles", ROOT / "plugins", *dependency_collection_dirs()]
    found = [p for p in (reads_env(base, name) for base in places) if p]
    assert found, "%s (set by %s) is read by nothing in the collection or its dependencies" % (name, type_file)


SAMPLE_INPUTS = {
    "munge_key_b64": "bXVuZ2Uta2V5LWJ5dGVzLWZvci10aGUtdGVzdC1vZi10aGUtaW5qZWN0b3JzISE=",
    "slurm_auth_key_b64": "c2x1cm0ta2V5LWJ5dGVzLWZvci10aGUtdGVzdC1vZi10aGUtaW5qZWN0b3JzISE=",
    "slurmdbd_storage_pass": "s3cretPassw0rd",
    "sssd_ldap_bind_dn": "cn=sssd,ou=services,dc=example,dc=org",
    "sssd_ldap_bind_password": "b1ndPassw0rd",
    "slurmrestd_jwt_key_b64": "and0LWtleS1ieXRlcy1mb3ItdGhlLXRlc3Qtb2YtdGhlLWluamVjdG9ycyEh",
    "kubeconfig": "apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\ncurrent-context: ''\n",
}


@pytest.mark.parametrize("path", TYPE_FILES, ids=lambda p: p.stem)
def test_rendered_injection(path, tmp_path):
    ctype = load(path)
    inputs = {f["id"]: SAMPLE_INPUTS[f["id"]] for f in ctype["inputs"]["fields"]}
    extra_vars, env, files = awx_injectors.inject(ctype, inputs, str(tmp_path), container_root="/runner")

    for name, tmpl in ctype["injectors"].get("extra_vars", {}).items():
        refs = awx_injectors.template_fields(tmpl)
        if refs:
            assert extra_vars[name] == "".join(inputs[r] for r in sorted(refs))
        else:
            assert extra_vars[name].startswith("/runner/env/tmp")
    for path_written in files:
        mode = stat.S_IMODE(os.stat(path_written).st_mode)
        assert mode == 0o600
        assert pathlib.Path(path_written).parent == tmp_path / "env"
    if ctype["injectors"].get("file"):
        assert len(files) == 1
        assert pathlib.Path(files[0]).read_text() == inputs["kubeconfig"]
        job_path = "/runner/env/" + pathlib.Path(files[0]).name
        assert env == {"K8S_AUTH_KUBECONFIG": job_path}
        assert extra_vars == {"ack_operator_kubeconfig": job_path, "copilot_kubeconfig": job_path}


def test_extra_vars_reach_ansible_as_unsafe_text(tmp_path):
    """AWX dumps the credential extra vars with every string !unsafe: loaded as Ansible loads an extra vars file
    (trusted as templates on 2.19+), each stays the literal text when templated."""
    import inspect

    from ansible.parsing.dataloader import DataLoader
    from ansible.template import Templar

    ctype = load(TYPES_DIR / "slurm_munge_key.yml")
    extra_vars, _env, _files = awx_injectors.inject(ctype, {"munge_key_b64": "{{ 6 * 7 }}"}, str(tmp_path))
    dumped = tmp_path / "env" / "extravars"
    loader = DataLoader()
    trusted = {"trusted_as_template": True} if "trusted_as_template" in inspect.signature(
        loader.load_from_file).parameters else {}
    templar = Templar(loader=loader, variables={})
    # Without the !unsafe tags the same file's value is templated (2.18 gives text, 2.19 the number): the
    # check below can fail.
    dumped.write_text(yaml.safe_dump(extra_vars))
    assert templar.template(loader.load_from_file(str(dumped), cache="none", **trusted)["munge_key_b64"]) in (42, "42")
    dumped.write_text(awx_injectors.safe_dump(extra_vars))
    loaded = loader.load_from_file(str(dumped), cache="none", **trusted)
    assert templar.template(loaded["munge_key_b64"]) == "{{ 6 * 7 }}"


def test_a_template_naming_an_unknown_field_is_refused():
    bad = {
        "name": "bad", "kind": "cloud",
        "inputs": {"fields": [{"id": "a", "label": "A", "type": "string", "secret": True}]},
        "injectors": {"extra_vars": {"munge_key_b64": "{{ b }}"}, "env": {"ANSIBLE_X": "{{ a }}"}},
    }
    problems = awx_injectors.check_credential_type(bad)
    assert any("'b' is undefined" in p for p in problems), problems
    assert any("ANSIBLE_X" in p for p in problems), problems


def test_tower_filename_needs_a_file_injector():
    bad = {
        "name": "bad", "kind": "cloud",
        "inputs": {"fields": [{"id": "a", "label": "A", "type": "string", "secret": True}]},
        "injectors": {"env": {"KUBECONFIG_PATH": "{{ tower.filename }}"}},
    }
    assert awx_injectors.check_credential_type(bad)
