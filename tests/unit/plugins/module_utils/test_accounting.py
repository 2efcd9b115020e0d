# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Accounts, users and QoS as code: checks, per-database plan, purge, slurm.conf policy."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import accounting

FEDERATION = {
    "all": ["onprem-ctl1", "onprem-c1", "cloud-ctl1", "cloud-c1", "login1", "lab-ctl1", "lab-dbd"],
    "slurmctld": ["onprem-ctl1", "cloud-ctl1", "lab-ctl1"],
    "slurmdbd": ["onprem-ctl1", "lab-dbd"],
    "slurmd": ["onprem-c1", "cloud-c1"],
    "login": ["login1"],
}
HOST_VARS = {
    "onprem-ctl1": {"slurm_cluster_name": "onprem"},
    "onprem-c1": {"slurm_cluster_name": "onprem"},
    # The cloud cluster has no slurmdbd host: it names the shared one.
    "cloud-ctl1": {"slurm_cluster_name": "cloud", "slurm_dbd_hosts": ["onprem-ctl1"]},
    "cloud-c1": {"slurm_cluster_name": "cloud"},
    "login1": {"slurm_cluster_name": "cloud"},
    "lab-ctl1": {"slurm_cluster_name": "lab"},
    "lab-dbd": {"slurm_cluster_name": "lab"},
}

QOS = [{"name": "normal"}, {"name": "short", "max_wall": "0:10:00", "max_jobs_per_user": 1}]
ACCOUNTS = [
    {"name": "chem", "parent": "science", "qos": ["normal", "short"], "default_qos": "normal"},
    {"name": "science", "fairshare": 100},
    {"name": "onprem-only", "clusters": ["onprem"]},
]
USERS = [
    {"name": "alice", "accounts": ["chem", "onprem-only"], "default_account": "chem"},
    {"name": "bob", "accounts": ["onprem-only"], "partitions": ["debug", "long"], "max_jobs": 2},
    {"name": "carol", "state": "absent"},
]


def host_vars(host):
    return HOST_VARS.get(host, {})


def valid_inputs(**overrides):
    inputs = {"clusters": ["onprem", "cloud", "lab"], "accounting": True,
              "slurm_qos": QOS, "slurm_accounts": ACCOUNTS, "slurm_users": USERS}
    inputs.update(overrides)
    return inputs


# ----------------------------------------------------------------- policy

def test_policy_without_accounting_sets_nothing():
    assert accounting.policy_config(False, None, {"PriorityWeightAge": 5}, True) == {}


def test_policy_enforces_limits_when_the_inventory_declares_accounts():
    config = accounting.policy_config(True, None, {}, True)
    assert config["AccountingStorageEnforce"] == "associations,limits,qos,safe"
    assert config["PriorityType"] == "priority/multifactor"
    assert config["PriorityWeightFairshare"] == 10000


def test_policy_enforces_nothing_by_default_without_declared_accounts():
    assert "AccountingStorageEnforce" not in accounting.policy_config(True, None, {}, False)


def test_policy_explicit_enforce_wins_even_empty():
    assert "AccountingStorageEnforce" not in accounting.policy_config(True, [], {}, True)
    assert accounting.policy_config(True, ["Associations"], {}, True)["AccountingStorageEnforce"] == "associations"


def test_policy_priority_keys_replace_defaults_case_insensitively():
    config = accounting.policy_config(True, None, {"priorityweightage": 7, "PriorityWeightJobSize": None}, False)
    assert config["priorityweightage"] == 7
    assert "PriorityWeightAge" not in config
    assert "PriorityWeightJobSize" not in config


# ----------------------------------------------------------------- checks

def test_valid_inputs_have_no_problem():
    assert accounting.accounting_problems(valid_inputs()) == []


@pytest.mark.parametrize("change, expected", [
    ({"slurm_users": [{"name": "dave", "accounts": ["nope"]}]}, "slurm_users[dave].accounts: account 'nope'"),
    ({"slurm_users": [{"name": "dave", "accounts": ["chem"], "default_account": "science"}]},
     "slurm_users[dave].default_account"),
    ({"slurm_users": [{"name": "dave"}]}, "slurm_users[dave].accounts: a user needs at least one account"),
    ({"slurm_users": [{"name": "dave", "accounts": ["chem"], "max_job": 3}]}, "unknown keys max_job"),
    ({"slurm_users": [{"name": "dave", "accounts": ["chem"], "clusters": ["mars"]}]}, "'mars' is not a cluster"),
    ({"slurm_users": [{"name": "dave", "accounts": ["chem"], "admin_level": "god"}]}, "admin_level"),
    ({"slurm_users": [{"name": "Dave Smith", "accounts": ["chem"]}]}, "is not a valid user name"),
    ({"slurm_accounts": [{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]}, "the parents form a loop"),
    ({"slurm_accounts": [{"name": "a", "parent": "ghost"}]}, "slurm_accounts[a].parent: account 'ghost'"),
    ({"slurm_accounts": [{"name": "a", "qos": ["gold"]}]}, "QoS 'gold' is not in slurm_qos"),
    ({"slurm_accounts": [{"name": "a", "qos": ["short"], "default_qos": "normal"}]},
     "slurm_accounts[a].default_qos: 'normal' is not in its qos list"),
    ({"slurm_accounts": [{"name": "a", "max_wall": "two hours"}]}, "slurm_accounts[a].max_wall"),
    ({"slurm_accounts": [{"name": "a", "grp_tres": {"cpu": "lots"}}]}, "slurm_accounts[a].grp_tres.cpu"),
    ({"slurm_accounts": [{"name": "a", "grp_tres": "cpu=4"}]}, "must be a mapping of TRES"),
    ({"slurm_accounts": [{"name": "a"}, {"name": "A"}]}, "is listed twice"),
    ({"slurm_qos": [{"name": "short", "preempt": ["ghost"]}]}, "slurm_qos[short].preempt: QoS 'ghost'"),
    ({"slurm_qos": [{"name": "short", "max_jobs_per_user": "x"}]}, "slurm_qos[short].max_jobs_per_user"),
    ({"slurm_qos": {"name": "short"}}, "slurm_qos: must be a list"),
    # Refused by sacctmgr only when the accounting play ran, after the configuration plays (issue 44).
    ({"slurm_qos": [{"name": "short", "flags": ["DenyOnLimit", "NoSuchFlag"]}]},
     "slurm_qos[short].flags: unknown QoS flag 'nosuchflag': valid flags are DenyOnLimit"),
    ({"slurm_qos": [{"name": "short", "preempt_mode": "kill"}]}, "slurm_qos[short].preempt_mode: unknown mode 'kill'"),
    ({"slurm_qos": [{"name": "short", "preempt_mode": "off,gang"}]}, "slurm_qos[short].preempt_mode: off/cluster cannot"),
    ({"slurm_default_qos": "gold"}, "slurm_default_qos: 'gold' is not in slurm_qos"),
    ({"accounting": False}, "slurm_accounting is false"),
    ({"slurm_accounting_enforce": ["associations", "strict"]}, "slurm_accounting_enforce: 'strict'"),
    ({"slurm_priority": {"SchedulerType": "sched/builtin"}}, "slurm_priority: 'SchedulerType'"),
    ({"slurm_accounting_purge": "yes"}, "slurm_accounting_purge"),
])
def test_bad_inputs_name_the_variable(change, expected):
    problems = accounting.accounting_problems(valid_inputs(**change))
    assert any(expected in p for p in problems), problems


# ----------------------------------------------------------------- clusters

def test_one_database_serves_the_federation_on_its_first_slurmdbd_host():
    assert accounting.serving_clusters("onprem-ctl1", FEDERATION, host_vars) == ["cloud", "onprem"]
    assert accounting.serving_clusters("lab-dbd", FEDERATION, host_vars) == ["lab"]
    assert accounting.serving_clusters("cloud-ctl1", FEDERATION, host_vars) == []


def test_a_cluster_without_accounting_is_served_by_nobody():
    hv = dict(HOST_VARS, **{"lab-ctl1": {"slurm_cluster_name": "lab", "slurm_accounting": False}})
    assert accounting.serving_clusters("lab-dbd", FEDERATION, lambda h: hv.get(h, {})) == []


# ----------------------------------------------------------------- copilot

def copilot_vars(**controller):
    """onprem runs the copilot with onprem-c1 shared through placeholder jobs."""
    hv = {h: dict(v) for h, v in HOST_VARS.items()}
    hv["onprem-ctl1"].update({"copilot_kubeconfig": "/etc/kube.conf"}, **controller)
    hv["onprem-c1"].update({"slurm_k8s_shared": True, "slurm_k8s_strategy": "placeholder"})
    return lambda h: hv.get(h, {})


def test_the_copilot_user_gets_an_association_where_its_placeholder_jobs_run():
    users = accounting.copilot_users(["cloud", "onprem"], FEDERATION, copilot_vars(), USERS, managed=True)
    assert users == [{"name": "slurm", "accounts": ["root"], "clusters": ["onprem"]}]
    plan = accounting.accounting_plan(["cloud", "onprem"], QOS, ACCOUNTS, USERS + users)
    slurm = [u for u in plan["users"] if u["name"] == "slurm"][0]
    assert [(a["cluster"], a["account"]) for a in slurm["associations"]] == [("onprem", "root")]
    assert slurm["default_account"] == "root"


def test_the_copilot_user_and_account_follow_copilot_config():
    config = {"copilot_config": {"slurmrestd": {"user": "k8s"}, "placeholder": {"account": "Chem"}}}
    users = accounting.copilot_users(["cloud", "onprem"], FEDERATION, copilot_vars(**config), USERS, managed=True)
    assert users == [{"name": "k8s", "accounts": ["chem"], "clusters": ["onprem"]}]


def test_no_copilot_user_without_enforced_associations_or_placeholder_nodes_or_copilot():
    def users(hv, declared=None, managed=True):
        declared = USERS if declared is None else declared
        return accounting.copilot_users(["cloud", "onprem"], FEDERATION, hv, declared, managed=managed)
    assert users(copilot_vars(), managed=False) == []  # nothing declared: nothing enforced
    assert users(copilot_vars(slurm_accounting_enforce=["limits"])) == []
    assert users(copilot_vars(slurm_accounting_enforce="associations"), managed=False) != []
    assert users(copilot_vars(copilot_kubeconfig="")) == []
    gres = copilot_vars()
    assert users(lambda h: dict(gres(h), slurm_k8s_strategy="gres") if h == "onprem-c1" else gres(h)) == []
    # A user the inventory declares keeps the associations it declares.
    assert users(copilot_vars(), declared=USERS + [{"name": "slurm", "accounts": ["chem"]}]) == []


# ----------------------------------------------------------------- plan

def test_plan_creates_parents_first_and_restricts_accounts_to_their_clusters():
    plan = accounting.accounting_plan(["onprem", "cloud"], QOS, ACCOUNTS, USERS)
    assert [a["name"] for a in plan["accounts"]] == ["science", "chem", "onprem-only"]
    assert plan["accounts"][0] == {"name": "science", "parent": "root", "clusters": ["cloud", "onprem"],
                                   "fairshare": 100}
    assert plan["accounts"][2]["clusters"] == ["onprem"]
    assert [q["name"] for q in plan["qos"]] == ["normal", "short"]


def test_a_user_gets_an_association_on_every_cluster_it_may_run_on():
    plan = accounting.accounting_plan(["onprem", "cloud"], QOS, ACCOUNTS, USERS)
    alice = [u for u in plan["users"] if u["name"] == "alice"][0]
    assert [(a["cluster"], a["account"]) for a in alice["associations"]] == [
        ("cloud", "chem"), ("onprem", "chem"), ("onprem", "onprem-only")]
    assert alice["default_account"] == "chem"
    assert alice["clusters"] == ["cloud", "onprem"]


def test_partitions_and_limits_go_on_each_association():
    plan = accounting.accounting_plan(["onprem", "cloud"], QOS, ACCOUNTS, USERS)
    bob = [u for u in plan["users"] if u["name"] == "bob"][0]
    assert bob["associations"] == [
        {"account": "onprem-only", "cluster": "onprem", "partition": "debug", "max_jobs": 2},
        {"account": "onprem-only", "cluster": "onprem", "partition": "long", "max_jobs": 2},
    ]


def test_a_user_limited_to_some_clusters_gets_associations_there_only():
    users = [{"name": "alice", "accounts": ["chem"], "clusters": ["cloud"]}]
    plan = accounting.accounting_plan(["onprem", "cloud"], QOS, ACCOUNTS, users)
    assert [a["cluster"] for a in plan["users"][0]["associations"]] == ["cloud"]


def test_another_database_plans_only_its_own_clusters():
    plan = accounting.accounting_plan(["lab"], QOS, ACCOUNTS, USERS)
    assert [a["name"] for a in plan["accounts"]] == ["science", "chem"]
    assert [u["name"] for u in plan["users"]] == ["alice"]  # bob's only account is not in this database
    assert plan["users"][0]["associations"] == [{"account": "chem", "cluster": "lab"}]


def test_a_host_serving_no_cluster_plans_nothing():
    plan = accounting.accounting_plan([], QOS, ACCOUNTS, USERS)
    assert plan["qos"] == [] and plan["accounts"] == [] and plan["users"] == []


def test_absent_entries_and_default_qos():
    plan = accounting.accounting_plan(["onprem"], QOS, ACCOUNTS, USERS, default_qos="Normal")
    assert plan["absent"]["users"] == ["carol"]
    assert plan["root"] == {"name": "root", "clusters": ["onprem"], "qos": ["normal"], "default_qos": "normal"}
    # As the slurm_accounting module takes them: root's default QoS before the
    # other accounts, what the inventory removes marked absent.
    entries = plan["entries"]
    assert entries["accounts"][0] == plan["root"]
    assert entries["accounts"][1:] == plan["accounts"] + [{"name": n, "state": "absent"}
                                                          for n in plan["absent"]["accounts"]]
    assert entries["users"][-1] == {"name": "carol", "state": "absent"}
    assert entries["qos"][:len(plan["qos"])] == plan["qos"]


# ----------------------------------------------------------------- purge

def assoc(cluster, parent="root"):
    return {"cluster": cluster, "parent": parent}


def test_purge_removes_unlisted_objects_on_this_databases_clusters_only():
    plan = accounting.accounting_plan(["onprem", "cloud"], QOS, ACCOUNTS, USERS)
    # As slurm_accounting_info returns them.
    current = {
        "qos": [{"name": "normal"}, {"name": "short"}, {"name": "old"}],
        "accounts": [
            {"name": "chem", "clusters": ["onprem"], "associations": {"onprem": assoc("onprem", "science")}},
            {"name": "legacy", "clusters": ["onprem", "lab"],
             "associations": {"onprem": assoc("onprem"), "lab": assoc("lab")}},
            {"name": "legacy-sub", "clusters": ["onprem"], "associations": {"onprem": assoc("onprem", "legacy")}},
            {"name": "elsewhere", "clusters": ["lab"], "associations": {"lab": assoc("lab")}},
        ],
        "users": [
            {"name": "root", "associations": [{"cluster": "onprem", "account": "root"}]},
            {"name": "alice", "associations": [{"cluster": "onprem", "account": "chem"}]},
            {"name": "mallory", "associations": [{"cluster": "cloud", "account": "legacy"},
                                                 {"cluster": "lab", "account": "legacy"}]},
        ],
    }
    assert accounting.purge_plan(current, plan) == {
        "users": [{"name": "mallory", "clusters": ["cloud"]}],
        "accounts": [{"name": "legacy-sub", "clusters": ["onprem"], "keep": []},
                     {"name": "legacy", "clusters": ["onprem"], "keep": ["lab"]}],
        "qos": ["old"],
    }


def test_qos_flags_and_preempt_modes_slurm_takes_pass():
    qos = [{"name": "short", "flags": ["denyonlimit", "NoDecay", "Relative"], "preempt_mode": "suspend,gang"}]
    assert accounting.accounting_problems(valid_inputs(slurm_qos=qos)) == []
