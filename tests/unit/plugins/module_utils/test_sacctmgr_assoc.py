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
