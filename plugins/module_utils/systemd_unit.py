# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a daemon's unit needs after its files were written: enable, start or restart.

slurm_config_files writes a daemon's files and keeps the daemon running in the
same module run (one round trip where a file task and a service task took two
on every host and run). It reads the unit's state with one ``systemctl show``;
the decision is here, pure: a daemon whose files changed restarts (it reads
them only at start), a stopped one starts, and a restart the caller asks for
(a change ``scontrol reconfigure`` cannot apply) happens whatever its state.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import socket
import time

SHOW_PROPERTIES = ("LoadState", "ActiveState", "UnitFileState", "NeedDaemonReload", "DropInPaths")

# As ansible.builtin.systemd_service: a unit on its way up counts as running.
RUNNING = ("active", "activating", "reloading")

# States `systemctl is-enabled` answers 0 for: nothing to enable.
ENABLED = ("enabled", "enabled-runtime", "static", "alias", "indirect", "generated", "transient")


def show_command(systemctl, *names):
    return [systemctl, "show", "--property=" + ",".join(SHOW_PROPERTIES), "--"] + list(names)


def parse_show(text):
    """``systemctl show --property=...`` output as a dict (``Key=value`` lines)."""
    state = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            state[key.strip()] = value.strip()
    return state


def parse_show_units(text, names):
    """``systemctl show`` output for ``names`` as ``{name: parse_show dict}``; None when it is not one block per name.

    systemctl prints one block of ``Key=value`` lines per unit, in the order
    asked, with an empty line between blocks (LoadState always has a value).
    """
    blocks = [block for block in text.split("\n\n") if block.strip()]
    if len(blocks) != len(names):
        return None
    return dict(zip(names, (parse_show(block) for block in blocks)))


def missing_drop_ins(state, drop_ins):
    """The drop-ins of ``drop_ins`` that systemd has not loaded for the unit (its DropInPaths)."""
    loaded = set(state.get("DropInPaths", "").split())
    return [path for path in drop_ins if path not in loaded]


STATES = ("started", "restarted", "enabled", "stopped")


def unit_actions(name, state, enabled, wanted, files_changed, restart_on_change, check_mode, drop_ins=()):
    """The ``systemctl`` verbs to run, in order, and an error (None when there is none).

    state: parse_show's dict; enabled: True to enable the unit, None to leave
    it as it is; wanted: ``started``, ``restarted``, ``enabled`` or ``stopped``; files_changed: this run
    changed a file of the daemon; restart_on_change: restart a running daemon
    whose files changed; drop_ins: drop-in files the unit must run with. A
    unit systemd does not know is an error, except in
    check mode, where the package that brings it may be one this run would
    install: it would then be enabled and started.

    ``enabled`` is another step's daemon, enabled here at most (with the
    step's own unit, in one ``systemctl enable``: one reload of systemd for
    both): it is neither started nor reloaded, and a unit not loaded or
    masked is left to the step that runs it, which says what is wrong.

    ``stopped`` is a daemon the host no longer needs (munged once every
    daemon of the cluster speaks auth/slurm): disabled at boot and stopped
    (``enabled`` is not read). A unit systemd does not know needs nothing.
    """
    if wanted not in STATES:
        return [], "service.state: %r is not one of %s" % (wanted, ", ".join(STATES))
    if wanted == "stopped":
        if state.get("LoadState") != "loaded":
            return [], None
        actions = ["disable"] if state.get("UnitFileState") in ("enabled", "enabled-runtime") else []
        return actions + (["stop"] if state.get("ActiveState") in RUNNING else []), None
    if wanted == "enabled":
        if state.get("LoadState") != "loaded" or state.get("UnitFileState") == "masked":
            return [], None
        return (["enable"] if enabled and state.get("UnitFileState") not in ENABLED else []), None
    if state.get("LoadState") != "loaded":
        if check_mode:
            return (["enable"] if enabled else []) + ["start"], None
        return [], "unit %s is not loaded (LoadState=%s): install the package that brings it first" % (
            name, state.get("LoadState") or "unknown")
    if state.get("UnitFileState") == "masked":
        return [], "unit %s is masked: unmask it (systemctl unmask %s) or let the inventory stop managing it" % (name, name)
    unloaded = missing_drop_ins(state, drop_ins)
    # `systemctl enable` reloads systemd's units once it made the links: the
    # reload a changed unit or new drop-in needs, without a second one (each
    # costs systemd a read of every unit file).
    if enabled and state.get("UnitFileState") not in ENABLED:
        actions = ["enable"]
    else:
        actions = ["daemon-reload"] if state.get("NeedDaemonReload") == "yes" or unloaded else []
    running = state.get("ActiveState") in RUNNING
    if wanted == "restarted" or (running and ((files_changed and restart_on_change) or unloaded)):
        actions.append("restart")
    elif not running:
        actions.append("start")
    return actions, None


def step_commands(planned):
    """The ``systemctl`` runs of one step, in order: ``[(verb, [unit, ...]), ...]``.

    planned: ``[(unit, its unit_actions verbs), ...]`` in the step's order.
    Every unit to enable goes in one ``systemctl enable`` first: systemd
    reloads its units once for all of them (a reload costs a node about 0.1 s
    of CPU, and a compute node's first run enabled munge and slurmd). That
    reload is also the one a changed unit file or drop-in needs; without an
    enable, one ``daemon-reload`` serves every unit that asks for it. Then
    each unit's start or restart, in the step's order.
    """
    enable = [name for name, verbs in planned if "enable" in verbs]
    commands = [("enable", enable)] if enable else []
    if not enable and any("daemon-reload" in verbs for _name, verbs in planned):
        commands.append(("daemon-reload", []))
    for name, verbs in planned:
        commands.extend((verb, [name]) for verb in verbs if verb in ("disable", "stop", "start", "restart"))
    return commands


def wait_until_listening(port, timeout, host="127.0.0.1", clock=time.monotonic, sleep=time.sleep):
    """Whether something accepts TCP connections on host:port within timeout seconds (polled every tenth).

    A daemon's unit says "started" before the daemon listens (slurmd probes its
    hardware first): the step returns once the port answers, so the next task
    (slurmctld's reconfigure, a job) finds the daemon there.
    """
    deadline = clock() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            if clock() >= deadline:
                return False
        sleep(0.1)
