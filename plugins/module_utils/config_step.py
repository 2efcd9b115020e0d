# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One configuration step of a host (slurm_config_files): converge it.

converge() is the whole step: accounts, directories, files, logs, modes,
absent files, the restart/reconfigure markers, then the daemons' units. The
module runs it on every run: it reads the host and changes only what differs.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shlex
import tempfile

from ansible_collections.hybridhpc.slurm.plugins.module_utils import config_files, system_accounts, systemd_unit


def wanted_bytes(spec):
    """The file's wanted bytes, and whether they are a secret; None for bytes when secret_content_b64 is not base64."""
    if spec.get("secret_content_b64") is not None:
        return config_files.decode_b64(spec["secret_content_b64"]), True
    if spec.get("secret_content") is not None:
        return spec["secret_content"].encode("utf-8"), True
    return (spec.get("content") or "").encode("utf-8"), False


def _attributes(module, path, spec, changed):
    args = module.load_file_common_arguments(dict(path=path, owner=spec["owner"], group=spec["group"], mode=spec["mode"]))
    if module.check_mode and not os.path.exists(path):
        return True
    return module.set_fs_attributes_if_different(args, changed)


def _unit_states(module, systemctl, names):
    """``{unit: parse_show dict}`` for names, from one ``systemctl show``."""
    rc, out, err = module.run_command(systemd_unit.show_command(systemctl, *names))
    if rc != 0:
        module.fail_json(msg="systemctl show %s failed: %s" % (" ".join(names), err.strip()))
    shown = systemd_unit.parse_show_units(out, names)
    if shown is None:
        module.fail_json(msg="systemctl show %s: not one block of properties per unit" % " ".join(names))
    return shown


# Debian's munge and slurmd ship a SysV init script beside their unit, and
# `systemctl enable` then also runs systemd-sysv-install (update-rc.d, Perl):
# twice the CPU of the enable itself, for rc links a systemd host never reads.
# systemd skips that hook when told to; the unit's own state is the same.
ENABLE_ENVIRONMENT = {"SYSTEMCTL_SKIP_SYSV": "1"}


def _after_start(module, service, actions):
    """Once the step started or restarted the unit: wait for its port, and clear the markers it applied."""
    if service.get("wait_port") and not systemd_unit.wait_until_listening(service["wait_port"], service["wait_timeout"]):
        module.fail_json(msg="%s started but nothing listens on port %s after %s s: see journalctl -u %s" % (
            service["name"], service["wait_port"], service["wait_timeout"], service["name"]),
            service_actions=actions)
    if service["applied_markers_dir"]:
        for name in config_files.MARKERS:
            path = config_files.marker_path(service["applied_markers_dir"], name)
            if os.path.exists(path):
                os.unlink(path)


def _run_units(module, units, files_changed):
    """Enable, start or restart the step's units; ``{unit: the verbs run}`` (or that would run, in check mode).

    Every enable of the step is one ``systemctl enable`` (systemd_unit.step_commands), then each unit starts or
    restarts in the step's order, and the step waits for it before the next.
    """
    if not units:
        return {}
    systemctl = module.get_bin_path("systemctl", required=True)
    states = _unit_states(module, systemctl, [service["name"] for service in units])
    planned = []
    for service in units:
        actions, error = systemd_unit.unit_actions(
            service["name"], states[service["name"]], service["enabled"], service["state"],
            files_changed, service["restart_on_change"], module.check_mode, service["drop_ins"])
        if error:
            module.fail_json(msg=error)
        planned.append((service["name"], actions))
    if not module.check_mode:
        by_name = {service["name"]: service for service in units}
        actions_of = dict(planned)
        for verb, names in systemd_unit.step_commands(planned):
            argv = [systemctl, verb] + (["--"] + names if names else [])
            rc, out, err = module.run_command(argv, environ_update=ENABLE_ENVIRONMENT if verb in ("enable", "disable") else None)
            concerned = names[0] if names else planned[0][0]
            if rc != 0:
                module.fail_json(msg="systemctl %s %s failed: %s" % (verb, " ".join(names), (err or out).strip()),
                                 service_actions=actions_of[concerned], unit_actions=actions_of)
            if verb in ("start", "restart"):
                _after_start(module, by_name[concerned], actions_of[concerned])
    return dict(planned)


def converge(module, params):
    """Run one step on the host (in check mode: say what it would do). params: the module's, with ``services``
    already validated (each entry complete). Returns the module's result."""
    units = _units(params)
    account_commands = system_accounts.ensure(module, params["accounts"])
    changed = bool(account_commands)
    for spec in params["directories"]:
        path = spec["path"]
        if not os.path.isdir(path):
            changed = True
            if not module.check_mode:
                os.makedirs(path)
        changed = _attributes(module, path, spec, changed) or changed

    markers_dir = params["markers_dir"]
    # Read before the files change: which changes are already pending decides
    # whether the files on disk are the accepted ones.
    pending = [m for m in config_files.MARKERS
               if markers_dir and os.path.exists(config_files.marker_path(markers_dir, m))]
    # Each file's wanted bytes and what is on disk, read once for the checks and the writes below.
    planned = []
    for spec in params["files"]:
        data, secret = wanted_bytes(spec)
        if data is None:
            module.fail_json(msg="files: secret_content_b64 of %s is not valid base64" % spec["dest"])
        planned.append((spec, data, secret, config_files.read_bytes(spec["dest"])))
    # Every changed candidate judged first: a refused one leaves every file of the step as it was.
    for spec, data, _secret, current in planned:
        if spec.get("validate") and current != data:
            _validate(module, spec["dest"], data, spec["validate"])
    changed_files, diffs = [], []
    old_conf = new_conf = None
    for spec, data, secret, current in planned:
        dest = spec["dest"]
        if dest == params["slurm_conf"]:
            old_conf = current.decode("utf-8", "replace") if current is not None else None
            new_conf = data.decode("utf-8", "replace")
        if current != data:
            changed_files.append(dest)
            if module._diff and not secret:
                diffs.append(dict(
                    before_header=dest, after_header=dest,
                    before=current.decode("utf-8", "replace") if current is not None else "",
                    after=data.decode("utf-8", "replace"),
                ))
            if not module.check_mode:
                if markers_dir and not secret and config_files.keeps_accepted_copy(current, pending):
                    _keep_accepted(module, markers_dir, dest, current)
                config_files.write_atomically(module, dest, data, ".slurm_config_files.")
        changed = _attributes(module, dest, spec, changed) or changed
    for spec in params["logs"]:
        path = spec["path"]
        if not os.path.exists(path):
            changed = True
            if not module.check_mode:
                # Created private; _attributes then gives it its owner and mode.
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
        changed = _attributes(module, path, spec, changed) or changed
    for spec in params["modes"]:
        if os.path.exists(spec["path"]):
            changed = _attributes(module, spec["path"], spec, changed) or changed
    removed = [path for path in params["absent"] if os.path.lexists(path)]
    # Files the configuration no longer has (a script dropped from an
    # exclusive directory, a file in `retired`): gone from the configuration
    # the daemons run, so their removal is a change they must apply.
    # Each read once: its content decides (retired) and is kept for a rollback.
    wanted = {spec["dest"] for spec in params["files"]}
    dropped = {}
    for path in params.get("retired") or []:
        data = config_files.read_bytes(path) if path not in wanted else None
        if data is not None and config_files.MANAGED_HEADER in data.split(b"\n", 1)[0]:
            dropped[path] = data
    for spec in params["directories"]:
        if spec.get("exclusive") and os.path.isdir(spec["path"]):
            for path in sorted(os.path.join(spec["path"], name) for name in os.listdir(spec["path"])):
                if path not in wanted and not os.path.isdir(path):
                    dropped[path] = config_files.read_bytes(path)
    for path in removed + list(dropped):
        if module._diff:
            diffs.append(dict(before_header=path, after_header=path, before="(present)\n", after="(absent)\n"))
        if not module.check_mode:
            # A removed file is kept too (slurm.key on the way back to MUNGE):
            # a rollback to the configuration that needs it needs it back.
            data = dropped[path] if path in dropped else (config_files.read_bytes(path) if markers_dir else None)
            if markers_dir and config_files.keeps_accepted_copy(data, pending):
                _keep_accepted(module, markers_dir, path, data)
            os.unlink(path)
    if markers_dir and not pending and not module.check_mode:
        # Gone and nothing pending: the cluster runs without it, so its kept
        # copy (a retired key) is no longer what a rollback would put back.
        for path in params["absent"]:
            kept = config_files.accepted_path(markers_dir, path)
            if path not in removed and not os.path.lexists(path) and os.path.exists(kept):
                os.unlink(kept)
    changed_files += list(dropped)
    removed += list(dropped)
    changed = changed or bool(changed_files) or bool(removed)

    restart_required = config_changed = False
    if markers_dir:
        add, restart_required, config_changed = config_files.decide(
            changed_files, params["slurm_conf"], old_conf, new_conf, pending)
        for name in add:
            if name in pending or module.check_mode:
                continue
            path = config_files.marker_path(markers_dir, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
            os.close(fd)
            changed = True

    # After the files: the daemon starts (or restarts) with them in place.
    unit_actions = _run_units(module, units, bool(changed_files))
    service_actions = unit_actions.get(params["service"]["name"], []) if params["service"] else []
    changed = changed or any(unit_actions.values())

    result = dict(changed=changed, account_commands=account_commands, changed_files=changed_files, removed_files=removed,
                  restart_required=restart_required, config_changed=config_changed, service_actions=service_actions,
                  unit_actions=unit_actions)
    if module._diff and diffs:
        result["diff"] = diffs
    return result


def _validate(module, dest, data, command):
    """Run the file's validate command on the candidate (written beside dest); fail with its output if it refuses."""
    argv = shlex.split(command)
    program = next((word for word in argv if word != "env" and "=" not in word), None)
    if program is None or (not os.path.isabs(program) and module.get_bin_path(program) is None):
        return
    directory = os.path.dirname(dest) or "."
    if not os.path.isdir(directory):
        return
    fd, candidate = tempfile.mkstemp(dir=directory, prefix=".candidate.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(candidate, 0o644)
        rc, out, err = module.run_command([word.replace("%s", candidate) for word in argv])
    finally:
        os.unlink(candidate)
    if rc != 0:
        said = " | ".join(line.strip() for line in (err or out).replace(candidate, dest).splitlines() if line.strip())
        module.fail_json(msg="%s: Slurm refuses the new file, nothing was replaced: %s" % (dest, said),
                         refused=dest, validate_rc=rc)


def _keep_accepted(module, markers_dir, dest, current):
    """Keep the file the cluster accepted (root-only) before its successor replaces it."""
    path = config_files.accepted_path(markers_dir, dest)
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o700)
    config_files.write_atomically(module, path, current, ".accepted.")
    # With the file's own mode and owner (the directory is root-only): a
    # rollback that brings back a file gone since brings it back as it was (a
    # dropped Prolog runnable, slurm.key the SlurmUser's alone).
    if os.path.exists(dest):
        stat = os.stat(dest)
        os.chmod(path, stat.st_mode & 0o777)
        if os.geteuid() == 0:
            os.chown(path, stat.st_uid, stat.st_gid)


def _units(params):
    """The unit entries of a step's params (its service, then its services)."""
    units = [params.get("service")] + list(params.get("services") or [])
    return [unit for unit in units if isinstance(unit, dict)]
