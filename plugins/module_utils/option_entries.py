# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Entries of a list option checked against an option spec, as Ansible checks a module's own options.

For an option whose entries take another option's (or another module's)
options, documented once there: slurm_config_files' ``services`` (each as its
``service``), slurm_accounting's ``qos``, ``accounts`` and ``users`` (each as
slurm_qos, slurm_account and slurm_user).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

from ansible.module_utils.common.arg_spec import ArgumentSpecValidator


def where(option, index, entry):
    """How a message names an entry: ``users[2] (alice)``."""
    name = entry.get("name") if isinstance(entry, dict) else None
    return "%s[%d]%s" % (option, index, " (%s)" % name if name else "")


def validated(option, entries, spec):
    """Every entry checked and completed (defaults, types, choices) against ``spec``.

    Raises ValueError naming the first bad entry (``services[1] (power.timer): ...``).
    """
    validator = ArgumentSpecValidator(spec)
    result = []
    for index, entry in enumerate(entries or []):
        if not isinstance(entry, dict):
            raise ValueError("%s: expected a dict, got %r" % (where(option, index, entry), entry))
        outcome = validator.validate(entry)
        if outcome.error_messages:
            raise ValueError("%s: %s" % (where(option, index, entry), "; ".join(outcome.error_messages)))
        result.append(outcome.validated_parameters)
    return result
