# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""systemd_unit: what a daemon's unit needs once its files are written."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import systemd_unit

RUNNING = {"LoadState": "loaded", "ActiveState": "active", "UnitFileState": "enabled"}
STOPPED = {"LoadState": "loaded", "ActiveState": "inactive", "UnitFileState": "disabled"}


def actions(state, enabled=True, wanted="started", files_changed=False, restart_on_change=True, check_mode=False):
    return systemd_unit.unit_actions("munge", state, enabled, wanted, files_changed, restart_on_change, check_mode)


def test_parse_show_reads_key_value_lines():
    text = "LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n\nnoise\n"
    assert systemd_unit.parse_show(text) == RUNNING


def test_show_reads_only_the_properties_the_decision_needs():
    assert systemd_unit.show_command("/bin/systemctl", "munge") == [
        "/bin/systemctl", "show", "--property=LoadState,ActiveState,UnitFileState,NeedDaemonReload,DropInPaths", "--", "munge"]


def test_show_asks_several_units_in_one_run():
    assert systemd_unit.show_command("/bin/systemctl", "munge", "slurmd")[-3:] == ["--", "munge", "slurmd"]


def test_parse_show_units_takes_each_block_for_the_unit_asked_in_its_place():
    text = ("LoadState=loaded\nActiveState=active\nUnitFileState=enabled\n\n"
            "LoadState=loaded\nActiveState=inactive\nUnitFileState=disabled\n")
    assert systemd_unit.parse_show_units(text, ["munge", "slurmd"]) == {"munge": RUNNING, "slurmd": STOPPED}
    # Not one block per unit: no answer rather than a state given to the wrong unit.
    assert systemd_unit.parse_show_units(text, ["munge"]) is None
    assert systemd_unit.parse_show_units(text, ["munge", "slurmd", "sackd"]) is None


@pytest.mark.parametrize("state, kwargs, expected", [
    # A converged node: nothing at all (the no-op of every run).
    (RUNNING, {}, []),
    # A stopped, disabled daemon: enabled first, then started.
    (STOPPED, {}, ["enable", "start"]),
    # Its boot setting left alone when enabled is not asked.
    (STOPPED, {"enabled": None}, ["start"]),
    (dict(STOPPED, UnitFileState="static"), {}, ["start"]),
    # A daemon still starting counts as running, as for systemd_service.
    (dict(RUNNING, ActiveState="activating"), {}, []),
    # Its files changed: it reads them only at start.
    (RUNNING, {"files_changed": True}, ["restart"]),
    (RUNNING, {"files_changed": True, "restart_on_change": False}, []),
    # Stopped with new files: a start reads them, no restart on top.
    (dict(STOPPED, UnitFileState="enabled"), {"files_changed": True}, ["start"]),
    # A restart asked for (a change reconfigure cannot apply): whatever its state.
    (RUNNING, {"wanted": "restarted"}, ["restart"]),
    (STOPPED, {"wanted": "restarted"}, ["enable", "restart"]),
    # A drop-in written since systemd last read the unit: reloaded first, then (re)started with it.
    (dict(RUNNING, NeedDaemonReload="yes"), {"files_changed": True}, ["daemon-reload", "restart"]),
    # The enable reloads systemd's units itself: no second reload.
    (dict(STOPPED, NeedDaemonReload="yes"), {}, ["enable", "start"]),
    (dict(STOPPED, NeedDaemonReload="yes", UnitFileState="enabled"), {}, ["daemon-reload", "start"]),
    (dict(RUNNING, NeedDaemonReload="no"), {}, []),
    # Check mode on a host whose package this run would install: it would be enabled and started.
    ({"LoadState": "not-found", "ActiveState": "inactive"}, {"check_mode": True}, ["enable", "start"]),
])
def test_unit_actions(state, kwargs, expected):
    assert actions(state, **kwargs) == (expected, None)


def test_an_unknown_unit_fails_outside_check_mode_naming_the_fix():
    verbs, error = actions({"LoadState": "not-found", "ActiveState": "inactive"})
    assert verbs == [] and "unit munge is not loaded (LoadState=not-found)" in error and "install the package" in error


def test_a_masked_unit_fails_naming_the_fix():
    verbs, error = actions(dict(RUNNING, UnitFileState="masked", ActiveState="inactive"))
    assert verbs == [] and "systemctl unmask munge" in error


def test_an_unknown_state_is_refused():
    assert actions(RUNNING, wanted="reloaded")[1] == (
        "service.state: 'reloaded' is not one of started, restarted, enabled, stopped")


@pytest.mark.parametrize("state, expected", [
    # A daemon the host no longer needs (munged once the cluster speaks auth/slurm alone): disabled, then stopped.
    (RUNNING, ["disable", "stop"]),
    (dict(RUNNING, UnitFileState="static"), ["stop"]),
    (dict(RUNNING, ActiveState="activating"), ["disable", "stop"]),
    (dict(STOPPED, UnitFileState="enabled"), ["disable"]),
    (STOPPED, []),
    # Not installed: nothing to stop, in check mode too.
    ({"LoadState": "not-found", "ActiveState": "inactive"}, []),
])
def test_a_unit_wanted_stopped_is_disabled_and_stopped(state, expected):
    for check_mode in (False, True):
        for enabled in (True, False):
            assert systemd_unit.unit_actions("munge", state, enabled, "stopped", True, True, check_mode) == (expected, None)


def test_a_stop_and_a_disable_run_in_the_steps_order():
    planned = [("slurmd", ["restart"]), ("sackd", ["disable", "stop"])]
    assert systemd_unit.step_commands(planned) == [("restart", ["slurmd"]), ("disable", ["sackd"]), ("stop", ["sackd"])]


@pytest.mark.parametrize("state, enabled, expected", [
    # Another step's daemon: enabled here at most, never started, restarted or reloaded.
    (dict(STOPPED, UnitFileState="disabled"), True, ["enable"]),
    (dict(STOPPED, UnitFileState="disabled", NeedDaemonReload="yes"), True, ["enable"]),
    (dict(STOPPED, UnitFileState="enabled", NeedDaemonReload="yes"), True, []),
    (dict(RUNNING, UnitFileState="disabled"), True, ["enable"]),
    (dict(RUNNING, UnitFileState="disabled"), None, []),
    (dict(RUNNING, UnitFileState="static"), True, []),
    # Not installed yet, or masked: the step that runs it says so, not this one.
    ({"LoadState": "not-found", "ActiveState": "inactive"}, True, []),
    (dict(STOPPED, UnitFileState="masked"), True, []),
])
def test_a_unit_wanted_enabled_is_only_enabled(state, enabled, expected):
    for check_mode in (False, True):
        assert systemd_unit.unit_actions("slurmd", state, enabled, "enabled", True, True, check_mode) == (expected, None)


@pytest.mark.parametrize("planned, expected", [
    # munge's step on a new compute node: one enable for munge and slurmd (one reload), then munge starts.
    ([("munge", ["enable", "start"]), ("slurmd", ["enable"])], [("enable", ["munge", "slurmd"]), ("start", ["munge"])]),
    # The enable's reload serves a unit whose files changed on disk: no daemon-reload of its own.
    ([("munge", ["daemon-reload", "restart"]), ("power.path", ["enable", "start"])],
     [("enable", ["power.path"]), ("restart", ["munge"]), ("start", ["power.path"])]),
    # Without an enable, one daemon-reload for every unit that asks for it.
    ([("a", ["daemon-reload", "restart"]), ("b", ["daemon-reload", "start"])],
     [("daemon-reload", []), ("restart", ["a"]), ("start", ["b"])]),
    ([("munge", []), ("slurmd", [])], []),
    ([], []),
])
def test_step_commands_enable_every_unit_at_once_then_start_each_in_order(planned, expected):
    assert systemd_unit.step_commands(planned) == expected


DROP_IN = "/etc/systemd/system/slurmrestd.service.d/override.conf"


@pytest.mark.parametrize("state, expected", [
    # systemd 252 started the unit before the drop-in's directory existed and does not say NeedDaemonReload.
    (dict(RUNNING, NeedDaemonReload="no", DropInPaths=""), ["daemon-reload", "restart"]),
    (dict(STOPPED, NeedDaemonReload="no"), ["enable", "start"]),
    (dict(STOPPED, NeedDaemonReload="no", UnitFileState="enabled"), ["daemon-reload", "start"]),
    # Loaded with it: nothing to do.
    (dict(RUNNING, NeedDaemonReload="no", DropInPaths="/run/x.conf " + DROP_IN), []),
])
def test_a_drop_in_systemd_has_not_loaded_makes_it_reload_and_the_daemon_restart(state, expected):
    assert systemd_unit.unit_actions("slurmrestd", state, True, "started", False, True, False, [DROP_IN]) == (expected, None)


def test_wait_until_listening_returns_once_the_port_accepts_and_gives_up_at_the_deadline():
    import socket

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        assert systemd_unit.wait_until_listening(port, timeout=5)
    # Nothing listens there any more: polled until the (fake) clock passes the deadline.
    now = [0.0]
    sleeps = []

    def sleep(seconds):
        sleeps.append(seconds)
        now[0] += seconds

    assert not systemd_unit.wait_until_listening(port, timeout=1, clock=lambda: now[0], sleep=sleep)
    assert 9 <= len(sleeps) <= 11
