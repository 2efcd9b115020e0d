# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Accounts, users and QoS as code: the checks, the plan and the slurm.conf policy.

The inventory declares ``slurm_qos``, ``slurm_accounts`` and ``slurm_users``
(role slurm_accounting). This module decides, on the Ansible controller:

* what is wrong with them (:func:`accounting_problems`, first play of site.yml);
* which clusters one accounting database serves, so that the objects are
  written once per database, by its first slurmdbd host
  (:func:`database_clusters`);
* the module calls that bring that database to the inventory
  (:func:`accounting_plan`): QoS first, accounts parents first, then users,
  each user with one association per cluster it may run on (a federation's
  clusters share the database, so a user of a federated account can run on
  every member), account and partition;
* what an opt-in purge removes (:func:`purge_plan`);
* the slurm.conf keys of the policy (:func:`policy_config`):
  AccountingStorageEnforce and the multifactor priority with fairshare.

Slurm facts this relies on (sacctmgr(1), slurm.conf(5), resource_limits and
priority_multifactor pages of Slurm 24.11):

* Limits and QoS are only enforced with ``AccountingStorageEnforce``:
  ``associations`` rejects jobs of users without an association, ``limits``
  enforces association limits (implies associations), ``qos`` requires a
  valid QoS and enforces its limits, ``safe`` only starts jobs that can run
  to completion within GrpTRESMins-style limits (implies limits).
* A child association replaces (does not extend) its parent's QoS list, and
  its default QoS must be in its QoS list; an association without a QoS list
  or default QoS inherits its parent's.
* ``normal`` is the QoS slurmdbd creates; ``root`` is the account (and user)
  every cluster gets on registration: neither is ever purged.
* PriorityType defaults to priority/multifactor in current Slurm, but every
  PriorityWeight* defaults to 0, which schedules first in, first out: the
  weights are what makes fairshare and QoS priority count.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.hybridhpc.slurm.plugins.module_utils import cluster_plan, sacctmgr_assoc

ENFORCE_VALUES = ("associations", "limits", "nojobs", "nosteps", "qos", "safe", "wckeys", "all")
# What an inventory that declares accounts gets unless it says otherwise.
ENFORCE_DEFAULT = ("associations", "limits", "qos", "safe")

PRIORITY_DEFAULTS = {
    "PriorityType": "priority/multifactor",
    "PriorityDecayHalfLife": "7-0",
    "PriorityMaxAge": "7-0",
    "PriorityWeightAge": 1000,
    "PriorityWeightFairshare": 10000,
    "PriorityWeightJobSize": 0,
    "PriorityWeightPartition": 1000,
    "PriorityWeightQOS": 5000,
}

# Built into every accounting database; never purged.
PROTECTED_QOS = ("normal",)
PROTECTED_ACCOUNTS = ("root",)
PROTECTED_USERS = ("root",)

LIMIT_INT_KEYS = ("grp_jobs", "grp_submit_jobs", "max_jobs", "max_submit_jobs")
LIMIT_TIME_KEYS = ("grp_wall", "max_wall")
LIMIT_TRES_KEYS = ("grp_tres", "max_tres_per_job")
ASSOC_KEYS = ("fairshare", "qos", "default_qos") + LIMIT_INT_KEYS + LIMIT_TIME_KEYS + LIMIT_TRES_KEYS

QOS_INT_KEYS = ("priority", "max_jobs_per_user", "max_submit_jobs_per_user", "grp_jobs", "grp_submit_jobs")
QOS_TRES_KEYS = ("max_tres_per_user", "max_tres_per_job", "grp_tres")
QOS_KEYS = ("name", "state", "description", "preempt", "preempt_mode", "flags", "usage_factor",
            "max_wall") + QOS_INT_KEYS + QOS_TRES_KEYS
ACCOUNT_KEYS = ("name", "state", "parent", "description", "organization", "clusters") + ASSOC_KEYS
USER_KEYS = ("name", "state", "accounts", "default_account", "clusters", "partitions", "admin_level") + ASSOC_KEYS
ADMIN_LEVELS = ("none", "operator", "administrator")

_NAME_RE = re.compile(r"^[a-z0-9_][a-z0-9_.-]*$")
_USER_RE = re.compile(r"^[a-z_][a-z0-9_.-]*\$?$")
_TIME_RE = re.compile(r"^(\d+|\d+:\d+|\d+:\d+:\d+|\d+-\d+|\d+-\d+:\d+|\d+-\d+:\d+:\d+)$")
_TRES_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*(/[a-z0-9_:.-]+)?$")
_TRES_VALUE_RE = re.compile(r"^-?\d+[KMGTP]?$", re.IGNORECASE)


# ----------------------------------------------------------------- policy

def enforce_list(accounting, enforce, managed):
    """The AccountingStorageEnforce values: the inventory's, else the default when it declares accounts."""
    if not accounting:
        return []
    if enforce is None:
        return list(ENFORCE_DEFAULT) if managed else []
    if isinstance(enforce, str):
        enforce = [e for e in enforce.split(",") if e.strip()]
    return [str(e).strip().lower() for e in enforce]


def policy_config(accounting, enforce, priority, managed):
    """slurm.conf keys of the accounting policy (merged under the inventory's slurm_config).

    ``managed``: the inventory declares accounts, users or QoS. Without
    accounting there is no fairshare and nothing to enforce: no keys.
    """
    if not accounting:
        return {}
    config = dict(PRIORITY_DEFAULTS)
    for key, value in (priority or {}).items():
        for known in list(config):
            if known.lower() == str(key).lower():
                del config[known]
        config[key] = value
    values = enforce_list(accounting, enforce, managed)
    if values:
        config["AccountingStorageEnforce"] = ",".join(values)
    return {k: v for k, v in config.items() if v is not None and v != ""}


# ----------------------------------------------------------------- clusters

def database_clusters(host, cluster_names, members_of):
    """The clusters whose accounting database this host writes: those whose first slurmdbd host it is.

    ``members_of(cluster)`` returns cluster_plan.cluster_members' answer plus
    ``accounting`` (the cluster's slurm_accounting).
    """
    served = []
    for name in cluster_names:
        members = members_of(name)
        if members.get("accounting", True) and members["dbd_hosts"][:1] == [host]:
            served.append(name)
    return sorted(served)


def site_clusters(groups, host_vars):
    """Every cluster of the inventory (the slurm_cluster_name of its slurmctld hosts), sorted."""
    names = set()
    for host in groups.get(cluster_plan.CONTROLLER_GROUP) or []:
        name = (host_vars(host) or {}).get("slurm_cluster_name")
        if name:
            names.add(name)
    return sorted(names)


def serving_clusters(host, groups, host_vars):
    """database_clusters from the inventory: each cluster's slurmdbd hosts as its controllers see them."""
    def members_of(cluster):
        controllers = [h for h in groups.get(cluster_plan.CONTROLLER_GROUP) or []
                       if (host_vars(h) or {}).get("slurm_cluster_name") == cluster]
        hv = host_vars(controllers[0]) or {} if controllers else {}
        members = cluster_plan.cluster_members(cluster, groups, host_vars, hv.get("slurm_dbd_hosts") or None)
        members["accounting"] = cluster_plan.truthy(hv.get("slurm_accounting", True))
        return members
    return database_clusters(host, site_clusters(groups, host_vars), members_of)


# ----------------------------------------------------------------- checks

def _present(items):
    return [i for i in items or [] if isinstance(i, dict) and i.get("state", "present") == "present"]


def _names(items):
    return [str(i.get("name", "")).lower() for i in _present(items)]


def _entries(var, items, keys, name_re, what, problems):
    if items is None:
        return []
    if not isinstance(items, list):
        problems.append("%s: must be a list of mappings (one per %s), got %r" % (var, what, items))
        return []
    seen = set()
    good = []
    for index, item in enumerate(items):
        where = "%s[%d]" % (var, index)
        if not isinstance(item, dict):
            problems.append("%s: must be a mapping with at least 'name', got %r" % (where, item))
            continue
        name = item.get("name")
        if not isinstance(name, str) or not name_re.match(name.lower()):
            problems.append("%s.name: %r is not a valid %s name (lower-case letters, digits, '_', '.', '-')"
                            % (where, name, what))
            continue
        where = "%s[%s]" % (var, name)
        if name.lower() in seen:
            problems.append("%s: %s %r is listed twice; keep one entry" % (where, what, name))
        seen.add(name.lower())
        unknown = sorted(set(item) - set(keys))
        if unknown:
            problems.append("%s: unknown keys %s; the keys are %s" % (where, ", ".join(unknown), ", ".join(keys)))
        if item.get("state", "present") not in ("present", "absent"):
            problems.append("%s.state: %r must be present or absent" % (where, item.get("state")))
        good.append((where, item))
    return good


def _check_int(where, key, value, problems, low=-1):
    if value is None:
        return
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.lstrip("-").isdigit())) \
            or int(value) < low:
        problems.append("%s.%s: %r must be a whole number (-1 clears the limit)" % (where, key, value))


def _check_time(where, key, value, problems):
    if value is None:
        return
    text = str(value).strip()
    if text in ("-1",) or text.lower() in ("unlimited", "infinite") or _TIME_RE.match(text):
        return
    problems.append('%s.%s: %r is not a Slurm time; use minutes, "hours:minutes:seconds" or '
                    '"days-hours:minutes:seconds" (-1 clears the limit)' % (where, key, value))


def _check_tres(where, key, value, problems):
    if value is None:
        return
    if not isinstance(value, dict):
        problems.append("%s.%s: must be a mapping of TRES to amounts, e.g. {cpu: 8, mem: 16G, gres/gpu: 2}, got %r"
                        % (where, key, value))
        return
    for name, amount in value.items():
        if not _TRES_NAME_RE.match(str(name).lower()):
            problems.append("%s.%s: %r is not a TRES name (cpu, mem, node, billing, gres/gpu, license/x)"
                            % (where, key, name))
        if isinstance(amount, bool) or not _TRES_VALUE_RE.match(str(amount)):
            problems.append("%s.%s.%s: %r must be a whole number, optionally with K/M/G/T (mem), or -1"
                            % (where, key, name, amount))


def _check_str_list(where, key, value, problems):
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        problems.append("%s.%s: must be a list of names, got %r" % (where, key, value))
        return []
    return [v.strip().lower() for v in value]


def _check_assoc(where, item, problems, qos_names):
    for key in LIMIT_INT_KEYS:
        _check_int(where, key, item.get(key), problems)
    for key in LIMIT_TIME_KEYS:
        _check_time(where, key, item.get(key), problems)
    for key in LIMIT_TRES_KEYS:
        _check_tres(where, key, item.get(key), problems)
    fairshare = item.get("fairshare")
    if fairshare is not None and str(fairshare).lower() != "parent":
        _check_int(where, "fairshare", fairshare, problems, low=0)
    qos = _check_str_list(where, "qos", item.get("qos"), problems)
    for name in qos + ([str(item["default_qos"]).lower()] if item.get("default_qos") else []):
        if name not in qos_names:
            problems.append("%s: QoS %r is not in slurm_qos; add it there (or use one of %s)"
                            % (where, name, ", ".join(sorted(qos_names))))
    if item.get("default_qos") and qos and str(item["default_qos"]).lower() not in qos:
        problems.append("%s.default_qos: %r is not in its qos list %s; Slurm requires the default QoS among "
                        "the allowed ones: add it to qos" % (where, item["default_qos"], qos))


def accounting_problems(inputs):
    """Problems of slurm_qos, slurm_accounts, slurm_users and the policy variables.

    ``inputs``: those variables plus ``clusters`` (the inventory's cluster
    names) and ``accounting`` (slurm_accounting).
    """
    problems = []
    clusters = [str(c).lower() for c in inputs.get("clusters") or []]
    accounting = inputs.get("accounting", True)
    qos_items = _entries("slurm_qos", inputs.get("slurm_qos"), QOS_KEYS, _NAME_RE, "QoS", problems)
    account_items = _entries("slurm_accounts", inputs.get("slurm_accounts"), ACCOUNT_KEYS, _NAME_RE, "account",
                             problems)
    user_items = _entries("slurm_users", inputs.get("slurm_users"), USER_KEYS, _USER_RE, "user", problems)
    declared = bool(qos_items or account_items or user_items)
    if declared and not accounting:
        problems.append("slurm_accounts/slurm_users/slurm_qos: accounts, users and QoS live in slurmdbd, but "
                        "slurm_accounting is false; set slurm_accounting: true (and a slurmdbd host) or remove them")

    qos_names = set(_names(inputs.get("slurm_qos"))) | set(PROTECTED_QOS)
    for where, item in qos_items:
        for key in QOS_INT_KEYS:
            _check_int(where, key, item.get(key), problems)
        for key in QOS_TRES_KEYS:
            _check_tres(where, key, item.get(key), problems)
        _check_time(where, "max_wall", item.get("max_wall"), problems)
        for name in _check_str_list(where, "preempt", item.get("preempt"), problems):
            if name not in qos_names:
                problems.append("%s.preempt: QoS %r is not in slurm_qos; add it or drop it from preempt"
                                % (where, name))
        # The slurm_qos module's own rules: sacctmgr refuses these only when the accounting play runs, after the
        # configuration plays changed hosts.
        flags = _check_str_list(where, "flags", item.get("flags"), problems)
        checks = [(sacctmgr_assoc.normalize_qos_flags, flags)]
        if item.get("preempt_mode") not in (None, ""):
            checks.append((sacctmgr_assoc.normalize_preempt_mode, item["preempt_mode"]))
        for normalize, value in checks:
            try:
                normalize(value)
            except ValueError as exc:
                problems.append("%s.%s" % (where, exc))
        factor = item.get("usage_factor")
        if factor is not None:
            try:
                if isinstance(factor, bool) or float(factor) < 0:
                    raise ValueError
            except (TypeError, ValueError):
                problems.append("%s.usage_factor: %r must be a number from 0" % (where, factor))

    default_qos = inputs.get("slurm_default_qos")
    if default_qos is not None and str(default_qos).lower() not in qos_names:
        problems.append("slurm_default_qos: %r is not in slurm_qos; add it there or use normal" % (default_qos,))

    account_names = set(_names(inputs.get("slurm_accounts"))) | set(PROTECTED_ACCOUNTS)
    parents = {}
    for where, item in account_items:
        _check_assoc(where, item, problems, qos_names)
        for cluster in _check_str_list(where, "clusters", item.get("clusters"), problems):
            if cluster not in clusters:
                problems.append("%s.clusters: %r is not a cluster of this inventory (%s)"
                                % (where, cluster, ", ".join(clusters)))
        parent = str(item.get("parent") or "root").lower()
        if item.get("state", "present") == "present":
            parents[item["name"].lower()] = parent
            if parent not in account_names:
                problems.append("%s.parent: account %r is not in slurm_accounts; add it or use root" % (where, parent))
    for name in parents:
        seen, current = [name], parents[name]
        while current in parents and current not in seen:
            seen.append(current)
            current = parents[current]
        if current in seen:
            problems.append("slurm_accounts[%s].parent: the parents form a loop (%s); an account tree has no cycles"
                            % (name, " -> ".join(seen + [current])))
            break

    for where, item in user_items:
        _check_assoc(where, item, problems, qos_names)
        for cluster in _check_str_list(where, "clusters", item.get("clusters"), problems):
            if cluster not in clusters:
                problems.append("%s.clusters: %r is not a cluster of this inventory (%s)"
                                % (where, cluster, ", ".join(clusters)))
        _check_str_list(where, "partitions", item.get("partitions"), problems)
        if item.get("admin_level") is not None and str(item["admin_level"]).lower() not in ADMIN_LEVELS:
            problems.append("%s.admin_level: %r must be one of %s" % (where, item["admin_level"], ", ".join(ADMIN_LEVELS)))
        if item.get("state", "present") != "present":
            continue
        accounts = _check_str_list(where, "accounts", item.get("accounts"), problems)
        if not accounts:
            problems.append("%s.accounts: a user needs at least one account to run jobs; list them" % where)
        for account in accounts:
            if account not in account_names:
                problems.append("%s.accounts: account %r is not in slurm_accounts; add it there" % (where, account))
        default = item.get("default_account")
        if default is not None and str(default).lower() not in accounts:
            problems.append("%s.default_account: %r is not one of its accounts %s; add it to accounts"
                            % (where, default, accounts))

    enforce = inputs.get("slurm_accounting_enforce")
    if enforce is not None:
        values = enforce if isinstance(enforce, list) else str(enforce).split(",")
        for value in values:
            if str(value).strip().lower() not in ENFORCE_VALUES:
                problems.append("slurm_accounting_enforce: %r is not one of %s" % (value, ", ".join(ENFORCE_VALUES)))
        if values and not accounting:
            problems.append("slurm_accounting_enforce: enforcement needs slurmdbd; set slurm_accounting: true "
                            "or slurm_accounting_enforce: []")
    priority = inputs.get("slurm_priority")
    if priority is not None:
        if not isinstance(priority, dict):
            problems.append("slurm_priority: must be a mapping of slurm.conf Priority* keys, got %r" % (priority,))
        else:
            for key in priority:
                if not str(key).lower().startswith("priority"):
                    problems.append("slurm_priority: %r is not a Priority* key of slurm.conf; put other keys in "
                                    "slurm_config" % (key,))
    purge = inputs.get("slurm_accounting_purge")
    if purge is not None and not isinstance(purge, bool):
        problems.append("slurm_accounting_purge: %r must be true or false" % (purge,))
    return problems


# ----------------------------------------------------------------- plan

_QOS_ARGS = tuple(k for k in QOS_KEYS if k != "state")


def _assoc_args(item):
    return {k: item[k] for k in ASSOC_KEYS if item.get(k) is not None}


def _account_order(accounts):
    """Accounts with every parent before its children (inventory order otherwise)."""
    by_name = {a["name"].lower(): a for a in accounts}
    ordered, placed = [], set()

    def place(name, trail=()):
        if name in placed or name not in by_name or name in trail:
            return
        place(str(by_name[name].get("parent") or "root").lower(), trail + (name,))
        placed.add(name)
        ordered.append(by_name[name])

    for account in accounts:
        place(account["name"].lower())
    return ordered


def accounting_plan(db_clusters, qos, accounts, users, default_qos=None):
    """The module calls that bring one accounting database to the inventory.

    ``db_clusters``: the clusters this database serves (database_clusters).
    Returns ``{"clusters", "qos", "accounts", "users", "absent": {"users",
    "accounts", "qos"}, "entries"}``: argument dicts for slurm_qos,
    slurm_account and slurm_user (present), the names the inventory marks
    absent, and ``entries``, all of them as the slurm_accounting module
    takes them (accounting_entries).
    """
    db_clusters = sorted(str(c).lower() for c in db_clusters)
    plan = {"clusters": db_clusters, "qos": [], "accounts": [], "users": [],
            "absent": {"users": [], "accounts": [], "qos": []}}
    if not db_clusters:
        plan["entries"] = accounting_entries(plan)
        return plan
    for item in qos or []:
        if item.get("state", "present") == "absent":
            plan["absent"]["qos"].append(item["name"].lower())
            continue
        args = {k: item[k] for k in _QOS_ARGS if item.get(k) is not None}
        args["name"] = item["name"].lower()
        plan["qos"].append(args)

    account_clusters = {"root": list(db_clusters)}
    present = []
    for item in accounts or []:
        name = item["name"].lower()
        if item.get("state", "present") == "absent":
            plan["absent"]["accounts"].append(name)
            continue
        wanted = [str(c).lower() for c in item["clusters"]] if item.get("clusters") else db_clusters
        mine = [c for c in db_clusters if c in wanted]
        if mine:
            account_clusters[name] = mine
            present.append(item)
    for item in _account_order(present):
        name = item["name"].lower()
        parent = str(item.get("parent") or "root").lower()
        clusters = [c for c in account_clusters[name] if c in account_clusters.get(parent, [])]
        args = {"name": name, "parent": parent, "clusters": clusters}
        for key in ("description", "organization"):
            if item.get(key) is not None:
                args[key] = item[key]
        args.update(_assoc_args(item))
        plan["accounts"].append(args)
        account_clusters[name] = clusters
    if default_qos:
        # Every association inherits the cluster's: root's QoS list and default.
        plan["root"] = {"name": "root", "clusters": list(db_clusters), "qos": [str(default_qos).lower()],
                        "default_qos": str(default_qos).lower()}

    for item in users or []:
        name = item["name"].lower()
        if item.get("state", "present") == "absent":
            plan["absent"]["users"].append(name)
            continue
        accounts_of = [str(a).lower() for a in item.get("accounts") or []]
        wanted = [str(c).lower() for c in item["clusters"]] if item.get("clusters") else db_clusters
        partitions = item.get("partitions") or [None]
        associations = []
        for cluster in db_clusters:
            if cluster not in wanted:
                continue
            for account in accounts_of:
                if cluster not in account_clusters.get(account, []):
                    continue
                for partition in partitions:
                    assoc = {"account": account, "cluster": cluster}
                    if partition:
                        assoc["partition"] = str(partition).lower()
                    assoc.update(_assoc_args(item))
                    associations.append(assoc)
        if not associations:
            continue  # none of its accounts is in this database
        args = {"name": name, "associations": associations, "clusters": sorted({a["cluster"] for a in associations})}
        default = str(item.get("default_account") or accounts_of[0]).lower()
        if not any(a["account"] == default for a in associations):
            default = associations[0]["account"]
        args["default_account"] = default
        if item.get("admin_level") is not None:
            args["admin_level"] = str(item["admin_level"]).lower()
        plan["users"].append(args)
    plan["entries"] = accounting_entries(plan)
    return plan


def accounting_entries(plan):
    """The plan as the slurm_accounting module's ``qos``, ``accounts`` and ``users``.

    root's default QoS comes first among the accounts: every association
    created after it inherits it. The module removes what ``absent`` names
    after the rest, users first, then accounts, then QoS.
    """
    def gone(names):
        return [{"name": name, "state": "absent"} for name in names]
    return {"qos": plan["qos"] + gone(plan["absent"]["qos"]),
            "accounts": ([plan["root"]] if "root" in plan else []) + plan["accounts"] + gone(plan["absent"]["accounts"]),
            "users": plan["users"] + gone(plan["absent"]["users"])}


# The Slurm user the copilot's slurmrestd requests run as: roles/copilot writes
# slurmrestd.user "slurm" unless copilot_config overrides it.
COPILOT_SLURM_USER = "slurm"


def copilot_users(db_clusters, groups, host_vars, declared_users=None, managed=False):
    """slurm_users entries the copilot's placeholder jobs need, for the clusters of this database.

    A cluster whose first controller runs the copilot (copilot_kubeconfig)
    for nodes shared through placeholder jobs (slurm_k8s_shared,
    slurm_k8s_strategy placeholder) submits those jobs as the copilot's
    Slurm user; where AccountingStorageEnforce has ``associations`` slurmctld
    refuses them ("Invalid account") unless that user has an association.
    It gets one in ``copilot_config.placeholder.account`` (default root) on
    each such cluster. A user the inventory declares itself is left to it.
    ``managed``: the inventory declares accounts, users or QoS (the default
    enforcement then has associations).
    """
    declared = {str(u.get("name", "")).lower() for u in declared_users or [] if isinstance(u, dict)}
    wanted = {}
    for cluster in db_clusters:
        in_cluster = [h for h in groups.get(cluster_plan.COMPUTE_GROUP) or []
                      if (host_vars(h) or {}).get("slurm_cluster_name") == cluster]
        controllers = [h for h in groups.get(cluster_plan.CONTROLLER_GROUP) or []
                       if (host_vars(h) or {}).get("slurm_cluster_name") == cluster]
        if not controllers:
            continue
        hv = host_vars(controllers[0]) or {}
        if not str(hv.get("copilot_kubeconfig") or ""):
            continue
        enforce = enforce_list(cluster_plan.truthy(hv.get("slurm_accounting", True)),
                               hv.get("slurm_accounting_enforce"), managed)
        if "associations" not in enforce:
            continue
        if not any(cluster_plan.truthy((host_vars(h) or {}).get("slurm_k8s_shared", False))
                   and str((host_vars(h) or {}).get("slurm_k8s_strategy") or "gres") == "placeholder"
                   for h in in_cluster):
            continue
        config = hv.get("copilot_config") or {}
        user = str((config.get("slurmrestd") or {}).get("user") or COPILOT_SLURM_USER).lower()
        account = str((config.get("placeholder") or {}).get("account") or "root").lower()
        if user in declared:
            continue
        wanted.setdefault((user, account), []).append(cluster)
    return [{"name": user, "accounts": [account], "clusters": clusters}
            for (user, account), clusters in sorted(wanted.items())]


def _clusters_of(item):
    """The clusters of an account or user view: ``clusters``, else those of its associations."""
    if item.get("clusters") is not None:
        return {str(c).lower() for c in item["clusters"]}
    assocs = item.get("associations") or []
    if isinstance(assocs, dict):
        return {str(c).lower() for c in assocs}
    return {str(a["cluster"]).lower() for a in assocs}


def _parent_of(account):
    assocs = account.get("associations")
    if isinstance(assocs, dict) and assocs:
        return str(sorted(assocs.items())[0][1].get("parent") or "root").lower()
    return str(account.get("parent") or "root").lower()


def purge_plan(current, plan):
    """What an opt-in purge removes: objects in the database the inventory does not list.

    ``current``: what slurm_accounting_info returned (``qos``, ``accounts``,
    ``users``: views with ``name`` and their associations, or ``clusters``).
    Only associations on the plan's clusters are removed: another database
    user's clusters are not this inventory's to purge. Returns ``{"users":
    [{"name", "clusters"}], "accounts": [{"name", "clusters", "keep"}]
    (children first; ``keep``: its clusters outside the plan, where it
    stays), "qos": [names]}``. root, normal and what the inventory marks
    absent (removed anyway) are left out.
    """
    clusters = set(plan["clusters"])
    kept_users = {u["name"] for u in plan["users"]} | set(PROTECTED_USERS) | set(plan["absent"]["users"])
    kept_accounts = {a["name"] for a in plan["accounts"]} | set(PROTECTED_ACCOUNTS) | set(plan["absent"]["accounts"])
    kept_qos = {q["name"] for q in plan["qos"]} | set(PROTECTED_QOS) | set(plan["absent"]["qos"])
    result = {"users": [], "accounts": [], "qos": []}
    for user in current.get("users") or []:
        on = sorted(_clusters_of(user) & clusters)
        if user["name"].lower() not in kept_users and on:
            result["users"].append({"name": user["name"].lower(), "clusters": on})
    doomed = []
    for account in current.get("accounts") or []:
        have = _clusters_of(account)
        on = sorted(have & clusters)
        if account["name"].lower() not in kept_accounts and on:
            doomed.append({"name": account["name"].lower(), "parent": _parent_of(account), "clusters": on,
                           "keep": sorted(have - clusters)})
    # Children before parents: sacctmgr refuses to delete an account that still has children.
    parents = {a["name"]: a["parent"] for a in doomed}

    def level(name, seen=()):
        if name not in parents or name in seen:
            return 0
        return 1 + level(parents[name], seen + (name,))

    depth = {a["name"]: level(a["name"]) for a in doomed}
    result["accounts"] = [{"name": a["name"], "clusters": a["clusters"], "keep": a["keep"]}
                          for a in sorted(doomed, key=lambda a: (-depth[a["name"]], a["name"]))]
    result["qos"] = sorted(str(q["name"] if isinstance(q, dict) else q).lower() for q in current.get("qos") or []
                           if str(q["name"] if isinstance(q, dict) else q).lower() not in kept_qos)
    return result
