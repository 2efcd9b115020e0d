# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""pam_slurm_adopt: what the cluster's slurm.conf and the inventory must say.

Slurm's pam_slurm_adopt documentation requires:

* ``PrologFlags=Contain`` in slurm.conf *before* the PAM module is used: it
  creates the job's extern step, the step an ssh session is adopted into. A
  node whose jobs have no extern step looks job-free to the module, which then
  refuses every user.
* ``task/cgroup`` and ``proctrack/cgroup``.
* the module only where users must not log in freely: never on login nodes
  (it would refuse every user without a job on the login node itself).

``with_contain`` adds Contain to the PrologFlags a user already set (theirs
are kept); ``problems`` checks the inputs up front, each problem naming the
variable and the fix (site_inputs.ROLE_CHECKS["pam_slurm_adopt"]).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hybridhpc.slurm.plugins.module_utils.cluster_plan import truthy

# pam_slurm_adopt's options (Slurm's pam_slurm_adopt documentation) and their values.
ACTION_CHOICES = {
    "pam_slurm_adopt_action_no_jobs": ("deny", "ignore"),
    "pam_slurm_adopt_action_unknown": ("newest", "allow", "deny"),
    "pam_slurm_adopt_action_adopt_failure": ("deny", "allow"),
    "pam_slurm_adopt_action_generic_failure": ("deny", "ignore", "allow"),
}
LOG_LEVELS = ("quiet", "fatal", "error", "info", "verbose", "debug", "debug2", "debug3", "debug4", "debug5")
CONTAIN = "Contain"
# access.conf(5): a user or group name may not hold the field separator, blanks
# or the characters that open a group or a netgroup.
_BAD_NAME_CHARS = set(" \t\n\r:()@,#")


def _key(config, name):
    """The spelling ``config`` uses for the case-insensitive slurm.conf key ``name``, or None."""
    return next((k for k in config or {} if str(k).lower() == name.lower()), None)


def prolog_flags(config):
    """The PrologFlags of a slurm.conf mapping as a list (a string is comma-split).

    >>> prolog_flags({"prologflags": "Alloc,X11"})
    ['Alloc', 'X11']
    """
    key = _key(config, "PrologFlags")
    value = config.get(key) if key else None
    if value in (None, "", []):
        return []
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    return [str(v).strip() for v in items if str(v).strip()]


def has_contain(config):
    """True when the slurm.conf mapping's PrologFlags hold Contain (any case)."""
    return any(flag.lower() == CONTAIN.lower() for flag in prolog_flags(config))


def with_contain(config, enabled=True):
    """``config`` with Contain added to its PrologFlags when ``enabled``; the user's flags stay first.

    The key keeps the user's spelling and form (a list stays a list, a string
    gets ",Contain"); a mapping that already has Contain, or ``enabled``
    false, comes back unchanged. The input is not modified.

    >>> with_contain({"PrologFlags": "Alloc"})
    {'PrologFlags': 'Alloc,Contain'}
    >>> with_contain({"prologflags": ["X11"]})
    {'prologflags': ['X11', 'Contain']}
    >>> with_contain({}, enabled=False)
    {}
    """
    result = dict(config or {})
    if not enabled or has_contain(result):
        return result
    key = _key(result, "PrologFlags") or "PrologFlags"
    value = result.get(key)
    if isinstance(value, (list, tuple)):
        result[key] = list(value) + [CONTAIN]
    else:
        result[key] = ",".join(prolog_flags(result) + [CONTAIN])
    return result


def _names(value, var, problems):
    if value is None:
        return
    if not isinstance(value, (list, tuple)):
        problems.append("%s: must be a list of names, got %r" % (var, value))
        return
    for i, name in enumerate(value):
        if not isinstance(name, str) or not name or _BAD_NAME_CHARS & set(name) or name.upper() in ("ALL", "EXCEPT", "LOCAL"):
            problems.append(
                "%s[%d]: %r is not a user or group name access.conf can hold (no blanks, ':', '(', ')', '@', ',', '#'; "
                "not ALL, EXCEPT or LOCAL)" % (var, i, name)
            )


def problems(inputs):
    """Problems of the pam_slurm_adopt inputs of one host (``inputs``: variable -> value, missing = default).

    ``is_compute`` / ``is_login``: whether the host is in group slurmd / login.
    ``slurm_pam_slurm_adopt``: the cluster's switch; ``pam_slurm_adopt_enabled``
    the host's (its default follows the cluster's).
    """
    found = []
    cluster_on = truthy(inputs.get("slurm_pam_slurm_adopt", False))
    for var in ("slurm_pam_slurm_adopt", "pam_slurm_adopt_enabled", "pam_slurm_adopt_disable_x11", "pam_slurm_adopt_join_container"):
        if var in inputs and not isinstance(inputs[var], bool):
            found.append("%s: %r must be true or false (a YAML boolean, unquoted)" % (var, inputs[var]))
    host_on = truthy(inputs.get("pam_slurm_adopt_enabled", cluster_on))
    if host_on and inputs.get("is_compute") and inputs.get("is_login"):
        found.append(
            "slurm_pam_slurm_adopt: %s is in group 'login' and in group 'slurmd'; pam_slurm_adopt would refuse ssh to "
            "every user without a job on this node, which users log in to; take it out of group 'login' (or 'slurmd'), "
            "or set pam_slurm_adopt_enabled: false in its host_vars" % inputs.get("host", "this host")
        )
    if host_on and not cluster_on and "slurm_pam_slurm_adopt" in inputs:
        found.append(
            "pam_slurm_adopt_enabled: true on %s, but slurm_pam_slurm_adopt is false for its cluster: without "
            "PrologFlags=Contain jobs have no extern step and the module refuses every user; set "
            "slurm_pam_slurm_adopt: true for the cluster" % inputs.get("host", "this host")
        )
    for var, choices in sorted(ACTION_CHOICES.items()):
        if var in inputs and inputs[var] not in choices:
            found.append("%s: %r is not one of %s; pick one of them" % (var, inputs[var], ", ".join(choices)))
    level = inputs.get("pam_slurm_adopt_log_level")
    if level is not None and level not in LOG_LEVELS:
        found.append("pam_slurm_adopt_log_level: %r is not one of %s (SlurmdDebug's levels)" % (level, ", ".join(LOG_LEVELS)))
    _names(inputs.get("pam_slurm_adopt_allow_users"), "pam_slurm_adopt_allow_users", found)
    _names(inputs.get("pam_slurm_adopt_allow_groups"), "pam_slurm_adopt_allow_groups", found)
    path = inputs.get("pam_slurm_adopt_access_file")
    if path is not None and (not isinstance(path, str) or not path.startswith("/") or set(path) & set(" \t\n\r")):
        found.append("pam_slurm_adopt_access_file: %r must be an absolute path without blanks" % (path,))
    if host_on and inputs.get("is_compute"):
        config = {str(k).lower(): v for k, v in (inputs.get("slurm_config") or {}).items()} if isinstance(
            inputs.get("slurm_config"), dict) else {}
        proctrack = config.get("proctracktype")
        if proctrack not in (None, "") and str(proctrack) != "proctrack/cgroup":
            found.append(
                "slurm_config.ProctrackType: %r; pam_slurm_adopt needs proctrack/cgroup (Slurm's pam_slurm_adopt "
                "documentation); remove ProctrackType from slurm_config or set slurm_pam_slurm_adopt: false" % (proctrack,)
            )
        task = config.get("taskplugin")
        plugins = task if isinstance(task, (list, tuple)) else str(task or "").split(",")
        if task not in (None, "", []) and "task/cgroup" not in [str(p).strip() for p in plugins]:
            found.append(
                "slurm_config.TaskPlugin: %r; pam_slurm_adopt needs task/cgroup among the task plugins; add it "
                "(task/cgroup,task/affinity) or set slurm_pam_slurm_adopt: false" % (task,)
            )
    return found
