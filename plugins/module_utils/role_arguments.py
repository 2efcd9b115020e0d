# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role's argument spec, checked for one host in one step.

Ansible checks a role's ``meta/argument_specs.yml`` in a task of its own each
time the role starts: about a dozen tasks per host in a site.yml run, each of
them templating the role's defaults again. The first play of site.yml checks
every role's specs here instead, once per host, before any host changes; the
later plays then start their roles with ``rolespec_validate: false``.

The checks are Ansible's own (``ArgumentSpecValidator``, as
``ansible.builtin.validate_argument_spec`` runs it), so a value is refused
here exactly when the role's own check would refuse it.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

SPEC_FILE = os.path.join("meta", "argument_specs.yml")


def spec_roles(roles_dir):
    """The names of the roles under ``roles_dir`` that have an argument spec, sorted."""
    return sorted(name for name in os.listdir(roles_dir) if os.path.isfile(os.path.join(roles_dir, name, SPEC_FILE)))


def distinct_entry_points(specs):
    """``[(entry point, options)]`` of one role's ``argument_specs``, each set of options once.

    Entry points that share one spec (a YAML alias: slurm_common's ``validate``
    and ``facts`` are its ``main``) are checked once, under the first name.
    """
    seen = []
    result = []
    for entry in sorted(specs, key=lambda name: (name != "main", name)):
        options = (specs[entry] or {}).get("options") or {}
        if any(options == other for other in seen):
            continue
        seen.append(options)
        result.append((entry, options))
    return result


def option_sources(options, play_values, defaults):
    """For each option: ``"inventory"`` when the play sets it, ``"default"`` when only a role default does.

    A name the play holds with the default's own value is the default (in a
    role's include, Ansible hands its defaults over with the play's variables).
    Options neither sets are left out: the check then sees them as absent, as
    the role's own check does (``required`` options fail there, too).
    """
    sources = {}
    for name in options:
        if name in play_values and (name not in defaults or play_values[name] != defaults[name]):
            sources[name] = "inventory"
        elif name in defaults:
            sources[name] = "default"
    return sources


def problems(role, entry, options, values, unresolved=None):
    """What the role's own spec check would say about ``values``, one string per problem.

    ``unresolved`` maps an option the play sets to why its template could not
    be resolved yet: that is a problem too, named with the variable.
    """
    where = role if entry == "main" else "%s (%s)" % (role, entry)
    found = ["%s: %s; set it to a value the role's meta/argument_specs.yml allows (role %s)" % (name, why, where)
             for name, why in sorted((unresolved or {}).items())]
    result = ArgumentSpecValidator(options).validate(values, validate_role_argument_spec=True)
    found.extend("%s (role %s)" % (message, where) for message in result.error_messages)
    return found
