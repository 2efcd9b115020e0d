"""Every conditional in the collection's YAML is a string, never a mapping.

An unquoted list item such as ``- out is search('CLUSTER: onprem')`` holds
``': '``, so YAML reads it as a one-key mapping. Ansible takes a non-empty
mapping as true (a deprecation warning until 2.19), so the assert can never
fail: a check that tests nothing. Quoting the whole item keeps it a string.
"""

import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
FOLDERS = ("roles", "playbooks", "extensions", "inventories", "lab")
CONDITIONAL_KEYS = ("when", "changed_when", "failed_when", "until", "that")


def mapping_conditionals(node, found):
    """Append (key, item) for each conditional item of ``node`` that YAML made a mapping."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in CONDITIONAL_KEYS:
                found.extend((key, item) for item in (value if isinstance(value, list) else [value]) if isinstance(item, dict))
            mapping_conditionals(value, found)
    elif isinstance(node, list):
        for item in node:
            mapping_conditionals(item, found)
    return found


def yaml_files():
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in (".yml", ".yaml") and not any(part.startswith(".") for part in path.relative_to(ROOT).parts):
                yield path


def test_a_colon_in_an_unquoted_assertion_is_found():
    tasks = yaml.safe_load("- ansible.builtin.assert:\n    that:\n      - out is search('CLUSTER: onprem')\n      - \"out is search('CLUSTER: cloud')\"\n")
    assert mapping_conditionals(tasks, []) == [("that", {"out is search('CLUSTER": "onprem')"})]


def test_no_conditional_in_the_collection_is_a_mapping():
    offenders = []
    for path in yaml_files():
        for document in yaml.safe_load_all(path.read_text()):
            offenders.extend("%s: %s %r" % (path.relative_to(ROOT), key, item) for key, item in mapping_conditionals(document, []))
    assert offenders == []


# ansible-core 2.19 refuses a conditional whose result is a string: a boolean
# variable given as `-e name=false` is the text "false" until `| bool` makes it
# one (2.18 took any non-empty string as true, so "false" passed as true).
def bool_variables():
    """The variables every role's argument specs declare as bool."""
    names = set()
    for spec in sorted((ROOT / "roles").glob("*/meta/argument_specs.yml")):
        for entry in (yaml.safe_load(spec.read_text()).get("argument_specs") or {}).values():
            names.update(name for name, option in (entry.get("options") or {}).items() if option.get("type") == "bool")
    return names


def bare_bool_uses(condition, names):
    """The names of ``names`` that ``condition`` uses without ``| bool`` (a default between the two is fine)."""
    pattern = re.compile(r"(?<![\w.'\"])(%s)\b(?!\s*\|\s*(?:default\([^)]*\)\s*\|\s*)?bool)(?!\s*(?:==|!=|is\b|\[|\.))"
                         % "|".join(sorted(map(re.escape, names))))
    return sorted({match.group(1) for match in pattern.finditer(condition)})


def when_conditions(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "when":
                yield from (item for item in (value if isinstance(value, list) else [value]) if isinstance(item, str))
            elif not (key == "loop" or key.startswith("with_")):  # a loop item's own "when" key is data
                yield from when_conditions(value)
    elif isinstance(node, list):
        for item in node:
            yield from when_conditions(item)


def test_a_bare_boolean_in_a_condition_is_found():
    names = {"slurm_accounting", "apptainer_enabled"}
    assert bare_bool_uses("slurm_accounting | default(true)", names) == ["slurm_accounting"]
    assert bare_bool_uses("apptainer_enabled or x", names) == ["apptainer_enabled"]
    assert bare_bool_uses("slurm_accounting | default(true) | bool", names) == []
    assert bare_bool_uses("not apptainer_enabled | bool", names) == []
    assert bare_bool_uses("'apptainer_enabled' in x and hostvars[h].slurm_accounting", names) == []


def test_every_boolean_variable_in_a_condition_goes_through_bool():
    names = bool_variables()
    offenders = []
    for folder in ("roles", "playbooks"):
        for path in sorted((ROOT / folder).rglob("*.yml")):
            if "tasks" not in path.parts and folder == "roles":
                continue
            for document in yaml.safe_load_all(path.read_text()):
                for condition in when_conditions(document):
                    used = bare_bool_uses(condition, names)
                    if used:
                        offenders.append("%s: %s (%s)" % (path.relative_to(ROOT), condition, ", ".join(used)))
    assert offenders == []
