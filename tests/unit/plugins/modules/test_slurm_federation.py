# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the slurm_federation module.

The module's logic runs against FakeSlurmdbd, a ``run(argv)`` callable that
keeps clusters and federations the way slurmdbd does and answers sacctmgr
argv lists the way sacctmgr 24.11 does. Every ``*federation*`` fixture in
tests/unit/fixtures/sacctmgr was captured from the lab's real sacctmgr
(slurm-wlm 24.11.5) on scratch clusters scratcha/scratchb/scratchc and
federations scratchfed/scratchfed2; the first tests check that the fake
answers exactly like those recordings (stdout, stderr, exit status).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pathlib

import pytest
from ansible.module_utils import basic
from module_args import set_module_args

from ansible_collections.hybridhpc.slurm.plugins.module_utils import sacctmgr as sm
from ansible_collections.hybridhpc.slurm.plugins.modules import slurm_federation

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures" / "sacctmgr"
SACCTMGR = "/usr/bin/sacctmgr"
READ = [SACCTMGR, "--immediate", "--parsable2", "--noheader"]
WRITE = [SACCTMGR, "--immediate"]
FED_FORMAT = "format=" + ",".join(sm.FEDERATION_FIELDS)
CLUSTER_FORMAT = "format=" + ",".join(sm.CLUSTER_FIELDS)


def fixture(name):
    return (FIXTURES / name).read_text()


class FakeSlurmdbd:
    """Answers sacctmgr argv lists like sacctmgr 24.11 talking to slurmdbd.

    Clusters carry their federation, fed_state and fed_id as in the database
    (a cluster is in at most one federation); federations only carry flags.
    Behaviour copied from the real tool: a joining cluster gets the lowest
    free ID and FedState ACTIVE; ``set clusters=`` writes the difference and
    fails with "Nothing to change" when there is none; a cluster of another
    federation is moved (``--immediate`` answers the prompt); an unknown
    cluster fails the whole command; ``show federation`` prints a federation
    without members as one record with empty cluster fields and ends the
    2nd and later member records with a stray ``|``.
    """

    def __init__(self, clusters=(), federations=()):
        self.clusters = {}
        for cluster in clusters:
            self.clusters[cluster["name"]] = dict(cluster)
        self.federations = {name: {"flags": ""} for name in federations}
        self.calls = []
        self.writes = []
        self.fail_next = None

    @staticmethod
    def cluster(name, features=(), federation="", fed_state="NA", fed_id=0, host="",
                flags="None"):
        registered = bool(host)
        return {"name": name, "control_host": host,
                "control_port": "6817" if registered else "0",
                "rpc": "10752" if registered else "0", "features": list(features),
                "federation": federation, "fed_state": fed_state if federation else "NA",
                "fed_id": fed_id, "flags": flags}

    @classmethod
    def with_federation(cls, federation, members, others=(), federations=()):
        """A database where ``federation`` holds ``members`` (IDs 1, 2, ...)."""
        clusters = [cls.cluster(m, federation=federation, fed_state="ACTIVE", fed_id=i)
                    for i, m in enumerate(members, start=1)]
        clusters += [cls.cluster(o) if isinstance(o, str) else o for o in others]
        return cls(clusters, federations=[federation] + list(federations))

    def members(self, federation):
        return sorted((c for c in self.clusters.values() if c["federation"] == federation),
                      key=lambda c: c["fed_id"])

    # -- dispatch

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
        if verb == "show":
            assert "--parsable2" in options and "--noheader" in options
            return getattr(self, "_show_" + entity)(rest)
        self.writes.append(argv)
        if entity == "cluster":
            return getattr(self, "_" + verb + "_cluster")(rest)
        assert entity == "federation", argv
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

    @staticmethod
    def _format(rest):
        fmt = [w for w in rest if w.startswith("format=")]
        assert len(fmt) == 1
        return fmt[0].split("=", 1)[1].split(","), [w for w in rest if not w.startswith("format=")]

    # -- show

    def _show_cluster(self, rest):
        fields, rest = self._format(rest)
        cond, _unused = self._conditions(rest)
        names = [n.lower() for n in cond["name"].split(",")] if "name" in cond else sorted(self.clusters)
        lines = []
        for name in names:
            if name not in self.clusters:
                continue
            cluster = self.clusters[name]
            values = {
                "Cluster": cluster["name"], "ControlHost": cluster["control_host"],
                "ControlPort": cluster["control_port"], "RPC": cluster["rpc"],
                "Features": ",".join(sorted({f.lower() for f in cluster["features"]})),
                "Federation": cluster["federation"], "FedState": cluster["fed_state"],
                "Flags": cluster["flags"],
            }
            lines.append("|".join(values[f] for f in fields) + "\n")
        return 0, "".join(lines), ""

    def _show_federation(self, rest):
        fields, rest = self._format(rest)
        cond, _unused = self._conditions(rest) if rest else ({}, [])
        names = [cond["name"].lower()] if "name" in cond else sorted(self.federations)
        lines = []
        for name in names:
            if name not in self.federations:
                continue
            flags = self.federations[name]["flags"]
            members = self.members(name)
            if not members:
                values = {"Federation": name, "Cluster": "", "ID": "", "Features": "",
                          "FedState": "", "Flags": flags}
                lines.append("|".join(values[f] for f in fields) + "\n")
            for index, cluster in enumerate(members):
                values = {
                    "Federation": name, "Cluster": cluster["name"], "ID": str(cluster["fed_id"]),
                    "Features": ",".join(sorted({f.lower() for f in cluster["features"]})),
                    "FedState": cluster["fed_state"], "Flags": flags,
                }
                # sacctmgr 24.11 does not reset its "last field" counter per member.
                stray = "|" if index else ""
                lines.append("|".join(values[f] for f in fields) + stray + "\n")
        return 0, "".join(lines), ""

    # -- writes

    def _add_cluster(self, rest):
        settings = dict(word.split("=", 1) for word in rest)
        name = settings["name"].lower()
        self.clusters[name] = self.cluster(name, features=[f for f in settings.get("features", "").split(",") if f])
        out = " Adding Cluster(s)\n  Name           = %s\n" % name
        if self.clusters[name]["features"]:
            out += " Setting\n" + "".join("  Feature       = %s\n" % f for f in self.clusters[name]["features"])
        return 0, out, ""

    def _modify_cluster(self, rest):
        name = self._conditions(rest)[0]["name"].lower()
        settings = dict(word.split("=", 1) for word in rest[rest.index("set") + 1:])
        features = [f for f in settings["features"].split(",") if f]
        self.clusters[name]["features"] = features
        return 0, " Setting\n" + "".join("  Feature       = %s\n" % f for f in features) + (
            " Modified cluster...\n  %s\n" % name), ""

    @staticmethod
    def _unknown_flag(value):
        return 1, "", (" Unknown federation flag used in:\n '%s'\n"
                       " Valid federation flags are\n  '(null)'\n" % value)

    def _verify(self, federation, changes):
        """verify_fed_clusters(): (kept changes, stderr, missing?)."""
        err, missing, kept = "", "", []
        for sign, name in changes:
            cluster = self.clusters.get(name)
            if cluster is None:
                missing += f" The cluster {name} doesn't exist. Please add first.\n"
            elif sign == "+" and cluster["federation"]:
                if federation and cluster["federation"] == federation:
                    err += (f" The cluster {name} is already assigned to federation "
                            f"{federation}\n")
                    continue
                err += f" The cluster {name} is assigned to federation {cluster['federation']}\n"
                kept.append((sign, name))
            elif sign == "-" and cluster["federation"] != federation:
                err += f" The cluster {name} isn't assigned to federation {federation}\n"
            else:
                kept.append((sign, name))
        if missing:
            return None, missing
        return kept, err

    def _join(self, federation, name):
        used = {c["fed_id"] for c in self.members(federation)}
        fed_id = next(i for i in range(1, len(used) + 2) if i not in used)
        self.clusters[name].update(federation=federation, fed_state="ACTIVE", fed_id=fed_id)

    def _leave(self, name):
        self.clusters[name].update(federation="", fed_state="NA", fed_id=0)

    def _add(self, rest):
        settings = dict(w.split("=", 1) for w in rest)
        name = settings.pop("name").lower()
        if "flags" in settings:
            return self._unknown_flag(settings.pop("flags"))
        clusters = [c.lower() for c in settings.pop("clusters", "").split(",") if c]
        assert not settings, settings
        if name in self.federations:
            return 1, f" This federation {name} already exists.  Not adding.\n", ""
        kept, err = self._verify(None, [("+", c) for c in clusters])
        if kept is None:
            return 1, "", err
        self.federations[name] = {"flags": ""}
        out = f" Adding Federation(s)\n  {name}\n"
        if clusters:
            out += " Settings\n" + "".join(f"  Cluster       = {c}\n" for c in clusters)
        for _sign, cluster in kept:
            self._join(name, cluster)
        return 0, out, err

    def _modify(self, rest):
        cond, settings = self._conditions(rest)
        name = cond["name"].lower()
        if name not in self.federations:
            return 1, "", f" The federation {name} doesn't exist.\n"
        out, err, changes = " Setting\n", "", None
        for setting in settings:
            key, value = setting.split("=", 1)
            if key == "flags":
                if value != sm.FEDERATION_FLAGS_CLEAR:
                    return self._unknown_flag(value)
                self.federations[name]["flags"] = ""
                out += "  Flags        -= (null)\n"
            elif key in ("clusters", "clusters+", "clusters-"):
                names = [c.lower() for c in value.split(",") if c]
                if key == "clusters":
                    changes = [("+", c) for c in names] + [
                        ("-", c["name"]) for c in self.members(name) if c["name"] not in names]
                else:
                    changes = [(key[-1], c) for c in names]
            else:
                raise AssertionError("unexpected setting " + setting)
        if changes is not None:
            changes, err = self._verify(name, changes)
            if changes is None:
                return 1, "", err
            if not changes:
                return 1, "Nothing to change\n", err
            out += "".join(f"  Cluster      {sign}= {cluster}\n" for sign, cluster in changes)
            # slurmdbd takes the leaving clusters out before the joining ones
            # get the lowest free IDs.
            for sign, cluster in sorted(changes, key=lambda change: change[0] == "+"):
                if sign == "+":
                    self._join(name, cluster)
                else:
                    self._leave(cluster)
        return 0, out + f" Modified federation...\n  {name}\n", err

    def _delete(self, rest):
        cond, _unused = self._conditions(rest)
        name = cond["name"].lower()
        if name not in self.federations:
            return 1, " Nothing deleted\n", ""
        for cluster in self.members(name):
            self._leave(cluster["name"])
        del self.federations[name]
        return 0, f" Deleting federations...\n  {name}\n", ""


def params(**kwargs):
    result = {"name": "hpcfed", "state": "present", "clusters": None, "clusters_mode": "set",
              "flags": None, "sacctmgr_path": None, "slurm_conf": None}
    result.update(kwargs)
    return result


def ensure(dbd, check_mode=False, diff=False, **kwargs):
    runner = sm.SacctmgrRunner(dbd, sacctmgr_path=SACCTMGR)
    return slurm_federation.ensure_federation(runner, params(**kwargs), check_mode=check_mode,
                                              diff=diff)


def modify(name, *settings):
    return WRITE + ["modify", "federation", "where", "name=" + name, "set"] + list(settings)


def member(name, fed_id, features=(), fed_state="ACTIVE"):
    return {"name": name, "id": fed_id, "fed_state": fed_state, "features": list(features)}


# --------------------------------------------------------------------------
# The fake answers like the real sacctmgr 24.11.5 did


def show_federation(dbd, name=None):
    where = ["where", "name=" + name] if name else []
    return dbd(READ + ["show", "federation"] + where + [FED_FORMAT])


def test_fake_show_matches_real_output():
    dbd = FakeSlurmdbd([FakeSlurmdbd.cluster("scratcha")], federations=["scratchfed"])
    assert show_federation(dbd, "scratchfed") == (0, fixture("show_federation_empty.txt"), "")
    assert show_federation(dbd, "scratchnope") == (0, fixture("show_federation_none.txt"), "")

    dbd = FakeSlurmdbd.with_federation("scratchfed", ["scratcha", "scratchb"])
    assert show_federation(dbd, "scratchfed")[1] == fixture("show_federation_two_members.txt")
    dbd.clusters["scratchc"] = FakeSlurmdbd.cluster("scratchc", features=["gpu"],
                                                    federation="scratchfed", fed_state="ACTIVE",
                                                    fed_id=3)
    assert show_federation(dbd, "SCRATCHFED")[1] == fixture("show_federation_three_members.txt")
    del dbd.clusters["scratchc"]
    dbd.clusters["scratchb"]["fed_state"] = "DRAIN+REMOVE"
    assert show_federation(dbd, "scratchfed")[1] == fixture("show_federation_drain_remove.txt")

    dbd = FakeSlurmdbd.with_federation("scratchfed", ["scratcha", "scratchb"],
                                       federations=["scratchfed2"])
    assert show_federation(dbd)[1] == fixture("show_federation_all.txt")
    assert dbd(READ + ["show", "cluster", "where", "name=scratchb", CLUSTER_FORMAT]) == (
        0, fixture("show_cluster_federation_member.txt"), "")


def test_fake_writes_match_real_output():
    dbd = FakeSlurmdbd([FakeSlurmdbd.cluster(n, features=["gpu"] if n == "scratchc" else [])
                        for n in ("scratcha", "scratchb", "scratchc")])
    add = WRITE + ["add", "federation", "name=scratchfed"]
    assert dbd(add + ["clusters=scratchzz"]) == (
        1, "", fixture("add_federation_unknown_cluster_stderr.txt"))
    assert dbd(add + ["flags=foo"]) == (1, "", fixture("add_federation_flags_unknown_stderr.txt"))
    assert dbd(add) == (0, fixture("add_federation.txt"), "")
    assert dbd(add) == (1, fixture("add_federation_exists.txt"), "")
    assert dbd(modify("scratchfed", "clusters=scratcha,scratchb")) == (
        0, fixture("modify_federation_add_clusters.txt"), "")
    assert dbd(modify("scratchfed", "clusters=scratcha,scratchb")) == (
        1, fixture("modify_federation_nothing_to_change.txt"),
        fixture("modify_federation_nothing_to_change_stderr.txt"))
    assert dbd(modify("scratchfed", "clusters=")) == (
        0, fixture("modify_federation_clear_clusters.txt"), "")
    assert dbd(modify("scratchfed", "flags=-1")) == (
        0, fixture("modify_federation_flags_clear.txt"), "")
    assert dbd(modify("scratchfed", "flags=-1", "clusters=scratchc")) == (
        0, fixture("modify_federation_clusters_and_flags.txt"), "")
    assert show_federation(dbd, "scratchfed")[1] == "scratchfed|scratchc|1|gpu|ACTIVE|\n"
    assert dbd(modify("scratchfed", "clusters=scratcha,scratchc")) == (
        0, " Setting\n  Cluster      += scratcha\n Modified federation...\n  scratchfed\n",
        " The cluster scratchc is already assigned to federation scratchfed\n")
    assert dbd(modify("scratchfed", "clusters=scratcha")) == (
        0, fixture("modify_federation_remove_clusters.txt"),
        fixture("modify_federation_set_clusters_stderr.txt"))
    assert dbd(modify("scratchfed", "clusters=scratcha,scratchb")) == (
        0, fixture("modify_federation_set_clusters.txt"),
        fixture("modify_federation_set_clusters_stderr.txt"))
    assert dbd(modify("scratchnope", "clusters=scratcha")) == (
        1, "", fixture("modify_federation_missing_stderr.txt"))
    assert dbd(WRITE + ["delete", "federation", "where", "name=scratchfed"]) == (
        0, fixture("delete_federation.txt"), "")
    assert dbd(WRITE + ["delete", "federation", "where", "name=scratchfed"]) == (
        1, fixture("delete_federation_missing.txt"), "")
    assert all(c["federation"] == "" and c["fed_state"] == "NA" for c in dbd.clusters.values())


def test_fake_replaces_members_like_sacctmgr_does():
    # Leaving clusters go first: the joining one reuses the freed ID.
    dbd = FakeSlurmdbd.with_federation("scratchfed", ["scratcha", "scratchb"],
                                       others=[FakeSlurmdbd.cluster("scratchc", features=["gpu"])])
    assert dbd(modify("scratchfed", "clusters=scratcha,scratchc")) == (
        0, fixture("modify_federation_replace_clusters.txt"),
        fixture("modify_federation_set_clusters_stderr.txt"))
    assert show_federation(dbd, "scratchfed")[1] == fixture("show_federation_after_replace.txt")


def test_fake_moves_a_cluster_like_sacctmgr_does():
    # The reason the module refuses: with --immediate, sacctmgr moves it.
    dbd = FakeSlurmdbd.with_federation("scratchfed2", ["scratchb"], others=["scratcha"],
                                       federations=["scratchfed"])
    dbd(modify("scratchfed", "clusters=scratcha"))
    assert dbd(modify("scratchfed", "clusters+=scratchb")) == (
        0, fixture("modify_federation_move.txt"), fixture("modify_federation_move_stderr.txt"))
    assert dbd.clusters["scratchb"]["federation"] == "scratchfed"
    assert dbd.clusters["scratchb"]["fed_id"] == 2
    assert dbd.members("scratchfed2") == []


# --------------------------------------------------------------------------
# create / unchanged / check mode


def test_create_with_members_then_second_run_is_unchanged():
    dbd = FakeSlurmdbd([FakeSlurmdbd.cluster("alpha", features=["gpu"]),
                        FakeSlurmdbd.cluster("beta")])
    first = ensure(dbd, clusters=["beta", "alpha"])
    assert first["changed"] is True
    assert first["commands"] == [WRITE + ["add", "federation", "name=hpcfed",
                                          "clusters=alpha,beta"]]
    assert first["federation"] == {
        "name": "hpcfed", "clusters": ["alpha", "beta"], "flags": [],
        "members": [member("alpha", 1, ["gpu"]), member("beta", 2)],
    }
    assert dbd.clusters["alpha"]["federation"] == "hpcfed"

    writes = len(dbd.writes)
    second = ensure(dbd, clusters=["alpha", "beta"])
    assert second["changed"] is False
    assert second["commands"] == []
    assert second["federation"] == first["federation"]
    assert len(dbd.writes) == writes


def test_clusters_are_registered_with_their_features_before_they_join_then_nothing_changes():
    dbd = FakeSlurmdbd([FakeSlurmdbd.cluster("alpha", features=["old"])])
    wanted = dict(clusters=["alpha", "beta"], cluster_features={"alpha": ["gpu"], "beta": None})
    check = ensure(dbd, check_mode=True, **wanted)
    assert dbd.writes == []
    assert check["changed"] is True
    assert check["commands"] == [
        WRITE + ["modify", "cluster", "where", "name=alpha", "set", "features=gpu"],
        WRITE + ["add", "cluster", "name=beta"],
        WRITE + ["add", "federation", "name=hpcfed", "clusters=alpha,beta"],
    ]
    first = ensure(dbd, **wanted)
    assert dbd.writes == check["commands"]
    assert first["federation"]["members"] == [member("alpha", 1, ["gpu"]), member("beta", 2)]
    writes = len(dbd.writes)
    again = ensure(dbd, **wanted)
    assert (again["changed"], again["commands"], len(dbd.writes)) == (False, [], writes)
    # null leaves the features as they are.
    dbd.clusters["beta"]["features"] = ["cloud"]
    assert ensure(dbd, **wanted)["changed"] is False


def test_create_empty_federation_and_keep_members_when_clusters_omitted():
    dbd = FakeSlurmdbd([FakeSlurmdbd.cluster("alpha")])
    result = ensure(dbd)
    assert result["commands"] == [WRITE + ["add", "federation", "name=hpcfed"]]
    assert result["federation"] == {"name": "hpcfed", "clusters": [], "flags": [], "members": []}
    assert ensure(dbd)["changed"] is False
    ensure(dbd, clusters=["alpha"])
    result = ensure(dbd)
    assert result["changed"] is False
    assert result["federation"]["clusters"] == ["alpha"]


def test_check_mode_reports_without_writing():
    dbd = FakeSlurmdbd([FakeSlurmdbd.cluster("alpha", features=["gpu"]),
                        FakeSlurmdbd.cluster("beta")])
    result = ensure(dbd, check_mode=True, diff=True, clusters=["alpha", "beta"])
    assert result["changed"] is True
    assert result["commands"] == [WRITE + ["add", "federation", "name=hpcfed",
                                           "clusters=alpha,beta"]]
    assert result["federation"]["clusters"] == ["alpha", "beta"]
    assert result["federation"]["members"] == [member("alpha", None, ["gpu"]),
                                               member("beta", None)]
    assert result["diff"] == {
        "before": {"name": "hpcfed", "state": "absent"},
        "after": {"name": "hpcfed", "state": "present", "clusters": ["alpha", "beta"],
                  "flags": []},
    }
    assert dbd.writes == []
    assert dbd.federations == {}
    assert all("--parsable2" in argv for argv, _env in dbd.calls)


def test_check_mode_on_members_does_not_write():
    dbd = FakeSlurmdbd.with_federation("hpcfed", ["alpha", "beta"], others=["gamma"])
    result = ensure(dbd, check_mode=True, clusters=["alpha", "gamma"])
    assert result["changed"] is True
    assert result["commands"] == [modify("hpcfed", "clusters=alpha,gamma")]
    assert result["federation"]["members"] == [member("alpha", 1), member("gamma", None)]
    assert dbd.writes == []
    assert [c["name"] for c in dbd.members("hpcfed")] == ["alpha", "beta"]


# --------------------------------------------------------------------------
# members: set / add / remove


def test_set_adds_and_removes_members():
    dbd = FakeSlurmdbd.with_federation("hpcfed", ["alpha", "beta"], others=["gamma"])
    result = ensure(dbd, clusters=["alpha", "gamma"])
    assert result["changed"] is True
    assert result["commands"] == [modify("hpcfed", "clusters=alpha,gamma")]
    assert result["federation"]["members"] == [member("alpha", 1), member("gamma", 2)]
    assert dbd.clusters["beta"]["federation"] == ""
    assert dbd.clusters["beta"]["fed_state"] == "NA"
    assert ensure(dbd, clusters=["gamma", "alpha"])["changed"] is False


def test_set_to_empty_list_removes_every_member():
    dbd = FakeSlurmdbd.with_federation("hpcfed", ["alpha", "beta"])
    result = ensure(dbd, clusters=[])
    assert result["commands"] == [modify("hpcfed", "clusters=")]
    assert result["federation"]["clusters"] == []
    assert dbd.members("hpcfed") == []
    assert "hpcfed" in dbd.federations
    assert ensure(dbd, clusters=[])["changed"] is False


def test_add_mode_keeps_other_members():
    dbd = FakeSlurmdbd.with_federation("hpcfed", ["alpha"], others=["beta", "gamma"])
    result = ensure(dbd, clusters=["gamma"], clusters_mode="add")
    assert result["commands"] == [modify("hpcfed", "clusters=alpha,gamma")]
    assert result["federation"]["clusters"] == ["alpha", "gamma"]
    assert ensure(dbd, clusters=["gamma", "alpha"], clusters_mode="add")["changed"] is False


def test_remove_mode_takes_members_out():
    dbd = FakeSlurmdbd.with_federation("hpcfed", ["alpha", "beta", "gamma"])
    result = ensure(dbd, clusters=["beta", "notamember"], clusters_mode="remove")
    assert result["changed"] is True
    assert result["commands"] == [modify("hpcfed", "clusters=alpha,gamma")]
    assert result["federation"]["members"] == [member("alpha", 1), member("gamma", 3)]
    assert dbd.clusters["beta"]["federation"] == ""
    assert ensure(dbd, clusters=["beta"], clusters_mode="remove")["changed"] is False
    result = ensure(dbd, clusters=["alpha", "gamma"], clusters_mode="remove")
    assert result["commands"] == [modify("hpcfed", "clusters=")]
    assert dbd.members("hpcfed") == []


def test_remove_mode_on_missing_federation_creates_it_empty():
    dbd = FakeSlurmdbd([FakeSlurmdbd.cluster("alpha")])
    result = ensure(dbd, clusters=["alpha"], clusters_mode="remove")
    assert result["commands"] == [WRITE + ["add", "federation", "name=hpcfed"]]
    assert dbd.members("hpcfed") == []


def test_a_draining_member_stays_a_member():
    dbd = FakeSlurmdbd.with_federation("hpcfed", ["alpha", "beta"])
    dbd.clusters["beta"]["fed_state"] = "DRAIN+REMOVE"
    result = ensure(dbd, clusters=["alpha", "beta"])
    assert result["changed"] is False
    assert result["federation"]["members"][1] == member("beta", 2, fed_state="DRAIN+REMOVE")


# --------------------------------------------------------------------------
# refusals: another federation, unknown cluster


def test_cluster_of_another_federation_fails_clearly():
    dbd = FakeSlurmdbd.with_federation("otherfed", ["beta"], others=["alpha"],
                                       federations=["hpcfed"])
    with pytest.raises(ValueError) as err:
        ensure(dbd, clusters=["alpha", "beta"])
    msg = str(err.value)
    assert "cluster 'beta' is in federation 'otherfed'" in msg
    assert "only one federation" in msg
    assert "name=otherfed clusters=[beta] clusters_mode=remove" in msg
    assert "DRAIN+REMOVE" in msg
    assert dbd.writes == []
    assert dbd.clusters["beta"]["federation"] == "otherfed"
    # Also in check mode and in add mode, and when creating the federation.
    with pytest.raises(ValueError, match="is in federation 'otherfed'"):
        ensure(dbd, check_mode=True, clusters=["beta"], clusters_mode="add")
    with pytest.raises(ValueError, match="is in federation 'otherfed'"):
        ensure(dbd, name="newfed", clusters=["beta"])
    assert dbd.writes == []


def test_cluster_leaving_another_federation_says_to_wait():
    dbd = FakeSlurmdbd.with_federation("otherfed", ["beta"], federations=["hpcfed"])
    dbd.clusters["beta"]["fed_state"] = "DRAINED+REMOVE"
    with pytest.raises(ValueError, match="still in federation 'otherfed' .fedstate DRAINED"):
        ensure(dbd, clusters=["beta"])
    # Once slurmctld has removed it, it can join.
    dbd.clusters["beta"].update(federation="", fed_state="NA", fed_id=0)
    assert ensure(dbd, clusters=["beta"])["federation"]["clusters"] == ["beta"]


def test_unknown_cluster_fails_clearly():
    dbd = FakeSlurmdbd([FakeSlurmdbd.cluster("alpha")])
    with pytest.raises(ValueError) as err:
        ensure(dbd, clusters=["alpha", "ghost"])
    msg = str(err.value)
    assert "cluster 'ghost' does not exist in the accounting database" in msg
    assert "add it with hybridhpc.slurm.slurm_cluster or start its slurmctld first" in msg
    assert dbd.writes == [] and dbd.federations == {}


def test_every_problem_is_reported_at_once():
    dbd = FakeSlurmdbd.with_federation("otherfed", ["beta"], federations=["hpcfed"])
    with pytest.raises(ValueError) as err:
        ensure(dbd, clusters=["beta", "ghost"])
    assert "'beta' is in federation 'otherfed'" in str(err.value)
    assert "'ghost' does not exist" in str(err.value)


def test_removing_needs_no_lookup_of_the_removed_cluster():
    dbd = FakeSlurmdbd.with_federation("hpcfed", ["alpha", "beta"])
    ensure(dbd, clusters=["alpha"])
    shows = [argv for argv, _env in dbd.calls if "cluster" in argv]
    assert shows == []


# --------------------------------------------------------------------------
# flags


def test_flags_empty_list_is_satisfied_and_unknown_flags_fail_before_sacctmgr():
    dbd = FakeSlurmdbd.with_federation("hpcfed", ["alpha"])
    assert ensure(dbd, flags=[])["changed"] is False
    with pytest.raises(ValueError, match="defines no federation flags"):
        ensure(dbd, flags=["foo"])
    assert dbd.writes == []


def test_flags_set_in_the_database_are_cleared_with_minus_one():
    # Not reachable with Slurm 24.11 (it has no flag to set), but sacctmgr
    # accepts flags=-1, which clears whatever a future release stored.
    dbd = FakeSlurmdbd.with_federation("hpcfed", ["alpha"])
    dbd.federations["hpcfed"]["flags"] = "SomeFlag"
    result = ensure(dbd, diff=True, flags=[])
    assert result["commands"] == [modify("hpcfed", "flags=-1")]
    assert result["diff"]["before"]["flags"] == ["SomeFlag"]
    assert result["diff"]["after"]["flags"] == []


# --------------------------------------------------------------------------
# delete


def test_delete_then_unchanged():
    dbd = FakeSlurmdbd.with_federation("hpcfed", ["alpha", "beta"])
    result = ensure(dbd, state="absent", clusters=["ignored"])
    assert result["changed"] is True
    assert result["commands"] == [WRITE + ["delete", "federation", "where", "name=hpcfed"]]
    assert result["federation"] == {}
    assert dbd.federations == {}
    assert dbd.clusters["alpha"]["federation"] == ""
    again = ensure(dbd, state="absent")
    assert again["changed"] is False
    assert again["commands"] == []


def test_delete_in_check_mode_does_not_write():
    dbd = FakeSlurmdbd.with_federation("hpcfed", ["alpha"])
    result = ensure(dbd, check_mode=True, diff=True, state="absent")
    assert result["changed"] is True
    assert dbd.writes == []
    assert "hpcfed" in dbd.federations
    assert result["diff"]["after"] == {"name": "hpcfed", "state": "absent"}


# --------------------------------------------------------------------------
# diff, names, errors


def test_diff_content():
    dbd = FakeSlurmdbd.with_federation("hpcfed", ["alpha", "beta"], others=["gamma"])
    result = ensure(dbd, diff=True, clusters=["alpha", "gamma"])
    assert result["diff"] == {
        "before": {"name": "hpcfed", "state": "present", "clusters": ["alpha", "beta"],
                   "flags": []},
        "after": {"name": "hpcfed", "state": "present", "clusters": ["alpha", "gamma"],
                  "flags": []},
    }
    unchanged = ensure(dbd, diff=True, clusters=["alpha", "gamma"])
    assert unchanged["diff"]["before"] == unchanged["diff"]["after"]
    assert "diff" not in ensure(dbd)


def test_upper_case_names_are_lowercased_with_warnings():
    dbd = FakeSlurmdbd.with_federation("hpcfed", ["alpha"])
    result = ensure(dbd, name="HPCfed", clusters=["Alpha"])
    assert result["changed"] is False
    assert result["federation"]["name"] == "hpcfed"
    assert len(result["warnings"]) == 2
    assert all("lower case" in w for w in result["warnings"])


def test_invalid_names_fail_before_running_sacctmgr():
    dbd = FakeSlurmdbd()
    with pytest.raises(ValueError, match="invalid federation name"):
        ensure(dbd, name="bad,name")
    with pytest.raises(ValueError, match="invalid cluster name"):
        ensure(dbd, clusters=["x" * 41])
    assert [argv for argv, _env in dbd.calls if "cluster" in argv] == []
    assert dbd.writes == []


def test_sacctmgr_failure_propagates():
    dbd = FakeSlurmdbd()
    dbd.fail_next = (1, "", fixture("stderr_slurmdbd_down.txt"))
    with pytest.raises(sm.SacctmgrError, match="could not reach slurmdbd"):
        ensure(dbd)


def test_a_write_sacctmgr_refuses_is_an_error():
    # Someone added the cluster elsewhere between our read and our write.
    dbd = FakeSlurmdbd.with_federation("hpcfed", ["alpha"], others=["beta"])
    real_call = dbd.__call__

    def racing(argv, environ_update=None):
        if "modify" in argv:
            dbd.clusters["beta"].update(federation="hpcfed", fed_state="ACTIVE", fed_id=2)
        return real_call(argv, environ_update=environ_update)

    runner = sm.SacctmgrRunner(racing, sacctmgr_path=SACCTMGR)
    with pytest.raises(sm.SacctmgrError, match="sacctmgr changed nothing"):
        slurm_federation.ensure_federation(runner, params(clusters=["alpha", "beta"]))


# --------------------------------------------------------------------------
# main(): argument spec, runner wiring, exit/fail


class ExitJson(Exception):
    pass


class FailJson(Exception):
    pass


@pytest.fixture
def run_main(monkeypatch):
    """Run slurm_federation.main() with args; sacctmgr calls go to a FakeSlurmdbd."""

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
            slurm_federation.main()
        return outcome.type, outcome.value.args[0]

    return run


def test_main_creates_and_reports(run_main):
    dbd = FakeSlurmdbd([FakeSlurmdbd.cluster("alpha")])
    kind, result = run_main(dbd, {"name": "hpcfed", "clusters": ["alpha"],
                                  "slurm_conf": "/etc/slurm/slurm.conf"}, diff=True)
    assert kind is ExitJson
    assert result["changed"] is True
    assert result["commands"] == [WRITE + ["add", "federation", "name=hpcfed", "clusters=alpha"]]
    assert result["federation"]["members"] == [member("alpha", 1)]
    assert result["diff"]["before"] == {"name": "hpcfed", "state": "absent"}
    assert all(env == {"SLURM_CONF": "/etc/slurm/slurm.conf"} for _argv, env in dbd.calls)


def test_main_check_mode(run_main):
    dbd = FakeSlurmdbd.with_federation("hpcfed", ["alpha", "beta"])
    kind, result = run_main(dbd, {"name": "hpcfed", "clusters": ["beta"],
                                  "clusters_mode": "remove"}, check_mode=True)
    assert kind is ExitJson
    assert result["changed"] is True
    assert result["commands"] == [modify("hpcfed", "clusters=alpha")]
    assert dbd.writes == []
    assert "diff" not in result


def test_main_fails_on_cluster_of_another_federation(run_main):
    dbd = FakeSlurmdbd.with_federation("otherfed", ["beta"], federations=["hpcfed"])
    kind, result = run_main(dbd, {"name": "hpcfed", "clusters": ["beta"]})
    assert kind is FailJson
    assert "cluster 'beta' is in federation 'otherfed'" in result["msg"]
    assert result["changed"] is False
    assert dbd.writes == []


def test_main_fails_with_sacctmgr_details(run_main):
    dbd = FakeSlurmdbd()
    dbd.fail_next = (1, "", fixture("stderr_slurmdbd_down.txt"))
    kind, result = run_main(dbd, {"name": "hpcfed"})
    assert kind is FailJson
    assert "could not reach slurmdbd" in result["msg"]
    assert result["rc"] == 1
    assert result["cmd"][:4] == READ
    assert "Connection refused" in result["stderr"]


def test_main_rejects_unknown_mode(run_main):
    kind, result = run_main(FakeSlurmdbd(), {"name": "hpcfed", "clusters_mode": "replace"})
    assert kind is FailJson
    assert "clusters_mode" in result["msg"]


def test_main_warns_on_upper_case_name(run_main, monkeypatch):
    warned = []
    monkeypatch.setattr(basic.AnsibleModule, "warn", lambda self, msg: warned.append(msg))
    dbd = FakeSlurmdbd(federations=["hpcfed"])
    kind, result = run_main(dbd, {"name": "HPCFED"})
    assert kind is ExitJson
    assert result["changed"] is False
    assert "warnings" not in result
    assert len(warned) == 1 and "lower case" in warned[0]
