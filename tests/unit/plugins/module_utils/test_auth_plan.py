# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which authentication a cluster runs, and what it keeps accepting while it moves (module_utils/auth_plan.py)."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import base64
import calendar
import time

from ansible_collections.hybridhpc.slurm.plugins.filter.auth import slurm_auth_problems
from ansible_collections.hybridhpc.slurm.plugins.module_utils import auth_plan, hostlist
from ansible_collections.hybridhpc.slurm.plugins.module_utils.host_packages import auth_sackd, host_components

KEY = base64.b64encode(b"k" * 64).decode()
SINCE = 1000.0


def utc(text):
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


def state(current_type, alt=(), record=None, nodes=None, jobs=None):
    return {"current": {"type": current_type, "alt": list(alt)}, "record": record, "nodes": nodes, "jobs": jobs}


# --- the plan ---------------------------------------------------------------------------------------------

def test_a_new_cluster_or_one_that_runs_the_wanted_type_accepts_nothing_else():
    for wanted in ("munge", "slurm"):
        for seen in (None, {}, state("auth/%s" % wanted)):
            plan = auth_plan.plan(wanted, seen)
            assert plan["AuthType"] == "auth/%s" % wanted and plan["CredType"] == "cred/%s" % wanted
            assert plan["accept"] == [] and plan["record"] is False and plan["uses"] == [wanted]


def test_the_run_that_switches_keeps_the_old_type_and_records_the_switch():
    plan = auth_plan.plan("slurm", state("auth/munge", ["auth/jwt"]))
    assert plan["AuthType"] == "auth/slurm" and plan["accept"] == ["auth/munge"]
    assert plan["record"] is True and plan["uses"] == ["munge", "slurm"]
    back = auth_plan.plan("munge", state("auth/slurm"))
    assert back["AuthType"] == "auth/munge" and back["accept"] == ["auth/slurm"] and back["record"] is True


def test_the_old_type_goes_once_every_slurmd_and_job_started_after_the_switch():
    seen = state("auth/slurm", ["auth/munge", "auth/jwt"], {"from": "munge", "to": "slurm", "since": SINCE},
                 nodes={"c1": SINCE + 5, "c2": SINCE + 9, "c3": None},
                 jobs=[{"id": "7", "start": SINCE + 20, "nodes": ["c1", "c2"]}])
    plan = auth_plan.plan("slurm", seen)
    assert plan["accept"] == [] and plan["uses"] == ["slurm"] and plan["record"] is False and plan["reasons"] == []


def test_a_job_that_started_before_its_node_took_the_new_type_keeps_it():
    seen = state("auth/slurm", ["auth/munge"], {"to": "slurm", "since": SINCE},
                 nodes={"c1": SINCE + 30, "c2": SINCE + 5},
                 jobs=[{"id": "7", "start": SINCE + 20, "nodes": ["c1", "c2"]}])
    plan = auth_plan.plan("slurm", seen)
    assert plan["accept"] == ["auth/munge"] and "job 7" in plan["reasons"][0]
    # Started before the switch itself, on a node restarted since: the same.
    seen["jobs"] = [{"id": "8", "start": SINCE - 1, "nodes": []}]
    seen["nodes"] = {"c1": SINCE + 30}
    assert auth_plan.plan("slurm", seen)["accept"] == ["auth/munge"]


def test_a_slurmd_started_before_the_switch_holds_nothing_once_its_jobs_ended():
    # An interrupted run restarted slurmd with the new slurm.conf before slurmctld switched: it answers slurmctld, so
    # it speaks the new type; only what its predecessor started could hold the old one.
    seen = state("auth/slurm", ["auth/munge"], {"to": "slurm", "since": SINCE}, nodes={"c1": SINCE - 60}, jobs=[])
    assert auth_plan.plan("slurm", seen)["accept"] == []
    seen["jobs"] = [{"id": "5", "start": SINCE - 90, "nodes": ["c1"]}]
    assert auth_plan.plan("slurm", seen)["accept"] == ["auth/munge"]


def test_a_federation_drops_the_old_type_only_once_every_cluster_switched():
    done = state("auth/slurm", ["auth/munge"], {"to": "slurm", "since": SINCE}, nodes={}, jobs=[])
    settled_peer = state("auth/slurm", ["auth/munge"], {"to": "slurm", "since": SINCE})
    assert auth_plan.plan("slurm", done, [settled_peer, {}])["accept"] == []
    # A sibling still on MUNGE (it fails before its slurmctld restarts), or with a restart left pending.
    for peer in (state("auth/munge"), dict(settled_peer, pending_restart=True)):
        plan = auth_plan.plan("slurm", done, [peer])
        assert plan["accept"] == ["auth/munge"], peer
        assert plan["reasons"] == ["another cluster of the federation has not switched yet"]
    assert auth_plan.plan("slurm", dict(done, pending_restart=True))["reasons"] == ["slurmctld has a restart pending"]
    # The filter leaves out skipped reads (controllers that plan no cluster) and the cluster's own.
    from ansible_collections.hybridhpc.slurm.plugins.filter.auth import slurm_auth_plan
    assert slurm_auth_plan("slurm", done, [done, {"skipped": True, "changed": False}, None])["accept"] == []


def test_anything_unknown_keeps_the_old_type():
    lost = state("auth/slurm", ["auth/munge"], None, nodes={}, jobs=[])
    plan = auth_plan.plan("slurm", lost)
    assert plan["accept"] == ["auth/munge"] and plan["record"] is True
    other = state("auth/slurm", ["auth/munge"], {"to": "munge", "since": SINCE}, nodes={}, jobs=[])
    assert auth_plan.plan("slurm", other)["record"] is True
    silent = state("auth/slurm", ["auth/munge"], {"to": "slurm", "since": SINCE}, nodes=None, jobs=None)
    plan = auth_plan.plan("slurm", silent)
    assert plan["accept"] == ["auth/munge"] and plan["record"] is False
    no_time = state("auth/slurm", ["auth/munge"], {"to": "slurm"}, nodes={}, jobs=[])
    assert auth_plan.plan("slurm", no_time)["accept"] == ["auth/munge"]
    no_start = state("auth/slurm", ["auth/munge"], {"to": "slurm", "since": SINCE}, nodes={},
                     jobs=[{"id": "9", "start": None, "nodes": []}])
    assert auth_plan.plan("slurm", no_start)["accept"] == ["auth/munge"]


def test_alt_types_put_the_accepted_type_before_jwt():
    moving = auth_plan.plan("slurm", state("auth/munge"))
    assert auth_plan.alt_types(moving, True) == "auth/munge,auth/jwt"
    assert auth_plan.alt_types(moving, False) == "auth/munge"
    assert auth_plan.alt_types(auth_plan.plan("munge"), True) == "auth/jwt"
    assert auth_plan.alt_types(auth_plan.plan("munge"), False) is None
    assert auth_plan.alt_types({}, False) is None


# --- what the controller reads ----------------------------------------------------------------------------

def test_conf_auth_reads_authtype_and_alt_types_with_munge_as_slurms_default():
    text = "# AuthType=auth/none\nClusterName=a\nauthtype = auth/slurm\nAuthAltTypes=auth/munge, auth/jwt\n"
    assert auth_plan.conf_auth(text) == {"type": "auth/slurm", "alt": ["auth/munge", "auth/jwt"]}
    assert auth_plan.conf_auth("ClusterName=a\n") == {"type": "auth/munge", "alt": []}
    assert auth_plan.conf_auth(None) == {}


def test_nodes_and_jobs_are_listed_only_while_the_other_type_is_accepted():
    assert auth_plan.in_transition({"type": "auth/slurm", "alt": ["auth/munge"]}, "slurm")
    assert not auth_plan.in_transition({"type": "auth/slurm", "alt": ["auth/jwt"]}, "slurm")
    assert not auth_plan.in_transition({"type": "auth/munge", "alt": ["auth/slurm"]}, "slurm")
    assert not auth_plan.in_transition({}, "slurm")


def test_parse_nodes_keeps_the_slurmd_start_of_nodes_that_answer():
    out = ("NodeName=c1 Arch=x86_64 State=MIXED SlurmdStartTime=2026-12-04T01:30:00 LastBusyTime=2026-12-04T01:31:00\n"
           "NodeName=c2 State=IDLE+CLOUD+POWERED_DOWN SlurmdStartTime=2026-12-04T00:00:00\n"
           "NodeName=c3 State=IDLE+NOT_RESPONDING SlurmdStartTime=2026-12-04T00:00:00\n"
           "NodeName=c4 State=DOWN+DRAIN SlurmdStartTime=None\n"
           "NodeName=c5 State=DRAINING SlurmdStartTime=2026-12-04T01:32:00\n")
    assert auth_plan.parse_nodes(out, utc) == {"c1": utc("2026-12-04T01:30:00"), "c2": None, "c3": None, "c4": None,
                                               "c5": utc("2026-12-04T01:32:00")}


def test_parse_jobs_expands_node_lists_and_keeps_unknown_starts_unknown():
    out = "67108865|2026-12-04T01:25:00|lc-a-c[1-2]\n12|N/A|\n\n"
    assert auth_plan.parse_jobs(out, utc, hostlist.expand) == [
        {"id": "67108865", "start": utc("2026-12-04T01:25:00"), "nodes": ["lc-a-c1", "lc-a-c2"]},
        {"id": "12", "start": None, "nodes": []},
    ]


# --- the first play's checks ------------------------------------------------------------------------------

def test_bad_inputs_name_the_variable_and_the_fix():
    assert "slurm_auth_type: 'kerberos'" in auth_plan.input_problems("kerberos", "")[0]
    assert "not base64" in auth_plan.input_problems("slurm", "@@@")[0]
    short = auth_plan.input_problems("slurm", base64.b64encode(b"x" * 8).decode())[0]
    assert short.startswith("slurm_auth_key_b64: the key is 8 bytes; give at least 32")
    own = auth_plan.input_problems("slurm", "", {"authtype": "auth/munge"}, {"CredType": "cred/munge"})
    assert own[0].startswith("slurm_config.authtype: the collection sets it from slurm_auth_type")
    assert own[1].startswith("slurmdbd_config.CredType:")
    assert auth_plan.input_problems("slurm", KEY, {"AuthInfo": "x"}) == []
    away = auth_plan.input_problems("slurm", "", key_source_host="ctl9", play_hosts=["ctl1", "c1"])
    assert away[0].startswith("slurm_auth_key_source_host: 'ctl9' is not a host of this run")
    assert auth_plan.input_problems("slurm", KEY, key_source_host="ctl9", play_hosts=["ctl1"]) == []
    assert auth_plan.input_problems("slurm", "", key_source_host="ctl1", play_hosts=["ctl1"]) == []
    assert auth_plan.input_problems("munge", "", key_source_host="ctl9", play_hosts=["ctl1"]) == []


def test_auth_slurm_needs_slurm_23_11():
    assert auth_plan.major_problems("slurm", "22.05")[0].startswith("slurm_auth_type: 'slurm' needs Slurm 23.11")
    assert auth_plan.major_problems("slurm", "23.11") == []
    assert auth_plan.major_problems("slurm", "26.05") == []
    assert auth_plan.major_problems("munge", "22.05") == []
    assert auth_plan.major_problems("slurm", "") == []


def test_every_cluster_of_the_inventory_has_one_type_and_one_key():
    inputs = {"auth_type": "slurm", "key_b64": "", "clusters": ["a", "a", "b"],
              "cluster_auth_types": ["slurm", "slurm", "munge"], "cluster_keys": ["", "", ""]}
    problems = slurm_auth_problems(inputs)
    assert len(problems) == 1 and "slurm_auth_type differs between the clusters (a: slurm, b: munge)" in problems[0]
    inputs.update(cluster_auth_types=["slurm", "slurm", "slurm"], cluster_keys=["", "", KEY])
    problems = slurm_auth_problems(inputs)
    assert len(problems) == 1 and problems[0].startswith("slurm_auth_key_b64 differs between the clusters (a, b)")
    assert KEY not in problems[0]
    inputs.update(cluster_keys=[KEY, KEY, KEY], key_b64=KEY)
    assert slurm_auth_problems(inputs) == []


# --- where sackd runs ----------------------------------------------------------------------------------

GROUPS = {"slurmctld": ["ctl"], "slurmd": ["c1"], "login": ["login1", "ctl"], "slurmdbd": ["ctl"], "slurmrestd": []}


def test_sackd_serves_login_nodes_under_auth_slurm_and_compute_nodes_on_the_way_back():
    to_slurm = auth_plan.plan("slurm", state("auth/munge"))
    back = auth_plan.plan("munge", state("auth/slurm"))
    done = auth_plan.plan("slurm")
    assert auth_sackd("login1", GROUPS, to_slurm) == "login" and auth_sackd("login1", GROUPS, done) == "login"
    assert auth_sackd("login1", GROUPS, back) is None
    assert auth_sackd("ctl", GROUPS, done) is None
    assert auth_sackd("c1", GROUPS, back) == "compute"
    assert auth_sackd("c1", GROUPS, to_slurm) is None and auth_sackd("c1", GROUPS, done) is None
    assert auth_sackd("c1", GROUPS, auth_plan.plan("munge")) is None
    assert "sackd" in host_components("c1", GROUPS, {}, False, None, back)
    assert "sackd" not in host_components("c1", GROUPS, {}, False, None, done)
    assert "sackd" in host_components("login1", GROUPS, {}, False, None, done)


# --- TLS ------------------------------------------------------------------------------------------------

def test_tls_is_refused_where_the_host_has_no_plugin_or_its_slurm_predates_it():
    config = {"tlstype": "tls/s2n"}
    paths = auth_plan.tls_plugin_paths(config)
    assert "/usr/lib/x86_64-linux-gnu/slurm-wlm/tls_s2n.so" in paths and "/usr/lib64/slurm/tls_s2n.so" in paths
    missing = auth_plan.tls_problems(config, "26.05", paths, "c1")
    assert missing and missing[0].startswith("slurm_config.TLSType: tls/s2n: c1 has no tls_s2n.so")
    assert auth_plan.tls_problems(config, "26.05", paths[1:], "c1") == []
    assert auth_plan.tls_problems(config, "24.11", [], "c1")[0].startswith(
        "slurm_config.TLSType: TLS needs Slurm 25.05 or later; c1 runs 24.11")
    assert auth_plan.tls_plugin_paths({"TLSType": "tls/s2n", "PluginDir": "/opt/slurm/lib:/x/"}) == [
        "/opt/slurm/lib/tls_s2n.so", "/x/tls_s2n.so"]
    for none in ({}, {"TLSType": "tls/none"}, {"TLSType": ""}):
        assert auth_plan.tls_plugin_paths(none) == [] and auth_plan.tls_problems(none, "22.05", [], "c1") == []
    inputs = {"auth_type": "munge", "config": config, "major": "26.05", "host": "c1", "paths_missing": paths}
    assert slurm_auth_problems(inputs) == missing
