# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check every role's argument spec for this host, in one task (see module_utils/role_arguments.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import inspect
import os
from collections import ChainMap

from ansible.errors import AnsibleError, AnsibleUndefinedVariable
from ansible.plugins.action import ActionBase

from ansible_collections.hybridhpc.slurm.plugins.module_utils import role_arguments

ROLES_DIR = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "roles"))


def _load_trusted(loader, path):
    """A role file's data, its strings templates as Ansible takes them from a role it runs.

    ansible-core 2.19 loads files untrusted unless told (DataLoader.load_from_file's trusted_as_template), and the
    templar leaves an untrusted string as it is: a default such as ``{{ slurm_pam_slurm_adopt | default(false) }}``
    then reached the checks as its text. 2.18 has no such option and trusts every string.
    """
    if "trusted_as_template" in inspect.signature(loader.load_from_file).parameters:
        return loader.load_from_file(path, trusted_as_template=True)
    return loader.load_from_file(path)


def _role_file(loader, role, *path):
    full = os.path.join(ROLES_DIR, role, *path)
    if not os.path.isfile(full):
        return {}
    return _load_trusted(loader, full) or {}


def role_files(loader):
    """``{role: {"defaults", "vars", "specs"}}`` for every role with an argument spec."""
    return {role: {"defaults": _role_file(loader, role, "defaults", "main.yml"),
                   "vars": _role_file(loader, role, "vars", "main.yml"),
                   "specs": _role_file(loader, role, role_arguments.SPEC_FILE).get("argument_specs") or {}}
            for role in role_arguments.spec_roles(ROLES_DIR)}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = False
    _VALID_ARGS = frozenset(("roles", "exclude"))

    def run(self, tmp=None, task_vars=None):
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        everyone = role_arguments.spec_roles(ROLES_DIR)
        exclude = self._task.args.get("exclude") or []
        roles = [role for role in self._task.args.get("roles") or everyone if role not in exclude]
        unknown = [role for role in roles if role not in everyone]
        if unknown:
            raise AnsibleError("roles: %s have no meta/argument_specs.yml in %s" % (", ".join(unknown), ROLES_DIR))
        files = role_files(self._loader)
        # As Ansible layers them when a role runs: the play's variables over
        # role vars over role defaults (every role's: a value may name another
        # role's default, as site.yml's plays see them).
        all_defaults = ChainMap(*[files[role]["defaults"] for role in everyone])
        variables = ChainMap(task_vars, *[files[role]["vars"] for role in everyone], all_defaults)
        found = []
        checked = 0
        # A templar of its own over those layers (Templar's public copy and its
        # available_variables): the task's templar keeps the task's variables.
        templar = self._templar.copy_with_new_env()
        templar.available_variables = variables
        for role in roles:
            # A role's own default first, then another role's (slurm_common
            # holds the cluster-wide ones, such as slurm_elastic_nodesets).
            defaults = ChainMap(files[role]["defaults"], all_defaults)
            for entry, options in role_arguments.distinct_entry_points(files[role]["specs"]):
                values, unresolved = {}, {}
                for name, source in role_arguments.option_sources(options, task_vars, defaults).items():
                    try:
                        values[name] = templar.template(task_vars[name] if source == "inventory" else defaults[name])
                    except AnsibleUndefinedVariable as exc:
                        # A default may name a fact an earlier role
                        # publishes: the role's own check would see it then.
                        if source == "inventory":
                            unresolved[name] = "cannot be resolved before any host changes (%s)" % exc
                found.extend(role_arguments.problems(role, entry, options, values, unresolved))
                checked += 1
        result["changed"] = False
        result["checked"] = checked
        if found:
            result["failed"] = True
            result["msg"] = "Invalid variables for %s: %s" % (task_vars.get("inventory_hostname", "this host"), " | ".join(found))
            result["argument_errors"] = found
        else:
            result["msg"] = "%d argument specs of %d roles hold" % (checked, len(roles))
        return result
