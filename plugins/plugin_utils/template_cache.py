# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's templates compiled once per run in ansible-playbook's own process, not once per task and host.

Ansible (ansible-core 2.18) compiles a template string with Jinja each time it
renders it, in the worker forked for one task on one host, and the compiled
code dies with the worker. A role variable such as
``{{ __slurm_common_members.controllers }}`` is compiled again for every task
that reads it on every host: on a 17-node no-op, 5,349 compiles of 221
distinct strings, half of the workers' CPU.

The preload callback calls :func:`prefill` for each of the collection's tasks
in ansible-playbook's own process, before that task's workers fork: the task's
strings, the conditions as Ansible wraps them, and its role's defaults and
vars. The workers inherit the compiled code, and :func:`install` makes
Ansible's environments take it from there.

Only strings read from the collection's own files are kept (an inventory's or
a playbook's strings are compiled as before), only for Ansible's plain
environments, and only when they use no filter whose result changes from call
to call: Jinja folds a filter with constant arguments into the compiled code
(``{{ 60 | random }}``), so keeping its code would give every later render the
first one's result.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re

# What decides the code Jinja generates for a source, besides the source: a
# compile for an environment that differs in any of them is never served.
ENV_SETTINGS = (
    "block_start_string", "block_end_string", "variable_start_string", "variable_end_string",
    "comment_start_string", "comment_end_string", "line_statement_prefix", "line_comment_prefix",
    "trim_blocks", "lstrip_blocks", "newline_sequence", "keep_trailing_newline",
    "optimized", "is_async", "autoescape", "finalize", "code_generator_class",
)
# Filters that may return something else on each call: never kept. (Calls such
# as lookup() or now() are never folded, only filters and tests.)
VOLATILE = re.compile(r"\b(random|shuffle|password_hash|strftime)\b")
# The keys whose strings Ansible evaluates as conditions (assert's "that" too).
CONDITION_KEYS = frozenset(("when", "changed_when", "failed_when", "until", "that"))

CODE = {}
STATE = {"compile": None, "environment": None}


def env_key(env):
    """What, besides the source, decides an environment's compiled code; None when it cannot be served."""
    if getattr(env, "overlayed", False):
        return None
    try:
        key = (type(env),) + tuple(getattr(env, name) for name in ENV_SETTINGS) + (tuple(sorted(env.extensions)),)
        hash(key)
    except (AttributeError, TypeError):
        return None
    return key


def compile_kept(env, source, name=None, filename=None, raw=False, defer_init=False):
    """``Environment.compile`` of Ansible's environments: the kept code for a source prefilled for this environment."""
    if name is None and filename is None and not raw and not defer_init and isinstance(source, str):
        key = env_key(env)
        if key is not None:
            code = CODE.get((key, source))
            if code is not None:
                return code
    return STATE["compile"](env, source, name, filename, raw, defer_init)


def install():
    """Serve Ansible's environments from the kept code (in ansible-playbook's process, before any fork).

    Returns False, changing nothing, when this Ansible lacks what :func:`prefill` relies on."""
    if STATE["compile"] is not None:
        return True
    try:
        from ansible.template import AnsibleEnvironment, _create_overlay, _escape_backslashes  # noqa: F401
    except ImportError:
        return False
    original = AnsibleEnvironment.compile
    STATE["compile"] = original
    AnsibleEnvironment.compile = compile_kept
    return True


def uninstall():
    """Back to Jinja's own compile, and nothing kept (tests)."""
    if STATE["compile"] is not None:
        from ansible.template import AnsibleEnvironment

        AnsibleEnvironment.compile = STATE["compile"]
    STATE["compile"] = None
    STATE["environment"] = None
    CODE.clear()


def condition_template(condition):
    """The template ansible-core 2.18 renders for one condition (playbook/conditional.py)."""
    return "{%% set __cres = %s %%}{{ [true if __cres else false, __cres.__class__.__name__] }}" % condition


def sources(data, key=None):
    """Every template string in a task's or a role's raw data, conditions wrapped as Ansible wraps them."""
    found = []
    if isinstance(data, dict):
        for name, value in data.items():
            found.extend(sources(value, name))
    elif isinstance(data, (list, tuple)):
        for value in data:
            found.extend(sources(value, key))
    elif isinstance(data, str):
        if key in CONDITION_KEYS and "{{" not in data and "{%" not in data:
            found.append(condition_template(data))
        else:
            found.append(data)
    return found


def _environment():
    if STATE["environment"] is None:
        from ansible.template import Templar

        STATE["environment"] = Templar(loader=None).environment
    return STATE["environment"]


def prefill(strings, env=None):
    """Compile each template of ``strings`` that is not kept yet, as a worker's Templar would; returns how many."""
    if STATE["compile"] is None:
        return 0
    from ansible.template import _create_overlay, _escape_backslashes

    env = env if env is not None else _environment()
    key = env_key(env)
    if key is None:
        return 0
    starts = (env.variable_start_string, env.block_start_string, env.comment_start_string)
    compiled = 0
    for text in strings:
        if not isinstance(text, str) or not any(start in text for start in starts) or VOLATILE.search(text):
            continue
        data, overlay = _create_overlay(text, None, env)
        if overlay is not env:
            continue
        data = _escape_backslashes(data, env)
        if (key, data) in CODE:
            continue
        try:
            CODE[(key, data)] = STATE["compile"](env, data)
        except Exception:  # pylint: disable=broad-except
            # The worker compiles it again and reports the error where it belongs.
            continue
        compiled += 1
    return compiled


def _in(root, item):
    """Whether a playbook object was read from a file under ``root`` (its path is ``file:line``)."""
    path = (item.get_path() or "").rsplit(":", 1)[0]
    return bool(path) and os.path.realpath(path).startswith(root + os.sep)


def play_sources(play, root):
    """The template strings of the variables of one of the collection's plays (none for another's)."""
    return sources(play.vars) if _in(root, play) else []


def task_sources(task, collection, root, roles_seen):
    """The template strings of one of the collection's tasks (none for another's), with those of its role's defaults
    and vars the first time one of its tasks comes (``roles_seen``: the role paths done)."""
    role = getattr(task, "_role", None)
    if not (role is not None and getattr(role, "_role_collection", None) == collection or _in(root, task)):
        return []
    found = sources(getattr(task, "_ds", None))
    # Its conditions with those it inherits (an imported role's, a block's).
    found.extend(sources(list(getattr(task, "when", None) or []), "when"))
    if role is not None and role.get_role_path() not in roles_seen:
        roles_seen.add(role.get_role_path())
        found.extend(sources(getattr(role, "_default_vars", None)))
        found.extend(sources(getattr(role, "_role_vars", None)))
    return found
