# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A check computes its problems once per host.

Ansible templates every argument of an assert (its messages too) before the
assert evaluates its condition: a message that names the variable the
condition computes runs the whole check twice on every host and run. The
checks are fails whose condition is the problems instead (a passing check is a
skip, decided without running the task).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
ASSERTS = ("assert", "ansible.builtin.assert", "ansible.legacy.assert")


def templated(variables):
    """The names of ``variables`` whose values are templates: each reading of one computes it again."""
    if not isinstance(variables, dict):
        return set()
    return {name for name, value in variables.items() if "{{" in str(value) or "{%" in str(value)}


def tasks(node, inherited=frozenset()):
    """Every task in a tasks file, blocks opened, with the computed variables it sees from outside: its enclosing
    blocks' vars and its role's (or play's) templated vars."""
    for task in node or []:
        if not isinstance(task, dict):
            continue
        yield task, inherited
        inner = inherited | templated(task.get("vars"))
        for key in ("block", "rescue", "always"):
            yield from tasks(task.get(key), inner)


def role_vars(path):
    """The templated variables of the role a tasks file belongs to (vars/main.yml and defaults/main.yml)."""
    found = set()
    for kind in ("vars", "defaults"):
        source = path.parents[1] / kind / "main.yml"
        if source.exists():
            found |= templated(yaml.safe_load(source.read_text()))
    return frozenset(found)


def names(text):
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", str(text)))


def doubled(task, inherited=frozenset()):
    """The computed variables (the task's own, its blocks', its role's) that both an assert's condition and one
    of its messages read."""
    action = next((key for key in ASSERTS if key in task), None)
    if action is None:
        return set()
    args = task[action] or {}
    messages = names(args.get("fail_msg", "")) | names(args.get("msg", "")) | names(args.get("success_msg", ""))
    return names(args.get("that", "")) & messages & (templated(task.get("vars")) | set(inherited))


def test_no_assert_computes_its_problems_twice():
    files = sorted(ROOT.glob("roles/*/tasks/*.yml")) + sorted(ROOT.glob("playbooks/*.yml"))
    assert files
    found = []
    for path in files:
        document = yaml.safe_load(path.read_text()) or []
        if path.parts[-2] == "playbooks":
            plays = [(play, templated(play.get("vars"))) for play in document if isinstance(play, dict)]
        else:
            plays = [({"tasks": document}, role_vars(path))]
        for play, outer in plays:
            for key in ("tasks", "pre_tasks", "post_tasks", "handlers"):
                for task, inherited in tasks(play.get(key), frozenset(outer)):
                    names_read_twice = ", ".join(sorted(doubled(task, inherited)))
                    if names_read_twice:
                        found.append("%s: %s (%s)" % (path.relative_to(ROOT), task.get("name"), names_read_twice))
    assert not found, "make these fails with the problems as their condition:\n" + "\n".join(found)


def test_the_check_sees_an_assert_that_reads_its_problems_twice():
    task = {"ansible.builtin.assert": {"that": "__problems | length == 0", "fail_msg": "bad: {{ __problems }}"},
            "vars": {"__problems": "{{ x | f }}"}}
    assert doubled(task) == {"__problems"}
    assert doubled({"ansible.builtin.fail": {"msg": "bad: {{ __problems }}"}, "when": "__problems | length > 0",
                    "vars": {"__problems": "{{ x | f }}"}}) == set()
    # A block's or the role's computed variable is read twice too; a plain value is not computed.
    block = {"block": [{"ansible.builtin.assert": {"that": "__p | length == 0", "fail_msg": "{{ __p }}"}}],
             "vars": {"__p": "{{ x | f }}"}}
    [(_block, _outer), (inner, seen)] = list(tasks([block]))
    assert doubled(inner, seen) == {"__p"}
    assert doubled(inner, frozenset({"__p"})) == {"__p"}
    assert doubled({"ansible.builtin.assert": {"that": "__p | length == 0", "fail_msg": "{{ __p }}"},
                    "vars": {"__p": [1]}}) == set()
