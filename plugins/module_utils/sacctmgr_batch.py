# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Many QoS, accounts and users in one module run (the slurm_accounting module).

Each entry is checked and completed by the option spec of the module that
manages one such object (slurm_qos, slurm_account, slurm_user) and applied
by that module's ensure, so one entry here behaves exactly as one call of
that module. What this adds is the order sacctmgr needs: what others refer
to is created first and removed last.
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

from ansible_collections.hybridhpc.slurm.plugins.module_utils import option_entries
from ansible_collections.hybridhpc.slurm.plugins.module_utils.sacctmgr import SacctmgrError
from ansible_collections.hybridhpc.slurm.plugins.module_utils.sacctmgr_assoc import (
    account_argument_spec,
    ensure_account,
    ensure_qos,
    ensure_user,
    qos_argument_spec,
    user_argument_spec,
)

# option -> (the object's key in an ensure result, ensure, option spec)
KINDS = {
    "qos": ("qos", ensure_qos, qos_argument_spec),
    "accounts": ("account", ensure_account, account_argument_spec),
    "users": ("user", ensure_user, user_argument_spec),
}

# Present: a QoS before the accounts and users that list it, an account before
# its users. Absent, the other way round: sacctmgr refuses to delete an account
# a user still has as default, or a QoS that is still an association's default.
ORDER = (("qos", "present"), ("accounts", "present"), ("users", "present"),
         ("users", "absent"), ("accounts", "absent"), ("qos", "absent"))


def validated(entries):
    """``{option: [params]}``: every entry checked and completed as its one-object module would.

    ``entries``: ``{"qos": [...], "accounts": [...], "users": [...]}`` (any
    may be missing). Raises ValueError naming the entry (``users[2] (alice)``)
    for unknown options, wrong types or choices: before anything is written.
    """
    return {option: option_entries.validated(option, entries.get(option), spec())
            for option, (_key, _ensure, spec) in KINDS.items()}


def steps(params):
    """``[(option, index, params)]`` in the order of ORDER; the given order within each."""
    return [(option, index, entry)
            for option, state in ORDER
            for index, entry in enumerate(params[option])
            if entry["state"] == state]


def apply(runner, entries, check_mode=False, diff=False):
    """Bring every entry to what it says; ``{"changed", "commands", "changes", "warnings"[, "diff"]}``.

    ``changes`` lists the entries that changed (``{"option", "name", "state",
    "commands"}``). A bad entry or a failed sacctmgr call raises (ValueError,
    SacctmgrError) with the entry named; the entries before it stay applied,
    as a loop over the one-object module would leave them.
    """
    result = {"changed": False, "commands": [], "changes": [], "warnings": []}
    diffs = []
    for option, index, params in steps(validated(entries)):
        key, ensure, _spec = KINDS[option]
        where = option_entries.where(option, index, params)
        try:
            outcome = ensure(runner, params, check_mode=check_mode, diff=diff)
        except ValueError as err:
            raise ValueError("%s: %s" % (where, err)) from err
        except SacctmgrError as err:
            raise SacctmgrError("%s: %s" % (where, err.msg), argv=err.argv, rc=err.rc, stdout=err.stdout,
                                stderr=err.stderr) from err
        result["warnings"].extend("%s: %s" % (where, w) for w in outcome["warnings"])
        if outcome["changed"]:
            result["changed"] = True
            result["commands"].extend(outcome["commands"])
            result["changes"].append({"option": option, "name": outcome[key].get("name") or params["name"],
                                      "state": params["state"], "commands": outcome["commands"]})
            if diff:
                diffs.append(dict(outcome["diff"], before_header=where, after_header=where))
    if diff:
        result["diff"] = diffs
    return result
