# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""QoS, accounts and users in the Slurm accounting database, with sacctmgr.

Builds on module_utils/sacctmgr.py (runner, parser, ``apply_plan``,
``run_module``) the same three layers: value normalisation (pure), object
views read with ``sacctmgr show``, and planning functions
(:func:`plan_qos`, :func:`plan_account`, :func:`plan_user`) that return
``{"changes": [args, ...], "after": view}`` for ``apply_plan``.

Every value is compared in one canonical form, the one ``sacctmgr show``
prints: integer limits as int with -1 for "no limit", times in minutes with
-1 for "no limit", TRES as a dict of name -> value as printed, lists sorted.

sacctmgr facts this relies on, checked on the lab's slurm-wlm 24.11.5:

* ``show qos where name=Q format=Name,Description,Priority,Preempt,
  PreemptMode,Flags,UsageFactor,MaxJobsPU,MaxSubmitPU,MaxWall,MaxTRESPU,
  MaxTRES,GrpTRES,GrpJobs,GrpSubmit`` prints e.g.
  ``testq|test qos|10|lowq|requeue|DenyOnLimit,NoDecay|1.500000|4|8|
  2-00:00:00|cpu=8,mem=16G|cpu=4,mem=16G,node=2|cpu=100,mem=1000M|20|40``;
  a fresh QoS: ``testq|testq|0||cluster||1.000000||||||||`` (description
  defaults to the name). Unknown names print nothing, rc 0.
* slurmdbd lower-cases names AND descriptions/organizations (``description=
  "Test QoS"`` shows ``test qos``), so those are compared in lower case.
* Unset integer limits print empty; ``=-1`` clears them. ``priority=-1``
  resets to 0, ``usagefactor=-1`` to 1.000000.
* Times print as ``[D-]HH:MM:SS`` (``maxwall=90`` -> ``01:30:00``,
  ``2-00:00:00``), empty when unlimited; ``-1`` and ``UNLIMITED`` clear.
* TRES limits MERGE: ``grptres=mem=1500M`` keeps the other TRES already set;
  ``name=-1`` clears one. mem is printed in the largest unit that divides it
  exactly: ``mem=16384`` -> ``16G``, ``1048576M`` -> ``1T``, ``1000M`` stays.
  An unknown TRES fails: ``slurmdb_format_tres_str: no TRES known by type
  gres/gpu`` (rc 1; gres TRES need AccountingStorageTRES).
* ``preempt=`` (empty) clears the list, ``flags=-1`` clears the flags,
  ``preemptmode=off`` or ``=cluster`` shows ``cluster``; ``suspend,gang``
  shows ``gang,suspend``; a bad mode: ``Bad Preempt Mode given``.
  A bad flag lists the valid ones: DenyOnLimit, EnforceUsageThreshold,
  NoReserve, PartitionMaxNodes, PartitionMinNodes, OverPartQOS,
  PartitionTimeLimit, RequiresReservation, NoDecay, Relative,
  UsageFactorSafe. A bad QoS name: ``You gave a bad qos 'x'. Valid QOS's
  are ...`` (rc 1). Modifying a QoS to the values it has is accepted.
* ``delete qos where name=Q`` of a QoS that is an association's default:
  ``Associations listed below have these as their Default QOS. ...
  Changes Discarded`` (rc 1). A QoS only in QOS lists / preempt lists is
  deleted silently.
* ``show account where name=A format=Account,Descr,Org``; ``add account A
  cluster=C parent=P ...`` without description/organization sets them to
  the account name (organization: the parent's name unless the parent is
  root). ``add account`` of an existing account on a cluster where it has an
  association fails: ``Already existing account A on cluster C``.
* ``show assoc`` prints inherited (parent) Max* limits and QoS for an
  association that has none of its own; the ``wopl`` (WithOutParentLimits)
  option prints only the association's own values, so every read uses it.
  With it an association inheriting its QoS shows an empty QOS, which
  ``qos=`` (empty) restores.
* ``show assoc where account=A user= wopl format=...`` lists only the
  account's own (user-less) associations; ``partition=`` (empty) in a
  ``where`` likewise matches only associations without partition, whereas
  leaving partition out matches every partition.
* ``modify account where name=A cluster=C set parent=P`` moves the account;
  setting the parent it already has fails (``Request didn't affect anything``,
  rc 1), so parent is only written when it differs. Other settings may be
  re-set to their value. ``fairshare=parent`` shows ``parent``.
* ``show user withassoc where name=U format=User,AdminLevel,DefaultAccount,
  Cluster,Account,Partition``: one line per association; DefaultAccount is
  per cluster. AdminLevel prints ``None``, ``Operator``, ``Administrator``.
* ``add user U account=A cluster=C [partition=P] ...``: the first
  association of a user on a cluster becomes its default there.
  ``modify user where name=U cluster=C set defaultaccount=A`` fails unless
  the user has an association with A on C (``Can't modify because these
  users aren't associated with new default account``).
* ``delete user where name=U account=A cluster=C`` of the default account
  fails (``You can not remove the default account of a user``); so does
  ``delete account`` of an account that is some user's default. ``delete``
  of nothing prints `` Nothing deleted`` (rc 1).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import re

from ansible_collections.hybridhpc.slurm.plugins.module_utils.sacctmgr import (
    SacctmgrError,
    apply_plan,
    split_list,
)

UNLIMITED_WORDS = ("-1", "unlimited", "infinite", "")
QOS_FLAGS = (
    "DenyOnLimit",
    "EnforceUsageThreshold",
    "NoDecay",
    "NoReserve",
    "OverPartQOS",
    "PartitionMaxNodes",
    "PartitionMinNodes",
    "PartitionTimeLimit",
    "Relative",
    "RequiresReservation",
    "UsageFactorSafe",
)
# Preempt modes of sacctmgr(1); "off" and "cluster" both show as "cluster".
PREEMPT_MODES = ("cluster", "off", "cancel", "requeue", "suspend", "gang")
PREEMPT_MODE_NONE = "cluster"
ADMIN_LEVELS = {"none": "None", "operator": "Operator", "administrator": "Administrator"}
MEMORY_TRES = ("mem", "vmem")
_MEM_UNITS = (("P", 1024 ** 3), ("T", 1024 ** 2), ("G", 1024), ("M", 1))
_NAME_RE = re.compile(r"^[a-z0-9_][a-z0-9_.@-]*$")
_TRES_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*(/[a-z0-9_:.-]+)?$")
_TIME_RE = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")

# --------------------------------------------------------------------------
# Values (pure): input -> canonical, shown -> canonical, canonical -> set value


def normalize_name(option, value):
    """Validate an account/user/QoS name; return it lower-cased."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{option}: a non-empty name is required")
    name = value.strip().lower()
    if not _NAME_RE.match(name):
        raise ValueError(
            f"{option}: invalid name {value!r}: use letters, digits, '_', '.', '@' and '-' "
            "(Slurm stores names in lower case)"
        )
    return name


def normalize_names(option, values):
    """Validate a list of names; return them lower-cased, sorted, de-duplicated."""
    return sorted({normalize_name(option, v) for v in values or ()})


def normalize_int(option, value, allow_clear=True):
    """An integer limit: int >= 0, or -1 (no limit) when ``allow_clear``."""
    if isinstance(value, bool):
        raise ValueError(f"{option}: expected an integer, got {value!r}")
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(
            f"{option}: expected an integer{' (-1 clears the limit)' if allow_clear else ''}, "
            f"got {value!r}"
        ) from None
    if number < (-1 if allow_clear else 0):
        raise ValueError(
            f"{option}: must be >= 0{' or -1 to clear the limit' if allow_clear else ''}, got {value!r}"
        )
    return number


def shown_int(value, unset=-1):
    """An integer as ``show`` prints it; empty means ``unset``."""
    value = (value or "").strip()
    return int(value) if value.lstrip("-").isdigit() else unset


def time_to_minutes(option, value):
    """Slurm time (minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]) -> minutes; -1 = no limit.

    Seconds round up to the next minute, as Slurm's time_str2mins does.
    """
    if isinstance(value, bool):
        raise ValueError(f"{option}: expected a Slurm time, got {value!r}")
    if isinstance(value, int):
        if value < -1:
            raise ValueError(f"{option}: minutes must be >= 0 or -1 for no limit, got {value}")
        return value
    text = str(value).strip()
    if text.lower() in UNLIMITED_WORDS:
        return -1
    match = _TIME_RE.match(text)
    if not match:
        raise ValueError(
            f"{option}: invalid time {value!r}: use minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, "
            "D-HH:MM:SS, or -1/UNLIMITED for no limit"
        )
    days, first, second, third = match.groups()
    if days is not None:
        hours, minutes, seconds = int(first), int(second or 0), int(third or 0)
        total = int(days) * 1440 + hours * 60 + minutes
    elif third is not None:
        total, seconds = int(first) * 60 + int(second), int(third)
    elif second is not None:
        total, seconds = int(first), int(second)
    else:
        total, seconds = int(first), 0
    return total + (1 if seconds else 0)


def shown_time(value):
    """A time as ``show`` prints it (``[D-]HH:MM:SS``, empty) -> minutes or -1."""
    return time_to_minutes("shown time", value or "-1")


def format_minutes(minutes):
    """Minutes as ``show`` prints them (``01:30:00``, ``2-00:00:00``); '' for -1."""
    if minutes is None or minutes < 0:
        return ""
    days, rest = divmod(minutes, 1440)
    text = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{text}" if days else text


def _memory_mb(option, name, value):
    text = str(value).strip().upper()
    match = re.match(r"^(\d+)([MGTP]?)B?$", text)
    if not match:
        raise ValueError(
            f"{option}: invalid {name} value {value!r}: use megabytes or a number with "
            "M, G, T or P (for example 16G)"
        )
    factor = dict(_MEM_UNITS)[match.group(2) or "M"]
    return int(match.group(1)) * factor


def format_memory(megabytes):
    """Memory the way sacctmgr prints a TRES: largest unit dividing exactly."""
    if megabytes == 0:
        return "0"
    for unit, factor in _MEM_UNITS:
        if megabytes % factor == 0:
            return f"{megabytes // factor}{unit}"
    return f"{megabytes}M"  # not reached: factor 1 always divides


def tres_value(option, name, value):
    """One TRES value in its printed form (mem units normalised)."""
    if isinstance(value, bool) or value is None:
        raise ValueError(f"{option}: TRES {name} needs a count, got {value!r}")
    if name in MEMORY_TRES:
        return format_memory(_memory_mb(option, name, value))
    text = str(value).strip()
    if not text.isdigit():
        raise ValueError(
            f"{option}: TRES {name} needs a whole number >= 0, got {value!r} (leave a TRES "
            "out of the dict to remove its limit)"
        )
    return str(int(text))


def normalize_tres(option, tres):
    """A TRES dict ({cpu: 8, mem: 16G, gres/gpu: 2}) -> {name: printed value}."""
    if not isinstance(tres, dict):
        raise ValueError(f"{option}: expected a dict of TRES name to count, like {{cpu: 8, mem: 16G}}")
    result = {}
    for key, value in tres.items():
        name = str(key).strip().lower()
        if not _TRES_NAME_RE.match(name):
            raise ValueError(
                f"{option}: invalid TRES name {key!r}: use names like cpu, mem, node, billing, gres/gpu"
            )
        result[name] = tres_value(option, name, value)
    return result


def shown_tres(value):
    """``cpu=8,mem=16G`` -> {"cpu": "8", "mem": "16G"} (values re-normalised)."""
    result = {}
    for item in (value or "").split(","):
        name, sep, count = item.strip().partition("=")
        if sep and name:
            try:
                result[name.lower()] = tres_value("shown TRES", name.lower(), count)
            except ValueError:
                result[name.lower()] = count
    return result


def tres_setting(current, wanted):
    """The ``name=value,...`` that makes the TRES limits exactly ``wanted``.

    TRES limits merge in sacctmgr, so each TRES set now but not wanted is
    cleared with ``name=-1``. Returns ``None`` when nothing differs.
    """
    if dict(current or {}) == dict(wanted):
        return None
    items = [f"{name}={wanted[name]}" for name in sorted(wanted)]
    items += [f"{name}=-1" for name in sorted(set(current or {}) - set(wanted))]
    return ",".join(items)


def normalize_preempt_mode(value):
    """``suspend,gang`` -> ``gang,suspend``; off/cluster -> ``cluster``."""
    modes = split_list(str(value).lower())
    for mode in modes:
        if mode not in PREEMPT_MODES:
            raise ValueError(
                "preempt_mode: unknown mode {!r}: use one of {} (gang combines with suspend, "
                "as 'suspend,gang')".format(mode, ", ".join(PREEMPT_MODES))
            )
    if not modes or set(modes) & {"off", "cluster"}:
        if len(modes) > 1:
            raise ValueError("preempt_mode: off/cluster cannot be combined with other modes")
        return PREEMPT_MODE_NONE
    return ",".join(modes)


def normalize_qos_flags(flags):
    """Validate QoS flags against sacctmgr's list; return them sorted, as printed."""
    known = {f.lower(): f for f in QOS_FLAGS}
    result = set()
    for flag in flags or ():
        item = str(flag).strip()
        if item.lower() not in known:
            raise ValueError(
                "flags: unknown QoS flag {!r}: valid flags are {}".format(flag, ", ".join(QOS_FLAGS))
            )
        result.add(known[item.lower()])
    return sorted(result)


def normalize_float(option, value):
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{option}: expected a number, got {value!r}") from None
    if number < 0:
        raise ValueError(f"{option}: must be >= 0, got {value!r}")
    return round(number, 6)


def normalize_fairshare(value):
    """An int >= 0 or ``parent``."""
    if str(value).strip().lower() == "parent":
        return "parent"
    try:
        return normalize_int("fairshare", value, allow_clear=False)
    except ValueError:
        raise ValueError(f"fairshare: expected a whole number >= 0 or 'parent', got {value!r}") from None


def shown_fairshare(value):
    value = (value or "").strip()
    if value.lower() == "parent":
        return "parent"
    return shown_int(value, unset=1)


# --------------------------------------------------------------------------
# Setting specs: option, set keyword, show field, kind.
#
# Kinds: int (limit, -1 clears), time, tres, lower (case-insensitive string),
# names (list of names), float, fairshare, flags, preempt_mode, default_qos.

_NORMALIZE = {
    "int": normalize_int,
    "time": time_to_minutes,
    "tres": normalize_tres,
    "lower": lambda option, v: str(v).strip().lower(),
    "names": normalize_names,
    "float": normalize_float,
    "fairshare": lambda option, v: normalize_fairshare(v),
    "flags": lambda option, v: normalize_qos_flags(v),
    "preempt_mode": lambda option, v: normalize_preempt_mode(v),
    "default_qos": lambda option, v: normalize_name(option, v) if str(v).strip() else "",
    "priority": lambda option, v: max(normalize_int(option, v), 0),
}
_SHOWN = {
    "int": shown_int,
    "time": shown_time,
    "tres": shown_tres,
    "lower": lambda v: (v or "").strip().lower(),
    "names": lambda v: split_list((v or "").lower()),
    "float": lambda v: round(float(v), 6) if (v or "").strip() else 1.0,
    "fairshare": shown_fairshare,
    "flags": lambda v: normalize_qos_flags(split_list(v, none_words=("None", "NotSet"))),
    "preempt_mode": lambda v: normalize_preempt_mode(v or PREEMPT_MODE_NONE),
    "default_qos": lambda v: (v or "").strip().lower(),
    "priority": lambda v: shown_int(v, unset=0),
}


def _render(kind, keyword, current, wanted):
    """The ``keyword=value`` that sets ``wanted`` (``current`` for TRES merges)."""
    if kind == "tres":
        return f"{keyword}={tres_setting(current, wanted)}"
    if kind == "names":
        return f"{keyword}={','.join(wanted)}"
    if kind == "flags":
        return f"{keyword}={','.join(wanted) if wanted else '-1'}"
    if kind == "default_qos":
        return f"{keyword}={wanted or '-1'}"
    if kind == "time":
        return f"{keyword}={wanted}"
    if kind == "float":
        return f"{keyword}={wanted:g}"
    return f"{keyword}={wanted}"


QOS_SETTINGS = (
    ("description", "description", "Description", "lower"),
    ("priority", "priority", "Priority", "priority"),
    ("preempt", "preempt", "Preempt", "names"),
    ("preempt_mode", "preemptmode", "PreemptMode", "preempt_mode"),
    ("flags", "flags", "Flags", "flags"),
    ("usage_factor", "usagefactor", "UsageFactor", "float"),
    ("max_jobs_per_user", "maxjobsperuser", "MaxJobsPU", "int"),
    ("max_submit_jobs_per_user", "maxsubmitjobsperuser", "MaxSubmitPU", "int"),
    ("max_wall", "maxwall", "MaxWall", "time"),
    ("max_tres_per_user", "maxtresperuser", "MaxTRESPU", "tres"),
    ("max_tres_per_job", "maxtresperjob", "MaxTRES", "tres"),
    ("grp_tres", "grptres", "GrpTRES", "tres"),
    ("grp_jobs", "grpjobs", "GrpJobs", "int"),
    ("grp_submit_jobs", "grpsubmitjobs", "GrpSubmit", "int"),
)
QOS_FIELDS = ("Name",) + tuple(spec[2] for spec in QOS_SETTINGS)

# Settings of an association (account or user), in sacctmgr's words.
ASSOC_SETTINGS = (
    ("fairshare", "fairshare", "Share", "fairshare"),
    ("qos", "qos", "QOS", "names"),
    ("default_qos", "defaultqos", "DefaultQOS", "default_qos"),
    ("grp_tres", "grptres", "GrpTRES", "tres"),
    ("grp_jobs", "grpjobs", "GrpJobs", "int"),
    ("grp_submit_jobs", "grpsubmit", "GrpSubmit", "int"),
    ("grp_wall", "grpwall", "GrpWall", "time"),
    ("max_jobs", "maxjobs", "MaxJobs", "int"),
    ("max_submit_jobs", "maxsubmit", "MaxSubmit", "int"),
    ("max_wall", "maxwall", "MaxWall", "time"),
    ("max_tres_per_job", "maxtres", "MaxTRES", "tres"),
)
ASSOC_OPTIONS = tuple(spec[0] for spec in ASSOC_SETTINGS)
ASSOC_FIELDS = ("Cluster", "Account", "User", "Partition", "ParentName") + tuple(
    spec[2] for spec in ASSOC_SETTINGS
)
# What an association has when created without settings (wopl view).
ASSOC_DEFAULTS = {
    "fairshare": 1, "qos": [], "default_qos": "", "grp_tres": {}, "grp_jobs": -1,
    "grp_submit_jobs": -1, "grp_wall": -1, "max_jobs": -1, "max_submit_jobs": -1,
    "max_wall": -1, "max_tres_per_job": {},
}
QOS_DEFAULTS = {
    "priority": 0, "preempt": [], "preempt_mode": PREEMPT_MODE_NONE, "flags": [],
    "usage_factor": 1.0, "max_jobs_per_user": -1, "max_submit_jobs_per_user": -1,
    "max_wall": -1, "max_tres_per_user": {}, "max_tres_per_job": {}, "grp_tres": {},
    "grp_jobs": -1, "grp_submit_jobs": -1,
}


def view_from_record(record, specs):
    """Canonical values of ``specs`` from a ``show`` record."""
    return {option: _SHOWN[kind](record[field]) for option, _kw, field, kind in specs}


def normalize_settings(params, specs):
    """Canonical wanted values of ``specs`` from module params; None = leave alone."""
    wanted = {}
    for option, _kw, _field, kind in specs:
        value = params.get(option)
        if value is not None:
            wanted[option] = _NORMALIZE[kind](option, value)
    return wanted


def diff_settings(current, wanted, specs):
    """``(set_args, after)``: the ``key=value`` words for what differs, and the result."""
    args = []
    after = dict(current)
    for option, keyword, _field, kind in specs:
        if option not in wanted:
            continue
        have, want = current.get(option), wanted[option]
        if kind == "float" and have is not None and abs(have - want) < 1e-6:
            continue
        if have == want:
            continue
        args.append(_render(kind, keyword, have, want))
        after[option] = want
    return args, after


def _check_state(state):
    if state not in ("present", "absent"):
        raise ValueError(f"state must be present or absent, got {state!r}")


# --------------------------------------------------------------------------
# Failures: add what to do to the well-known refusals of sacctmgr

_ASSOC_HINTS = (
    ("have these as their Default QOS",
     "the QoS is still the default QoS of the associations listed: set another "
     "default_qos on them (slurm_account/slurm_user) before deleting it"),
    ("You can not remove the default account of a user",
     "the account is a user's default account: give those users another "
     "default_account (hybridhpc.slurm.slurm_user) or remove them from the "
     "cluster first"),
    ("aren't associated with new default account",
     "default_account must be one of the user's accounts on that cluster"),
    ("You gave a bad qos", "a QoS named in qos/default_qos/preempt does not exist: "
     "create it first with hybridhpc.slurm.slurm_qos"),
    ("no TRES known by type",
     "a TRES is not tracked by slurmdbd: add it to AccountingStorageTRES in slurm.conf "
     "(gres/gpu needs GresTypes=gpu too) or leave it out"),
    ("Job(s) active", "jobs are still running or pending under it: wait for them or cancel them"),
    ("Jobs running", "jobs are still running or pending under it: wait for them or cancel them"),
    ("doesn't exist", "a parent account or cluster named here does not exist: create it first"),
)


def with_hint(err):
    """A copy of SacctmgrError ``err`` whose message says what to do, when known."""
    text = err.stdout + "\n" + err.stderr
    for marker, hint in _ASSOC_HINTS:
        if marker in text:
            return SacctmgrError(f"{err.msg}: {hint}", argv=err.argv, rc=err.rc,
                                 stdout=err.stdout, stderr=err.stderr)
    return err


def apply_assoc_plan(runner, plan, check_mode, read_after):
    """``apply_plan`` with the hints of :func:`with_hint` on failures."""
    try:
        return apply_plan(runner, plan, check_mode, read_after)
    except SacctmgrError as err:
        raise with_hint(err) from err


def ensuring(key, read, plan):
    """The ``ensure(runner, params, check_mode, diff)`` that run_module drives, for one kind of object.

    read -> plan -> apply (in check mode only report) -> read again. ``key``
    names the object in the result (qos, account, user); ``read(runner,
    name)`` returns its view or ``None``; ``plan(before, name, params)``
    returns ``{"changes", "after"}``.
    """
    def ensure(runner, params, check_mode=False, diff=False):
        name = normalize_name("name", params["name"])
        before = read(runner, name)
        changed, commands, after = apply_assoc_plan(runner, plan(before, name, params), check_mode,
                                                    lambda: read(runner, name))
        result = {"changed": changed, key: after or {}, "commands": commands, "warnings": []}
        if diff:
            result["diff"] = {"before": diff_view(name, before), "after": diff_view(name, after)}
        return result
    return ensure


# --------------------------------------------------------------------------
# QoS


def show_qos_args(name=None):
    args = ["show", "qos"]
    return args + ["where", "name=" + name] if name else args


def qos_from_record(record):
    view = {"name": record["Name"].lower()}
    view.update(view_from_record(record, QOS_SETTINGS))
    return view


def get_qos(runner, name):
    """The QoS view, or ``None`` when it does not exist."""
    for record in runner.query(show_qos_args(name), QOS_FIELDS):
        if record["Name"].lower() == name:
            return qos_from_record(record)
    return None


def list_qos(runner):
    """Every QoS view, sorted by name."""
    views = [qos_from_record(r) for r in runner.query(show_qos_args(), QOS_FIELDS)]
    return sorted(views, key=lambda v: v["name"])


def plan_qos(current, name, params):
    """Plan the changes that bring QoS ``name`` to ``params`` (module options)."""
    name = normalize_name("name", name)
    state = params.get("state") or "present"
    _check_state(state)
    wanted = normalize_settings(params, QOS_SETTINGS)
    if name in wanted.get("preempt", ()):
        raise ValueError(f"preempt: QoS {name!r} cannot preempt itself: remove it from preempt")
    if state == "absent":
        if current is None:
            return {"changes": [], "after": None}
        return {"changes": [["delete", "qos", "where", "name=" + name]], "after": None}
    if current is None:
        base = dict(QOS_DEFAULTS, name=name, description=name)
        settings, after = diff_settings(base, wanted, QOS_SETTINGS)
        # An added QoS would get the name as description; a wanted one is set on add.
        return {"changes": [["add", "qos", name] + settings], "after": after}
    settings, after = diff_settings(current, wanted, QOS_SETTINGS)
    if not settings:
        return {"changes": [], "after": after}
    return {"changes": [["modify", "qos", "where", "name=" + name, "set"] + settings], "after": after}


# --------------------------------------------------------------------------
# Associations (shared by accounts and users)


def assoc_from_record(record):
    view = {
        "cluster": record["Cluster"].lower(),
        "account": record["Account"].lower(),
        "user": record["User"].lower(),
        "partition": record["Partition"].lower(),
        "parent": record["ParentName"].lower(),
    }
    view.update(view_from_record(record, ASSOC_SETTINGS))
    return view


def get_assocs(runner, account=None, user=None):
    """Association views (own values: ``wopl``) of an account or a user.

    ``account`` alone lists only the account's user-less associations.
    """
    args = ["show", "assoc", "where"]
    if account is not None:
        args.append("account=" + account)
    args.append("user=" + (user or ""))
    args.append("wopl")
    records = runner.query(args, ASSOC_FIELDS)
    views = [assoc_from_record(r) for r in records]
    if account is not None:
        views = [v for v in views if v["account"] == account]
    views = [v for v in views if v["user"] == (user or "")]
    return sorted(views, key=lambda v: (v["cluster"], v["account"], v["partition"]))


def _assoc_public(view):
    """An association view without the empty user/parent keys that do not apply."""
    result = dict(view)
    if not result.get("user"):
        result.pop("user", None)
        result.pop("partition", None)
    else:
        result.pop("parent", None)
    return result


def check_default_qos(option_prefix, settings, current=None):
    """default_qos must be in the association's qos list (when one is known)."""
    default = settings.get("default_qos")
    if not default:
        return
    qos = settings.get("qos", (current or {}).get("qos"))
    if qos and default not in qos:
        raise ValueError(
            f"{option_prefix}default_qos: {default!r} is not in the qos list {qos}: "
            "add it to qos or choose one of them"
        )


def _check_qos_list(option_prefix, wanted):
    if "qos" in wanted and not wanted["qos"] and wanted.get("default_qos"):
        raise ValueError(
            f"{option_prefix}default_qos needs a qos list: with qos: [] the association "
            "inherits its parent's QoS"
        )


# --------------------------------------------------------------------------
# Accounts

ACCOUNT_FIELDS = ("Account", "Descr", "Org")


def get_account(runner, name):
    """The account view (description, organization, per-cluster associations)."""
    found = None
    for record in runner.query(["show", "account", "where", "name=" + name], ACCOUNT_FIELDS):
        if record["Account"].lower() == name:
            found = record
    if found is None:
        return None
    assocs = get_assocs(runner, account=name)
    return account_view(name, found["Descr"], found["Org"], assocs)


def account_view(name, description, organization, assocs):
    return {
        "name": name,
        "description": (description or "").lower(),
        "organization": (organization or "").lower(),
        "clusters": sorted({a["cluster"] for a in assocs}),
        "associations": {a["cluster"]: _assoc_public(a) for a in assocs},
    }


def list_accounts(runner):
    """Every account view except root, sorted by name."""
    records = runner.query(["show", "account"], ACCOUNT_FIELDS)
    assocs = runner.query(["show", "assoc", "where", "user=", "wopl"], ASSOC_FIELDS)
    by_account = {}
    for record in assocs:
        view = assoc_from_record(record)
        if not view["user"]:
            by_account.setdefault(view["account"], []).append(view)
    accounts = []
    for record in records:
        name = record["Account"].lower()
        if name == "root":
            continue
        accounts.append(account_view(name, record["Descr"], record["Org"], by_account.get(name, [])))
    return sorted(accounts, key=lambda a: a["name"])


def _check_root(current, params, state):
    """The root account is Slurm's own: only its association settings on the listed clusters change.

    Every cluster gets a root association when it registers; it is never
    created, moved or deleted here, and clusters not listed are left alone
    (so setting the default QoS of one site's clusters does not touch the
    root associations of other clusters in the same database).
    """
    if state == "absent":
        raise ValueError("state: the root account is Slurm's own and cannot be removed")
    if params.get("parent") is not None:
        raise ValueError("parent: the root account is the top of the tree and has no parent; drop parent")
    clusters = normalize_names("clusters", params.get("clusters") or [])
    if not clusters:
        raise ValueError("clusters: list the clusters whose root association to change")
    have = (current or {}).get("associations", {})
    missing = [c for c in clusters if c not in have]
    if missing:
        raise ValueError(
            "clusters: %s %s no root association: a cluster gets one when its slurmctld registers "
            "(or with hybridhpc.slurm.slurm_cluster); register it first" % (", ".join(missing), "has" if len(missing) == 1 else "have"))


def plan_account(current, name, params):
    """Plan the changes that bring account ``name`` to ``params`` (module options).

    Per cluster: ``add account`` where the account has no association,
    ``modify account where name=N cluster=C set ...`` where settings or the
    parent differ, ``delete account where name=N cluster=C`` for clusters
    not in ``clusters`` (when given).
    """
    name = normalize_name("name", name)
    root = name == "root"
    state = params.get("state") or "present"
    _check_state(state)
    if root:
        _check_root(current, params, state)
    if state == "absent":
        if current is None:
            return {"changes": [], "after": None}
        return {"changes": [["delete", "account", "where", "name=" + name]], "after": None}

    clusters = params.get("clusters")
    wanted_clusters = normalize_names("clusters", clusters) if clusters is not None else None
    if current is None and not wanted_clusters:
        raise ValueError(
            f"clusters: account {name!r} does not exist yet; list the clusters to create it on"
        )
    if wanted_clusters == []:
        raise ValueError(
            "clusters: an account needs an association on at least one cluster; use "
            "state=absent to delete it"
        )
    parent = params.get("parent")
    if parent is not None:
        parent = normalize_name("parent", parent)
    else:
        # Left alone where the account is; new associations get the parent
        # the account already has (when one), else root.
        parents = sorted({a["parent"] for a in (current or {}).get("associations", {}).values()})
        parent = parents[0] if len(parents) == 1 else "root"
    if parent == name:
        raise ValueError(f"parent: account {name!r} cannot be its own parent")
    wanted = normalize_settings(params, ASSOC_SETTINGS)
    _check_qos_list("", wanted)
    check_default_qos("", wanted)
    texts = {}
    for option in ("description", "organization"):
        if params.get(option) is not None:
            texts[option] = str(params[option]).strip().lower()

    changes = []
    have_assocs = dict(current["associations"]) if current else {}
    clusters_now = sorted(have_assocs)
    target = wanted_clusters if wanted_clusters is not None else clusters_now
    after_assocs = {}
    if current is None:
        description = texts.get("description", name)
        organization = texts.get("organization", name if parent == "root" else parent)
    else:
        description = texts.get("description", current["description"])
        organization = texts.get("organization", current["organization"])
        text_args = [f"{o}={texts[o]}" for o in ("description", "organization")
                     if o in texts and texts[o] != current[o]]
        if text_args:
            changes.append(["modify", "account", "where", "name=" + name, "set"] + text_args)

    for cluster in target:
        if cluster in have_assocs:
            have = have_assocs[cluster]
            check_default_qos("", wanted, have)
            settings, after = diff_settings(have, wanted, ASSOC_SETTINGS)
            if have["parent"] != parent and params.get("parent") is not None:
                settings = ["parent=" + parent] + settings
                after["parent"] = parent
            if settings:
                changes.append(["modify", "account", "where", "name=" + name,
                                "cluster=" + cluster, "set"] + settings)
        else:
            base = dict(ASSOC_DEFAULTS, cluster=cluster, account=name, parent=parent)
            settings, after = diff_settings(base, wanted, ASSOC_SETTINGS)
            add = ["add", "account", name, "cluster=" + cluster, "parent=" + parent]
            if current is None and not changes:
                add += [f"description={description}", f"organization={organization}"]
            changes.append(add + settings)
        after_assocs[cluster] = after
    for cluster in clusters_now:
        if cluster not in target and not root:
            changes.append(["delete", "account", "where", "name=" + name, "cluster=" + cluster])
        elif cluster not in target:
            after_assocs[cluster] = have_assocs[cluster]
    after = {
        "name": name,
        "description": description,
        "organization": organization,
        "clusters": sorted(after_assocs),
        "associations": after_assocs,
    }
    return {"changes": changes, "after": after}


def diff_view(name, view):
    """An object as shown in --diff output: its view with state, or state=absent."""
    if view is None:
        return {"name": name, "state": "absent"}
    return dict(view, state="present")


def association_argument_spec():
    """Association options (doc fragment hybridhpc.slurm.sacctmgr.association)."""
    return {
        "fairshare": {"type": "raw"},
        "qos": {"type": "list", "elements": "str"},
        "default_qos": {"type": "str"},
        "grp_tres": {"type": "dict"},
        "grp_jobs": {"type": "int"},
        "grp_submit_jobs": {"type": "int"},
        "grp_wall": {"type": "str"},
        "max_jobs": {"type": "int"},
        "max_submit_jobs": {"type": "int"},
        "max_wall": {"type": "str"},
        "max_tres_per_job": {"type": "dict"},
    }


# --------------------------------------------------------------------------
# Users

USER_FIELDS = ("User", "AdminLevel", "DefaultAccount", "Cluster", "Account", "Partition")
ASSOCIATIONS_MODES = ("set", "add")


def _assoc_key(view):
    return (view["cluster"], view["account"], view["partition"])


def get_user(runner, name):
    """The user view (admin level, default account per cluster, associations)."""
    records = runner.query(["show", "user", "withassoc", "where", "name=" + name], USER_FIELDS)
    records = [r for r in records if r["User"].lower() == name]
    if not records:
        return None
    assocs = get_assocs(runner, user=name)
    return user_view(name, records, assocs)


def user_view(name, records, assocs):
    return {
        "name": name,
        "admin_level": records[0]["AdminLevel"] or "None",
        "default_accounts": {r["Cluster"].lower(): r["DefaultAccount"].lower()
                             for r in records if r["Cluster"]},
        "associations": [_assoc_public(a) for a in assocs],
    }


def list_users(runner):
    """Every user view, sorted by name."""
    records = runner.query(["show", "user", "withassoc"], USER_FIELDS)
    assocs = [assoc_from_record(r) for r in runner.query(["show", "assoc", "wopl"], ASSOC_FIELDS)]
    by_user = {}
    for record in records:
        by_user.setdefault(record["User"].lower(), []).append(record)
    users = []
    for name in sorted(by_user):
        mine = sorted((a for a in assocs if a["user"] == name),
                      key=lambda a: (a["cluster"], a["account"], a["partition"]))
        users.append(user_view(name, by_user[name], mine))
    return users


def _wanted_associations(name, items):
    """Normalise the ``associations`` option; return {key: (item, settings)}."""
    wanted = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict) or not item.get("account") or not item.get("cluster"):
            raise ValueError(f"associations[{index}]: account and cluster are required")
        account = normalize_name(f"associations[{index}].account", item["account"])
        cluster = normalize_name(f"associations[{index}].cluster", item["cluster"])
        partition = normalize_name(f"associations[{index}].partition", item["partition"]) \
            if item.get("partition") else ""
        prefix = f"associations[{index}] ({account} on {cluster}): "
        try:
            settings = normalize_settings(item, ASSOC_SETTINGS)
            _check_qos_list("", settings)
            check_default_qos("", settings)
        except ValueError as err:
            raise ValueError(prefix + str(err)) from None
        key = (cluster, account, partition)
        if key in wanted:
            raise ValueError(f"{prefix}listed twice (partition {partition or 'none'}): list it once")
        wanted[key] = (prefix, settings)
    return wanted


def _user_where(name, key):
    cluster, account, partition = key
    return ["where", "name=" + name, "account=" + account, "cluster=" + cluster,
            "partition=" + partition]


def plan_user(current, name, params):
    """Plan the changes that bring user ``name`` to ``params`` (module options).

    Order: add associations (on a cluster new to the user, the default
    account's association first, so it becomes the default there), modify
    associations, set default accounts and the admin level, then delete
    associations (after the default moved away from them).
    """
    name = normalize_name("name", name)
    state = params.get("state") or "present"
    _check_state(state)
    only = normalize_names("clusters", params["clusters"]) if params.get("clusters") is not None else None
    have = {_assoc_key(dict(a, partition=a.get("partition", ""))): a
            for a in (current or {}).get("associations", [])}
    have_clusters = sorted({k[0] for k in have})

    if state == "absent":
        if current is None:
            return {"changes": [], "after": None}
        if only is None:
            return {"changes": [["delete", "user", "where", "name=" + name]], "after": None}
        gone = [c for c in have_clusters if c in only]
        changes = [["delete", "user", "where", "name=" + name, "cluster=" + c] for c in gone]
        left = [a for k, a in have.items() if k[0] not in gone]
        after = None
        if left:
            after = dict(current, associations=left,
                         default_accounts={c: a for c, a in current["default_accounts"].items()
                                           if c not in gone})
        return {"changes": changes, "after": after}

    mode = params.get("associations_mode") or "set"
    if mode not in ASSOCIATIONS_MODES:
        raise ValueError(f"associations_mode must be set or add, got {mode!r}")
    items = params.get("associations")
    wanted = _wanted_associations(name, items or [])
    if current is None and not wanted:
        raise ValueError(
            f"associations: user {name!r} does not exist yet; list at least one "
            "association (account and cluster) to create it"
        )
    admin = params.get("admin_level")
    if admin is not None:
        if str(admin).lower() not in ADMIN_LEVELS:
            raise ValueError("admin_level must be none, operator or administrator, got {!r}".format(admin))
        admin = ADMIN_LEVELS[str(admin).lower()]
    default = normalize_name("default_account", params["default_account"]) \
        if params.get("default_account") else None

    wanted_clusters = sorted({k[0] for k in wanted})
    scope = set(wanted_clusters) | set(only or ())
    removed = [k for k in sorted(have) if mode == "set" and k[0] in scope and k not in wanted]
    final = set(have) - set(removed) | set(wanted)

    defaults = dict((current or {}).get("default_accounts", {}))
    if default is not None:
        for cluster in wanted_clusters:
            if not any(k[0] == cluster and k[1] == default for k in final):
                raise ValueError(
                    f"default_account: {default!r} is not one of the user's accounts on cluster "
                    f"{cluster!r}; add an association with account {default} on {cluster} or "
                    "choose one of its accounts"
                )
    for cluster, account in sorted(defaults.items()):
        if (default is None or cluster not in wanted_clusters) and any(k[0] == cluster for k in final) \
                and not any(k[0] == cluster and k[1] == account for k in final):
            raise ValueError(
                f"associations: the user's default account on {cluster!r} is {account!r}, whose "
                f"associations would be removed; set default_account to one of the accounts kept there"
            )

    adds, modifies, sets, deletes = [], [], [], []
    after_assocs = {k: a for k, a in have.items() if k not in removed}
    first_add = current is None
    for cluster in wanted_clusters:
        new_here = cluster not in {k[0] for k in have}
        keys = sorted(k for k in wanted if k[0] == cluster)
        if new_here:
            lead = default if default is not None else keys[0][1]
            keys.sort(key=lambda k: (k[1] != lead, k))
            defaults[cluster] = lead
        for key in keys:
            prefix, settings = wanted[key]
            if key in have:
                try:
                    check_default_qos("", settings, have[key])
                except ValueError as err:
                    raise ValueError(prefix + str(err)) from None
                args, after = diff_settings(have[key], settings, ASSOC_SETTINGS)
                if args:
                    modifies.append(["modify", "user"] + _user_where(name, key) + ["set"] + args)
                after_assocs[key] = after
                continue
            base = dict(ASSOC_DEFAULTS, cluster=cluster, account=key[1], user=name, partition=key[2])
            args, after = diff_settings(base, settings, ASSOC_SETTINGS)
            add = ["add", "user", name, "account=" + key[1], "cluster=" + cluster]
            if key[2]:
                add.append("partition=" + key[2])
            if first_add:
                add.append("defaultaccount=" + defaults[cluster])
                first_add = False
            adds.append(add + args)
            after_assocs[key] = after
        if default is not None and not new_here and defaults.get(cluster) != default:
            sets.append(["modify", "user", "where", "name=" + name, "cluster=" + cluster,
                         "set", "defaultaccount=" + default])
            defaults[cluster] = default
    admin_now = (current or {}).get("admin_level", "None")
    if admin is not None and admin != admin_now:
        sets.append(["modify", "user", "where", "name=" + name, "set", "adminlevel=" + admin])
    gone_clusters = [c for c in have_clusters if c in scope and not any(k[0] == c for k in final)]
    for cluster in gone_clusters:
        deletes.append(["delete", "user", "where", "name=" + name, "cluster=" + cluster])
        defaults.pop(cluster, None)
    for key in removed:
        if key[0] not in gone_clusters:
            deletes.append(["delete", "user"] + _user_where(name, key))
    after = {
        "name": name,
        "admin_level": admin if admin is not None else admin_now,
        "default_accounts": defaults,
        "associations": [after_assocs[k] for k in sorted(after_assocs)],
    }
    return {"changes": adds + modifies + sets + deletes, "after": after}


def read_database(runner, clusters=None):
    """Every QoS, account (but root) and user, limited to associations on ``clusters`` when given.

    For the read-only module slurm_accounting_info (and the role's opt-in
    purge): accounts and users without an association on those clusters are
    left out; QoS are global and always listed.
    """
    wanted = set(normalize_names("clusters", clusters)) if clusters is not None else None
    qos = list_qos(runner)
    accounts, users = [], []
    for account in list_accounts(runner):
        if wanted is not None:
            kept = {c: a for c, a in account["associations"].items() if c in wanted}
            if not kept:
                continue
            account = dict(account, associations=kept, clusters=sorted(kept))
        accounts.append(account)
    for user in list_users(runner):
        if wanted is not None:
            kept = [a for a in user["associations"] if a["cluster"] in wanted]
            if not kept:
                continue
            user = dict(user, associations=kept,
                        default_accounts={c: a for c, a in user["default_accounts"].items() if c in wanted})
        users.append(user)
    return {"qos": qos, "accounts": accounts, "users": users}


# --------------------------------------------------------------------------
# One object per call: the options and the ensure of slurm_qos, slurm_account
# and slurm_user, shared with slurm_accounting (many objects in one run).


def qos_argument_spec():
    """slurm_qos's options, without the sacctmgr ones."""
    return {
        "name": {"type": "str", "required": True},
        "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
        "description": {"type": "str"},
        "priority": {"type": "int"},
        "preempt": {"type": "list", "elements": "str"},
        "preempt_mode": {"type": "str"},
        "flags": {"type": "list", "elements": "str"},
        "usage_factor": {"type": "float"},
        "max_jobs_per_user": {"type": "int"},
        "max_submit_jobs_per_user": {"type": "int"},
        "max_wall": {"type": "str"},
        "max_tres_per_user": {"type": "dict"},
        "max_tres_per_job": {"type": "dict"},
        "grp_tres": {"type": "dict"},
        "grp_jobs": {"type": "int"},
        "grp_submit_jobs": {"type": "int"},
    }


def account_argument_spec():
    """slurm_account's options, without the sacctmgr ones."""
    spec = association_argument_spec()
    spec.update(
        name={"type": "str", "required": True},
        state={"type": "str", "default": "present", "choices": ["present", "absent"]},
        clusters={"type": "list", "elements": "str"},
        parent={"type": "str"},
        description={"type": "str"},
        organization={"type": "str"},
    )
    return spec


def user_argument_spec():
    """slurm_user's options, without the sacctmgr ones."""
    association = association_argument_spec()
    association.update(
        account={"type": "str", "required": True},
        cluster={"type": "str", "required": True},
        partition={"type": "str"},
    )
    return {
        "name": {"type": "str", "required": True},
        "state": {"type": "str", "default": "present", "choices": ["present", "absent"]},
        "admin_level": {"type": "str", "choices": list(ADMIN_LEVELS)},
        "default_account": {"type": "str"},
        "associations": {"type": "list", "elements": "dict", "options": association},
        "associations_mode": {"type": "str", "default": "set", "choices": list(ASSOCIATIONS_MODES)},
        "clusters": {"type": "list", "elements": "str"},
    }


ensure_qos = ensuring("qos", get_qos, plan_qos)
ensure_account = ensuring("account", get_account, plan_account)
ensure_user = ensuring("user", get_user, plan_user)
