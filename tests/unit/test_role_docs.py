"""Every input a role or playbook reads is declared and documented.

A role's inputs are what its defaults, tasks, templates, vars and handlers
read, and what the playbooks read (host and group variables a user sets, such
as slurm_node_name or slurmd_serial). Each must be an option of the reading
role's meta/argument_specs.yml (Ansible validates it at role start,
`ansible-doc -t role` shows it) and appear in that role's README.md; a name
only the playbooks read must be in some role's spec and README.

Names are found with Jinja's own parser rather than a regex: it tells a read
(`{{ x }}`) from a loop variable or a `{% set %}`, and strings, filters and
attributes from variables. Expressions are every templated string and the
bare ones of `when`, `changed_when`, `failed_when`, `until` and assert's
`that`. Other hosts' variables are read through hostvars (`hostvars[h]['x']`,
`... | map('extract', hostvars) | selectattr('x')`): those names count too.
Not inputs: internal `__*` names, facts and magic variables, loop variables,
registered results, set_fact names (the facts slurm_common publishes,
`slurm_common_*`, among them) and vars: a file defines for itself.

slurm_common's validate.yml checks every role's inputs before any host
changes: it hands them to Python checks on behalf of their roles, so what it
reads must be declared by some role (its owner), like what the playbooks read.
"""

import functools
import pathlib
import re
import warnings

import pytest
import yaml
from jinja2 import Environment, nodes

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLES = sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "tasks").is_dir())
ROLE_FOLDERS = ("defaults", "tasks", "templates", "vars", "handlers")
# Keys whose string value is a bare Jinja expression.
EXPRESSION_KEYS = {"when", "changed_when", "failed_when", "until", "that"}
MAGIC = {
    "hostvars", "groups", "group_names", "inventory_hostname", "inventory_hostname_short", "inventory_dir",
    "inventory_file", "playbook_dir", "play_hosts", "role_path", "role_name", "role_names", "omit", "item",
    "environment", "vars", "loop", "lookup", "query", "q", "now", "range", "dict", "lipsum", "cycler", "joiner",
    "namespace", "undef", "true", "false", "none", "True", "False", "None",
}
# Functions of plugins/filter that read other hosts' variables straight from hostvars.
HOSTVARS_READ = re.compile(r"""\bhv(?:\.get\(|\[)\s*["'](\w+)["']""")
# Files that read other roles' inputs on their behalf (site-wide validation).
SITE_CHECKS = {ROOT / "roles" / "slurm_common" / "tasks" / "validate.yml"}
JINJA = Environment(extensions=["jinja2.ext.do", "jinja2.ext.loopcontrols"])


class AnsibleLoader(yaml.SafeLoader):
    """safe_load that keeps !vault and !unsafe values as plain strings."""


AnsibleLoader.add_multi_constructor("!", lambda loader, suffix, node: loader.construct_scalar(node))


def _template_names(text, where):
    """(variables read, variables assigned, other hosts' variables read) of one template."""
    try:
        with warnings.catch_warnings():  # regex escapes in Jinja string literals warn; not this test's business
            warnings.simplefilter("ignore", DeprecationWarning)
            tree = JINJA.parse(text)
    except Exception as exc:  # a template Ansible renders must parse; say where it does not
        raise AssertionError("%s: %s" % (where, exc)) from exc
    loads, stores, remote = set(), set(), set()
    for node in tree.find_all(nodes.Name):
        (loads if node.ctx == "load" else stores).add(node.name)
    for node in tree.find_all((nodes.Getitem, nodes.Getattr, nodes.Filter)):
        remote.update(_hostvars_attribute(node))
    return loads, stores, remote


def _is_hostvars(node):
    return isinstance(node, nodes.Name) and node.name == "hostvars"


def _host_rows(node):
    """True when node is one host's variables (hostvars[h]) or a sequence of them (map('extract', hostvars))."""
    if isinstance(node, nodes.Getitem):
        return _is_hostvars(node.node)
    while isinstance(node, nodes.Filter):
        if node.name == "map" and len(node.args) == 2 and _is_hostvars(node.args[1]):
            return True
        node = node.node
    return False


def _const(node):
    return node.value.split(".")[0] if isinstance(node, nodes.Const) and isinstance(node.value, str) else None


def _hostvars_attribute(node):
    if isinstance(node, nodes.Getitem) and _host_rows(node.node) and isinstance(node.node, nodes.Getitem):
        yield _const(node.arg)
    elif isinstance(node, nodes.Getattr) and isinstance(node.node, nodes.Getitem) and _host_rows(node.node):
        yield node.attr
    elif isinstance(node, nodes.Filter):
        if node.name == "map" and len(node.args) == 3 and _is_hostvars(node.args[1]):
            yield _const(node.args[2])
        elif node.name in ("selectattr", "rejectattr") and node.args and _host_rows(node.node):
            yield _const(node.args[0])
        elif node.name == "map" and _host_rows(node.node):
            yield from (_const(kw.value) for kw in node.kwargs if kw.key == "attribute")


class Scan:
    """Names read and defined in a set of files."""

    def __init__(self):
        self.reads = {}  # name -> first file reading it
        self.facts = set()  # registered results and set_fact names: defined at run time, anywhere

    def read(self, names, where):
        for name in names:
            if name:
                self.reads.setdefault(name, where)

    def template(self, text, where, local):
        loads, stores, remote = _template_names(text, where)
        self.read(loads - stores - local, where)
        self.read(remote, where)

    def yaml_file(self, path):
        where = str(path.relative_to(ROOT))
        data = yaml.load(path.read_text(), Loader=AnsibleLoader)
        local = set()
        self._definitions(data, local)
        self._walk(data, None, where, local)

    def _definitions(self, node, local):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "register" and isinstance(value, str):
                    self.facts.add(value)
                elif key in ("set_fact", "ansible.builtin.set_fact") and isinstance(value, dict):
                    self.facts.update(k for k in value if k != "cacheable")
                elif key == "vars" and isinstance(value, dict):
                    local.update(value)
                elif key == "loop_var":
                    local.add(value)
                self._definitions(value, local)
        elif isinstance(node, list):
            for value in node:
                self._definitions(value, local)

    def _walk(self, node, key, where, local):
        if isinstance(node, dict):
            for k, value in node.items():
                self._walk(value, k, where, local)
        elif isinstance(node, list):
            for value in node:
                self._walk(value, key, where, local)
        elif isinstance(node, str):
            if key in EXPRESSION_KEYS and "{{" not in node:
                self.template("{{ %s }}" % node, where, local)
            elif "{{" in node or "{%" in node:
                self.template(node, where, local)


def _inputs(scan, defined=()):
    """What a scan read that a user may set: no internal, magic or run-time names."""
    return {
        name: where
        for name, where in scan.reads.items()
        if not name.startswith(("__", "ansible_"))
        and name not in MAGIC
        and name not in scan.facts
        and name not in defined
    }


def _scan(paths):
    scan = Scan()
    for path in paths:
        if path.suffix in (".yml", ".yaml"):
            scan.yaml_file(path)
        else:
            scan.template(path.read_text(), str(path.relative_to(ROOT)), set())
    return scan


def _role_files(role, site_checks=True):
    return sorted(
        p
        for folder in ROLE_FOLDERS
        for p in (ROOT / "roles" / role / folder).rglob("*")
        if p.is_file() and (site_checks or p not in SITE_CHECKS)
    )


def _playbook_files():
    return sorted((ROOT / "playbooks").rglob("*.yml"))


@functools.lru_cache(maxsize=None)
def _all_facts():
    """Run-time names of every role and playbook (a fact one role sets, another reads)."""
    return frozenset(_scan([p for role in ROLES for p in _role_files(role)] + _playbook_files()).facts)


def _specs(role):
    path = ROOT / "roles" / role / "meta" / "argument_specs.yml"
    return yaml.safe_load(path.read_text())["argument_specs"]


def _options(role):
    return {name: opt for entry in _specs(role).values() for name, opt in (entry.get("options") or {}).items()}


def _defaults(role):
    path = ROOT / "roles" / role / "defaults" / "main.yml"
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


def _readme(role):
    path = ROOT / "roles" / role / "README.md"
    return path.read_text() if path.exists() else ""


def _templated(value):
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(_templated(v) for v in value.values())
    if isinstance(value, list):
        return any(_templated(v) for v in value)
    return False


def _plugin_hostvars_reads():
    return {
        name: str(path.relative_to(ROOT))
        for path in sorted((ROOT / "plugins" / "filter").glob("*.py"))
        for name in HOSTVARS_READ.findall(path.read_text())
        if not name.startswith(("__", "ansible_"))
    }


@pytest.mark.parametrize("role", ROLES)
def test_every_input_a_role_reads_is_in_its_argument_specs(role):
    facts = _all_facts()
    scan = _scan(_role_files(role, site_checks=False))
    scan.facts |= facts
    declared = _options(role)
    missing = {name: where for name, where in _inputs(scan).items() if name not in declared}
    assert not missing, "read by role %s, missing from roles/%s/meta/argument_specs.yml: %s" % (role, role, missing)


def test_every_input_the_playbooks_site_checks_and_filters_read_is_declared_by_some_role():
    scan = _scan(_playbook_files() + sorted(SITE_CHECKS))
    scan.facts |= _all_facts()
    reads = dict(_inputs(scan), **_plugin_hostvars_reads())
    declared = {name for role in ROLES for name in _options(role)}
    missing = {name: where for name, where in reads.items() if name not in declared and name not in scan.facts}
    assert not missing, "read by playbooks, site checks or filters, in no role's meta/argument_specs.yml: %s" % missing


@pytest.mark.parametrize("role", ROLES)
def test_every_option_is_in_the_role_readme(role):
    readme = _readme(role)
    assert readme, "roles/%s/README.md is missing" % role
    missing = [name for name in _options(role) if not re.search(r"`%s`" % re.escape(name), readme)]
    assert not missing, "options of roles/%s/meta/argument_specs.yml not in its README.md: %s" % (role, missing)


@pytest.mark.parametrize("role", ROLES)
def test_every_default_is_an_option_with_the_same_default(role):
    options = _specs(role)["main"].get("options") or {}
    missing = [name for name in _defaults(role) if name not in options]
    assert not missing, "roles/%s/defaults/main.yml variables missing from the main entry point: %s" % (role, missing)
    for name, value in _defaults(role).items():
        option = options[name]
        if _templated(value):
            # Worked out from facts or other variables: the description says how, there is no static default.
            assert "default" not in option, "%s: default is templated in defaults/main.yml, leave it out of the spec" % name
        else:
            assert option.get("default") == value, "%s: spec default %r != defaults/main.yml %r" % (name, option.get("default"), value)


@pytest.mark.parametrize("role", ROLES)
def test_options_are_described_typed_and_secrets_hidden(role):
    for entry_name, entry in _specs(role).items():
        for name, option in (entry.get("options") or {}).items():
            where = "%s %s %s" % (role, entry_name, name)
            assert option.get("description"), where + ": no description"
            assert option.get("type"), where + ": no type"
            assert not (option.get("required") and "default" in option), where + ": required with a default"
            if re.search(r"(_pass|_password|_key_b64|_token|_secret)$", name):
                assert option.get("no_log") is True, where + ": a secret needs no_log: true"


def test_every_tasks_from_a_playbook_uses_is_an_entry_point():
    used = set()
    for path in _playbook_files():
        text = path.read_text()
        for role, tasks_from in re.findall(r"name:\s*hybridhpc\.slurm\.(\w+)\s*\n\s*tasks_from:\s*(\w+)", text):
            used.add((role, tasks_from))
    assert used, "no tasks_from found: the pattern no longer matches the playbooks"
    missing = sorted((role, entry) for role, entry in used if entry not in _specs(role))
    assert not missing, "tasks_from entry points without an argument_specs entry: %s" % missing


def test_the_scan_sees_reads_through_hostvars_and_ignores_local_names():
    scan = Scan()
    scan.template(
        "{% for h in groups['all'] %}{{ hostvars[h]['k8s_node_name'] }}{% endfor %}"
        "{{ groups['x'] | map('extract', hostvars) | selectattr('slurm_k8s_shared') | map(attribute='slurm_node_name') | list }}"
        "{{ groups['x'] | map('extract', hostvars, 'slurm_cluster_name') | list }}"
        "{% set local = 1 %}{{ local + wanted | default(1) }}{{ x.results | selectattr('rc') | list }}",
        "test",
        set(),
    )
    assert set(_inputs(scan)) == {"k8s_node_name", "slurm_k8s_shared", "slurm_node_name", "slurm_cluster_name", "wanted", "x"}
