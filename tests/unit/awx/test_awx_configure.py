"""playbooks/awx_configure.yml without an AWX: syntax, its own checks, and what it would send.

The job templates, surveys and workflows are rendered from the play's vars with
Ansible's templar and checked with AWX's rules for survey specs
(awx/api/views JobTemplateSurveySpec._validate_spec_data): required keys and
types, unique variables, defaults of the question's type, integer min/max,
choices holding the default. Survey variables must be ones the playbook reads.
"""

import pathlib
import re
import subprocess
import sys

import installed_collection
import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.parsing.vault import VaultLib, VaultSecret
from ansible.template import Templar
from templating import trusted

ROOT = pathlib.Path(__file__).resolve().parents[3]
PLAYBOOK = ROOT / "playbooks" / "awx_configure.yml"
BIN = pathlib.Path(sys.executable).parent
SURVEY_TYPES = {"text": str, "textarea": str, "password": str, "multiplechoice": str, "multiselect": str,
                "integer": int, "float": (int, float)}

SECRETS = {
    "vault_munge_key_b64": "bXVuZ2Uta2V5LWZvci1hd3gtY29uZmlndXJlLXRlc3RzLW9ubHkhIQ==",
    "vault_slurmdbd_storage_pass": "Pl41nT3xtMustNeverShow",
}


def play_vars(**overrides):
    play = trusted(yaml.safe_load(PLAYBOOK.read_text())[0])
    variables = dict(play["vars"], playbook_dir=str(ROOT / "playbooks"), **overrides)
    return Templar(loader=DataLoader(), variables=variables), variables


def rendered(name, **overrides):
    templar, variables = play_vars(**overrides)
    return templar.template(variables[name])


def job_templates(**overrides):
    return rendered("__awx_job_templates", **overrides)


def awx_survey_errors(spec):
    """AWX's survey spec validation (the subset that applies to specs written as code)."""
    errors = []
    for field, kind in (("name", str), ("description", str), ("spec", list)):
        if not isinstance(spec.get(field), kind):
            errors.append("%s must be a %s" % (field, kind.__name__))
    if not spec.get("spec"):
        return errors + ["spec has no questions"]
    seen = set()
    for idx, item in enumerate(spec["spec"]):
        for field in ("type", "question_name", "variable", "required"):
            if field not in item:
                errors.append("question %d: %s missing" % (idx, field))
        if not isinstance(item.get("required"), bool):
            errors.append("question %d: required must be a boolean" % idx)
        if item.get("variable") in seen:
            errors.append("question %d: variable %s duplicated" % (idx, item.get("variable")))
        seen.add(item.get("variable"))
        qtype = item.get("type")
        if qtype not in SURVEY_TYPES:
            errors.append("question %d: type %s" % (idx, qtype))
            continue
        default = item.get("default")
        if default not in (None, "") and not isinstance(default, SURVEY_TYPES[qtype]):
            errors.append("question %d: default %r is not a %s" % (idx, default, qtype))
        for key in ("min", "max"):
            if key in item and item[key] is not None and not isinstance(item[key], int):
                errors.append("question %d: %s must be an integer" % (idx, key))
        if qtype in ("multiplechoice", "multiselect"):
            choices = item.get("choices")
            if isinstance(choices, str):
                choices = [c for c in choices.splitlines() if c.strip()]
            if not choices:
                errors.append("question %d: no choices" % idx)
            elif default not in (None, "") and default not in choices:
                errors.append("question %d: default %r not among the choices" % (idx, default))
            if not all(isinstance(c, str) for c in choices or []):
                errors.append("question %d: choices must be strings" % idx)
        if qtype in ("integer", "float") and isinstance(default, (int, float)):
            if not item.get("min", default) <= default <= item.get("max", default):
                errors.append("question %d: default outside min/max" % idx)
        if qtype in ("text", "textarea") and isinstance(default, str):
            if not item.get("min", 0) <= len(default) <= item.get("max", len(default)):
                errors.append("question %d: default length outside min/max" % idx)
    return errors


def surveys():
    out = []
    for jt in job_templates():
        if "survey" in jt:
            out.append(pytest.param(jt["playbook"], jt["survey"], id=jt["key"]))
    for wf in ("__awx_survey_site", "__awx_survey_upgrade"):
        out.append(pytest.param(None, rendered(wf), id="workflow" + wf))
    return out


# awx_configure.yml drives AWX with the awx.awx collection, which is not a
# dependency of this one: the ansible 12 and 13 bundles ship it, the ansible 14
# bundle (ansible-core 2.21) does not.
AWX_COLLECTION = installed_collection.collection_present("awx.awx")


def test_syntax_check():
    playbooks = ([PLAYBOOK] if AWX_COLLECTION else []) + [ROOT / "playbooks" / "rolling_upgrade.yml"]
    res = subprocess.run(
        [BIN / "ansible-playbook", "--syntax-check", *playbooks],
        check=False, capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    if not AWX_COLLECTION:
        pytest.skip("awx.awx is not installed: awx_configure.yml left out of the syntax check (rolling_upgrade.yml passed)")


@pytest.mark.parametrize("playbook,survey", surveys())
def test_survey_is_valid_for_awx(playbook, survey):
    assert awx_survey_errors(survey) == []


@pytest.mark.parametrize("playbook,survey", [p for p in surveys() if p.values[0]])
def test_survey_variables_are_read_by_the_playbook(playbook, survey):
    """A survey answer nobody reads is a decision that changes nothing."""
    texts = [(ROOT / playbook).read_text()]
    texts += [p.read_text() for p in (ROOT / "playbooks" / "tasks").glob("*.yml")]
    texts += [p.read_text() for p in ROOT.glob("roles/*/meta/argument_specs.yml")]
    for question in survey["spec"]:
        var = question["variable"]
        assert any(re.search(r"\b%s\b" % var, t) for t in texts), "%s (survey of %s) is read by nothing" % (var, playbook)


def test_surveys_never_override_the_inventory_silently():
    """Survey answers are extra vars: a default for a role option would beat the inventory's value.

    Role options are asked optionally and without default (AWX passes no empty
    answer); playbook-level variables (serial, rolling upgrade settings, which
    the inventory cannot set) may have defaults.
    """
    options = set()
    for spec_file in ROOT.glob("roles/*/meta/argument_specs.yml"):
        for spec in yaml.safe_load(spec_file.read_text())["argument_specs"].values():
            # Playbook-level variables are documented in a role's spec too (the
            # role they steer), their description naming the playbook that reads
            # them (serial, the upgrade); the first play may check them too.
            options.update(name for name, option in (spec.get("options") or {}).items()
                           if not str(option.get("description", "")).startswith("playbooks/"))
    role_texts = [p.read_text() for p in ROOT.glob("roles/*/*/*") if p.is_file() and "meta" not in p.parts]
    options = {o for o in options if any(re.search(r"\b%s\b" % o, t) for t in role_texts)}
    for param in surveys():
        for question in param.values[1]["spec"]:
            if question["variable"] in options:
                assert question["required"] is False and question.get("default", "") == "", question["variable"]


def test_upgrade_survey_defaults_are_the_playbooks():
    text = (ROOT / "playbooks" / "rolling_upgrade.yml").read_text()
    survey = {q["variable"]: q for q in rendered("__awx_survey_upgrade")["spec"]}
    for var, question in survey.items():
        if question["type"] != "multiplechoice" and question["type"] != "integer":
            continue
        defaults = set(re.findall(r"\b%s \| default\(([^)]*)\)" % var, text))
        if not defaults:
            continue
        assert {d.strip("'\"").lower() for d in defaults} == {str(question["default"]).lower()}, var


def test_upgrade_cluster_choices_follow_the_inventory_clusters():
    survey = {q["variable"]: q for q in rendered("__awx_survey_upgrade", awx_slurm_clusters=["onprem", "cloud"])["spec"]}
    assert survey["slurm_upgrade_cluster"]["choices"] == ["all", "onprem", "cloud"]


def test_job_templates_name_the_playbooks():
    jts = job_templates()
    assert {jt["playbook"] for jt in jts} == {
        "playbooks/site.yml", "playbooks/federation.yml", "playbooks/ack.yml", "playbooks/copilot.yml", "playbooks/rolling_upgrade.yml"}
    for jt in jts:
        assert (ROOT / jt["playbook"]).is_file(), jt["playbook"]


def test_timeouts_scale_with_the_cluster():
    small = {k: int(v) for k, v in rendered("__awx_timeouts", awx_expected_hosts=10).items()}
    default = {k: int(v) for k, v in rendered("__awx_timeouts").items()}
    large = {k: int(v) for k, v in rendered("__awx_timeouts", awx_expected_hosts=2000).items()}
    assert set(default) == {jt["key"] for jt in job_templates()}
    for key in default:
        assert 0 < small[key] <= default[key] < large[key], key
    # Every batch may wait the whole drain timeout: the job must outlive them all.
    assert default["rolling_upgrade"] >= 10 * 3600
    batch_of_one = int(rendered("__awx_timeouts", awx_upgrade_batch_default="1", awx_expected_hosts=20)["rolling_upgrade"])
    assert batch_of_one >= 20 * 3600


def test_credentials_name_existing_types():
    play = yaml.safe_load(PLAYBOOK.read_text())[0]
    task = next(t for t in play["tasks"] if t["name"].startswith("Credentials"))
    types = {yaml.safe_load(p.read_text())["name"] for p in (ROOT / "awx" / "credential_types").glob("*.yml")}
    for item in task["loop"]:
        assert item["type"] in types | {"Machine"}, item["type"]
    keys = set(rendered("__awx_cred"))
    for jt in job_templates():
        assert set(jt["credentials"]) <= keys, jt["key"]


def test_workflows_chain_existing_nodes():
    play = trusted(yaml.safe_load(PLAYBOOK.read_text())[0])
    templar, _variables = play_vars()
    jt_names = {"%s %s" % (rendered("awx_name_prefix"), jt["key"].replace("_", " ")) for jt in job_templates()}
    workflows = [templar.template(t["awx.awx.workflow_job_template"]) for t in play["tasks"] if "awx.awx.workflow_job_template" in t]
    assert len(workflows) == 2
    used = set()
    for wf in workflows:
        ids = {n["identifier"] for n in wf["workflow_nodes"]}
        for node in wf["workflow_nodes"]:
            ujt = node["unified_job_template"]
            if ujt["type"] == "job_template":
                assert ujt["name"] in jt_names, ujt["name"]
                used.add(ujt["name"])
            for kind in ("success_nodes", "failure_nodes", "always_nodes"):
                for nxt in node.get("related", {}).get(kind, []):
                    assert nxt["identifier"] in ids
    assert used == jt_names, "job templates in no workflow: %s" % (jt_names - used)


def run_validate(tmp_path, secrets_text, encrypt):
    if not AWX_COLLECTION:
        pytest.skip("awx.awx is not installed: awx_configure.yml cannot load (its module_defaults name awx.awx's group)")
    password = tmp_path / "vault-pass"
    password.write_text("awx-configure-test\n")
    path = tmp_path / "secrets.yml"
    if encrypt:
        vault = VaultLib([("default", VaultSecret(b"awx-configure-test"))])
        path.write_bytes(vault.encrypt(secrets_text))
    else:
        path.write_text(secrets_text)
    return subprocess.run(
        [BIN / "ansible-playbook", PLAYBOOK, "--tags", "validate", "--vault-password-file", password, "-e", "awx_secrets_file=%s" % path],
        check=False, capture_output=True, text=True, timeout=180, cwd=ROOT,
    )


def test_validate_accepts_a_vaulted_secrets_file(tmp_path):
    res = run_validate(tmp_path, yaml.safe_dump(SECRETS), encrypt=True)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr
    for value in SECRETS.values():
        assert value not in res.stdout + res.stderr


@pytest.mark.parametrize("case", ["plain text", "placeholders"])
def test_validate_refuses_secrets_that_are_not_vaulted_or_placeholders(tmp_path, case):
    if case == "plain text":
        res = run_validate(tmp_path, yaml.safe_dump(SECRETS), encrypt=False)
    else:
        res = run_validate(tmp_path, (ROOT / "inventories" / "example" / "group_vars" / "all" / "vault.yml").read_text(), encrypt=True)
    assert res.returncode != 0
    assert "must be vault-encrypted" in res.stdout
    for value in SECRETS.values():
        assert value not in res.stdout + res.stderr
