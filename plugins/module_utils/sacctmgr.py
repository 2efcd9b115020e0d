# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run ``sacctmgr`` and read its answers, for the Slurm accounting modules.

Three layers, each usable alone:

* a runner (:class:`SacctmgrRunner`) that builds argv lists (never a shell
  string), calls an injected ``run(argv) -> (rc, stdout, stderr)`` (the
  module passes ``module.run_command``; tests pass a fake that replays
  recorded output) and turns failures into :class:`SacctmgrError`;
* a parser for ``--parsable2 --noheader`` output (:func:`parse_parsable`);
* object helpers named after what they do (:func:`get_cluster`,
  :func:`add_cluster`, :func:`modify_cluster`, :func:`delete_cluster`, and
  for federations :func:`get_federation`, :func:`add_federation`,
  :func:`modify_federation`, :func:`delete_federation`) and pure planning
  functions (:func:`plan_features`, :func:`plan_cluster`,
  :func:`plan_federation`) that the modules use to stay idempotent and to
  report in check mode what they would run.

sacctmgr facts this relies on (sacctmgr(1), slurm.conf(5), Slurm sources):

* ``--immediate`` commits without the 30 s confirmation prompt;
  ``--parsable2`` separates fields with ``|`` and adds no trailing ``|``
  (``--parsable`` does add one); ``--noheader`` drops the header line.
* ``show cluster where name=NAME format=Cluster,ControlHost,ControlPort,RPC,
  Features,Federation,FedState,Flags`` prints one record per cluster
  (checked on the lab's sacctmgr 24.11.5:
  ``lab|172.19.0.2|6817|10752|||NA|MultipleSlurmd``; no output, rc 0, for
  an unknown name; the name matches case-insensitively).
  Features are printed comma separated (empty when none), Federation is
  empty and FedState is ``NA`` for a cluster in no federation, Flags is
  ``None`` when no flag is set, ControlHost/ControlPort/RPC are empty/0/0
  until a slurmctld registers the cluster.
* ``add cluster name=NAME [features=a,b]``, ``modify cluster where name=NAME
  set features=a,b fedstate=STATE``, ``delete cluster where name=NAME``.
  ``features=`` with an empty value clears every feature (sacctmgr(1) of
  24.11 says to set "a new value of '' (two single quotes)", which the
  shell hands over as an empty value). Newer man pages also document
  ``features+=``/``features-=``; they are not used here: the whole wanted
  list is always written, which is idempotent and shows in check mode.
* FedState values sacctmgr accepts: ACTIVE, INACTIVE, DRAIN, DRAIN+REMOVE;
  it may show DRAINED / DRAINED+REMOVE once a draining cluster has no more
  federated jobs, and NA for a cluster in no federation.
* The accounting database keeps names in lower case; cluster names longer
  than 40 characters break slurmdbd's per-cluster MySQL/MariaDB tables.
* Failures: a non-zero exit status, and messages such as
  `` Nothing new added.``, `` This cluster x already exists.  Not adding.``,
  `` Problem adding clusters: ...``, ``Problem talking to the database``.
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import re
from shlex import quote as _shell_quote

SACCTMGR = "sacctmgr"
READ_OPTIONS = ("--immediate", "--parsable2", "--noheader")
WRITE_OPTIONS = ("--immediate",)

CLUSTER_FIELDS = (
    "Cluster",
    "ControlHost",
    "ControlPort",
    "RPC",
    "Features",
    "Federation",
    "FedState",
    "Flags",
)

# States sacctmgr accepts for ``set fedstate=``.
FEDSTATES = ("ACTIVE", "INACTIVE", "DRAIN", "DRAIN+REMOVE")
# What ``show cluster format=FedState`` may print for each wanted state once
# it holds: a draining cluster becomes DRAINED when its federated jobs end.
FEDSTATE_REACHED = {
    "ACTIVE": ("ACTIVE",),
    "INACTIVE": ("INACTIVE",),
    "DRAIN": ("DRAIN", "DRAINED"),
    "DRAIN+REMOVE": ("DRAIN+REMOVE", "DRAINED+REMOVE"),
}
FEDSTATE_NONE = "NA"

FEATURE_MODES = ("set", "add", "remove")

CLUSTER_NAME_MAX_LENGTH = 40
_CLUSTER_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
CLUSTER_NAME_RULE = (
    f"Slurm cluster names (ClusterName in slurm.conf) must be 1 to {CLUSTER_NAME_MAX_LENGTH} "
    "characters long (slurmdbd names MySQL/MariaDB tables after the cluster "
    "and longer names exceed the table-name limit), use only letters, digits, "
    "'_' and '-', and start with a letter or a digit; Slurm maps upper case "
    "to lower case"
)
_FEATURE_FORBIDDEN_RE = re.compile(r"[\s,|=\"'`]")

# Substrings of sacctmgr output that mean a command failed even when the
# exit status does not say so, with the explanation given to the user.
_FAILURE_MARKERS = (
    ("already exists", "the object already exists"),
    ("Nothing new added", "sacctmgr added nothing"),
    ("Nothing modified", "sacctmgr modified nothing"),
    ("Nothing deleted", "sacctmgr deleted nothing"),
    ("Nothing to change", "sacctmgr changed nothing"),
    ("Problem ", "sacctmgr reported a problem"),
    ("Unknown option", "sacctmgr did not understand an option"),
    ("Unknown condition", "sacctmgr did not understand a condition"),
    ("Unknown field", "sacctmgr did not understand a format field"),
    ("Invalid FedState", "sacctmgr rejected the fedstate"),
)
# Hints for well-known causes, checked on the whole output.
_CAUSE_HINTS = (
    (
        ("Connection refused", "Problem talking to the database",
         "Unable to connect to database", "failed to open persistent connection"),
        (
            "sacctmgr could not reach slurmdbd: check that slurmdbd runs, that "
            "AccountingStorageHost/Port in slurm.conf (see SLURM_CONF) point to it "
            "and that munge works on this host"
        ),
    ),
    (
        ("Access/permission denied", "Access denied", "privilege"),
        (
            "the user running sacctmgr is not a Slurm administrator (run it as "
            "root or SlurmUser, or grant AdminLevel=Administrator)"
        ),
    ),
    (
        ("Munge", "munge", "Invalid authentication credential"),
        (
            "authentication with slurmdbd failed: check munged and that the munge "
            "key matches the one of slurmdbd"
        ),
    ),
    (
        ("Job(s) active", "jobs running", "Jobs running"),
        "jobs are still running on the cluster's associations",
    ),
)


class SacctmgrError(Exception):
    """A sacctmgr command failed, or its output could not be understood."""

    def __init__(self, msg, argv=None, rc=None, stdout=None, stderr=None):
        self.msg = msg
        self.argv = list(argv) if argv is not None else None
        self.rc = rc
        self.stdout = stdout or ""
        self.stderr = stderr or ""
        super().__init__(self._describe())

    def _describe(self):
        parts = [self.msg]
        if self.argv is not None:
            parts.append(f"command: {format_argv(self.argv)}")
        if self.rc is not None:
            parts.append(f"rc: {self.rc}")
        if self.stderr.strip():
            parts.append(f"stderr: {self.stderr.strip()}")
        if self.stdout.strip():
            stdout = self.stdout.strip()
            if len(stdout) > 2000:
                stdout = stdout[:2000] + "..."
            parts.append(f"stdout: {stdout}")
        return "; ".join(parts)

    def to_dict(self):
        """Details for ``module.fail_json(msg=str(err), **err.to_dict())``."""
        return {
            "cmd": self.argv,
            "rc": self.rc,
            "stdout": self.stdout,
            "stderr": self.stderr,
        }


def format_argv(argv):
    """Render an argv list as a copy-pastable shell command (for messages)."""
    return " ".join(_shell_quote(str(a)) for a in argv)


def explain_failure(stdout, stderr, rc=0, write=True):
    """Return why a sacctmgr run failed, or ``None`` when it did not.

    ``write`` says whether ``stdout`` holds messages (add/modify/delete) or
    data (show); data is never searched for failure markers.
    """
    stdout = stdout or ""
    stderr = stderr or ""
    messages = stderr + "\n" + stdout if write else stderr
    reason = None
    if rc not in (0, None):
        reason = f"sacctmgr exited with status {rc}"
    for marker, text in _FAILURE_MARKERS:
        if marker in messages:
            reason = text if reason is None else f"{reason} ({text})"
            break
    if reason is None:
        return None
    everything = stderr + "\n" + stdout
    for markers, hint in _CAUSE_HINTS:
        if any(m in everything for m in markers):
            reason = f"{reason}: {hint}"
            break
    return reason


def check_result(argv, rc, stdout, stderr, write=True):
    """Raise :class:`SacctmgrError` when a run failed; return ``stdout``."""
    reason = explain_failure(stdout, stderr, rc=rc, write=write)
    if reason is not None:
        raise SacctmgrError(reason, argv=argv, rc=rc, stdout=stdout, stderr=stderr)
    return stdout or ""


def sacctmgr_argument_spec():
    """Options shared by the sacctmgr modules (doc fragment hybridhpc.slurm.sacctmgr)."""
    return {
        "sacctmgr_path": {"type": "path"},
        "slurm_conf": {"type": "path"},
    }


class SacctmgrRunner:
    """Build and run sacctmgr argv lists.

    ``run(argv)`` must return ``(rc, stdout, stderr)``. When an environment
    is configured it is called as ``run(argv, environ_update=environ)``,
    the keyword of ``AnsibleModule.run_command``, so the module can pass
    ``module.run_command`` itself.
    """

    def __init__(self, run, sacctmgr_path=None, environ=None):
        self._run = run
        self.sacctmgr_path = sacctmgr_path or SACCTMGR
        self.environ = dict(environ or {})
        self.executed = []

    def read_argv(self, args):
        """argv of a query: ``sacctmgr --immediate --parsable2 --noheader ARGS``."""
        return [self.sacctmgr_path] + list(READ_OPTIONS) + [str(a) for a in args]

    def write_argv(self, args):
        """argv of a change: ``sacctmgr --immediate ARGS``."""
        return [self.sacctmgr_path] + list(WRITE_OPTIONS) + [str(a) for a in args]

    def _call(self, argv):
        if self.environ:
            result = self._run(list(argv), environ_update=dict(self.environ))
        else:
            result = self._run(list(argv))
        rc, stdout, stderr = result
        return rc, stdout or "", stderr or ""

    def query(self, args, fields):
        """Run ``show ARGS format=FIELDS`` and return the parsed records."""
        argv = self.read_argv(list(args) + ["format=" + ",".join(fields)])
        rc, stdout, stderr = self._call(argv)
        check_result(argv, rc, stdout, stderr, write=False)
        try:
            return parse_parsable(stdout, fields)
        except ValueError as err:
            raise SacctmgrError(
                f"could not parse sacctmgr output: {err}",
                argv=argv, rc=rc, stdout=stdout, stderr=stderr,
            ) from err

    def write(self, args):
        """Run a change and return the argv that ran."""
        argv = self.write_argv(args)
        rc, stdout, stderr = self._call(argv)
        check_result(argv, rc, stdout, stderr, write=True)
        self.executed.append(argv)
        return argv


def runner_from_module(module):
    """A runner for an AnsibleModule using the doc fragment's options."""
    params = module.params
    path = params.get("sacctmgr_path") or module.get_bin_path(SACCTMGR, required=True)
    environ = {}
    if params.get("slurm_conf"):
        environ["SLURM_CONF"] = params["slurm_conf"]
    return SacctmgrRunner(module.run_command, sacctmgr_path=path, environ=environ)


# --------------------------------------------------------------------------
# Parsing


def parse_parsable(output, fields):
    """Parse ``--parsable2 --noheader`` (or ``--parsable``) output.

    Returns one dict per non-empty line, keyed by ``fields``. Values are kept
    as printed (spaces included); a trailing ``|`` (``--parsable``) is
    accepted. Raises ``ValueError`` when a line does not have one value per
    field.
    """
    fields = list(fields)
    if not fields:
        raise ValueError("no fields given")
    records = []
    for lineno, line in enumerate((output or "").splitlines(), start=1):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        values = line.split("|")
        if len(values) == len(fields) + 1 and values[-1] == "":
            values.pop()
        if len(values) != len(fields):
            raise ValueError(
                "line {} has {} values for {} fields ({}): {!r}".format(
                    lineno, len(values), len(fields), ",".join(fields), line
                )
            )
        records.append(dict(zip(fields, values)))
    return records


def split_list(value, none_words=()):
    """Split a comma separated sacctmgr value into a sorted, de-duplicated list."""
    items = set()
    for item in (value or "").split(","):
        item = item.strip()
        if item and item not in none_words:
            items.add(item)
    return sorted(items)


def _to_int(value):
    value = (value or "").strip()
    return int(value) if value.isdigit() else None


def cluster_from_record(record):
    """Turn a ``show cluster`` record (keys of CLUSTER_FIELDS) into a dict."""
    return {
        "name": record["Cluster"],
        "control_host": record["ControlHost"],
        "control_port": _to_int(record["ControlPort"]),
        "rpc": _to_int(record["RPC"]),
        "features": split_list(record["Features"]),
        "federation": record["Federation"],
        "fed_state": record["FedState"] or FEDSTATE_NONE,
        "flags": split_list(record["Flags"], none_words=("None",)),
    }


# --------------------------------------------------------------------------
# Validation and planning (pure)


def validate_cluster_name(name):
    """Check a cluster name against what Slurm accepts; return it lower-cased.

    Raises ``ValueError`` stating the rule.
    """
    if not isinstance(name, str) or not name:
        raise ValueError("a cluster name is required: " + CLUSTER_NAME_RULE)
    normalized = name.lower()
    if len(normalized) > CLUSTER_NAME_MAX_LENGTH or not _CLUSTER_NAME_RE.match(normalized):
        raise ValueError(f"invalid cluster name {name!r}: {CLUSTER_NAME_RULE}")
    return normalized


def normalize_features(features):
    """Validate feature names; return them lower-cased, sorted, de-duplicated.

    sacctmgr lists are comma separated and ``+``/``-`` prefixes mean add or
    remove, so names may not contain commas, blanks, ``|``, ``=`` or quotes
    nor start with ``+``/``-``. The accounting database reports names in
    lower case, so they are compared and written in lower case.
    """
    result = set()
    for feature in features or ():
        if not isinstance(feature, str) or not feature.strip():
            raise ValueError(f"feature names must be non-empty strings, got {feature!r}")
        item = feature.strip()
        if _FEATURE_FORBIDDEN_RE.search(item) or item[0] in "+-":
            raise ValueError(
                f"invalid feature name {feature!r}: use letters, digits and punctuation "
                "other than , | = quotes, no blanks, not starting with + or -"
            )
        result.add(item.lower())
    return sorted(result)


def plan_features(current, wanted, mode="set"):
    """Return the sorted feature list a cluster should end up with.

    ``set`` replaces the list with ``wanted``, ``add`` adds ``wanted`` to
    ``current``, ``remove`` takes ``wanted`` out of ``current``.
    """
    if mode not in FEATURE_MODES:
        raise ValueError(
            "features mode must be one of {}, got {!r}".format(", ".join(FEATURE_MODES), mode)
        )
    now = {f.lower() for f in (current or ())}
    want = set(normalize_features(wanted))
    if mode == "set":
        return sorted(want)
    if mode == "add":
        return sorted(now | want)
    return sorted(now - want)


def validate_fedstate(fedstate):
    """Return the fedstate upper-cased, or raise ``ValueError``."""
    value = str(fedstate).strip().upper()
    if value not in FEDSTATES:
        raise ValueError(
            "fedstate must be one of {}, got {!r}".format(", ".join(FEDSTATES), fedstate)
        )
    return value


def fedstate_reached(current, wanted):
    """True when the shown FedState ``current`` satisfies the wanted state."""
    return (current or "").upper() in FEDSTATE_REACHED[validate_fedstate(wanted)]


def new_cluster_view(name, features=None):
    """What ``show cluster`` reports for a cluster just added by sacctmgr."""
    return {
        "name": name,
        "control_host": "",
        "control_port": 0,
        "rpc": 0,
        "features": sorted(features or []),
        "federation": "",
        "fed_state": FEDSTATE_NONE,
        "flags": [],
    }


def plan_cluster(current, name, state="present", features=None, features_mode="set",
                 fedstate=None):
    """Plan the sacctmgr changes that bring cluster ``name`` to a state.

    ``current`` is what :func:`get_cluster` returned (``None`` when the
    cluster does not exist); ``features=None`` and ``fedstate=None`` leave
    those attributes alone. Returns ``{"changes": [args, ...], "after": view}``
    where each ``args`` list goes to :meth:`SacctmgrRunner.write` and
    ``after`` is the expected ``get_cluster`` view (``None`` when absent).
    Raises ``ValueError`` for impossible requests.
    """
    name = validate_cluster_name(name)
    if state not in ("present", "absent"):
        raise ValueError(f"state must be present or absent, got {state!r}")
    if fedstate is not None:
        fedstate = validate_fedstate(fedstate)

    if state == "absent":
        if current is None:
            return {"changes": [], "after": None}
        return {"changes": [delete_cluster_args(name)], "after": None}

    have_features = current["features"] if current is not None else []
    new_features = None
    if features is not None:
        planned = plan_features(have_features, features, features_mode)
        if planned != sorted(have_features):
            new_features = planned

    new_fedstate = None
    if fedstate is not None:
        federation = current["federation"] if current is not None else ""
        if not federation:
            if fedstate != "DRAIN+REMOVE":
                raise ValueError(
                    "fedstate needs the cluster to be in a federation: cluster {!r} "
                    "{} in no federation, so Slurm has no federation state to set; "
                    "add it to a federation first".format(
                        name, "is" if current is not None else "would be"
                    )
                )
            # A cluster in no federation is where DRAIN+REMOVE ends: nothing to do.
        elif not fedstate_reached(current["fed_state"], fedstate):
            new_fedstate = fedstate

    if current is None:
        after = new_cluster_view(name, new_features)
        return {"changes": [add_cluster_args(name, features=new_features)], "after": after}

    after = dict(current)
    after["features"] = list(current["features"])
    after["flags"] = list(current["flags"])
    if new_features is None and new_fedstate is None:
        return {"changes": [], "after": after}
    if new_features is not None:
        after["features"] = new_features
    if new_fedstate is not None:
        after["fed_state"] = new_fedstate
    args = modify_cluster_args(name, features=new_features, fedstate=new_fedstate)
    return {"changes": [args], "after": after}


# --------------------------------------------------------------------------
# Cluster commands


def show_cluster_args(name):
    """Arguments selecting one cluster for ``show`` (format= is added by query)."""
    return ["show", "cluster", "where", "name=" + name]


def _set_args(features=None, fedstate=None, federation=None):
    args = []
    if features is not None:
        args.append("features=" + ",".join(features))
    if federation is not None:
        args.append("federation=" + federation)
    if fedstate is not None:
        args.append("fedstate=" + validate_fedstate(fedstate))
    return args


def add_cluster_args(name, features=None, fedstate=None, federation=None):
    """``add cluster name=NAME [features=a,b] [federation=F] [fedstate=S]``."""
    return ["add", "cluster", "name=" + name] + _set_args(
        features=features or None, fedstate=fedstate, federation=federation
    )


def modify_cluster_args(name, features=None, fedstate=None, federation=None):
    """``modify cluster where name=NAME set ...``; ``features=[]`` clears them."""
    settings = _set_args(features=features, fedstate=fedstate, federation=federation)
    if not settings:
        raise ValueError(f"nothing to set on cluster {name!r}")
    return ["modify", "cluster", "where", "name=" + name, "set"] + settings


def delete_cluster_args(name):
    """``delete cluster where name=NAME``."""
    return ["delete", "cluster", "where", "name=" + name]


def get_cluster(runner, name):
    """Return the cluster as a dict, or ``None`` when the database has no such cluster.

    Keys: name, control_host, control_port, rpc, features (sorted list),
    federation, fed_state, flags (list).
    """
    records = runner.query(show_cluster_args(name), CLUSTER_FIELDS)
    for record in records:
        if record["Cluster"].lower() == name.lower():
            return cluster_from_record(record)
    return None


def add_cluster(runner, name, features=None, fedstate=None, federation=None):
    """Add a cluster to the accounting database; return the argv that ran."""
    return runner.write(add_cluster_args(name, features=features, fedstate=fedstate,
                                         federation=federation))


def modify_cluster(runner, name, features=None, fedstate=None, federation=None):
    """Set features (list; ``[]`` clears) and/or fedstate; return the argv that ran."""
    return runner.write(modify_cluster_args(name, features=features, fedstate=fedstate,
                                            federation=federation))


def delete_cluster(runner, name):
    """Delete a cluster from the accounting database; return the argv that ran."""
    return runner.write(delete_cluster_args(name))


def cluster_diff_view(name, cluster):
    """The part of a cluster shown in --diff output."""
    if cluster is None:
        return {"name": name, "state": "absent"}
    return {
        "name": cluster["name"],
        "state": "present",
        "features": list(cluster["features"]),
        "federation": cluster["federation"],
        "fed_state": cluster["fed_state"],
    }


def ensure_cluster(runner, params, check_mode=False, diff=False):
    """Bring the cluster to the wanted state; return the module result.

    read -> plan -> nothing to do? return -> check mode? report -> apply -> re-read.
    Raises ``ValueError`` for requests Slurm cannot satisfy and
    ``SacctmgrError`` when sacctmgr fails.
    """
    warnings = []
    name = validate_cluster_name(params["name"])
    if name != params["name"]:
        warnings.append(
            "cluster name {!r} is stored by Slurm in lower case as {!r}".format(params["name"], name)
        )

    before = get_cluster(runner, name)
    plan = plan_cluster(
        before,
        name,
        state=params.get("state") or "present",
        features=params.get("features"),
        features_mode=params.get("features_mode") or "set",
        fedstate=params.get("fedstate"),
    )
    changed, commands, after = apply_plan(runner, plan, check_mode, lambda: get_cluster(runner, name))

    result = {
        "changed": changed,
        "cluster": after if after is not None else {},
        "commands": commands,
        "warnings": warnings,
    }
    if diff:
        result["diff"] = {"before": cluster_diff_view(name, before), "after": cluster_diff_view(name, after)}
    return result


# --------------------------------------------------------------------------
# Federations
#
# sacctmgr facts the federation helpers rely on (sacctmgr(1) "SPECIFICATIONS
# FOR FEDERATION", Slurm sources, and checked on the lab's sacctmgr 24.11.5):
#
# * ``show federation where name=NAME format=Federation,Cluster,ID,Features,
#   FedState,Flags`` prints one record per member cluster (ID is the
#   cluster's id in the federation, Features and FedState are the cluster's);
#   a federation without members is one record with empty Cluster, ID,
#   Features and FedState (``scratchfed|||||``); an unknown name prints
#   nothing (rc 0). Names match case-insensitively and are stored in lower
#   case. With --parsable2, sacctmgr 24.11 ends the 2nd and later member
#   records of a federation with a stray ``|``, which parse_parsable accepts.
# * ``add federation name=NAME [clusters=a,b]``; ``modify federation where
#   name=NAME set clusters=a,b`` makes a,b the exact member list (sacctmgr
#   turns it into ``+=``/``-=`` for the difference; ``clusters=`` removes
#   every member; ``clusters+=``/``clusters-=`` also work but are not used:
#   the whole wanted list is always written, as for cluster features). Setting
#   the list a federation already has fails with "Nothing to change" (rc 1),
#   so it is only written when it differs.
# * ``delete federation where name=NAME``; members then show no Federation
#   and FedState NA. A cluster joins with FedState ACTIVE and the lowest free ID.
# * A cluster in ANOTHER federation is moved silently with --immediate (the
#   confirmation prompt is answered yes), which is why plan_federation refuses
#   it; an unknown cluster fails with "The cluster X doesn't exist. Please add
#   first."; modifying an unknown federation fails with "The federation X
#   doesn't exist.".
# * Federation flags: Slurm defines none (24.11 answers any ``flags=`` value,
#   even an empty one, with "Unknown federation flag ... Valid federation
#   flags are '(null)'"); ``flags=-1`` clears every flag and is accepted.
#   ``show federation format=Flags`` prints an empty value.

FEDERATION_FIELDS = ("Federation", "Cluster", "ID", "Features", "FedState", "Flags")

# Flags ``sacctmgr add/modify federation ... flags=`` accepts: none in Slurm
# up to 24.11. Add names here when a Slurm release defines some.
FEDERATION_FLAGS = ()
# The value that clears every federation flag (``atoi(value) == -1``).
FEDERATION_FLAGS_CLEAR = "-1"
_FEDERATION_FLAGS_NONE = ("None", "NotSet", "(null)")

CLUSTERS_MODES = ("set", "add", "remove")
# The FedState a cluster has right after joining a federation.
FEDSTATE_JOINED = "ACTIVE"
# FedStates of a cluster on its way out of its federation.
FEDSTATES_LEAVING = ("DRAIN+REMOVE", "DRAINED+REMOVE")

_FEDERATION_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
FEDERATION_NAME_RULE = (
    "Slurm federation names must use only letters, digits, '_' and '-', and "
    "start with a letter or a digit; Slurm maps upper case to lower case"
)


def validate_federation_name(name):
    """Check a federation name; return it lower-cased, or raise ``ValueError``."""
    if not isinstance(name, str) or not name:
        raise ValueError("a federation name is required: " + FEDERATION_NAME_RULE)
    normalized = name.lower()
    if not _FEDERATION_NAME_RE.match(normalized):
        raise ValueError(f"invalid federation name {name!r}: {FEDERATION_NAME_RULE}")
    return normalized


def normalize_cluster_names(clusters):
    """Validate cluster names; return them lower-cased, sorted, de-duplicated."""
    return sorted({validate_cluster_name(c) for c in clusters or ()})


def normalize_federation_flags(flags):
    """Validate federation flags against FEDERATION_FLAGS; return them sorted.

    Raises ``ValueError`` naming the flags Slurm accepts (none up to 24.11).
    """
    known = {f.lower(): f for f in FEDERATION_FLAGS}
    result = set()
    for flag in flags or ():
        item = str(flag).strip()
        if item.lower() not in known:
            if known:
                valid = "valid flags are " + ", ".join(FEDERATION_FLAGS)
            else:
                valid = (
                    "Slurm (up to 24.11) defines no federation flags (sacctmgr lists the "
                    "valid ones as '(null)'), so the only flags value it accepts is an "
                    "empty list"
                )
            raise ValueError(f"unknown federation flag {flag!r}: {valid}")
        result.add(known[item.lower()])
    return sorted(result)


def plan_members(current, wanted, mode="set"):
    """Return the sorted member list a federation should end up with.

    ``set`` replaces the members with ``wanted``, ``add`` adds ``wanted`` to
    ``current``, ``remove`` takes ``wanted`` out of ``current``.
    """
    if mode not in CLUSTERS_MODES:
        raise ValueError(
            "clusters mode must be one of {}, got {!r}".format(", ".join(CLUSTERS_MODES), mode)
        )
    now = {c.lower() for c in (current or ())}
    want = set(normalize_cluster_names(wanted))
    if mode == "set":
        return sorted(want)
    if mode == "add":
        return sorted(now | want)
    return sorted(now - want)


def federation_joining_clusters(current, clusters, clusters_mode="set"):
    """Clusters that would join the federation: those to look up before planning.

    ``current`` is what :func:`get_federation` returned (``None`` when
    absent); ``clusters=None`` leaves the members alone (nothing joins).
    """
    if clusters is None:
        return []
    have = current["clusters"] if current is not None else []
    return sorted(set(plan_members(have, clusters, clusters_mode)) - set(have))


def _joining_problem(federation, name, view):
    """Why cluster ``name`` (get_cluster view ``view``) cannot join, or ``None``."""
    if view is None:
        return (
            f"cluster {name!r} does not exist in the accounting database: add it with "
            "hybridhpc.slurm.slurm_cluster or start its slurmctld first"
        )
    other = view.get("federation") or ""
    if other and other.lower() != federation:
        fed_state = view.get("fed_state") or FEDSTATE_NONE
        if fed_state.upper() in FEDSTATES_LEAVING:
            return (
                f"cluster {name!r} is still in federation {other!r} (fedstate {fed_state}, "
                "leaving it once its federated jobs have ended); a cluster can be in only "
                f"one federation: wait until it has left {other!r}, or remove it there "
                f"(hybridhpc.slurm.slurm_federation name={other} clusters=[{name}] "
                "clusters_mode=remove), then run again"
            )
        return (
            f"cluster {name!r} is in federation {other!r} (fedstate {fed_state}); a cluster "
            f"can be in only one federation and sacctmgr would silently move it: remove it "
            f"from {other!r} first (hybridhpc.slurm.slurm_federation name={other} "
            f"clusters=[{name}] clusters_mode=remove), or set its fedstate to DRAIN+REMOVE "
            f"(hybridhpc.slurm.slurm_cluster name={name} fedstate=DRAIN+REMOVE) and wait "
            f"until it has left {other!r}"
        )
    return None


def new_member_view(name, cluster_view=None):
    """What ``show federation`` reports for a cluster that just joined (id unknown)."""
    features = list(cluster_view["features"]) if cluster_view else []
    return {"name": name, "id": None, "fed_state": FEDSTATE_JOINED, "features": features}


def plan_federation(current, name, state="present", clusters=None, clusters_mode="set",
                    flags=None, cluster_views=None):
    """Plan the sacctmgr changes that bring federation ``name`` to a state.

    ``current`` is what :func:`get_federation` returned (``None`` when the
    federation does not exist). ``clusters=None`` and ``flags=None`` leave
    members and flags alone. ``cluster_views`` maps every cluster of
    :func:`federation_joining_clusters` to its :func:`get_cluster` view
    (``None`` for a cluster the database does not know).

    Returns ``{"changes": [args, ...], "after": view}`` like
    :func:`plan_cluster`. Raises ``ValueError`` for impossible requests: an
    unknown cluster, a cluster in another federation, an unknown flag.
    """
    name = validate_federation_name(name)
    if state not in ("present", "absent"):
        raise ValueError(f"state must be present or absent, got {state!r}")
    if clusters_mode not in CLUSTERS_MODES:
        raise ValueError(
            "clusters_mode must be one of {}, got {!r}".format(", ".join(CLUSTERS_MODES), clusters_mode)
        )
    wanted_flags = normalize_federation_flags(flags) if flags is not None else None
    wanted = normalize_cluster_names(clusters) if clusters is not None else None

    if state == "absent":
        if current is None:
            return {"changes": [], "after": None}
        return {"changes": [delete_federation_args(name)], "after": None}

    have = list(current["clusters"]) if current is not None else []
    members = plan_members(have, wanted, clusters_mode) if wanted is not None else list(have)
    joining = sorted(set(members) - set(have))

    views = cluster_views or {}
    problems = []
    for cluster in joining:
        if cluster not in views:
            raise ValueError(f"cluster {cluster!r} was not looked up before planning")
        problem = _joining_problem(name, cluster, views[cluster])
        if problem:
            problems.append(problem)
    if problems:
        raise ValueError("; ".join(problems))

    have_flags = list(current["flags"]) if current is not None else []
    new_flags = None
    if wanted_flags is not None and wanted_flags != sorted(have_flags):
        new_flags = wanted_flags

    kept = [dict(m, features=list(m["features"])) for m in (current or {}).get("members", [])
            if m["name"] in members]
    after_members = sorted(kept + [new_member_view(c, views[c]) for c in joining],
                           key=lambda m: m["name"])
    after = {
        "name": name,
        "clusters": members,
        "flags": new_flags if new_flags is not None else sorted(have_flags),
        "members": after_members,
    }

    if current is None:
        args = add_federation_args(name, clusters=members or None, flags=new_flags or None)
        return {"changes": [args], "after": after}
    new_members = members if members != sorted(have) else None
    if new_members is None and new_flags is None:
        return {"changes": [], "after": after}
    args = modify_federation_args(name, clusters=new_members, flags=new_flags)
    return {"changes": [args], "after": after}


# --------------------------------------------------------------------------
# Federation commands


def show_federation_args(name):
    """Arguments selecting one federation for ``show`` (format= is added by query)."""
    return ["show", "federation", "where", "name=" + name]


def _federation_set_args(clusters=None, flags=None):
    args = []
    if flags is not None:
        args.append("flags=" + (",".join(flags) if flags else FEDERATION_FLAGS_CLEAR))
    if clusters is not None:
        args.append("clusters=" + ",".join(clusters))
    return args


def add_federation_args(name, clusters=None, flags=None):
    """``add federation name=NAME [clusters=a,b] [flags=F]``."""
    return ["add", "federation", "name=" + name] + _federation_set_args(
        clusters=clusters or None, flags=flags or None
    )


def modify_federation_args(name, clusters=None, flags=None):
    """``modify federation where name=NAME set ...``.

    ``clusters`` is the whole member list (``[]`` removes every member);
    ``flags=[]`` clears every flag (``flags=-1``).
    """
    settings = _federation_set_args(clusters=clusters, flags=flags)
    if not settings:
        raise ValueError(f"nothing to set on federation {name!r}")
    return ["modify", "federation", "where", "name=" + name, "set"] + settings


def delete_federation_args(name):
    """``delete federation where name=NAME``."""
    return ["delete", "federation", "where", "name=" + name]


def federation_from_records(records):
    """Turn the ``show federation`` records of ONE federation into a dict.

    Keys: name, clusters (sorted member names), flags (sorted list), members
    (sorted by name; each with name, id, fed_state, features).
    """
    if not records:
        raise ValueError("no federation records")
    members = []
    for record in records:
        if not record["Cluster"]:
            continue  # the record of a federation without members
        members.append({
            "name": record["Cluster"],
            "id": _to_int(record["ID"]),
            "fed_state": record["FedState"] or FEDSTATE_NONE,
            "features": split_list(record["Features"]),
        })
    members.sort(key=lambda m: m["name"])
    return {
        "name": records[0]["Federation"],
        "clusters": [m["name"] for m in members],
        "flags": split_list(records[0]["Flags"], none_words=_FEDERATION_FLAGS_NONE),
        "members": members,
    }


def get_federation(runner, name):
    """Return the federation as a dict, or ``None`` when it does not exist."""
    records = runner.query(show_federation_args(name), FEDERATION_FIELDS)
    mine = [r for r in records if r["Federation"].lower() == name.lower()]
    if not mine:
        return None
    return federation_from_records(mine)


def add_federation(runner, name, clusters=None, flags=None):
    """Create a federation, optionally with members; return the argv that ran."""
    return runner.write(add_federation_args(name, clusters=clusters, flags=flags))


def modify_federation(runner, name, clusters=None, flags=None):
    """Set the members (whole list; ``[]`` removes all) and/or flags; return the argv."""
    return runner.write(modify_federation_args(name, clusters=clusters, flags=flags))


def delete_federation(runner, name):
    """Delete a federation (its members leave it); return the argv that ran."""
    return runner.write(delete_federation_args(name))


def apply_plan(runner, plan, check_mode, read_after):
    """Run a plan's sacctmgr writes, or in check mode only name them.

    Returns ``(changed, commands, after)``: the argv lists run (or that would
    run) and the object as read back after the writes (the plan's expected
    state in check mode or when nothing changes).
    """
    commands = [runner.write_argv(args) for args in plan["changes"]]
    after = plan["after"]
    if commands and not check_mode:
        commands = [runner.write(args) for args in plan["changes"]]
        after = read_after()
    return bool(commands), commands, after


def run_module(module, ensure):
    """Drive a sacctmgr module: run ``ensure`` and report like every module here.

    ``ensure(runner, params, check_mode, diff)`` returns the result with a
    ``warnings`` list; bad input (ValueError) and sacctmgr failures end in
    ``fail_json``, warnings go through ``module.warn``.
    """
    try:
        runner = runner_from_module(module)
        result = ensure(runner, module.params, check_mode=module.check_mode, diff=module._diff)
    except ValueError as err:
        module.fail_json(msg=str(err), changed=False)
    except SacctmgrError as err:
        module.fail_json(msg=str(err), changed=False, **err.to_dict())
    for warning in result.pop("warnings"):
        module.warn(warning)
    module.exit_json(**result)
