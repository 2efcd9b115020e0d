"""AWX's credential injection, for tests that must see what a job would see.

AWX (awx/main/models/credential/__init__.py, ``CredentialType.inject_credential``
and ``fields.CredentialTypeInjectorField``) renders a custom credential type's
injectors with Jinja2 in an immutable sandbox over the credential's inputs:

* ``file`` templates first, each into a new file of the job's ``env/`` directory
  (mode 0600); ``{{ tower.filename }}`` (one unnamed ``template``) or
  ``{{ tower.filename.<name> }}`` (``template.<name>``) is that file's path as the
  job sees it (``/runner/env/tmpXXXX`` inside an execution environment);
* ``env`` entries become environment variables of ansible-playbook, except the
  ones AWX refuses (``ANSIBLE_*`` and a block list);
* ``extra_vars`` entries are rendered, dumped to a YAML file of ``env/`` with every
  string tagged ``!unsafe`` (AWX's ``safe_dump``) and passed as extra vars.

When a type is saved, AWX renders every template with ``StrictUndefined`` over
placeholder inputs, so a template may only name the type's own fields and
``tower.filename``; ``check_credential_type`` does the same.
"""

import os
import re
import stat
import tempfile

import yaml
from jinja2 import StrictUndefined
from jinja2.sandbox import ImmutableSandboxedEnvironment

# awx/main/constants.py ENV_BLOCKLIST, plus the ANSIBLE_ prefix rule of
# CredentialTypeInjectorField.validate_env_var_allowed.
ENV_BLOCKLIST = frozenset((
    "VIRTUAL_ENV", "PATH", "PYTHONPATH", "JOB_ID", "INVENTORY_ID", "INVENTORY_SOURCE_ID",
    "INVENTORY_UPDATE_ID", "AD_HOC_COMMAND_ID", "REST_API_URL", "REST_API_TOKEN", "MAX_EVENT_RES",
    "CALLBACK_QUEUE", "CALLBACK_CONNECTION", "CACHE", "JOB_CALLBACK_DEBUG", "INVENTORY_HOSTVARS",
    "AWX_HOST", "PROJECT_REVISION", "SUPERVISOR_CONFIG_PATH",
))
FIELD_TYPES = ("string", "boolean")
INJECTOR_KINDS = ("file", "env", "extra_vars")
CUSTOM_KINDS = ("cloud", "net")


class Namespace:
    """AWX's TowerNamespace: attributes only (``tower.filename``)."""


class UnsafeDumper(yaml.SafeDumper):
    """AWX's safe_dump: every string of the extra vars is ``!unsafe``."""


def _unsafe_str(dumper, data):
    return dumper.represent_scalar("!unsafe", data, style='"' if "\n" in data else None)


UnsafeDumper.add_representer(str, _unsafe_str)


def safe_dump(data):
    return yaml.dump(data, Dumper=UnsafeDumper, default_flow_style=False, allow_unicode=True)


def sandbox(strict=False):
    return ImmutableSandboxedEnvironment(undefined=StrictUndefined) if strict else ImmutableSandboxedEnvironment()


def load_credential_type(path):
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def secret_fields(ctype):
    return {f["id"] for f in ctype.get("inputs", {}).get("fields", []) if f.get("secret")}


def template_fields(tmpl):
    """Input names a template refers to (names in ``{{ }}``, without ``tower``/``awx``)."""
    names = set()
    for expr in re.findall(r"{{(.*?)}}", tmpl, re.S):
        names.update(re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\b", expr))
    return names - {"tower", "awx", "filename"}


def check_credential_type(ctype):
    """Problems AWX would refuse the type for (empty when it would save it)."""
    problems = []
    for key in ("name", "kind", "inputs", "injectors"):
        if key not in ctype:
            problems.append("missing %s" % key)
    if ctype.get("kind") not in CUSTOM_KINDS:
        problems.append("kind must be one of %s for a custom type" % (CUSTOM_KINDS,))
    fields = ctype.get("inputs", {}).get("fields", [])
    ids = [f.get("id") for f in fields]
    if len(ids) != len(set(ids)):
        problems.append("duplicate field ids")
    for field in fields:
        if not field.get("id") or not field.get("label"):
            problems.append("field without id or label: %r" % field)
        if field.get("type", "string") not in FIELD_TYPES:
            problems.append("field %s: type must be one of %s" % (field.get("id"), FIELD_TYPES))
        if field.get("secret") and field.get("type", "string") != "string":
            problems.append("field %s: only strings can be secret" % field.get("id"))
    for req in ctype.get("inputs", {}).get("required", []):
        if req not in ids:
            problems.append("required %s is not a field" % req)
    injectors = ctype.get("injectors", {})
    for kind in injectors:
        if kind not in INJECTOR_KINDS:
            problems.append("unknown injector %s" % kind)
    for env_var in injectors.get("env", {}):
        if env_var.startswith("ANSIBLE_") or env_var in ENV_BLOCKLIST:
            problems.append("env %s: AWX does not allow it in credentials" % env_var)
    files = list(injectors.get("file", {}))
    for label in files:
        if label != "template" and not label.startswith("template."):
            problems.append("file injector %s: must be template or template.<name>" % label)
    if "template" in files and len(files) > 1:
        problems.append("file injectors: either one template or several template.<name>, not both")

    # Render every template as AWX's validation does: StrictUndefined over placeholders.
    namespace = {f["id"]: (True if f.get("type") == "boolean" else "EXAMPLE") for f in fields}
    tower = Namespace()
    if "template" in files:
        tower.filename = "EXAMPLE_FILENAME"
    elif files:
        tower.filename = Namespace()
        for label in files:
            setattr(tower.filename, label.split(".", 1)[1], "EXAMPLE_FILENAME")
    namespace["tower"] = tower
    env = sandbox(strict=True)
    for kind in INJECTOR_KINDS:
        for key, tmpl in injectors.get(kind, {}).items():
            if not isinstance(tmpl, str):
                problems.append("%s.%s: a template must be a string" % (kind, key))
                continue
            try:
                env.from_string(tmpl).render(**namespace)
            except Exception as exc:  # jinja2 UndefinedError, TemplateSyntaxError, SecurityError
                problems.append("%s.%s: %s" % (kind, key, exc))
    return problems


def inject(ctype, inputs, private_data_dir, container_root=None):
    """Render ``ctype``'s injectors over ``inputs`` as AWX does for a job.

    Files are written under ``<private_data_dir>/env``; their paths are reported
    under ``container_root`` (``/runner`` in an execution environment) when given.
    Returns ``(extra_vars, env, files)``: the extra vars dict (not yet dumped),
    the environment variables and the paths of the files written.
    """
    env_dir = os.path.join(private_data_dir, "env")
    os.makedirs(env_dir, exist_ok=True)
    tower = Namespace()
    namespace = {"tower": tower}
    for name, value in inputs.items():
        if isinstance(value, bool) or len(value):
            namespace[name] = value
    for field in ctype.get("inputs", {}).get("fields", []):
        if field.get("type") == "boolean" and field["id"] not in inputs:
            namespace[field["id"]] = False
    jinja = sandbox()

    def job_path(path):
        if container_root is None:
            return path
        return os.path.join(container_root, os.path.relpath(path, private_data_dir))

    files = []
    for label, tmpl in ctype.get("injectors", {}).get("file", {}).items():
        data = jinja.from_string(tmpl).render(**namespace)
        handle, path = tempfile.mkstemp(dir=env_dir)
        with os.fdopen(handle, "w") as out:
            out.write(data)
        os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)
        files.append(path)
        if "." not in label:
            tower.filename = job_path(path)
        else:
            if not hasattr(tower, "filename"):
                tower.filename = Namespace()
            setattr(tower.filename, label.split(".", 1)[1], job_path(path))

    env = {}
    for name, tmpl in ctype.get("injectors", {}).get("env", {}).items():
        if name.startswith("ANSIBLE_") or name in ENV_BLOCKLIST:
            continue  # AWX logs and skips these
        env[name] = jinja.from_string(tmpl).render(**namespace)

    def build(node):
        if isinstance(node, dict):
            return {build(k): build(v) for k, v in node.items()}
        if isinstance(node, list):
            return [build(x) for x in node]
        return jinja.from_string(node).render(**namespace)

    extra_vars = build(ctype.get("injectors", {}).get("extra_vars", {}))
    return extra_vars, env, files
