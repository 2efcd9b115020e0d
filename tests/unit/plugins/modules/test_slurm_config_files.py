# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_config_files: a host's files in one step, the restart/reconfigure decision and its markers.

Runs the module on real files in a temporary directory (owner and group: the
user running the tests).
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import grp
import json
import os
import pwd

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import config_files
from ansible_collections.hybridhpc.slurm.plugins.modules import slurm_config_files

USER = pwd.getpwuid(os.getuid()).pw_name
GROUP = grp.getgrgid(os.getgid()).gr_name
CONF = "ClusterName=a\nSlurmctldHost=ctl1\nSlurmctldPort=6817\nSlurmdTimeout=60\n"


@pytest.fixture
def run_module(module_main):
    return lambda args, check_mode=False, diff=False: module_main(slurm_config_files.main, args, check_mode, diff)


def args(tmp_path, conf=CONF, gres="Name=gpu\n", secret=None):
    files = [
        {"dest": str(tmp_path / "etc" / "slurm.conf"), "content": conf, "owner": USER, "group": GROUP},
        {"dest": str(tmp_path / "etc" / "gres.conf"), "content": gres, "owner": USER, "group": GROUP},
    ]
    if secret is not None:
        files.append({"dest": str(tmp_path / "etc" / "slurmdbd.conf"), "secret_content": secret,
                      "owner": USER, "group": GROUP, "mode": "0600"})
    return {
        "directories": [{"path": str(tmp_path / "etc"), "owner": USER, "group": GROUP},
                        {"path": str(tmp_path / "state"), "owner": USER, "group": GROUP}],
        "files": files,
        "slurm_conf": str(tmp_path / "etc" / "slurm.conf"),
        "markers_dir": str(tmp_path / "state"),
    }


def markers(tmp_path):
    return sorted(p.name for p in (tmp_path / "state").iterdir() if p.name.startswith("hybridhpc-pending-"))


def accepted(tmp_path):
    """The accepted copies kept for a rollback: {file name: text}."""
    directory = tmp_path / "state" / "hybridhpc-accepted"
    return {p.name.rsplit("%", 1)[-1]: p.read_text() for p in directory.iterdir()} if directory.is_dir() else {}


def test_first_run_writes_everything_and_asks_for_a_restart(run_module, tmp_path):
    result = run_module(args(tmp_path))
    assert result["changed"] and result["restart_required"] and result["config_changed"]
    assert (tmp_path / "etc" / "slurm.conf").read_text() == CONF
    assert oct((tmp_path / "etc" / "gres.conf").stat().st_mode & 0o777) == "0o644"
    assert markers(tmp_path) == ["hybridhpc-pending-reconfigure", "hybridhpc-pending-restart"]


def test_a_second_run_changes_nothing_while_the_markers_still_say_what_is_pending(run_module, tmp_path):
    run_module(args(tmp_path))
    again = run_module(args(tmp_path))
    assert not again["changed"] and again["changed_files"] == []
    # A run that failed before the daemons applied the change: the markers keep it.
    assert again["restart_required"] and again["config_changed"]
    for marker in (tmp_path / "state").glob("hybridhpc-pending-*"):
        marker.unlink()
    clean = run_module(args(tmp_path))
    assert not clean["changed"] and not clean["restart_required"] and not clean["config_changed"]


def test_a_reconfigure_key_changes_without_a_restart(run_module, tmp_path):
    run_module(args(tmp_path))
    for marker in (tmp_path / "state").glob("hybridhpc-pending-*"):
        marker.unlink()
    result = run_module(args(tmp_path, conf=CONF.replace("SlurmdTimeout=60", "SlurmdTimeout=120")))
    assert result["changed_files"] == [str(tmp_path / "etc" / "slurm.conf")]
    assert result["config_changed"] and not result["restart_required"]
    assert markers(tmp_path) == ["hybridhpc-pending-reconfigure"]
    port = run_module(args(tmp_path, conf=CONF.replace("6817", "6900")))
    assert port["restart_required"]


def test_a_companion_file_change_is_a_reconfigure(run_module, tmp_path):
    run_module(args(tmp_path))
    for marker in (tmp_path / "state").glob("hybridhpc-pending-*"):
        marker.unlink()
    result = run_module(args(tmp_path, gres="Name=gpu Count=2\n"), diff=True)
    assert result["config_changed"] and not result["restart_required"]
    assert result["diff"] == [{"before_header": str(tmp_path / "etc" / "gres.conf"),
                               "after_header": str(tmp_path / "etc" / "gres.conf"),
                               "before": "Name=gpu\n", "after": "Name=gpu Count=2\n"}]


def test_the_file_a_change_replaces_is_kept_as_the_accepted_one(run_module, tmp_path):
    run_module(args(tmp_path))
    # A new host: nothing was accepted before.
    assert accepted(tmp_path) == {}
    for marker in (tmp_path / "state").glob("hybridhpc-pending-*"):
        marker.unlink()
    run_module(args(tmp_path, conf=CONF.replace("SlurmdTimeout=60", "SlurmdTimeout=120")))
    assert accepted(tmp_path) == {"slurm.conf": CONF}
    assert oct((tmp_path / "state" / "hybridhpc-accepted").stat().st_mode & 0o777) == "0o700"


def test_a_file_written_by_an_unfinished_run_never_becomes_the_accepted_one(run_module, tmp_path):
    run_module(args(tmp_path))
    for marker in (tmp_path / "state").glob("hybridhpc-pending-*"):
        marker.unlink()
    run_module(args(tmp_path, conf=CONF.replace("SlurmdTimeout=60", "SlurmdTimeout=120")))
    # The run stopped before the cluster applied it (its marker is still there): the next change keeps CONF.
    run_module(args(tmp_path, conf=CONF.replace("SlurmdTimeout=60", "SlurmdTimeout=180")))
    assert accepted(tmp_path) == {"slurm.conf": CONF}


def test_check_mode_writes_nothing(run_module, tmp_path):
    result = run_module(args(tmp_path), check_mode=True)
    assert result["changed"] and result["restart_required"]
    assert not (tmp_path / "etc").exists()


def test_secrets_are_written_0600_and_never_diffed(run_module, tmp_path):
    result = run_module(args(tmp_path, secret="StoragePass=hunter2\n"), diff=True)
    secret = tmp_path / "etc" / "slurmdbd.conf"
    assert secret.read_text() == "StoragePass=hunter2\n"
    assert oct(secret.stat().st_mode & 0o777) == "0o600"
    assert "hunter2" not in json.dumps(result)


def test_attributes_are_fixed_without_a_content_change(run_module, tmp_path):
    run_module(args(tmp_path))
    os.chmod(tmp_path / "etc" / "gres.conf", 0o600)
    result = run_module(args(tmp_path))
    assert result["changed"] and result["changed_files"] == []
    assert oct((tmp_path / "etc" / "gres.conf").stat().st_mode & 0o777) == "0o644"


def test_decide_without_markers_dir_inputs():
    assert config_files.decide([], "/etc/slurm/slurm.conf", CONF, CONF, []) == ([], False, False)
    assert config_files.decide(["/etc/slurm/gres.conf"], "/etc/slurm/slurm.conf", CONF, CONF, ["restart"]) == (
        ["reconfigure"], True, True)


def test_absent_files_are_removed_once_without_asking_the_daemons_for_anything(run_module, tmp_path):
    """A compute node that turns configless drops the copy file-based mode left; slurmctld serves it now."""
    etc = tmp_path / "etc"
    etc.mkdir()
    (etc / "slurm.conf").write_text(CONF)
    absent = {"absent": [str(etc / "slurm.conf"), str(etc / "gres.conf")], "markers_dir": str(tmp_path)}
    check = run_module(absent, check_mode=True, diff=True)
    assert check["changed"] and check["removed_files"] == [str(etc / "slurm.conf")]
    assert (etc / "slurm.conf").exists()
    first = run_module(absent)
    assert first["changed"] and not (etc / "slurm.conf").exists()
    assert not first["config_changed"] and not first["restart_required"]
    second = run_module(absent)
    assert not second["changed"] and second["removed_files"] == []


def test_modes_are_fixed_on_paths_that_exist_and_absent_ones_are_left_alone(run_module, tmp_path):
    device = tmp_path / "fuse"
    device.write_text("")
    os.chmod(device, 0o600)
    spec = {"modes": [{"path": str(device), "mode": "0666"}, {"path": str(tmp_path / "none"), "mode": "0666"}]}
    assert run_module(spec)["changed"]
    assert oct(device.stat().st_mode & 0o777) == "0o666"
    assert not (tmp_path / "none").exists()
    assert not run_module(spec)["changed"]


def test_logs_are_created_empty_once_and_their_content_never_touched(run_module, tmp_path):
    log = tmp_path / "power.log"
    spec = {"logs": [{"path": str(log), "owner": USER, "group": GROUP}]}
    check = run_module(spec, check_mode=True)
    assert check["changed"] and not log.exists()
    assert run_module(spec)["changed"]
    assert log.read_bytes() == b"" and oct(log.stat().st_mode & 0o777) == "0o640"
    log.write_text("resume cloud-c1\n")
    assert not run_module(spec)["changed"]
    os.chmod(log, 0o666)
    assert run_module(spec)["changed"]
    assert oct(log.stat().st_mode & 0o777) == "0o640" and log.read_text() == "resume cloud-c1\n"


# The daemon's unit, through a stand-in for systemctl on PATH: it keeps the
# unit's state in a file and logs the verbs it was given (the real systemd is
# exercised by the molecule scenarios: munge and slurmd on every lab node).
SYSTEMCTL = """#!/usr/bin/env python3
import json, os, sys
state_file, log_file = sys.argv[0] + ".state", sys.argv[0] + ".log"
state = json.load(open(state_file))
args = [a for a in sys.argv[1:] if a != "--"]
# One state for every unit, or each unit its own under "units"; a verb may name several units.
units = [state.get("units", {}).get(name, state) for name in args[1:]] or [state]
if args[0] == "show":
    # As systemd's: one block per unit asked, in that order, an empty line between.
    names = [a for a in args[1:] if not a.startswith("--property=")]
    blocks = ["\\n".join("%s=%s" % kv for kv in state.get("units", {}).get(name, state).items() if kv[0] != "units")
              for name in names]
    print("\\n\\n".join(blocks))
    open(sys.argv[0] + ".shows", "a").write(" ".join(names) + "\\n")
    sys.exit(0)
open(log_file, "a").write(" ".join(args) + "\\n")
open(sys.argv[0] + ".sysv", "a").write("%s %s\\n" % (args[0], os.environ.get("SYSTEMCTL_SKIP_SYSV", "-")))
if state.get("fail") == args[0]:
    print("Job for %s failed." % args[1], file=sys.stderr)
    sys.exit(1)
for unit in units:
    if args[0] in ("start", "restart"):
        unit["ActiveState"] = "active"
    if args[0] == "enable":
        unit["UnitFileState"] = "enabled"
# As systemd's: an enable reloads the units once it made its links.
if args[0] in ("daemon-reload", "enable"):
    for unit in [state] + list(state.get("units", {}).values()):
        unit["NeedDaemonReload"] = "no"
        unit["DropInPaths"] = unit.get("DropInPaths_on_disk", unit.get("DropInPaths", ""))
json.dump(state, open(state_file, "w"))
"""


@pytest.fixture
def systemctl(tmp_path, monkeypatch):
    """``set(**unit state)`` and ``verbs()``: the stand-in's state and the verbs it ran."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tool = bin_dir / "systemctl"
    tool.write_text(SYSTEMCTL)
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ.get("PATH", "")))

    class Unit:
        @staticmethod
        def set(**state):
            (bin_dir / "systemctl.state").write_text(json.dumps(state))

        @staticmethod
        def verbs():
            log = bin_dir / "systemctl.log"
            return log.read_text().splitlines() if log.exists() else []

        @staticmethod
        def skip_sysv():
            """Each verb run, with the SYSTEMCTL_SKIP_SYSV it ran with ("-": not set)."""
            log = bin_dir / "systemctl.sysv"
            return log.read_text().splitlines() if log.exists() else []

        @staticmethod
        def shows():
            """The units of each ``systemctl show`` run so far, a list per run."""
            log = bin_dir / "systemctl.shows"
            return [line.split() for line in log.read_text().splitlines()] if log.exists() else []

    Unit.set(LoadState="loaded", ActiveState="inactive", UnitFileState="disabled")
    return Unit


KEY = "c2VjcmV0AAEC/w=="  # bytes that are not UTF-8 text, as a MUNGE key's


def key_args(tmp_path, key=KEY, **service):
    return {"files": [{"dest": str(tmp_path / "munge.key"), "secret_content_b64": key,
                       "owner": USER, "group": GROUP, "mode": "0400"}],
            "service": dict({"name": "munge"}, **service)}


def test_the_daemon_starts_once_its_files_are_in_place_then_nothing_happens(run_module, tmp_path, systemctl):
    first = run_module(key_args(tmp_path))
    assert first["changed"] and first["service_actions"] == ["enable", "start"]
    assert (tmp_path / "munge.key").read_bytes() == b"secret\x00\x01\x02\xff"
    assert oct((tmp_path / "munge.key").stat().st_mode & 0o777) == "0o400"
    again = run_module(key_args(tmp_path))
    assert not again["changed"] and again["service_actions"] == []
    assert systemctl.verbs() == ["enable munge", "start munge"]
    # The enable without Debian's SysV hook (update-rc.d); nothing else is told to skip it.
    assert systemctl.skip_sysv() == ["enable 1", "start -"]


def test_a_changed_file_restarts_the_running_daemon_and_check_mode_only_says_so(run_module, tmp_path, systemctl):
    run_module(key_args(tmp_path))
    new_key = "bmV3IGtleQ=="
    check = run_module(key_args(tmp_path, key=new_key), check_mode=True, diff=True)
    assert check["changed"] and check["service_actions"] == ["restart"] and "diff" not in check
    assert systemctl.verbs() == ["enable munge", "start munge"]
    assert (tmp_path / "munge.key").read_bytes() == b"secret\x00\x01\x02\xff"
    result = run_module(key_args(tmp_path, key=new_key))
    assert result["service_actions"] == ["restart"] and (tmp_path / "munge.key").read_bytes() == b"new key"
    assert systemctl.verbs()[-1] == "restart munge"


def test_a_restart_asked_for_happens_without_a_file_change(run_module, tmp_path, systemctl):
    run_module(key_args(tmp_path))
    result = run_module(key_args(tmp_path, state="restarted", restart_on_change=False))
    assert result["changed"] and result["service_actions"] == ["restart"]


def test_the_secret_never_shows_and_a_failed_start_says_which_verb(run_module, tmp_path, systemctl):
    systemctl.set(LoadState="loaded", ActiveState="inactive", UnitFileState="enabled", fail="start")
    result = run_module(key_args(tmp_path))
    assert result["failed"] and result["msg"] == "systemctl start munge failed: Job for munge failed."
    assert KEY not in json.dumps(result)


def test_a_started_daemon_is_waited_for_on_its_port_and_one_left_running_is_not(run_module, tmp_path, systemctl):
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        started = run_module(key_args(tmp_path, wait_port=port, wait_timeout=5))
        assert started["service_actions"] == ["enable", "start"] and not started.get("failed")
    # The port closed: a run that starts nothing does not wait...
    assert run_module(key_args(tmp_path, wait_port=port, wait_timeout=1))["service_actions"] == []
    # ...one that restarts the daemon does, and fails naming the unit and where to look.
    failed = run_module(key_args(tmp_path, key="bmV3IGtleQ==", wait_port=port, wait_timeout=1))
    assert failed["failed"] and failed["service_actions"] == ["restart"]
    assert failed["msg"] == "munge started but nothing listens on port %d after 1 s: see journalctl -u munge" % port


def test_an_unknown_unit_fails_but_check_mode_on_a_new_host_says_it_would_start(run_module, tmp_path, systemctl):
    systemctl.set(LoadState="not-found", ActiveState="inactive", UnitFileState="")
    assert run_module(key_args(tmp_path), check_mode=True)["service_actions"] == ["enable", "start"]
    failed = run_module(key_args(tmp_path))
    assert failed["failed"] and "install the package that brings it first" in failed["msg"]
    assert systemctl.verbs() == []


def test_a_secret_that_is_not_base64_fails_without_showing_it(run_module, tmp_path):
    result = run_module({"files": [{"dest": str(tmp_path / "munge.key"), "secret_content_b64": "not base64!"}]})
    assert result["failed"] and result["msg"] == "files: secret_content_b64 of %s is not valid base64" % (
        tmp_path / "munge.key")


def test_a_start_or_restart_applies_the_pending_markers_and_nothing_else_does(run_module, tmp_path, systemctl):
    state = tmp_path / "state"
    state.mkdir()
    for name in ("restart", "reconfigure"):
        (state / ("hybridhpc-pending-" + name)).touch()
    service = {"name": "slurmd", "applied_markers_dir": str(state)}
    run_module({"service": dict(service, state="restarted")}, check_mode=True)
    assert markers(tmp_path) == ["hybridhpc-pending-reconfigure", "hybridhpc-pending-restart"]
    systemctl.set(LoadState="loaded", ActiveState="active", UnitFileState="enabled")
    assert run_module({"service": service})["service_actions"] == []
    assert markers(tmp_path) == ["hybridhpc-pending-reconfigure", "hybridhpc-pending-restart"]
    assert run_module({"service": dict(service, state="restarted")})["service_actions"] == ["restart"]
    assert markers(tmp_path) == []
    (state / "hybridhpc-pending-reconfigure").touch()
    systemctl.set(LoadState="loaded", ActiveState="failed", UnitFileState="enabled")
    assert run_module({"service": service})["service_actions"] == ["start"]
    assert markers(tmp_path) == []


def test_a_changed_drop_in_makes_systemd_reload_before_the_restart(run_module, tmp_path, systemctl):
    systemctl.set(LoadState="loaded", ActiveState="active", UnitFileState="enabled", NeedDaemonReload="yes")
    dropin = {"dest": str(tmp_path / "override.conf"), "content": "[Service]\nUser=slurmrestd\n",
              "owner": USER, "group": GROUP}
    result = run_module({"files": [dropin], "service": {"name": "slurmrestd"}})
    assert result["service_actions"] == ["daemon-reload", "restart"]
    assert systemctl.verbs() == ["daemon-reload", "restart slurmrestd"]
    assert run_module({"files": [dropin], "service": {"name": "slurmrestd"}})["service_actions"] == []


def test_a_drop_in_systemd_never_loaded_is_loaded_and_the_daemon_restarted(run_module, tmp_path, systemctl):
    dropin = str(tmp_path / "override.conf")
    systemctl.set(LoadState="loaded", ActiveState="active", UnitFileState="enabled", NeedDaemonReload="no",
                  DropInPaths="", DropInPaths_on_disk=dropin)
    service = {"name": "slurmrestd", "drop_ins": [dropin]}
    assert run_module({"service": service})["service_actions"] == ["daemon-reload", "restart"]
    assert run_module({"service": service})["service_actions"] == []


def test_a_new_secret_file_is_never_readable_by_others(run_module, tmp_path, monkeypatch):
    """Between the write and the owner/mode step, a new file keeps 0600 (atomic_move would give it the umask's 0644)."""
    from ansible.module_utils import basic

    modes = {}
    set_attributes = basic.AnsibleModule.set_fs_attributes_if_different

    def record(self, file_args, changed, *rest, **kwargs):
        path = file_args["path"]
        if os.path.isfile(path):
            modes.setdefault(path, os.stat(path).st_mode & 0o777)
        return set_attributes(self, file_args, changed, *rest, **kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "set_fs_attributes_if_different", record)
    umask = os.umask(0o022)
    try:
        result = run_module(args(tmp_path, secret="StoragePass=secret\n"))
    finally:
        os.umask(umask)
    secret = str(tmp_path / "etc" / "slurmdbd.conf")
    assert result["changed"]
    assert modes[secret] == 0o600
    assert os.stat(secret).st_mode & 0o777 == 0o600


def test_accounts_come_first_and_an_account_as_wanted_changes_nothing(run_module, tmp_path):
    me = pwd.getpwuid(os.getuid())
    account = {"name": USER, "uid": me.pw_uid, "gid": me.pw_gid, "home": me.pw_dir, "shell": me.pw_shell}
    if grp.getgrgid(me.pw_gid).gr_name != USER:
        pytest.skip("the test user's group is not named after it")
    first = run_module(dict(args(tmp_path), accounts=[account]))
    assert first["account_commands"] == []
    again = run_module(dict(args(tmp_path), accounts=[account]))
    assert not again["changed"] and again["account_commands"] == []


def test_a_missing_account_is_planned_in_check_mode_and_makes_the_step_changed(run_module, tmp_path):
    first = run_module(args(tmp_path))
    assert first["changed"]
    account = {"name": "hybridhpc-no-such-user", "uid": 64999, "gid": 64999}
    result = run_module(dict(args(tmp_path), accounts=[account]), check_mode=True)
    assert result["changed"]
    assert [argv[0] for argv in result["account_commands"]] == ["groupadd", "useradd"]
    assert ["--uid", "64999"] == result["account_commands"][1][2:4]


def test_more_units_run_after_the_service_with_one_enable_for_all(run_module, tmp_path, systemctl):
    idle = {"LoadState": "loaded", "ActiveState": "inactive", "UnitFileState": "disabled"}
    running = {"LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled"}
    systemctl.set(LoadState="loaded", units={"munge": dict(running), "power.path": dict(idle),
                                             "power.timer": dict(running)})
    spec = dict(key_args(tmp_path), services=[{"name": "power.path"}, {"name": "power.timer"}])
    first = run_module(spec)
    assert first["unit_actions"] == {"munge": ["restart"], "power.path": ["enable", "start"],
                                     "power.timer": ["restart"]}
    assert first["service_actions"] == ["restart"]
    # One enable (one reload of systemd) before any start; then each unit in the step's order.
    assert systemctl.verbs() == ["enable power.path", "restart munge", "start power.path", "restart power.timer"]
    assert systemctl.shows() == [["munge", "power.path", "power.timer"]]
    again = run_module(spec)
    assert not again["changed"] and again["unit_actions"] == {"munge": [], "power.path": [], "power.timer": []}
    units_only = run_module({"services": [{"name": "power.timer", "state": "restarted"}]})
    assert units_only["service_actions"] == [] and units_only["unit_actions"] == {"power.timer": ["restart"]}


def test_another_steps_daemon_is_enabled_with_the_service_in_one_enable(run_module, tmp_path, systemctl):
    idle = {"LoadState": "loaded", "ActiveState": "inactive", "UnitFileState": "disabled"}
    systemctl.set(LoadState="loaded", units={"munge": dict(idle), "slurmd": dict(idle)})
    spec = dict(key_args(tmp_path), services=[{"name": "slurmd", "state": "enabled"}])
    first = run_module(spec)
    assert first["changed"] and first["unit_actions"] == {"munge": ["enable", "start"], "slurmd": ["enable"]}
    assert systemctl.verbs() == ["enable munge slurmd", "start munge"]
    assert systemctl.skip_sysv() == ["enable 1", "start -"]
    again = run_module(spec)
    assert not again["changed"] and again["unit_actions"] == {"munge": [], "slurmd": []}
    # Disabled behind the collection's back: the step enables it again, and starts nothing.
    systemctl.set(LoadState="loaded", units={"munge": {"LoadState": "loaded", "ActiveState": "active",
                                                       "UnitFileState": "enabled"}, "slurmd": dict(idle)})
    drifted = run_module(spec)
    assert drifted["changed"] and drifted["unit_actions"] == {"munge": [], "slurmd": ["enable"]}
    # Not installed yet (its package comes with its own role on this host): left to that role's step.
    systemctl.set(LoadState="loaded", units={"munge": {"LoadState": "loaded", "ActiveState": "active",
                                                       "UnitFileState": "enabled"},
                                             "slurmd": {"LoadState": "not-found", "ActiveState": "inactive"}})
    assert run_module(spec)["unit_actions"] == {"munge": [], "slurmd": []}


def test_a_bad_unit_entry_is_named_before_anything_runs(run_module, tmp_path, systemctl):
    conf = tmp_path / "power.json"
    result = run_module({"files": [{"dest": str(conf), "content": "{}"}],
                         "services": [{"name": "power.path"}, {"name": "power.timer", "stat": "restarted"}]})
    assert result["failed"] and result["msg"].startswith("services[1] (power.timer): ") and "stat" in result["msg"]
    assert systemctl.verbs() == [] and not conf.exists()


# Drift: after a run, each thing the step manages, broken alone, makes the next
# run change it (or report what is pending), and the run after that changes
# nothing.
def full_step(tmp_path):
    spec = key_args(tmp_path)
    spec["files"].append({"dest": str(tmp_path / "etc" / "slurm.conf"), "content": CONF, "owner": USER, "group": GROUP})
    spec.update(directories=[{"path": str(tmp_path / "etc"), "owner": USER, "group": GROUP},
                             {"path": str(tmp_path / "state"), "owner": USER, "group": GROUP}],
                absent=[str(tmp_path / "etc" / "stale.conf")], slurm_conf=str(tmp_path / "etc" / "slurm.conf"),
                markers_dir=str(tmp_path / "state"), service=dict(spec["service"], applied_markers_dir=str(tmp_path / "state")))
    return spec


def nothing_to_do(result):
    return not (result["changed"] or result["restart_required"] or result["config_changed"])


def test_a_step_that_ran_does_nothing_until_the_host_drifts(run_module, tmp_path, systemctl):
    assert run_module(full_step(tmp_path))["changed"]
    assert nothing_to_do(run_module(full_step(tmp_path)))
    # Each drift alone, then put back by the step itself.
    drifts = [
        lambda: (tmp_path / "etc" / "slurm.conf").write_text(CONF + "# edited\n"),
        lambda: os.chmod(tmp_path / "munge.key", 0o644),
        (tmp_path / "munge.key").unlink,
        lambda: (tmp_path / "etc" / "stale.conf").write_text("x"),
        lambda: os.chmod(tmp_path / "etc", 0o700),
        lambda: (tmp_path / "state" / "hybridhpc-pending-reconfigure").write_text(""),
        lambda: systemctl.set(LoadState="loaded", ActiveState="inactive", UnitFileState="enabled"),
        lambda: systemctl.set(LoadState="loaded", ActiveState="active", UnitFileState="disabled"),
    ]
    for number, drift in enumerate(drifts):
        drift()
        assert not nothing_to_do(run_module(full_step(tmp_path), check_mode=True)), "drift %d went unnoticed" % number
        assert not nothing_to_do(run_module(full_step(tmp_path))), "drift %d went unnoticed" % number
        if number == 5:
            (tmp_path / "state" / "hybridhpc-pending-reconfigure").unlink()
        assert nothing_to_do(run_module(full_step(tmp_path))), "drift %d: still changing after the step ran" % number


def test_an_exclusive_directory_keeps_only_the_listed_files_and_a_dropped_one_is_a_reconfigure(run_module, tmp_path):
    scripts = tmp_path / "etc" / "scripts"
    step = args(tmp_path)
    step["directories"].append({"path": str(scripts), "owner": USER, "group": GROUP, "exclusive": True})
    prolog = {"dest": str(scripts / "prolog-10-a.sh"), "content": "#!/bin/sh\ntrue\n", "mode": "0755",
              "owner": USER, "group": GROUP}
    step["files"].append(prolog)
    run_module(step)
    assert oct((scripts / "prolog-10-a.sh").stat().st_mode & 0o777) == "0o755"
    for name in config_files.MARKERS:
        os.unlink(config_files.marker_path(str(tmp_path / "state"), name))
    assert not run_module(step)["changed"]
    step["files"].remove(prolog)
    result = run_module(step)
    assert result["changed"] and result["removed_files"] == [str(scripts / "prolog-10-a.sh")]
    assert not (scripts / "prolog-10-a.sh").exists() and markers(tmp_path) == ["hybridhpc-pending-reconfigure"]
    # Kept with its mode, for a rollback to bring back runnable.
    kept = config_files.accepted_path(str(tmp_path / "state"), str(scripts / "prolog-10-a.sh"))
    assert open(kept).read() == "#!/bin/sh\ntrue\n" and oct(os.stat(kept).st_mode & 0o777) == "0o755"


def test_a_retired_file_goes_only_when_the_collection_wrote_it(run_module, tmp_path):
    run_module(args(tmp_path))
    ours = tmp_path / "etc" / "topology.conf"
    ours.write_text("# Managed by Ansible (hybridhpc.slurm): slurm_topology; edits are overwritten\nSwitchName=s1 Nodes=c1\n")
    theirs = tmp_path / "etc" / "plugstack.conf"
    theirs.write_text("required /usr/lib/spank/x.so\n")
    step = dict(args(tmp_path), retired=[str(ours), str(theirs), str(tmp_path / "etc" / "helpers.conf")])
    result = run_module(step)
    assert result["removed_files"] == [str(ours)] and not ours.exists() and theirs.exists()
    assert "hybridhpc-pending-reconfigure" in markers(tmp_path)
    assert not run_module(step)["removed_files"]


def test_a_job_container_conf_change_asks_for_a_restart(run_module, tmp_path):
    step = args(tmp_path)
    step["files"].append({"dest": str(tmp_path / "etc" / "job_container.conf"), "content": "BasePath=/a\n",
                          "owner": USER, "group": GROUP})
    run_module(step)
    for name in config_files.MARKERS:
        os.unlink(config_files.marker_path(str(tmp_path / "state"), name))
    step["files"][-1]["content"] = "BasePath=/b\n"
    result = run_module(step)
    assert result["restart_required"] and markers(tmp_path) == ["hybridhpc-pending-reconfigure", "hybridhpc-pending-restart"]


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another owner needs root")
def test_a_removed_file_is_kept_with_its_owner_and_mode_until_the_cluster_runs_without_it(run_module, tmp_path):
    """slurm.key removed on the way back to MUNGE: a rollback to the configuration that needs it needs it back."""
    etc = tmp_path / "etc"
    etc.mkdir()
    key = etc / "slurm.key"
    key.write_text("key-bytes\n")
    os.chown(key, 64030, 64030)
    os.chmod(key, 0o600)
    absent = {"absent": [str(key)], "markers_dir": str(tmp_path / "state")}
    (tmp_path / "state").mkdir()
    run_module(absent)
    kept = config_files.accepted_path(str(tmp_path / "state"), str(key))
    assert not key.exists() and open(kept).read() == "key-bytes\n"
    assert oct(os.stat(kept).st_mode & 0o777) == "0o600" and os.stat(kept).st_uid == 64030
    # A run interrupted before the cluster applied the removal keeps the copy.
    (tmp_path / "state" / (config_files.MARKER_PREFIX + "reconfigure")).touch()
    run_module(absent)
    assert os.path.exists(kept)
    # Applied (no marker left): the cluster runs without it, the retired key's copy goes.
    (tmp_path / "state" / (config_files.MARKER_PREFIX + "reconfigure")).unlink()
    assert not run_module(absent)["changed"]
    assert not os.path.exists(kept)
