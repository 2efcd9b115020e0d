# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The configuration: one JSON file (e.g. /etc/slurm/healthcheck.json), checked once on load.

``validate(data: dict) -> list[str]``
    Every problem in an already parsed document, each naming the key (and the
    check: ``checks[2] (gpu): timeout: must be a positive number``). Empty
    when the document is good. The Ansible side may reuse it.

``parse(data: dict) -> Config`` / ``load(path) -> Config``
    Raise :class:`ConfigError` (a ValueError) carrying every problem.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

DEFAULT_TIMEOUT = 10
DEFAULT_SCONTROL = "/usr/bin/scontrol"
DEFAULT_SCONTROL_TIMEOUT = 20
DEFAULT_SLURMD = "/usr/sbin/slurmd"
DEFAULT_MEMINFO = "/proc/meminfo"
DEFAULT_MOUNTINFO = "/proc/self/mountinfo"
DEFAULT_PREFIX = "healthcheck"

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")
# `slurmd -C` fields a slurmd_view check may compare (RealMemory: at least; the others: equal, or
# at least with compare: at_least, as slurmctld judges a registering node against its slurm.conf line).
SLURMD_FIELDS = ("CPUs", "Boards", "Sockets", "CoresPerSocket", "ThreadsPerCore", "RealMemory")

TOP_KEYS = {"node", "reason_prefix", "scontrol", "scontrol_timeout", "checks"}
COMMON_KEYS = {"name", "type", "timeout"}
# type -> (required keys, optional keys)
TYPES = {
    "mount": ({"path"}, {"fstype", "mountinfo"}),
    "free_space": ({"path", "min_free_mb"}, set()),
    "memory": ({"min_available_mb"}, {"meminfo"}),
    "gpu": (set(), {"devices", "command", "expect_count"}),
    "slurmd_view": ({"expect"}, {"slurmd", "compare"}),
    "command": ({"command"}, set()),
}


class ConfigError(ValueError):
    """The configuration is unusable; the message names every bad key."""


@dataclass(frozen=True)
class Check:
    name: str
    type: str
    timeout: float = DEFAULT_TIMEOUT
    options: dict = field(default_factory=dict)

    def get(self, key, default=None):
        return self.options.get(key, default)


@dataclass(frozen=True)
class Config:
    node: str
    checks: tuple
    reason_prefix: str = DEFAULT_PREFIX
    scontrol: str = DEFAULT_SCONTROL
    scontrol_timeout: float = DEFAULT_SCONTROL_TIMEOUT


def _positive(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _positive_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _argv(value) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(a, str) and a for a in value)


def _abs_path(value) -> bool:
    return isinstance(value, str) and value.startswith("/")


def _check_problems(where: str, check: dict) -> list[str]:
    problems = []
    kind = check.get("type")
    if kind is None:
        return ["%s: type: required (one of %s)" % (where, ", ".join(sorted(TYPES)))]
    if kind not in TYPES:
        return ["%s: type: unknown check type %r (one of %s)" % (where, kind, ", ".join(sorted(TYPES)))]
    required, optional = TYPES[kind]
    for key in sorted(required - set(check)):
        problems.append("%s: %s: required for a %s check" % (where, key, kind))
    for key in sorted(set(check) - required - optional - COMMON_KEYS):
        problems.append("%s: %s: unknown key for a %s check (known: %s)" % (where, key, kind, ", ".join(sorted(required | optional | COMMON_KEYS))))
    if "timeout" in check and not _positive(check["timeout"]):
        problems.append("%s: timeout: must be a positive number of seconds, not %r" % (where, check["timeout"]))
    for key in ("path", "mountinfo", "meminfo", "slurmd"):
        if key in check and not _abs_path(check[key]):
            problems.append("%s: %s: must be an absolute path, not %r" % (where, key, check[key]))
    if "fstype" in check and not (isinstance(check["fstype"], str) and check["fstype"]):
        problems.append("%s: fstype: must be a file system type such as nfs4" % where)
    for key in ("min_free_mb", "min_available_mb"):
        if key in check and not _positive(check[key]):
            problems.append("%s: %s: must be a positive number of MiB, not %r" % (where, key, check[key]))
    if "command" in check and not _argv(check["command"]):
        problems.append("%s: command: must be a non-empty list of strings (an argv, no shell)" % where)
    if kind == "gpu":
        devices = check.get("devices", [])
        if not (isinstance(devices, list) and all(_abs_path(d) for d in devices)):
            problems.append("%s: devices: must be a list of absolute device paths" % where)
        if not devices and "command" not in check:
            problems.append("%s: devices: a gpu check needs devices, a command, or both" % where)
        if "expect_count" in check:
            if not _positive_int(check["expect_count"]):
                problems.append("%s: expect_count: must be a positive integer, not %r" % (where, check["expect_count"]))
            elif "command" not in check:
                problems.append("%s: expect_count: needs a command whose output has one 'GPU ' line per GPU" % where)
    if kind == "slurmd_view" and check.get("compare", "equal") not in ("equal", "at_least"):
        problems.append("%s: compare: equal or at_least, not %r" % (where, check["compare"]))
    if kind == "slurmd_view" and "expect" in check:
        expect = check["expect"]
        if not (isinstance(expect, dict) and expect):
            problems.append("%s: expect: must be a mapping of slurmd -C fields (%s)" % (where, ", ".join(SLURMD_FIELDS)))
        else:
            for key, value in expect.items():
                if key not in SLURMD_FIELDS:
                    problems.append("%s: expect.%s: unknown field (known: %s)" % (where, key, ", ".join(SLURMD_FIELDS)))
                elif not _positive_int(value):
                    problems.append("%s: expect.%s: must be a positive integer, not %r" % (where, key, value))
    return problems


def validate(data) -> list[str]:
    """Every problem in a parsed configuration document (empty list: good)."""
    if not isinstance(data, dict):
        return ["the configuration must be a JSON object"]
    problems = []
    for key in sorted(set(data) - TOP_KEYS):
        problems.append("%s: unknown key (known: %s)" % (key, ", ".join(sorted(TOP_KEYS))))
    node = data.get("node")
    if not (isinstance(node, str) and node and not any(c.isspace() for c in node)):
        problems.append("node: required: this node's Slurm NodeName")
    prefix = data.get("reason_prefix", DEFAULT_PREFIX)
    if not (isinstance(prefix, str) and NAME.match(prefix)):
        problems.append("reason_prefix: must be a word (letters, digits, _.-), not %r" % (prefix,))
    if "scontrol" in data and not _abs_path(data["scontrol"]):
        problems.append("scontrol: must be an absolute path, not %r" % (data["scontrol"],))
    if "scontrol_timeout" in data and not _positive(data["scontrol_timeout"]):
        problems.append("scontrol_timeout: must be a positive number of seconds")
    checks = data.get("checks")
    if not (isinstance(checks, list) and checks):
        problems.append("checks: required: a non-empty list of checks")
        return problems
    seen = {}
    for index, check in enumerate(checks):
        if not isinstance(check, dict):
            problems.append("checks[%d]: must be an object" % index)
            continue
        name = check.get("name")
        where = "checks[%d] (%s)" % (index, name) if isinstance(name, str) and name else "checks[%d]" % index
        if name is None:
            problems.append("%s: name: required" % where)
        elif not (isinstance(name, str) and NAME.match(name)):
            problems.append("%s: name: must be 1-40 letters, digits, _.- (it goes into the drain reason), not %r" % (where, name))
        elif name in seen:
            problems.append("%s: name: duplicate of checks[%d]" % (where, seen[name]))
        else:
            seen[name] = index
        problems.extend(_check_problems(where, check))
    return problems


def parse(data) -> Config:
    problems = validate(data)
    if problems:
        raise ConfigError("; ".join(problems))
    checks = tuple(
        Check(name=c["name"], type=c["type"], timeout=c.get("timeout", DEFAULT_TIMEOUT),
              options={k: v for k, v in c.items() if k not in COMMON_KEYS})
        for c in data["checks"]
    )
    return Config(node=data["node"], checks=checks, reason_prefix=data.get("reason_prefix", DEFAULT_PREFIX),
                  scontrol=data.get("scontrol", DEFAULT_SCONTROL), scontrol_timeout=data.get("scontrol_timeout", DEFAULT_SCONTROL_TIMEOUT))


def load(path) -> Config:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except OSError as exc:
        raise ConfigError("cannot read %s: %s" % (path, exc.strerror or exc)) from exc
    except ValueError as exc:
        raise ConfigError("%s is not JSON: %s" % (path, exc)) from exc
    return parse(data)
