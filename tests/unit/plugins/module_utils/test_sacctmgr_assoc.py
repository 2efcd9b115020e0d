# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for module_utils/sacctmgr_assoc.py (QoS, accounts, users).

Fixtures tests/unit/fixtures/sacctmgr/{qos,account,assoc,user}_*_24.11.5.txt
were captured from the lab's real sacctmgr (slurm-wlm 24.11.5): the stdout
(and for failures stdout+stderr) of the commands named in each test.
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pathlib

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import sacctmgr as sm
from ansible_collections.hybridhpc.slurm.plugins.module_utils import sacctmgr_assoc as sa

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "sacctmgr"


def fixture(name):
    return (FIXTURES / name).read_text()


class Replay:
    """A ``run`` callable answering each call with the next recorded result."""

    def __init__(self, *results):
        self.results = list(results)
        self.calls = []

    def __call__(self, argv, **kwargs):
        self.calls.append(list(argv))
        return self.results.pop(0)


# --------------------------------------------------------------------------
# Values


@pytest.mark.parametrize("value,minutes", [
    (90, 90), ("90", 90), ("1:00:00", 60), ("30:00", 30), ("30:01", 31),
    ("2-00:00:00", 2880), ("1-12", 2160), ("1-00:30", 1470), ("-1", -1),
    ("UNLIMITED", -1), ("infinite", -1), (-1, -1),
    # as sacctmgr prints them
    ("01:30:00", 90), ("1-00:00:00", 1440), ("", -1),
])
def test_time_to_minutes(value, minutes):
    assert sa.time_to_minutes("max_wall", value) == minutes


@pytest.mark.parametrize("value", ["1h", "1:2:3:4", "abc", -5, True, "1-"])
def test_bad_time_names_the_option(value):
    with pytest.raises(ValueError, match="max_wall"):
        sa.time_to_minutes("max_wall", value)


@pytest.mark.parametrize("minutes,text", [(90, "01:30:00"), (2880, "2-00:00:00"), (-1, "")])
def test_format_minutes_like_sacctmgr(minutes, text):
    assert sa.format_minutes(minutes) == text


@pytest.mark.parametrize("given,shown", [
    # recorded: mem=16384 -> 16G, 1048576M -> 1T, 1000M and 1500M stay
    (16384, "16G"), ("16384", "16G"), ("16G", "16G"), ("16g", "16G"), ("1048576M", "1T"),
    ("1000M", "1000M"), ("1500", "1500M"), ("1T", "1T"), ("2048G", "2T"),
])
def test_memory_normalised_as_sacctmgr_prints_it(given, shown):
    assert sa.normalize_tres("grp_tres", {"mem": given}) == {"mem": shown}


def test_tres_names_lower_case_and_counts_as_strings():
    assert sa.normalize_tres("grp_tres", {"CPU": 8, "gres/gpu": "2", "node": 0}) == {
        "cpu": "8", "gres/gpu": "2", "node": "0"}


@pytest.mark.parametrize("tres,match", [
    ({"cpu": -1}, "leave a TRES out"), ({"cpu": "x"}, "whole number"),
    ({"mem": "16Q"}, "M, G, T or P"), ({"bad name": 1}, "invalid TRES name"),
    ([1], "expected a dict"),
])
def test_bad_tres_names_option_and_fix(tres, match):
    with pytest.raises(ValueError, match="max_tres_per_job.*" + match):
        sa.normalize_tres("max_tres_per_job", tres)


def test_tres_setting_clears_what_is_not_wanted():
    # sacctmgr merges TRES limits, so the exact set needs name=-1 for the rest
    current = sa.shown_tres("cpu=4,mem=16G,node=2")
    assert sa.tres_setting(current, {"cpu": "8"}) == "cpu=8,mem=-1,node=-1"
    assert sa.tres_setting(current, {}) == "cpu=-1,mem=-1,node=-1"
    assert sa.tres_setting(current, sa.normalize_tres("x", {"cpu": 4, "mem": 16384, "node": 2})) is None


@pytest.mark.parametrize("given,shown", [
    ("suspend,gang", "gang,suspend"), ("GANG,suspend", "gang,suspend"), ("off", "cluster"),
    ("cluster", "cluster"), ("requeue", "requeue"), ("cancel", "cancel"),
])
def test_preempt_mode(given, shown):
    assert sa.normalize_preempt_mode(given) == shown


def test_bad_preempt_mode_lists_the_modes():
    with pytest.raises(ValueError, match="preempt_mode: unknown mode 'bogus': use one of cluster, off"):
        sa.normalize_preempt_mode("bogus")
    with pytest.raises(ValueError, match="cannot be combined"):
        sa.normalize_preempt_mode("off,cancel")


def test_qos_flags_match_sacctmgr_list():
    # the valid flags sacctmgr 24.11.5 lists for a bad one
    listed = fixture("qos_bad_flag_24.11.5.txt").split("'")[-2].split(",")
    assert sorted(listed) == sorted(sa.QOS_FLAGS)
    assert sa.normalize_qos_flags(["nodecay", "DenyOnLimit"]) == ["DenyOnLimit", "NoDecay"]
    with pytest.raises(ValueError, match="flags: unknown QoS flag 'bogus': valid flags are DenyOnLimit"):
        sa.normalize_qos_flags(["bogus"])


@pytest.mark.parametrize("value,result", [(5, 5), ("parent", "parent"), ("Parent", "parent"), ("0", 0)])
def test_fairshare(value, result):
    assert sa.normalize_fairshare(value) == result


def test_bad_fairshare():
    with pytest.raises(ValueError, match="fairshare: expected a whole number >= 0 or 'parent'"):
        sa.normalize_fairshare(-1)


def test_int_limits():
    assert sa.normalize_int("grp_jobs", -1) == -1
    with pytest.raises(ValueError, match="grp_jobs: must be >= 0 or -1"):
        sa.normalize_int("grp_jobs", -2)
    with pytest.raises(ValueError, match="grp_jobs: expected an integer"):
        sa.normalize_int("grp_jobs", "many")


def test_names_lower_case_and_validated():
    assert sa.normalize_names("qos", ["High", "low", "high"]) == ["high", "low"]
    with pytest.raises(ValueError, match="qos: invalid name 'a b'"):
        sa.normalize_names("qos", ["a b"])


# --------------------------------------------------------------------------
# QoS


def qos_runner(*outputs):
    return sm.SacctmgrRunner(Replay(*[(0, out, "") for out in outputs]), sacctmgr_path="sacctmgr")


def test_get_qos_reads_real_output():
    runner = qos_runner(fixture("qos_show_gold_24.11.5.txt"))
    assert sa.get_qos(runner, "gold") == {
        "name": "gold", "description": "gold qos", "priority": 10, "preempt": ["normal"],
        "preempt_mode": "requeue", "flags": ["DenyOnLimit", "NoDecay"], "usage_factor": 1.0,
        "max_jobs_per_user": 4, "max_submit_jobs_per_user": 8, "max_wall": 1440,
        "max_tres_per_user": {"cpu": "8", "mem": "16G"},
        "max_tres_per_job": {"cpu": "4", "mem": "16G", "node": "2"},
        "grp_tres": {"cpu": "100", "mem": "1000M"}, "grp_jobs": 20, "grp_submit_jobs": 40,
    }
    assert runner._run.calls == [[
        "sacctmgr", "--immediate", "--parsable2", "--noheader", "show", "qos", "where",
        "name=gold", "format=" + ",".join(sa.QOS_FIELDS)]]


def test_fresh_qos_view_equals_defaults():
    view = sa.get_qos(qos_runner(fixture("qos_show_fresh_24.11.5.txt")), "freshq")
    assert view == dict(sa.QOS_DEFAULTS, name="freshq", description="freshq")


def test_unknown_qos_is_none():
    assert sa.get_qos(qos_runner(fixture("qos_show_none_24.11.5.txt")), "nosuch") is None


def gold():
    return sa.get_qos(qos_runner(fixture("qos_show_gold_24.11.5.txt")), "gold")


def test_plan_qos_same_values_in_other_spellings_changes_nothing():
    params = {"description": "Gold QoS", "priority": 10, "preempt": ["Normal"],
              "preempt_mode": "requeue", "flags": ["nodecay", "denyonlimit"], "usage_factor": 1,
              "max_jobs_per_user": 4, "max_wall": "24:00:00",
              "max_tres_per_user": {"cpu": 8, "mem": 16384},
              "grp_tres": {"cpu": 100, "mem": "1000M"}}
    assert sa.plan_qos(gold(), "GOLD", params)["changes"] == []


def test_plan_qos_unset_options_are_left_alone():
    assert sa.plan_qos(gold(), "gold", {})["changes"] == []


def test_plan_qos_modify_only_what_differs():
    plan = sa.plan_qos(gold(), "gold", {"max_tres_per_user": {"cpu": 16}, "max_wall": -1,
                                        "flags": [], "preempt": [], "preempt_mode": "off",
                                        "grp_jobs": -1, "usage_factor": 0.5})
    assert plan["changes"] == [["modify", "qos", "where", "name=gold", "set", "preempt=",
                                "preemptmode=cluster", "flags=-1", "usagefactor=0.5",
                                "maxwall=-1", "maxtresperuser=cpu=16,mem=-1", "grpjobs=-1"]]
    after = plan["after"]
    assert (after["max_tres_per_user"], after["max_wall"], after["flags"], after["grp_jobs"]) == (
        {"cpu": "16"}, -1, [], -1)


def test_plan_qos_add_with_settings():
    plan = sa.plan_qos(None, "New", {"priority": 5, "max_wall": "1:00:00"})
    assert plan["changes"] == [["add", "qos", "new", "priority=5", "maxwall=60"]]
    assert plan["after"] == dict(sa.QOS_DEFAULTS, name="new", description="new", priority=5, max_wall=60)


def test_plan_qos_absent():
    assert sa.plan_qos(gold(), "gold", {"state": "absent"})["changes"] == [
        ["delete", "qos", "where", "name=gold"]]
    assert sa.plan_qos(None, "gold", {"state": "absent"}) == {"changes": [], "after": None}


def test_plan_qos_cannot_preempt_itself():
    with pytest.raises(ValueError, match="preempt: QoS 'gold' cannot preempt itself"):
        sa.plan_qos(gold(), "gold", {"preempt": ["gold"]})


def test_delete_qos_still_default_explains_the_fix():
    runner = sm.SacctmgrRunner(Replay((1, fixture("qos_delete_default_qos_24.11.5.txt"), "")))
    plan = sa.plan_qos(gold(), "gold", {"state": "absent"})
    with pytest.raises(sm.SacctmgrError, match="still the default QoS of the associations listed"):
        sa.apply_assoc_plan(runner, plan, False, lambda: None)


def test_unknown_tres_explains_the_fix():
    runner = sm.SacctmgrRunner(Replay((1, "", fixture("qos_unknown_tres_stderr_24.11.5.txt"))))
    plan = sa.plan_qos(gold(), "gold", {"max_tres_per_job": {"gres/gpu": 2}})
    with pytest.raises(sm.SacctmgrError, match="AccountingStorageTRES"):
        sa.apply_assoc_plan(runner, plan, False, lambda: None)


# --------------------------------------------------------------------------
# Accounts


def theory():
    runner = qos_runner(fixture("account_show_theory_24.11.5.txt"),
                        fixture("assoc_show_theory_wopl_24.11.5.txt"))
    view = sa.get_account(runner, "theory")
    assert runner._run.calls[1][4:] == ["show", "assoc", "where", "account=theory", "user=", "wopl",
                                        "format=" + ",".join(sa.ASSOC_FIELDS)]
    return view


def test_get_account_reads_own_association_values():
    view = theory()
    assert view["description"] == "new" and view["organization"] == "sci org"
    assert view["clusters"] == ["acctbox"]
    assert view["associations"]["acctbox"] == {
        "cluster": "acctbox", "account": "theory", "parent": "chem", "fairshare": "parent",
        "qos": ["testq"], "default_qos": "testq", "grp_tres": {"cpu": "64"}, "grp_jobs": 10,
        "grp_submit_jobs": 12, "grp_wall": 2880, "max_jobs": 3, "max_submit_jobs": 6,
        "max_wall": 1440, "max_tres_per_job": {"cpu": "2"}}


def test_plan_account_unchanged_and_parent_left_alone():
    assert sa.plan_account(theory(), "theory", {"grp_wall": "2-00:00:00", "qos": ["TestQ"],
                                                "fairshare": "parent", "description": "NEW"})[
        "changes"] == []


def test_plan_account_moves_parent_and_sets_exact_clusters():
    plan = sa.plan_account(theory(), "theory", {"parent": "physics", "clusters": ["acctbox2"],
                                                "max_tres_per_job": {}})
    assert plan["changes"] == [
        ["add", "account", "theory", "cluster=acctbox2", "parent=physics"],
        ["delete", "account", "where", "name=theory", "cluster=acctbox"],
    ]
    plan = sa.plan_account(theory(), "theory", {"parent": "physics", "max_tres_per_job": {}})
    assert plan["changes"] == [["modify", "account", "where", "name=theory", "cluster=acctbox", "set",
                                "parent=physics", "maxtres=cpu=-1"]]


def test_plan_new_account_needs_clusters_and_gets_name_as_description():
    with pytest.raises(ValueError, match="clusters: account 'x' does not exist yet"):
        sa.plan_account(None, "x", {})
    plan = sa.plan_account(None, "x", {"clusters": ["b", "a"], "parent": "physics", "grp_jobs": 5})
    assert plan["changes"] == [
        ["add", "account", "x", "cluster=a", "parent=physics", "description=x",
         "organization=physics", "grpjobs=5"],
        ["add", "account", "x", "cluster=b", "parent=physics", "grpjobs=5"],
    ]


def test_plan_account_default_qos_must_be_in_qos():
    with pytest.raises(ValueError, match="default_qos: 'gold' is not in the qos list"):
        sa.plan_account(theory(), "theory", {"qos": ["normal"], "default_qos": "gold"})
    with pytest.raises(ValueError, match="default_qos: 'gold' is not in the qos list"):
        sa.plan_account(theory(), "theory", {"default_qos": "gold"})


def test_delete_account_still_default_explains_the_fix():
    runner = sm.SacctmgrRunner(Replay((1, fixture("account_delete_default_24.11.5.txt"), "")))
    plan = sa.plan_account(theory(), "theory", {"state": "absent"})
    with pytest.raises(sm.SacctmgrError, match="a user's default account"):
        sa.apply_assoc_plan(runner, plan, False, lambda: None)


# --------------------------------------------------------------------------
# Users


def alice():
    runner = qos_runner(fixture("user_show_alice_24.11.5.txt"), fixture("assoc_show_alice_wopl_24.11.5.txt"))
    return sa.get_user(runner, "alice")


def test_get_user_reads_defaults_per_cluster_and_own_values():
    view = alice()
    assert view["admin_level"] == "Operator"
    assert view["default_accounts"] == {"acctbox": "theory", "acctbox2": "chem"}
    keys = [(a["cluster"], a["account"], a["partition"]) for a in view["associations"]]
    assert keys == [("acctbox", "physics", ""), ("acctbox", "physics", "debug"), ("acctbox", "theory", ""),
                    ("acctbox2", "chem", ""), ("acctbox2", "physics", "debug")]
    # wopl: the theory association's own values, not the account's inherited limits
    theory_assoc = view["associations"][2]
    assert (theory_assoc["max_jobs"], theory_assoc["qos"], theory_assoc["max_wall"]) == (4, [], -1)


def test_inherited_view_differs_from_wopl():
    records = sm.parse_parsable(fixture("assoc_show_alice_inherited_24.11.5.txt"), sa.ASSOC_FIELDS)
    assert sa.assoc_from_record(records[0])["max_wall"] == 1440


ALICE_ASSOCS = [
    {"account": "physics", "cluster": "acctbox"},
    {"account": "physics", "cluster": "acctbox", "partition": "debug"},
    {"account": "theory", "cluster": "acctbox", "max_jobs": 4},
    {"account": "chem", "cluster": "acctbox2"},
    {"account": "physics", "cluster": "acctbox2", "partition": "debug"},
]


def test_plan_user_unchanged():
    assert sa.plan_user(alice(), "alice", {"associations": ALICE_ASSOCS, "admin_level": "operator"})[
        "changes"] == []


def test_plan_user_set_mode_removes_unlisted_and_moves_default_first():
    params = {"associations": [{"account": "physics", "cluster": "acctbox", "max_jobs": 2}],
              "default_account": "physics"}
    assert sa.plan_user(alice(), "alice", params)["changes"] == [
        ["modify", "user", "where", "name=alice", "account=physics", "cluster=acctbox", "partition=",
         "set", "maxjobs=2"],
        ["modify", "user", "where", "name=alice", "cluster=acctbox", "set", "defaultaccount=physics"],
        ["delete", "user", "where", "name=alice", "account=physics", "cluster=acctbox",
         "partition=debug"],
        ["delete", "user", "where", "name=alice", "account=theory", "cluster=acctbox", "partition="],
    ]


def test_plan_user_add_mode_keeps_unlisted():
    params = {"associations": [{"account": "physics", "cluster": "acctbox3"}], "associations_mode": "add"}
    plan = sa.plan_user(alice(), "alice", params)
    assert plan["changes"] == [["add", "user", "alice", "account=physics", "cluster=acctbox3"]]
    assert plan["after"]["default_accounts"]["acctbox3"] == "physics"


def test_plan_user_clusters_option_removes_user_from_a_cluster():
    params = {"associations": ALICE_ASSOCS[:3], "clusters": ["acctbox2"]}
    assert sa.plan_user(alice(), "alice", params)["changes"] == [
        ["delete", "user", "where", "name=alice", "cluster=acctbox2"]]


def test_plan_new_user_first_add_sets_default_account():
    params = {"associations": [{"account": "b", "cluster": "c1"}, {"account": "a", "cluster": "c1"}],
              "default_account": "b"}
    assert sa.plan_user(None, "Bob", params)["changes"] == [
        ["add", "user", "bob", "account=b", "cluster=c1", "defaultaccount=b"],
        ["add", "user", "bob", "account=a", "cluster=c1"],
    ]


@pytest.mark.parametrize("params,message", [
    ({"associations": [{"account": "a", "cluster": "c1"}], "default_account": "z"},
     "default_account: 'z' is not one of the user's accounts on cluster 'c1'"),
    ({"associations": []}, "associations: user 'bob' does not exist yet"),
    ({"associations": [{"account": "a"}]}, r"associations\[0\]: account and cluster are required"),
    ({"associations": [{"account": "a", "cluster": "c", "max_wall": "x"}]},
     r"associations\[0\] \(a on c\): max_wall: invalid time"),
])
def test_plan_user_bad_input(params, message):
    with pytest.raises(ValueError, match=message):
        sa.plan_user(None, "bob", params)


def test_plan_user_refuses_to_remove_the_default_account():
    params = {"associations": [{"account": "physics", "cluster": "acctbox"}]}
    with pytest.raises(ValueError, match="default account on 'acctbox' is 'theory'"):
        sa.plan_user(alice(), "alice", params)


def test_plan_user_absent():
    assert sa.plan_user(alice(), "alice", {"state": "absent"})["changes"] == [
        ["delete", "user", "where", "name=alice"]]
    plan = sa.plan_user(alice(), "alice", {"state": "absent", "clusters": ["acctbox2"]})
    assert plan["changes"] == [["delete", "user", "where", "name=alice", "cluster=acctbox2"]]
    assert plan["after"]["default_accounts"] == {"acctbox": "theory"}


def test_plan_account_without_parent_leaves_each_cluster_where_it_is():
    view = theory()
    other = dict(view["associations"]["acctbox"], cluster="acctbox2", parent="physics")
    view["associations"]["acctbox2"] = other
    assert sa.plan_account(view, "theory", {})["changes"] == []


def root_view():
    base = dict(sa.ASSOC_DEFAULTS, account="root", parent="")
    return {"name": "root", "description": "default root account", "organization": "root",
            "clusters": ["onprem", "other"],
            "associations": {c: dict(base, cluster=c) for c in ("onprem", "other")}}


def test_root_sets_only_the_listed_clusters_and_is_never_deleted():
    plan = sa.plan_account(root_view(), "root", {"clusters": ["onprem"], "qos": ["normal"],
                                                 "default_qos": "normal"})
    assert plan["changes"] == [["modify", "account", "where", "name=root", "cluster=onprem", "set",
                                "qos=normal", "defaultqos=normal"]]
    assert plan["after"]["clusters"] == ["onprem", "other"]


@pytest.mark.parametrize("params, message", [
    ({"state": "absent"}, "cannot be removed"),
    ({"clusters": ["onprem"], "parent": "x"}, "has no parent"),
    ({"qos": ["normal"]}, "clusters: list the clusters"),
    ({"clusters": ["mars"]}, "mars has no root association"),
])
def test_root_refuses_what_slurm_does_not_allow(params, message):
    with pytest.raises(ValueError, match=message):
        sa.plan_account(root_view(), "root", params)


def database_runner():
    return qos_runner(fixture("qos_show_gold_24.11.5.txt"), fixture("account_show_theory_24.11.5.txt"),
                      fixture("assoc_show_theory_wopl_24.11.5.txt"), fixture("user_show_alice_24.11.5.txt"),
                      fixture("assoc_show_alice_wopl_24.11.5.txt"))


def test_read_database_lists_every_qos_account_and_user():
    found = sa.read_database(database_runner())
    assert [q["name"] for q in found["qos"]] == ["gold"]
    assert [a["name"] for a in found["accounts"]] == ["theory"]
    assert found["accounts"][0]["clusters"] == ["acctbox"]
    assert [u["name"] for u in found["users"]] == ["alice"]
    assert len(found["users"][0]["associations"]) == 5


def test_read_database_keeps_only_associations_on_the_given_clusters():
    found = sa.read_database(database_runner(), ["ACCTBOX2"])
    assert found["accounts"] == []  # theory has no association on acctbox2
    alice = found["users"][0]
    assert {a["cluster"] for a in alice["associations"]} == {"acctbox2"}
    assert alice["default_accounts"] == {"acctbox2": "chem"}
    assert [q["name"] for q in found["qos"]] == ["gold"]  # QoS are global
