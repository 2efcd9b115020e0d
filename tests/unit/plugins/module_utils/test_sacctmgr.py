# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for module_utils/sacctmgr.py.

Fixtures in tests/unit/fixtures/sacctmgr/ are sacctmgr outputs, recorded as
Slurm 24.11 prints them (from the sacctmgr man page and sources; to be
re-checked against the lab's real sacctmgr):

* show_cluster_*.txt: stdout of
  ``sacctmgr --immediate --parsable2 --noheader show cluster where name=NAME
  format=Cluster,ControlHost,ControlPort,RPC,Features,Federation,FedState,Flags``
  (show_cluster_parsable_trailing.txt: same with ``--parsable``, trailing ``|``);
* add_cluster*.txt, modify_cluster_*.txt, delete_cluster*.txt: stdout of the
  matching ``sacctmgr --immediate add|modify|delete cluster ...``;
* stderr_*.txt: stderr of failed runs.

show_cluster_lab_24.11.5.txt was captured from the lab's real sacctmgr
(slurm-wlm 24.11.5, cluster registered by its slurmctld).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pathlib

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import sacctmgr as sm

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "sacctmgr"


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


# --------------------------------------------------------------------------
# parse_parsable


def test_parse_empty_output_gives_no_record():
    assert sm.parse_parsable("", sm.CLUSTER_FIELDS) == []
    assert sm.parse_parsable(None, sm.CLUSTER_FIELDS) == []
    assert sm.parse_parsable("\n\n", sm.CLUSTER_FIELDS) == []
    assert sm.parse_parsable(fixture("show_cluster_none.txt"), sm.CLUSTER_FIELDS) == []


def test_parse_one_record_keyed_by_fields():
    records = sm.parse_parsable(fixture("show_cluster_registered.txt"), sm.CLUSTER_FIELDS)
    assert records == [{
        "Cluster": "alpha",
        "ControlHost": "10.11.0.2",
        "ControlPort": "6817",
        "RPC": "10752",
        "Features": "",
        "Federation": "",
        "FedState": "NA",
        "Flags": "None",
    }]


def test_parse_real_24_11_output():
    records = sm.parse_parsable(fixture("show_cluster_lab_24.11.5.txt"), sm.CLUSTER_FIELDS)
    assert [sm.cluster_from_record(r) for r in records] == [{
        "name": "lab",
        "control_host": "172.19.0.2",
        "control_port": 6817,
        "rpc": 10752,
        "features": [],
        "federation": "",
        "fed_state": "NA",
        "flags": ["MultipleSlurmd"],
    }]


def test_parse_trailing_separator_of_parsable():
    plain = sm.parse_parsable(fixture("show_cluster_registered.txt"), sm.CLUSTER_FIELDS)
    trailing = sm.parse_parsable(fixture("show_cluster_parsable_trailing.txt"), sm.CLUSTER_FIELDS)
    assert trailing == plain


def test_parse_trailing_empty_last_field_is_not_a_trailing_separator():
    # --parsable2 with an empty last field ends with "|" too: the count decides.
    records = sm.parse_parsable("a|b|\n", ["One", "Two", "Three"])
    assert records == [{"One": "a", "Two": "b", "Three": ""}]
    records = sm.parse_parsable("a|b||\n", ["One", "Two", "Three"])
    assert records == [{"One": "a", "Two": "b", "Three": ""}]


def test_parse_keeps_spaces_inside_values_and_crlf():
    records = sm.parse_parsable("root|Lab cluster  admins|x\r\n", ["Name", "Descr", "Org"])
    assert records == [{"Name": "root", "Descr": "Lab cluster  admins", "Org": "x"}]


def test_parse_several_records_with_feature_lists_and_fedstates():
    records = sm.parse_parsable(fixture("show_cluster_all.txt"), sm.CLUSTER_FIELDS)
    assert [r["Cluster"] for r in records] == ["alpha", "beta", "extern"]
    assert records[0]["Features"] == "x86_64,gpu"
    assert records[1]["FedState"] == "INACTIVE"
    assert records[2]["Flags"] == "External"


@pytest.mark.parametrize("state", ["ACTIVE", "INACTIVE", "DRAIN", "DRAIN+REMOVE",
                                   "DRAINED", "DRAINED+REMOVE", "NA"])
def test_parse_fedstate_values(state):
    line = f"alpha|10.11.0.2|6817|10752|gpu|hpcfed|{state}|None\n"
    record = sm.parse_parsable(line, sm.CLUSTER_FIELDS)[0]
    assert record["FedState"] == state
    assert sm.cluster_from_record(record)["fed_state"] == state


def test_parse_wrong_field_count_raises():
    with pytest.raises(ValueError, match="3 values for 8 fields"):
        sm.parse_parsable("alpha|x|y\n", sm.CLUSTER_FIELDS)
    with pytest.raises(ValueError):
        sm.parse_parsable("a\n", [])


def test_split_list():
    assert sm.split_list("") == []
    assert sm.split_list(None) == []
    assert sm.split_list("x86_64,gpu") == ["gpu", "x86_64"]
    assert sm.split_list("gpu,,gpu, ib ") == ["gpu", "ib"]
    assert sm.split_list("None", none_words=("None",)) == []


def test_cluster_from_record_registered_and_added():
    registered = sm.cluster_from_record(
        sm.parse_parsable(fixture("show_cluster_federated.txt"), sm.CLUSTER_FIELDS)[0])
    assert registered == {
        "name": "alpha",
        "control_host": "10.11.0.2",
        "control_port": 6817,
        "rpc": 10752,
        "features": ["gpu", "x86_64"],
        "federation": "hpcfed",
        "fed_state": "ACTIVE",
        "flags": [],
    }
    added = sm.cluster_from_record(
        sm.parse_parsable(fixture("show_cluster_added.txt"), sm.CLUSTER_FIELDS)[0])
    assert added == sm.new_cluster_view("beta")
    external = sm.cluster_from_record(
        sm.parse_parsable(fixture("show_cluster_all.txt"), sm.CLUSTER_FIELDS)[2])
    assert external["flags"] == ["External"]
    assert external["control_host"] == ""


# --------------------------------------------------------------------------
# plan_features


@pytest.mark.parametrize("current, wanted, mode, expected", [
    (["gpu"], ["x86_64", "ib"], "set", ["ib", "x86_64"]),
    (["gpu"], [], "set", []),
    ([], ["gpu", "gpu"], "set", ["gpu"]),
    (["gpu"], ["ib"], "add", ["gpu", "ib"]),
    (["gpu", "ib"], ["gpu"], "add", ["gpu", "ib"]),
    (["gpu", "ib"], ["ib"], "remove", ["gpu"]),
    (["gpu"], ["ib"], "remove", ["gpu"]),
    ([], ["ib"], "remove", []),
    (["gpu"], ["GPU", " Bigmem "], "set", ["bigmem", "gpu"]),
    (None, None, "add", []),
])
def test_plan_features(current, wanted, mode, expected):
    assert sm.plan_features(current, wanted, mode) == expected


def test_plan_features_is_pure():
    current = ["gpu"]
    wanted = ["ib"]
    sm.plan_features(current, wanted, "add")
    assert current == ["gpu"] and wanted == ["ib"]


def test_plan_features_rejects_unknown_mode():
    with pytest.raises(ValueError, match="set, add, remove"):
        sm.plan_features([], ["gpu"], "replace")


@pytest.mark.parametrize("bad", ["a,b", "a b", "", " ", "+gpu", "-gpu", "a|b", "a=b", "it's"])
def test_feature_names_that_sacctmgr_would_misread_are_rejected(bad):
    with pytest.raises(ValueError):
        sm.plan_features([], [bad], "set")


# --------------------------------------------------------------------------
# validate_cluster_name


@pytest.mark.parametrize("name", ["alpha", "c1", "hpc-east_2", "0lab", "a" * 40])
def test_valid_cluster_names(name):
    assert sm.validate_cluster_name(name) == name


def test_cluster_name_is_lowercased_like_slurm_does():
    assert sm.validate_cluster_name("Alpha") == "alpha"


@pytest.mark.parametrize("name", ["", "a" * 41, "-alpha", "_alpha", "al pha", "al.pha",
                                  "al,pha", "al|pha", "name=x", "alphä", None, 3])
def test_invalid_cluster_names_state_the_rule(name):
    with pytest.raises(ValueError) as err:
        sm.validate_cluster_name(name)
    message = str(err.value)
    assert "40 characters" in message
    assert "lower case" in message


def test_validate_fedstate():
    assert sm.validate_fedstate("drain+remove") == "DRAIN+REMOVE"
    with pytest.raises(ValueError, match="ACTIVE, INACTIVE, DRAIN, DRAIN\\+REMOVE"):
        sm.validate_fedstate("DRAINED")


@pytest.mark.parametrize("shown, wanted, reached", [
    ("ACTIVE", "ACTIVE", True),
    ("DRAIN", "ACTIVE", False),
    ("DRAIN", "DRAIN", True),
    ("DRAINED", "DRAIN", True),
    ("DRAINED+REMOVE", "DRAIN+REMOVE", True),
    ("DRAIN", "DRAIN+REMOVE", False),
    ("INACTIVE", "DRAIN", False),
    ("NA", "ACTIVE", False),
])
def test_fedstate_reached(shown, wanted, reached):
    assert sm.fedstate_reached(shown, wanted) is reached


# --------------------------------------------------------------------------
# Runner: argv building, environment, error translation


def test_runner_read_and_write_argv():
    runner = sm.SacctmgrRunner(Replay())
    assert runner.read_argv(["show", "cluster"]) == [
        "sacctmgr", "--immediate", "--parsable2", "--noheader", "show", "cluster"]
    assert runner.write_argv(["add", "cluster", "name=beta"]) == [
        "sacctmgr", "--immediate", "add", "cluster", "name=beta"]
    custom = sm.SacctmgrRunner(Replay(), sacctmgr_path="/opt/slurm/bin/sacctmgr")
    assert custom.write_argv(["delete", "cluster", "where", "name=b"])[0] == "/opt/slurm/bin/sacctmgr"


def test_query_builds_format_and_parses():
    run = Replay((0, fixture("show_cluster_registered.txt"), ""))
    runner = sm.SacctmgrRunner(run)
    fields = ["Cluster", "ControlHost", "ControlPort", "RPC", "Features", "Federation", "FedState", "Flags"]
    records = runner.query(["show", "cluster", "where", "name=alpha"], fields)
    assert records[0]["Cluster"] == "alpha"
    argv, kwargs = run.calls[0]
    assert argv == [
        "sacctmgr", "--immediate", "--parsable2", "--noheader", "show", "cluster", "where",
        "name=alpha", "format=Cluster,ControlHost,ControlPort,RPC,Features,Federation,FedState,Flags",
    ]
    assert kwargs == {}
    assert runner.executed == []


def test_environment_is_passed_as_run_command_environ_update():
    run = Replay((0, "", ""), (0, fixture("delete_cluster.txt"), ""))
    runner = sm.SacctmgrRunner(run, environ={"SLURM_CONF": "/etc/slurm/slurm.conf"})
    assert sm.get_cluster(runner, "beta") is None
    sm.delete_cluster(runner, "beta")
    for _argv, kwargs in run.calls:
        assert kwargs == {"environ_update": {"SLURM_CONF": "/etc/slurm/slurm.conf"}}


def test_get_cluster_none_and_pick_by_name():
    runner = sm.SacctmgrRunner(Replay((0, "", ""), (0, fixture("show_cluster_all.txt"), "")))
    assert sm.get_cluster(runner, "alpha") is None
    beta = sm.get_cluster(runner, "beta")
    assert beta["name"] == "beta"
    assert beta["fed_state"] == "INACTIVE"
    assert beta["features"] == ["bigmem"]


def test_write_functions_build_real_sacctmgr_syntax():
    run = Replay(
        (0, fixture("add_cluster.txt"), ""),
        (0, fixture("add_cluster_features.txt"), ""),
        (0, fixture("modify_cluster_features.txt"), ""),
        (0, fixture("modify_cluster_features.txt"), ""),
        (0, fixture("modify_cluster_fedstate.txt"), ""),
        (0, fixture("delete_cluster.txt"), ""),
    )
    runner = sm.SacctmgrRunner(run, sacctmgr_path="/usr/bin/sacctmgr")
    head = ["/usr/bin/sacctmgr", "--immediate"]
    assert sm.add_cluster(runner, "beta") == head + ["add", "cluster", "name=beta"]
    assert sm.add_cluster(runner, "beta", features=["gpu", "x86_64"]) == head + [
        "add", "cluster", "name=beta", "features=gpu,x86_64"]
    assert sm.modify_cluster(runner, "alpha", features=["gpu", "x86_64"]) == head + [
        "modify", "cluster", "where", "name=alpha", "set", "features=gpu,x86_64"]
    # An empty list clears every feature: "features=" (the shell's features='').
    assert sm.modify_cluster(runner, "alpha", features=[]) == head + [
        "modify", "cluster", "where", "name=alpha", "set", "features="]
    assert sm.modify_cluster(runner, "alpha", fedstate="drain") == head + [
        "modify", "cluster", "where", "name=alpha", "set", "fedstate=DRAIN"]
    assert sm.delete_cluster(runner, "beta") == head + ["delete", "cluster", "where", "name=beta"]
    assert [argv for argv, _kw in run.calls] == runner.executed


def test_modify_with_nothing_to_set_is_refused():
    with pytest.raises(ValueError):
        sm.modify_cluster_args("alpha")


def test_add_args_with_federation_and_fedstate():
    assert sm.add_cluster_args("gamma", features=[], fedstate="ACTIVE", federation="hpcfed") == [
        "add", "cluster", "name=gamma", "federation=hpcfed", "fedstate=ACTIVE"]


def test_non_zero_rc_raises_with_argv_and_stderr():
    run = Replay((1, "", fixture("stderr_slurmdbd_down.txt")))
    runner = sm.SacctmgrRunner(run)
    with pytest.raises(sm.SacctmgrError) as err:
        sm.get_cluster(runner, "alpha")
    error = err.value
    message = str(error)
    assert "exited with status 1" in message
    assert "could not reach slurmdbd" in message
    assert "sacctmgr --immediate --parsable2 --noheader show cluster where name=alpha" in message
    assert "Connection refused" in message
    assert error.rc == 1
    assert error.argv[0] == "sacctmgr"
    assert error.to_dict()["stderr"] == fixture("stderr_slurmdbd_down.txt")


def test_already_exists_is_an_error_with_rc_1():
    runner = sm.SacctmgrRunner(Replay((1, fixture("add_cluster_exists.txt"), "")))
    with pytest.raises(sm.SacctmgrError) as err:
        sm.add_cluster(runner, "beta")
    assert "already exists" in str(err.value)
    assert "add cluster name=beta" in str(err.value)
    assert runner.executed == []


def test_nothing_new_added_is_an_error_even_with_rc_0():
    runner = sm.SacctmgrRunner(Replay((0, " Adding Cluster(s)\n Nothing new added.\n", "")))
    with pytest.raises(sm.SacctmgrError, match="added nothing"):
        sm.add_cluster(runner, "beta")


def test_problem_message_is_an_error_even_with_rc_0():
    runner = sm.SacctmgrRunner(Replay((0, "", fixture("stderr_access_denied.txt"))))
    with pytest.raises(sm.SacctmgrError) as err:
        sm.add_cluster(runner, "beta")
    message = str(err.value)
    assert "reported a problem" in message
    assert "not a Slurm administrator" in message
    assert "Access/permission denied" in message


def test_nothing_deleted_is_an_error():
    runner = sm.SacctmgrRunner(Replay((1, fixture("delete_cluster_missing.txt"), "")))
    with pytest.raises(sm.SacctmgrError, match="deleted nothing"):
        sm.delete_cluster(runner, "ghost")


def test_query_data_is_not_searched_for_messages():
    # Records are data: a value mentioning "Problem " is not a failure.
    run = Replay((0, "root|Problem solvers|x\n", ""))
    runner = sm.SacctmgrRunner(run)
    assert runner.query(["show", "account"], ["Name", "Descr", "Org"])[0]["Descr"] == "Problem solvers"


def test_unparsable_query_output_raises_sacctmgr_error():
    runner = sm.SacctmgrRunner(Replay((0, "alpha|10.11.0.2\n", "")))
    with pytest.raises(sm.SacctmgrError, match="could not parse"):
        sm.get_cluster(runner, "alpha")


def test_explain_failure_success_is_none():
    assert sm.explain_failure(fixture("add_cluster.txt"), "", rc=0) is None
    assert sm.explain_failure(fixture("show_cluster_all.txt"), "", rc=0, write=False) is None


def test_format_argv_quotes_for_the_shell():
    assert sm.format_argv(["sacctmgr", "set", "features="]) == "sacctmgr set features="
    assert sm.format_argv(["a b"]) == "'a b'"


def test_argument_spec_matches_doc_fragment():
    import yaml

    from ansible_collections.hybridhpc.slurm.plugins.doc_fragments.sacctmgr import (
        ModuleDocFragment,
    )

    documented = yaml.safe_load(ModuleDocFragment.DOCUMENTATION)["options"]
    spec = sm.sacctmgr_argument_spec()
    assert set(documented) == set(spec)
    for key, option in spec.items():
        assert documented[key]["type"] == option["type"]


# --------------------------------------------------------------------------
# plan_cluster


def registered(**changes):
    cluster = sm.cluster_from_record(
        sm.parse_parsable(fixture("show_cluster_registered.txt"), sm.CLUSTER_FIELDS)[0])
    cluster.update(changes)
    return cluster


def test_plan_absent_to_present_adds():
    plan = sm.plan_cluster(None, "beta")
    assert plan["changes"] == [["add", "cluster", "name=beta"]]
    assert plan["after"] == sm.new_cluster_view("beta")


def test_plan_add_with_features_in_one_command():
    plan = sm.plan_cluster(None, "beta", features=["x86_64", "gpu"])
    assert plan["changes"] == [["add", "cluster", "name=beta", "features=gpu,x86_64"]]
    assert plan["after"]["features"] == ["gpu", "x86_64"]


def test_plan_present_cluster_is_a_no_op():
    current = registered()
    plan = sm.plan_cluster(current, "alpha")
    assert plan == {"changes": [], "after": current}
    assert plan["after"] is not current


def test_plan_features_change_and_no_change():
    current = registered(features=["gpu"])
    assert sm.plan_cluster(current, "alpha", features=["gpu"])["changes"] == []
    assert sm.plan_cluster(current, "alpha", features=["gpu"], features_mode="add")["changes"] == []
    assert sm.plan_cluster(current, "alpha", features=["ib"], features_mode="remove")["changes"] == []
    plan = sm.plan_cluster(current, "alpha", features=["ib"], features_mode="add")
    assert plan["changes"] == [["modify", "cluster", "where", "name=alpha", "set", "features=gpu,ib"]]
    assert plan["after"]["features"] == ["gpu", "ib"]
    plan = sm.plan_cluster(current, "alpha", features=[])
    assert plan["changes"] == [["modify", "cluster", "where", "name=alpha", "set", "features="]]


def test_plan_delete():
    assert sm.plan_cluster(registered(), "alpha", state="absent") == {
        "changes": [["delete", "cluster", "where", "name=alpha"]], "after": None}
    assert sm.plan_cluster(None, "alpha", state="absent") == {"changes": [], "after": None}


def test_plan_fedstate_needs_a_federation():
    with pytest.raises(ValueError, match="fedstate needs the cluster to be in a federation"):
        sm.plan_cluster(registered(), "alpha", fedstate="ACTIVE")
    with pytest.raises(ValueError, match="fedstate needs the cluster to be in a federation"):
        sm.plan_cluster(None, "alpha", fedstate="DRAIN")


def test_plan_fedstate_drain_remove_outside_a_federation_is_reached():
    assert sm.plan_cluster(registered(), "alpha", fedstate="DRAIN+REMOVE")["changes"] == []


def test_plan_fedstate_in_a_federation():
    current = registered(federation="hpcfed", fed_state="ACTIVE")
    assert sm.plan_cluster(current, "alpha", fedstate="ACTIVE")["changes"] == []
    plan = sm.plan_cluster(current, "alpha", fedstate="DRAIN", features=["gpu"])
    assert plan["changes"] == [["modify", "cluster", "where", "name=alpha", "set",
                                "features=gpu", "fedstate=DRAIN"]]
    assert plan["after"]["fed_state"] == "DRAIN"
    drained = registered(federation="hpcfed", fed_state="DRAINED")
    assert sm.plan_cluster(drained, "alpha", fedstate="DRAIN")["changes"] == []


def test_plan_rejects_bad_state_and_name():
    with pytest.raises(ValueError):
        sm.plan_cluster(None, "alpha", state="gone")
    with pytest.raises(ValueError):
        sm.plan_cluster(None, "al pha")
