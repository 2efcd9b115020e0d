"""Every conditional in the collection's YAML is a string, never a mapping.

An unquoted list item such as ``- out is search('CLUSTER: onprem')`` holds
``': '``, so YAML reads it as a one-key mapping. Ansible takes a non-empty
mapping as true (a deprecation warning until 2.19), so the assert can never
fail: a check that tests nothing. Quoting the whole item keeps it a string.
"""

import pathlib

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
