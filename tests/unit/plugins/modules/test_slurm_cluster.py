# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the slurm_cluster module.

The module's logic runs against FakeSlurmdbd, a ``run(argv)`` callable that
keeps cluster records the way slurmdbd does and answers sacctmgr argv lists
with output shaped like the recorded fixtures (tests/unit/fixtures/sacctmgr).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pathlib

import pytest
from ansible.module_utils import basic
from module_args import set_module_args

from ansible_collections.hybridhpc.slurm.plugins.module_utils import sacctmgr as sm
from ansible_collections.hybridhpc.slurm.plugins.modules import slurm_cluster

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "sacctmgr"
SACCTMGR = "/usr/bin/sacctmgr"


def fixture(name):
    return (FIXTURES / name).read_text()


class FakeSlurmdbd:
    """Answers sacctmgr argv lists like sacctmgr talking to slurmdbd would.

    Clusters are kept as the database row: features as written (in order,
    not lower-cased), federation, fed_state; ``show`` prints them the way
    sacctmgr does (features lower-cased and de-duplicated, NA/None/0 for
    unset values). Every call is recorded; ``writes`` keeps add/modify/delete.
    """

    def __init__(self, clusters=None):
        self.clusters = {}
        for cluster in clusters or ():
            self.clusters[cluster["name"]] = dict(cluster)
        self.calls = []
        self.writes = []
        self.fail_next = None

    @staticmethod
    def registered(name, host="10.11.0.2", features=(), federation="", fed_state="NA",
                   flags="None"):
        return {"name": name, "control_host": host, "control_port": "6817", "rpc": "10752",
                "features": list(features), "federation": federation, "fed_state": fed_state,
                "flags": flags}

    def __call__(self, argv, environ_update=None):
        argv = list(argv)
        self.calls.append((argv, environ_update))
        if self.fail_next is not None:
            result, self.fail_next = self.fail_next, None
            return result
        assert argv[0] == SACCTMGR
        words = argv[1:]
        options = [w for w in words if w.startswith("--")]
        words = [w for w in words if not w.startswith("--")]
        assert "--immediate" in options, "sacctmgr would prompt for 30 s"
        verb, entity, rest = words[0], words[1], words[2:]
        assert entity == "cluster"
        if verb == "show":
            assert "--parsable2" in options and "--noheader" in options
            return self._show(rest)
        self.writes.append(argv)
        return getattr(self, "_" + verb)(rest)

    @staticmethod
    def _conditions(rest):
        assert rest[0] == "where"
        cond, i = {}, 1
        while i < len(rest) and rest[i] != "set":
            key, _sep, value = rest[i].partition("=")
            cond[key.lower()] = value
            i += 1
        return cond, rest[i + 1:]

    def _row(self, cluster, fields):
        shown_features = []
        for feature in cluster["features"]:
            if feature.lower() not in shown_features:
                shown_features.append(feature.lower())
        values = {
            "Cluster": cluster["name"],
            "ControlHost": cluster["control_host"],
            "ControlPort": cluster["control_port"],
            "RPC": cluster["rpc"],
            "Features": ",".join(shown_features),
            "Federation": cluster["federation"],
            "FedState": cluster["fed_state"],
            "Flags": cluster["flags"],
        }
        return "|".join(values[f] for f in fields)

    def _show(self, rest):
        fmt = [w for w in rest if w.startswith("format=")]
        assert len(fmt) == 1
        fields = fmt[0].split("=", 1)[1].split(",")
        cond, _unused = self._conditions([w for w in rest if not w.startswith("format=")])
        names = [cond["name"].lower()] if "name" in cond else sorted(self.clusters)
        lines = [self._row(self.clusters[n], fields) for n in names if n in self.clusters]
        return 0, "".join(line + "\n" for line in lines), ""

    @staticmethod
    def _features(value, have):
        if value == "":
            return []
        return [f for f in value.split(",") if f]

    def _add(self, rest):
        settings = dict(w.split("=", 1) for w in rest)
        name = settings.pop("name").lower()
        if name in self.clusters:
            return 1, f" This cluster {name} already exists.  Not adding.\n", ""
        cluster = {"name": name, "control_host": "", "control_port": "0", "rpc": "0",
                   "features": [], "federation": "", "fed_state": "NA", "flags": "None"}
        out = f" Adding Cluster(s)\n  Name           = {name}\n"
        if "features" in settings:
            cluster["features"] = self._features(settings.pop("features"), [])
            out += " Setting\n" + "".join(
                f"  Feature       = {f}\n" for f in cluster["features"])
        assert not settings, settings
        self.clusters[name] = cluster
        return 0, out, ""

    def _modify(self, rest):
        cond, settings = self._conditions(rest)
        name = cond["name"].lower()
        if name not in self.clusters:
            return 1, "", " Query didn't return any clusters.\n"
        cluster = self.clusters[name]
        out = " Setting\n"
        for setting in settings:
            key, value = setting.split("=", 1)
            if key == "features":
                cluster["features"] = self._features(value, cluster["features"])
                out += "".join(f"  Feature       = {f}\n" for f in cluster["features"])
            elif key == "fedstate":
                assert value in sm.FEDSTATES
                cluster["fed_state"] = value
                out += f"  FedState       = {value}\n"
            else:
                raise AssertionError("unexpected setting " + setting)
        return 0, out + f" Modified cluster...\n  {name}\n", ""

    def _delete(self, rest):
        cond, _unused = self._conditions(rest)
        name = cond["name"].lower()
        if name not in self.clusters:
            return 1, " Nothing deleted\n", ""
        del self.clusters[name]
        return 0, f" Deleting clusters...\n  {name}\n", ""


def params(**kwargs):
    result = {"name": "alpha", "state": "present", "features": None, "features_mode": "set",
              "fedstate": None, "sacctmgr_path": None, "slurm_conf": None}
    result.update(kwargs)
    return result


def ensure(dbd, check_mode=False, diff=False, **kwargs):
    runner = sm.SacctmgrRunner(dbd, sacctmgr_path=SACCTMGR)
    return slurm_cluster.ensure_cluster(runner, params(**kwargs), check_mode=check_mode, diff=diff)


# --------------------------------------------------------------------------
# The fake answers like the recorded sacctmgr output


def test_fake_show_matches_recorded_output():
    fields = ",".join(sm.CLUSTER_FIELDS)
    head = [SACCTMGR, "--immediate", "--parsable2", "--noheader", "show", "cluster", "where"]
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("alpha")])
    assert dbd(head + ["name=alpha", "format=" + fields])[1] == fixture("show_cluster_registered.txt")
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("alpha", features=["x86_64", "GPU"],
                                                federation="hpcfed", fed_state="ACTIVE")])
    assert dbd(head + ["name=alpha", "format=" + fields])[1] == fixture("show_cluster_federated.txt")
    dbd = FakeSlurmdbd()
    assert dbd(head + ["name=alpha", "format=" + fields])[1] == fixture("show_cluster_none.txt")
    dbd([SACCTMGR, "--immediate", "add", "cluster", "name=beta"])
    assert dbd(head + ["name=beta", "format=" + fields])[1] == fixture("show_cluster_added.txt")


def test_fake_writes_match_recorded_output():
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("alpha")])
    assert dbd([SACCTMGR, "--immediate", "add", "cluster", "name=beta"]) == (
        0, fixture("add_cluster.txt"), "")
    assert dbd([SACCTMGR, "--immediate", "add", "cluster", "name=beta"]) == (
        1, fixture("add_cluster_exists.txt"), "")
    assert dbd([SACCTMGR, "--immediate", "modify", "cluster", "where", "name=alpha", "set",
                "features=gpu,x86_64"]) == (0, fixture("modify_cluster_features.txt"), "")
    assert dbd([SACCTMGR, "--immediate", "delete", "cluster", "where", "name=beta"]) == (
        0, fixture("delete_cluster.txt"), "")
    assert dbd([SACCTMGR, "--immediate", "delete", "cluster", "where", "name=beta"]) == (
        1, fixture("delete_cluster_missing.txt"), "")


# --------------------------------------------------------------------------
# present / absent


def test_absent_to_present_adds_then_second_run_is_unchanged():
    dbd = FakeSlurmdbd()
    first = ensure(dbd, name="beta")
    assert first["changed"] is True
    assert first["commands"] == [[SACCTMGR, "--immediate", "add", "cluster", "name=beta"]]
    assert first["cluster"] == sm.new_cluster_view("beta")
    assert "beta" in dbd.clusters

    writes = len(dbd.writes)
    second = ensure(dbd, name="beta")
    assert second["changed"] is False
    assert second["commands"] == []
    assert second["cluster"] == first["cluster"]
    assert len(dbd.writes) == writes


def test_registered_cluster_present_is_a_no_op():
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("alpha")])
    result = ensure(dbd, name="alpha")
    assert result["changed"] is False
    assert result["commands"] == []
    assert dbd.writes == []
    assert result["cluster"]["control_host"] == "10.11.0.2"
    assert result["cluster"]["control_port"] == 6817
    assert result["cluster"]["rpc"] == 10752


def test_check_mode_reports_the_add_without_writing():
    dbd = FakeSlurmdbd()
    result = ensure(dbd, check_mode=True, name="beta", features=["gpu"])
    assert result["changed"] is True
    assert result["commands"] == [
        [SACCTMGR, "--immediate", "add", "cluster", "name=beta", "features=gpu"]]
    assert result["cluster"]["name"] == "beta"
    assert result["cluster"]["features"] == ["gpu"]
    assert dbd.writes == []
    assert dbd.clusters == {}
    # Only reads ran, with --parsable2 --noheader.
    assert all("--parsable2" in argv for argv, _env in dbd.calls)


def test_add_with_features_is_one_command():
    dbd = FakeSlurmdbd()
    result = ensure(dbd, name="beta", features=["x86_64", "GPU"])
    assert result["commands"] == [
        [SACCTMGR, "--immediate", "add", "cluster", "name=beta", "features=gpu,x86_64"]]
    assert result["cluster"]["features"] == ["gpu", "x86_64"]
    assert ensure(dbd, name="beta", features=["gpu", "x86_64"])["changed"] is False


def test_delete_then_unchanged():
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("alpha"), FakeSlurmdbd.registered("beta")])
    result = ensure(dbd, name="beta", state="absent")
    assert result["changed"] is True
    assert result["commands"] == [[SACCTMGR, "--immediate", "delete", "cluster", "where",
                                   "name=beta"]]
    assert result["cluster"] == {}
    assert sorted(dbd.clusters) == ["alpha"]
    again = ensure(dbd, name="beta", state="absent")
    assert again["changed"] is False
    assert again["commands"] == []


def test_delete_in_check_mode_does_not_write():
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("beta")])
    result = ensure(dbd, check_mode=True, diff=True, name="beta", state="absent")
    assert result["changed"] is True
    assert result["commands"] == [[SACCTMGR, "--immediate", "delete", "cluster", "where",
                                   "name=beta"]]
    assert dbd.writes == []
    assert "beta" in dbd.clusters
    assert result["diff"]["after"] == {"name": "beta", "state": "absent"}


# --------------------------------------------------------------------------
# features


def test_features_set_add_remove_and_clear():
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("alpha", features=["gpu"])])
    modify = [SACCTMGR, "--immediate", "modify", "cluster", "where", "name=alpha", "set"]

    result = ensure(dbd, features=["x86_64", "gpu"])
    assert result["changed"] is True
    assert result["commands"] == [modify + ["features=gpu,x86_64"]]
    assert result["cluster"]["features"] == ["gpu", "x86_64"]
    assert ensure(dbd, features=["gpu", "x86_64"])["changed"] is False

    result = ensure(dbd, features=["ib"], features_mode="add")
    assert result["commands"] == [modify + ["features=gpu,ib,x86_64"]]
    assert ensure(dbd, features=["ib"], features_mode="add")["changed"] is False

    result = ensure(dbd, features=["gpu", "absent"], features_mode="remove")
    assert result["commands"] == [modify + ["features=ib,x86_64"]]
    assert result["cluster"]["features"] == ["ib", "x86_64"]
    assert ensure(dbd, features=["gpu"], features_mode="remove")["changed"] is False

    result = ensure(dbd, features=[])
    assert result["commands"] == [modify + ["features="]]
    assert result["cluster"]["features"] == []
    assert dbd.clusters["alpha"]["features"] == []
    assert ensure(dbd, features=[])["changed"] is False


def test_features_omitted_are_left_alone():
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("alpha", features=["gpu"])])
    assert ensure(dbd)["changed"] is False
    assert dbd.clusters["alpha"]["features"] == ["gpu"]


def test_features_compare_like_slurm_reports_them():
    # Written in upper case by someone else, shown lower-cased by sacctmgr.
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("alpha", features=["GPU", "gpu"])])
    assert ensure(dbd, features=["GPU"])["changed"] is False


def test_features_check_mode():
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("alpha", features=["gpu"])])
    result = ensure(dbd, check_mode=True, features=["ib"], features_mode="add")
    assert result["changed"] is True
    assert result["cluster"]["features"] == ["gpu", "ib"]
    assert dbd.writes == []
    assert dbd.clusters["alpha"]["features"] == ["gpu"]


# --------------------------------------------------------------------------
# fedstate


def test_fedstate_without_federation_fails_clearly():
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("alpha")])
    with pytest.raises(ValueError, match="fedstate needs the cluster to be in a federation"):
        ensure(dbd, fedstate="ACTIVE")
    assert dbd.writes == []


def test_fedstate_on_a_cluster_to_add_fails_before_adding():
    dbd = FakeSlurmdbd()
    with pytest.raises(ValueError, match="fedstate needs the cluster to be in a federation"):
        ensure(dbd, name="beta", fedstate="DRAIN", check_mode=True)
    assert dbd.writes == [] and dbd.clusters == {}


def test_fedstate_changes_in_a_federation():
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("alpha", federation="hpcfed", fed_state="ACTIVE")])
    assert ensure(dbd, fedstate="ACTIVE")["changed"] is False
    result = ensure(dbd, fedstate="DRAIN")
    assert result["commands"] == [[SACCTMGR, "--immediate", "modify", "cluster", "where",
                                   "name=alpha", "set", "fedstate=DRAIN"]]
    assert result["cluster"]["fed_state"] == "DRAIN"
    # slurmctld finishes draining: DRAINED still satisfies DRAIN.
    dbd.clusters["alpha"]["fed_state"] = "DRAINED"
    assert ensure(dbd, fedstate="DRAIN")["changed"] is False
    assert ensure(dbd, fedstate="ACTIVE")["changed"] is True


def test_drain_remove_ends_outside_the_federation():
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("beta", federation="hpcfed", fed_state="DRAIN+REMOVE")])
    assert ensure(dbd, name="beta", fedstate="DRAIN+REMOVE")["changed"] is False
    # Once drained, slurmctld removes the cluster from the federation.
    dbd.clusters["beta"].update(federation="", fed_state="NA")
    assert ensure(dbd, name="beta", fedstate="DRAIN+REMOVE")["changed"] is False


def test_features_and_fedstate_in_one_modify():
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("alpha", federation="hpcfed", fed_state="ACTIVE")])
    result = ensure(dbd, features=["gpu"], fedstate="INACTIVE")
    assert result["commands"] == [[SACCTMGR, "--immediate", "modify", "cluster", "where",
                                   "name=alpha", "set", "features=gpu", "fedstate=INACTIVE"]]
    assert len(dbd.writes) == 1


# --------------------------------------------------------------------------
# diff, names, errors


def test_diff_content():
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("alpha", features=["gpu"])])
    result = ensure(dbd, diff=True, features=["ib"], features_mode="add")
    assert result["diff"] == {
        "before": {"name": "alpha", "state": "present", "features": ["gpu"],
                   "federation": "", "fed_state": "NA"},
        "after": {"name": "alpha", "state": "present", "features": ["gpu", "ib"],
                  "federation": "", "fed_state": "NA"},
    }
    add = ensure(FakeSlurmdbd(), diff=True, name="beta")
    assert add["diff"]["before"] == {"name": "beta", "state": "absent"}
    assert add["diff"]["after"]["state"] == "present"
    unchanged = ensure(dbd, diff=True)
    assert unchanged["diff"]["before"] == unchanged["diff"]["after"]
    assert "diff" not in ensure(dbd)


def test_upper_case_name_is_lowercased_with_a_warning():
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("alpha")])
    result = ensure(dbd, name="Alpha")
    assert result["changed"] is False
    assert result["cluster"]["name"] == "alpha"
    assert "lower case" in result["warnings"][0]


def test_invalid_name_fails_before_running_sacctmgr():
    dbd = FakeSlurmdbd()
    with pytest.raises(ValueError, match="40 characters"):
        ensure(dbd, name="x" * 41)
    assert dbd.calls == []


def test_sacctmgr_failure_propagates():
    dbd = FakeSlurmdbd()
    dbd.fail_next = (1, "", fixture("stderr_slurmdbd_down.txt"))
    with pytest.raises(sm.SacctmgrError, match="could not reach slurmdbd"):
        ensure(dbd, name="beta")


# --------------------------------------------------------------------------
# main(): argument spec, runner wiring, exit/fail


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


@pytest.fixture
def run_main(monkeypatch):
    """Run slurm_cluster.main() with args; sacctmgr calls go to a FakeSlurmdbd."""

    def exit_json(self, **kwargs):
        raise ExitJson(kwargs)

    def fail_json(self, **kwargs):
        raise FailJson(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    monkeypatch.setattr(basic.AnsibleModule, "get_bin_path",
                        lambda self, arg, required=False, opt_dirs=None: SACCTMGR)

    def run(dbd, args, check_mode=False, diff=False):
        def run_command(self, argv, **kwargs):
            return dbd(argv, environ_update=kwargs.get("environ_update"))

        monkeypatch.setattr(basic.AnsibleModule, "run_command", run_command)
        module_args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
        set_module_args(monkeypatch, module_args)
        with pytest.raises((ExitJson, FailJson)) as outcome:
            slurm_cluster.main()
        return outcome.type, outcome.value.args[0]

    return run


def test_main_adds_and_reports(run_main):
    dbd = FakeSlurmdbd()
    kind, result = run_main(dbd, {"name": "beta", "features": ["gpu"],
                                  "slurm_conf": "/etc/slurm/slurm.conf"}, diff=True)
    assert kind is ExitJson
    assert result["changed"] is True
    assert result["commands"] == [
        [SACCTMGR, "--immediate", "add", "cluster", "name=beta", "features=gpu"]]
    assert result["cluster"]["features"] == ["gpu"]
    assert result["diff"]["before"] == {"name": "beta", "state": "absent"}
    assert all(env == {"SLURM_CONF": "/etc/slurm/slurm.conf"} for _argv, env in dbd.calls)


def test_main_check_mode_and_custom_path(run_main):
    dbd = FakeSlurmdbd()
    kind, result = run_main(dbd, {"name": "beta", "sacctmgr_path": SACCTMGR}, check_mode=True)
    assert kind is ExitJson
    assert result["changed"] is True
    assert dbd.writes == []
    assert all(env is None for _argv, env in dbd.calls)
    assert "diff" not in result


def test_main_fails_on_fedstate_without_federation(run_main):
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("alpha")])
    kind, result = run_main(dbd, {"name": "alpha", "fedstate": "DRAIN"})
    assert kind is FailJson
    assert "fedstate needs the cluster to be in a federation" in result["msg"]
    assert result["changed"] is False


def test_main_fails_with_sacctmgr_details(run_main):
    dbd = FakeSlurmdbd()
    dbd.fail_next = (1, "", fixture("stderr_slurmdbd_down.txt"))
    kind, result = run_main(dbd, {"name": "beta"})
    assert kind is FailJson
    assert "could not reach slurmdbd" in result["msg"]
    assert result["rc"] == 1
    assert result["cmd"][:4] == [SACCTMGR, "--immediate", "--parsable2", "--noheader"]
    assert "Connection refused" in result["stderr"]


def test_main_rejects_unknown_fedstate(run_main):
    kind, result = run_main(FakeSlurmdbd(), {"name": "alpha", "fedstate": "DRAINED"})
    assert kind is FailJson
    assert "fedstate" in result["msg"]


def test_main_warns_on_upper_case_name(run_main, monkeypatch):
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: warned.append(msg))
    dbd = FakeSlurmdbd([FakeSlurmdbd.registered("alpha")])
    kind, result = run_main(dbd, {"name": "ALPHA"})
    assert kind is ExitJson
    assert result["changed"] is False
    assert "warnings" not in result
    assert len(warned) == 1 and "lower case" in warned[0]
