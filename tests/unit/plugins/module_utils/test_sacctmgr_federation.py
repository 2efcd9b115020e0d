# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the federation helpers of module_utils/sacctmgr.py.

The ``*federation*`` fixtures in tests/unit/fixtures/sacctmgr/ were captured
from the lab's real sacctmgr (slurm-wlm 24.11.5) on scratch clusters
(scratcha, scratchb, scratchc with feature gpu) and scratch federations:

* show_federation_*.txt: stdout of ``sacctmgr --parsable2 --noheader show
  federation [where name=NAME] format=Federation,Cluster,ID,Features,FedState,Flags``
  (note the stray ``|`` ending the 2nd and later member records);
* show_cluster_federation_member.txt: ``show cluster`` of a member;
* add_/modify_/delete_federation*.txt: stdout, ``*_stderr.txt``: stderr, of
  the matching ``sacctmgr --immediate add|modify|delete federation ...``.
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pathlib
import re

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import sacctmgr as sm

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "sacctmgr"
FED_FORMAT = "format=Federation,Cluster,ID,Features,FedState,Flags"


def fixture(name):
    return (FIXTURES / name).read_text()


class Replay:
    """A ``run`` callable answering each call with the next recorded result."""

    def __init__(self, *results):
        self.results = list(results)
        self.calls = []

    def __call__(self, argv, **kwargs):
        self.calls.append((list(argv), kwargs))
        return self.results.pop(0)


def member(name, fed_id, features=(), fed_state="ACTIVE"):
    return {"name": name, "id": fed_id, "fed_state": fed_state, "features": list(features)}


def federation(name, members, flags=()):
    return {"name": name, "clusters": sorted(m["name"] for m in members), "flags": list(flags),
            "members": sorted(members, key=lambda m: m["name"])}


def cluster_view(name, federation_name="", fed_state="NA", features=()):
    view = sm.new_cluster_view(name, list(features))
    view.update(federation=federation_name, fed_state=fed_state)
    return view


# --------------------------------------------------------------------------
# Parsing the real output


def test_fields_are_the_ones_sacctmgr_24_11_knows():
    assert sm.FEDERATION_FIELDS == ("Federation", "Cluster", "ID", "Features", "FedState", "Flags")


def test_parse_members_with_the_stray_trailing_separator():
    records = sm.parse_parsable(fixture("show_federation_three_members.txt"), sm.FEDERATION_FIELDS)
    assert [r["Cluster"] for r in records] == ["scratcha", "scratchb", "scratchc"]
    assert records[2] == {"Federation": "scratchfed", "Cluster": "scratchc", "ID": "3",
                          "Features": "gpu", "FedState": "ACTIVE", "Flags": ""}
    assert sm.federation_from_records(records) == federation("scratchfed", [
        member("scratcha", 1), member("scratchb", 2), member("scratchc", 3, ["gpu"])])


def test_federation_without_members_is_one_empty_record():
    records = sm.parse_parsable(fixture("show_federation_empty.txt"), sm.FEDERATION_FIELDS)
    assert records == [{"Federation": "scratchfed", "Cluster": "", "ID": "", "Features": "",
                        "FedState": "", "Flags": ""}]
    assert sm.federation_from_records(records) == federation("scratchfed", [])


def test_member_states_are_kept_as_shown():
    records = sm.parse_parsable(fixture("show_federation_drain_remove.txt"), sm.FEDERATION_FIELDS)
    result = sm.federation_from_records(records)
    assert result["members"][1] == member("scratchb", 2, fed_state="DRAIN+REMOVE")


def test_federation_flags_words_meaning_none_are_dropped():
    for shown in ("", "None", "NotSet", "(null)"):
        record = {"Federation": "f", "Cluster": "", "ID": "", "Features": "", "FedState": "",
                  "Flags": shown}
        assert sm.federation_from_records([record])["flags"] == []
    record["Flags"] = "B,A"
    assert sm.federation_from_records([record])["flags"] == ["A", "B"]


def test_federation_from_no_record_is_an_error():
    with pytest.raises(ValueError):
        sm.federation_from_records([])


def test_get_federation_runs_show_and_parses():
    run = Replay((0, fixture("show_federation_two_members.txt"), ""))
    runner = sm.SacctmgrRunner(run)
    assert sm.get_federation(runner, "scratchfed") == federation(
        "scratchfed", [member("scratcha", 1), member("scratchb", 2)])
    assert run.calls[0][0] == ["sacctmgr", "--immediate", "--parsable2", "--noheader", "show",
                               "federation", "where", "name=scratchfed", FED_FORMAT]
    assert runner.executed == []


def test_get_federation_none_and_other_federations():
    runner = sm.SacctmgrRunner(Replay((0, fixture("show_federation_none.txt"), "")))
    assert sm.get_federation(runner, "scratchnope") is None
    # Only the records of the asked federation count, whatever the case.
    runner = sm.SacctmgrRunner(Replay((0, fixture("show_federation_all.txt"), ""),
                                      (0, fixture("show_federation_all.txt"), "")))
    assert sm.get_federation(runner, "SCRATCHFED2") == federation("scratchfed2", [])
    assert sm.get_federation(runner, "scratchfed")["clusters"] == ["scratcha", "scratchb"]


def test_get_federation_read_failure():
    runner = sm.SacctmgrRunner(Replay((1, "", fixture("stderr_slurmdbd_down.txt"))))
    with pytest.raises(sm.SacctmgrError, match="could not reach slurmdbd"):
        sm.get_federation(runner, "scratchfed")


def test_cluster_view_of_a_member_names_its_federation():
    runner = sm.SacctmgrRunner(Replay((0, fixture("show_cluster_federation_member.txt"), "")))
    view = sm.get_cluster(runner, "scratchb")
    assert view["federation"] == "scratchfed"
    assert view["fed_state"] == "ACTIVE"


# --------------------------------------------------------------------------
# Names, flags, member lists


def test_validate_federation_name():
    assert sm.validate_federation_name("hpcfed") == "hpcfed"
    assert sm.validate_federation_name("HPC_fed-2") == "hpc_fed-2"
    for bad in ("", None, "a,b", "a b", "-x", "+x", "a=b", "a|b", "a'b", 3):
        with pytest.raises(ValueError, match="federation name"):
            sm.validate_federation_name(bad)


def test_normalize_cluster_names():
    assert sm.normalize_cluster_names(["Beta", "alpha", "beta"]) == ["alpha", "beta"]
    assert sm.normalize_cluster_names([]) == []
    assert sm.normalize_cluster_names(None) == []
    with pytest.raises(ValueError, match="invalid cluster name"):
        sm.normalize_cluster_names(["a,b"])


def test_federation_flags_none_exist_in_slurm_24_11():
    assert sm.FEDERATION_FLAGS == ()
    assert sm.normalize_federation_flags([]) == []
    assert sm.normalize_federation_flags(None) == []
    with pytest.raises(ValueError, match="unknown federation flag 'foo'.*defines no federation flags"):
        sm.normalize_federation_flags(["foo"])


def test_federation_flags_when_a_release_defines_some(monkeypatch):
    monkeypatch.setattr(sm, "FEDERATION_FLAGS", ("Example", "Other"))
    assert sm.normalize_federation_flags(["other", "EXAMPLE", "Other"]) == ["Example", "Other"]
    with pytest.raises(ValueError, match="valid flags are Example, Other"):
        sm.normalize_federation_flags(["foo"])


def test_plan_members_modes():
    assert sm.plan_members(["alpha", "beta"], ["Gamma", "alpha"], "set") == ["alpha", "gamma"]
    assert sm.plan_members(["alpha"], ["gamma"], "add") == ["alpha", "gamma"]
    assert sm.plan_members(["alpha", "beta"], ["beta", "zeta"], "remove") == ["alpha"]
    assert sm.plan_members(["alpha"], [], "set") == []
    assert sm.plan_members(None, ["alpha"], "add") == ["alpha"]
    with pytest.raises(ValueError, match="clusters mode"):
        sm.plan_members([], [], "replace")


def test_joining_clusters_are_the_ones_to_look_up():
    current = federation("hpcfed", [member("alpha", 1), member("beta", 2)])
    assert sm.federation_joining_clusters(current, ["alpha", "gamma"]) == ["gamma"]
    assert sm.federation_joining_clusters(current, ["Gamma"], "add") == ["gamma"]
    assert sm.federation_joining_clusters(current, ["alpha"], "remove") == []
    assert sm.federation_joining_clusters(current, None) == []
    assert sm.federation_joining_clusters(None, ["beta", "alpha"]) == ["alpha", "beta"]


# --------------------------------------------------------------------------
# Argument lists


def test_federation_argument_lists():
    assert sm.show_federation_args("f") == ["show", "federation", "where", "name=f"]
    assert sm.add_federation_args("f") == ["add", "federation", "name=f"]
    assert sm.add_federation_args("f", clusters=[]) == ["add", "federation", "name=f"]
    assert sm.add_federation_args("f", clusters=["a", "b"]) == [
        "add", "federation", "name=f", "clusters=a,b"]
    assert sm.modify_federation_args("f", clusters=["a"]) == [
        "modify", "federation", "where", "name=f", "set", "clusters=a"]
    assert sm.modify_federation_args("f", clusters=[]) == [
        "modify", "federation", "where", "name=f", "set", "clusters="]
    assert sm.modify_federation_args("f", flags=[]) == [
        "modify", "federation", "where", "name=f", "set", "flags=-1"]
    assert sm.modify_federation_args("f", clusters=["c"], flags=["X", "Y"]) == [
        "modify", "federation", "where", "name=f", "set", "flags=X,Y", "clusters=c"]
    with pytest.raises(ValueError, match="nothing to set"):
        sm.modify_federation_args("f")
    assert sm.delete_federation_args("f") == ["delete", "federation", "where", "name=f"]


def test_writes_return_the_argv_that_ran():
    run = Replay((0, fixture("add_federation_clusters.txt"), ""),
                 (0, fixture("modify_federation_replace_clusters.txt"),
                  fixture("modify_federation_set_clusters_stderr.txt")),
                 (0, fixture("modify_federation_clear_clusters.txt"), ""),
                 (0, fixture("delete_federation.txt"), ""))
    runner = sm.SacctmgrRunner(run, sacctmgr_path="/usr/bin/sacctmgr")
    head = ["/usr/bin/sacctmgr", "--immediate"]
    assert sm.add_federation(runner, "scratchfed", clusters=["scratcha", "scratchc"]) == head + [
        "add", "federation", "name=scratchfed", "clusters=scratcha,scratchc"]
    # "already assigned" on stderr is information, not a failure.
    assert sm.modify_federation(runner, "scratchfed", clusters=["scratcha", "scratchc"])[-1] == (
        "clusters=scratcha,scratchc")
    assert sm.modify_federation(runner, "scratchfed", clusters=[])[-1] == "clusters="
    assert sm.delete_federation(runner, "scratchfed") == head + [
        "delete", "federation", "where", "name=scratchfed"]
    assert len(runner.executed) == 4


@pytest.mark.parametrize("result, reason", [
    ((1, fixture("add_federation_exists.txt"), ""), "the object already exists"),
    ((1, "", fixture("add_federation_unknown_cluster_stderr.txt")), "exited with status 1"),
    ((1, "", fixture("add_federation_flags_unknown_stderr.txt")), "exited with status 1"),
    ((1, fixture("modify_federation_nothing_to_change.txt"),
      fixture("modify_federation_nothing_to_change_stderr.txt")), "sacctmgr changed nothing"),
    ((1, "", fixture("modify_federation_missing_stderr.txt")), "exited with status 1"),
    ((1, fixture("delete_federation_missing.txt"), ""), "sacctmgr deleted nothing"),
])
def test_refused_writes_raise_with_sacctmgr_messages(result, reason):
    runner = sm.SacctmgrRunner(Replay(result))
    with pytest.raises(sm.SacctmgrError, match=reason) as err:
        sm.add_federation(runner, "scratchfed")
    details = err.value.to_dict()
    assert details["rc"] == 1
    assert (details["stdout"] + details["stderr"]).strip()
    assert runner.executed == []


# --------------------------------------------------------------------------
# plan_federation


HPCFED = federation("hpcfed", [member("alpha", 1, ["gpu"]), member("beta", 2)])


def test_plan_absent():
    assert sm.plan_federation(None, "hpcfed", state="absent") == {"changes": [], "after": None}
    assert sm.plan_federation(HPCFED, "hpcfed", state="absent", clusters=["x"]) == {
        "changes": [["delete", "federation", "where", "name=hpcfed"]], "after": None}


def test_plan_create_empty_and_with_members():
    plan = sm.plan_federation(None, "HPCfed")
    assert plan == {"changes": [["add", "federation", "name=hpcfed"]],
                    "after": federation("hpcfed", [])}
    views = {"alpha": cluster_view("alpha", features=["gpu"]), "beta": cluster_view("beta")}
    plan = sm.plan_federation(None, "hpcfed", clusters=["beta", "alpha"], cluster_views=views)
    assert plan["changes"] == [["add", "federation", "name=hpcfed", "clusters=alpha,beta"]]
    assert plan["after"] == federation("hpcfed", [member("alpha", None, ["gpu"]),
                                                  member("beta", None)])


def test_plan_unchanged_keeps_the_view():
    for clusters, mode in ((None, "set"), (["beta", "alpha"], "set"), (["alpha"], "add"),
                           (["gamma"], "remove")):
        plan = sm.plan_federation(HPCFED, "hpcfed", clusters=clusters, clusters_mode=mode,
                                  flags=[])
        assert plan == {"changes": [], "after": HPCFED}
    assert HPCFED["members"][0] == member("alpha", 1, ["gpu"])


def test_plan_set_add_remove_write_the_whole_member_list():
    views = {"gamma": cluster_view("gamma")}
    plan = sm.plan_federation(HPCFED, "hpcfed", clusters=["alpha", "gamma"], cluster_views=views)
    assert plan["changes"] == [["modify", "federation", "where", "name=hpcfed", "set",
                                "clusters=alpha,gamma"]]
    assert plan["after"]["members"] == [member("alpha", 1, ["gpu"]), member("gamma", None)]

    plan = sm.plan_federation(HPCFED, "hpcfed", clusters=["gamma"], clusters_mode="add",
                              cluster_views=views)
    assert plan["changes"][0][-1] == "clusters=alpha,beta,gamma"

    plan = sm.plan_federation(HPCFED, "hpcfed", clusters=["alpha"], clusters_mode="remove")
    assert plan["changes"][0][-1] == "clusters=beta"
    assert plan["after"] == federation("hpcfed", [member("beta", 2)])

    plan = sm.plan_federation(HPCFED, "hpcfed", clusters=[])
    assert plan["changes"][0][-1] == "clusters="
    assert plan["after"]["members"] == []


def test_plan_refuses_unknown_clusters():
    with pytest.raises(ValueError, match=(
            "cluster 'gamma' does not exist in the accounting database: add it with "
            "hybridhpc.slurm.slurm_cluster or start its slurmctld first")):
        sm.plan_federation(HPCFED, "hpcfed", clusters=["gamma"], clusters_mode="add",
                           cluster_views={"gamma": None})


def test_plan_refuses_clusters_of_another_federation():
    views = {"gamma": cluster_view("gamma", "otherfed", "ACTIVE")}
    with pytest.raises(ValueError) as err:
        sm.plan_federation(HPCFED, "hpcfed", clusters=["gamma"], clusters_mode="add",
                           cluster_views=views)
    msg = str(err.value)
    assert msg.startswith("cluster 'gamma' is in federation 'otherfed' (fedstate ACTIVE)")
    assert "slurm_federation name=otherfed clusters=[gamma] clusters_mode=remove" in msg
    assert "slurm_cluster name=gamma fedstate=DRAIN+REMOVE" in msg


def test_plan_explains_clusters_leaving_another_federation():
    for state in ("DRAIN+REMOVE", "DRAINED+REMOVE"):
        views = {"gamma": cluster_view("gamma", "otherfed", state)}
        with pytest.raises(ValueError, match=re.escape(f"still in federation 'otherfed' (fedstate {state}, leaving")):
            sm.plan_federation(None, "hpcfed", clusters=["gamma"], cluster_views=views)


def test_plan_lists_every_problem():
    views = {"gamma": None, "delta": cluster_view("delta", "otherfed", "INACTIVE")}
    with pytest.raises(ValueError) as err:
        sm.plan_federation(None, "hpcfed", clusters=["gamma", "delta"], cluster_views=views)
    assert "'delta' is in federation 'otherfed'" in str(err.value)
    assert "'gamma' does not exist" in str(err.value)


def test_plan_accepts_a_cluster_whose_view_already_names_this_federation():
    views = {"gamma": cluster_view("gamma", "HPCFED", "ACTIVE")}
    plan = sm.plan_federation(HPCFED, "hpcfed", clusters=["gamma"], clusters_mode="add",
                              cluster_views=views)
    assert plan["changes"][0][-1] == "clusters=alpha,beta,gamma"


def test_plan_needs_the_joining_clusters_looked_up():
    with pytest.raises(ValueError, match="not looked up"):
        sm.plan_federation(HPCFED, "hpcfed", clusters=["gamma"], clusters_mode="add")


def test_plan_flags():
    with pytest.raises(ValueError, match="defines no federation flags"):
        sm.plan_federation(HPCFED, "hpcfed", flags=["foo"])
    with pytest.raises(ValueError, match="defines no federation flags"):
        sm.plan_federation(HPCFED, "hpcfed", state="absent", flags=["foo"])
    flagged = dict(HPCFED, flags=["Legacy"])
    plan = sm.plan_federation(flagged, "hpcfed", flags=[])
    assert plan["changes"] == [["modify", "federation", "where", "name=hpcfed", "set", "flags=-1"]]
    assert plan["after"]["flags"] == []
    assert sm.plan_federation(flagged, "hpcfed")["changes"] == []


def test_plan_flags_when_a_release_defines_some(monkeypatch):
    monkeypatch.setattr(sm, "FEDERATION_FLAGS", ("Example",))
    plan = sm.plan_federation(None, "hpcfed", flags=["example"])
    assert plan["changes"] == [["add", "federation", "name=hpcfed", "flags=Example"]]
    plan = sm.plan_federation(HPCFED, "hpcfed", clusters=["alpha"], flags=["Example"])
    assert plan["changes"] == [["modify", "federation", "where", "name=hpcfed", "set",
                                "flags=Example", "clusters=alpha"]]
    assert plan["after"]["flags"] == ["Example"]


def test_plan_rejects_bad_requests():
    with pytest.raises(ValueError, match="state must be present or absent"):
        sm.plan_federation(None, "hpcfed", state="gone")
    with pytest.raises(ValueError, match="clusters_mode must be one of"):
        sm.plan_federation(None, "hpcfed", clusters_mode="replace")
    with pytest.raises(ValueError, match="invalid federation name"):
        sm.plan_federation(None, "hpc fed")
    with pytest.raises(ValueError, match="invalid cluster name"):
        sm.plan_federation(None, "hpcfed", clusters=["bad name"])


def test_plan_does_not_touch_its_inputs():
    current = federation("hpcfed", [member("alpha", 1, ["gpu"])])
    snapshot = repr(current)
    plan = sm.plan_federation(current, "hpcfed", clusters=[])
    plan["after"]["clusters"].append("x")
    sm.plan_federation(current, "hpcfed")["after"]["members"][0]["features"].append("x")
    assert repr(current) == snapshot
