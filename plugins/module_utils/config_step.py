# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""One configuration step of a host (slurm_config_files): converge it, record it, and check the record.

converge() is the whole step: accounts, directories, files, logs, modes,
absent files, the restart/reconfigure markers, then the daemons' units. The
module runs it on every run where the host may differ.

Two kinds of step have records: slurm_config_files' (converge() here) and
slurm_pam_adopt's (pam_step.converge()). A step that converged leaves a
record on the host (for slurm_config_files, record_params(): its
arguments with every file's content replaced by its SHA-256, 0600 in a root
only directory, named by the step and keyed by the digest of its arguments).
On the next run the facts step of the first play (slurm_host_facts) runs
converge() again in check mode on each record, through verifying(): the same
code, so the record says "in sync" only when this step, run now, would change
nothing, leave no restart or reconfigure pending and start no unit. The
action plugin then answers a task whose arguments have that digest without
sending the module to the host, unless the host changed since the facts step
(plugin_utils/run_changes.py). A record never stands in for a check: it only
names what to check.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import contextlib
import hashlib
import json
import os

from ansible_collections.hybridhpc.slurm.plugins.module_utils import config_files, pam_step, system_accounts, systemd_unit

RECORD_SUFFIX = ".json"
# The modules' record option (set by their action plugin; doc_fragments/step_record.py).
RECORD_OPTIONS = dict(
    dir=dict(type="path", required=True),
    step=dict(type="str", required=True),
    digest=dict(type="str", required=True),
)
CONTENT_KEYS = ("content", "secret_content", "secret_content_b64")


class StepFailed(Exception):
    """converge() would fail (verifying(): instead of ending the module)."""


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


# Each unit's `systemctl show`, read once for every record verified_steps checks
# (check mode changes no unit): one systemctl run per host, not one per unit.
_SHOWN = {}


def _unit_states(module, systemctl, names):
    """``{unit: parse_show dict}`` for names: one ``systemctl show`` for those not read already (check mode of a
    record: _SHOWN)."""
    states = {name: _SHOWN[name] for name in names if module.check_mode and name in _SHOWN}
    missing = [name for name in names if name not in states]
    if missing:
        rc, out, err = module.run_command(systemd_unit.show_command(systemctl, *missing))
        if rc != 0:
            module.fail_json(msg="systemctl show %s failed: %s" % (" ".join(missing), err.strip()))
        shown = systemd_unit.parse_show_units(out, missing)
        if shown is None:
            module.fail_json(msg="systemctl show %s: not one block of properties per unit" % " ".join(missing))
        states.update(shown)
    return states


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
            rc, out, err = module.run_command(argv, environ_update=ENABLE_ENVIRONMENT if verb == "enable" else None)
            concerned = names[0] if names else planned[0][0]
            if rc != 0:
                module.fail_json(msg="systemctl %s %s failed: %s" % (verb, " ".join(names), (err or out).strip()),
                                 service_actions=actions_of[concerned], unit_actions=actions_of)
            if verb in ("start", "restart"):
                _after_start(module, by_name[concerned], actions_of[concerned])
    return dict(planned)


def _file_differs(spec, current, data):
    """Whether the file's bytes differ from the wanted ones (a record's file gives only their SHA-256)."""
    if spec.get("sha256") is not None:
        return current is None or hashlib.sha256(current).hexdigest() != spec["sha256"]
    return current != data


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

    changed_files, diffs = [], []
    old_conf = new_conf = None
    for spec in params["files"]:
        dest = spec["dest"]
        if spec.get("sha256") is not None:
            data, secret = None, True
        else:
            data, secret = wanted_bytes(spec)
            if data is None:
                module.fail_json(msg="files: secret_content_b64 of %s is not valid base64" % dest)
        current = config_files.read_bytes(dest)
        if dest == params["slurm_conf"] and data is not None:
            old_conf = current.decode("utf-8", "replace") if current is not None else None
            new_conf = data.decode("utf-8", "replace")
        if _file_differs(spec, current, data):
            changed_files.append(dest)
            if module._diff and not secret:
                diffs.append(dict(
                    before_header=dest, after_header=dest,
                    before=current.decode("utf-8", "replace") if current is not None else "",
                    after=data.decode("utf-8", "replace"),
                ))
            if not module.check_mode:
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
    for path in removed:
        if module._diff:
            diffs.append(dict(before_header=path, after_header=path, before="(present)\n", after="(absent)\n"))
        if not module.check_mode:
            os.unlink(path)
    changed = changed or bool(changed_files) or bool(removed)

    restart_required = config_changed = False
    markers_dir = params["markers_dir"]
    if markers_dir:
        pending = [m for m in config_files.MARKERS if os.path.exists(config_files.marker_path(markers_dir, m))]
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


def in_sync(result):
    """A converge() result (check mode) that says the step has nothing to do: no change (a unit to start or
    restart is one), nothing pending."""
    return not (result["changed"] or result["restart_required"] or result["config_changed"])


def unchanged_result(params):
    """What converge() returns for a step that has nothing to do (the action plugin's answer from a record)."""
    return dict(changed=False, account_commands=[], changed_files=[], removed_files=[], restart_required=False,
                config_changed=False, service_actions=[], unit_actions={unit.get("name"): [] for unit in _units(params)})


def pam_in_sync(result):
    """A pam_step.converge() result (check mode) that says the step has nothing to do (a command is a change)."""
    return not result["changed"]


# Each kind of step with a record: how it runs, and when its check-mode result says "nothing to do".
KINDS = {
    "config_files": (converge, in_sync),
    "pam_adopt": (pam_step.converge, pam_in_sync),
}


def _units(params):
    """The unit entries of a step's params (its service, then its services)."""
    units = [params.get("service")] + list(params.get("services") or [])
    return [unit for unit in units if isinstance(unit, dict)]


def _with_units(params, change):
    """A copy of params with change() applied to its service and to each of its services."""
    kept = dict(params)
    if "service" in kept:
        kept["service"] = change(kept["service"])
    if isinstance(kept.get("services"), list):
        kept["services"] = [change(unit) for unit in kept["services"]]
    return kept


def _started(unit):
    return dict(unit, state="started") if isinstance(unit, dict) and unit.get("state") == "restarted" else unit


def record_params(params):
    """The step's params as its record keeps them: each file's content replaced by the SHA-256 of its bytes, and a
    unit the step restarted as one kept running (checked again, the record asks that it runs, not another
    restart)."""
    kept = _with_units(params, _started)
    files = []
    for spec in params["files"]:
        data, _secret = wanted_bytes(spec)
        entry = {key: value for key, value in spec.items() if key not in CONTENT_KEYS and key != "sha256"}
        entry["sha256"] = hashlib.sha256(data or b"").hexdigest()
        files.append(entry)
    kept["files"] = files
    return kept


def record_path(directory, step):
    return os.path.join(directory, step + RECORD_SUFFIX)


def write_record(module, directory, step, digest, params, kind="config_files"):
    """Keep what this step converged to (root only: the record names secret files and their hashes)."""
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o700)
    os.chmod(directory, 0o700)
    kept = record_params(params) if kind == "config_files" else params
    data = json.dumps({"kind": kind, "digest": digest, "params": kept}, sort_keys=True).encode("utf-8")
    config_files.write_atomically(module, record_path(directory, step), data, ".step.")


@contextlib.contextmanager
def verifying(module):
    """Run converge() as a check of a record: check mode, no diff, and a failure raises StepFailed instead of
    ending the module."""
    saved = module.check_mode, module._diff, module.fail_json

    def fail(**kwargs):
        raise StepFailed(kwargs.get("msg", ""))

    module.check_mode, module._diff, module.fail_json = True, False, fail
    try:
        yield
    finally:
        module.check_mode, module._diff, module.fail_json = saved


def _record_units(record):
    """The names of the units a config_files record starts or keeps running."""
    if not isinstance(record, dict) or record.get("kind") != "config_files" or not isinstance(record.get("params"), dict):
        return []
    return [unit["name"] for unit in _units(record["params"]) if isinstance(unit.get("name"), str)]


def _show_units(module, names):
    """``{unit: state}`` from one ``systemctl show`` of every unit in names; {} when that run cannot tell
    (each unit is then shown on its own, and a failure reported as before)."""
    systemctl = module.get_bin_path("systemctl")
    if not names or systemctl is None:
        return {}
    rc, out, dummy = module.run_command(systemd_unit.show_command(systemctl, *names))
    return (systemd_unit.parse_show_units(out, names) or {}) if rc == 0 else {}


def verified_steps(module, directory):
    """{step: digest} of the records in directory whose step, run now, would do nothing."""
    steps = {}
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return steps
    records = []
    for name in names:
        if not name.endswith(RECORD_SUFFIX):
            continue
        try:
            with open(os.path.join(directory, name), "rb") as handle:
                records.append((name, json.loads(handle.read().decode("utf-8"))))
        except (OSError, ValueError):
            continue
    units = sorted({unit for dummy, record in records for unit in _record_units(record)})
    _SHOWN.update(_show_units(module, units))
    try:
        for name, record in records:
            try:
                digest, params = record["digest"], record["params"]
                run, nothing_to_do = KINDS[record["kind"]]
                with verifying(module):
                    result = run(module, params)
            except (OSError, ValueError, KeyError, TypeError, StepFailed):
                continue
            if nothing_to_do(result):
                steps[name[:-len(RECORD_SUFFIX)]] = digest
    finally:
        _SHOWN.clear()
    return steps


# A unit's options that a record's digest leaves out (args_digest).
UNDIGESTED_UNIT_OPTIONS = ("restart_on_change", "state")


def _digested_unit(unit):
    if isinstance(unit, dict):
        return {key: value for key, value in unit.items() if key not in UNDIGESTED_UNIT_OPTIONS}
    return unit


def asks_restart(args):
    """Whether the step's arguments ask a unit to restart (state restarted): never answered from a record."""
    return any(unit.get("state") == "restarted" for unit in _units(args))


def args_digest(args, code):
    """The digest that keys a record: the task's arguments (as the module gets them) and the code that runs them.

    A unit's ``restart_on_change`` and ``state`` are left out:

    - ``restart_on_change`` decides only what a changed file does to a running daemon, and a record is taken only
      when no file would change; the roles turn it off in the run that installs the daemon (its first start reads
      the new files), so with it in, every node's first run after that one missed its record.
    - ``state``: a step that asks for a restart is never answered from a record (:func:`asks_restart`), and one
      that ran the restart keeps the unit as started (:func:`record_params`). With it in, the run after every
      change that needed a restart missed the record of each daemon's step, and ran it for nothing.
    """
    kept = _with_units(args, _digested_unit)
    text = json.dumps({"args": kept, "code": code}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
