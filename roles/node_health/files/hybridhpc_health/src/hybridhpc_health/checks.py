# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The check types: one function each, ``check(Check) -> str`` (the pass detail) or raise :class:`CheckFailed`.

They run inside a child process (runner.py) and may block: the runner kills
them at their timeout. Any other exception is a failure too, its text the detail.
"""

from __future__ import annotations

import os
import subprocess

from . import config


class CheckFailed(Exception):
    """The check ran and the node is not healthy; the message is the detail."""


def _unescape_mountinfo(field: str) -> str:
    # mountinfo escapes space, tab, newline and backslash as \ooo
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts(mountinfo_path: str) -> dict[str, str]:
    """Mount point -> file system type, from /proc/self/mountinfo (the last mount on a point wins)."""
    found = {}
    with open(mountinfo_path, encoding="utf-8", errors="replace") as handle:
        for line in handle:
            fields = line.split()
            if "-" not in fields or len(fields) < 5:
                continue
            after = fields[fields.index("-") + 1:]
            if after:
                found[_unescape_mountinfo(fields[4])] = after[0]
    return found


def mount(check) -> str:
    path = os.path.normpath(check.get("path"))
    table = mounts(check.get("mountinfo", config.DEFAULT_MOUNTINFO))
    fstype = table.get(path)
    if fstype is None and not os.path.ismount(path):
        raise CheckFailed("%s is not mounted" % path)
    want = check.get("fstype")
    if want and fstype != want:
        raise CheckFailed("%s is %s, not %s" % (path, fstype or "of unknown type", want))
    os.statvfs(path)  # answers, i.e. not a dead NFS server (this is what hangs; the runner kills it)
    return "%s mounted (%s)" % (path, fstype or "mount point")


def free_space(check) -> str:
    path = check.get("path")
    st = os.statvfs(path)
    free_mb = st.f_bavail * st.f_frsize / 1048576
    need = check.get("min_free_mb")
    if free_mb < need:
        raise CheckFailed("%s has %d MB free, needs %g" % (path, free_mb, need))
    return "%s has %d MB free" % (path, free_mb)


def memory(check) -> str:
    path = check.get("meminfo", config.DEFAULT_MEMINFO)
    available_kb = None
    with open(path, encoding="ascii", errors="replace") as handle:
        for line in handle:
            if line.startswith("MemAvailable:"):
                available_kb = int(line.split()[1])
                break
    if available_kb is None:
        raise CheckFailed("no MemAvailable in %s" % path)
    available_mb = available_kb / 1024
    need = check.get("min_available_mb")
    if available_mb < need:
        raise CheckFailed("%d MB available, needs %g" % (available_mb, need))
    return "%d MB available" % available_mb


def _run(argv, timeout) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace", timeout=timeout)
    except FileNotFoundError as exc:
        raise CheckFailed("cannot run %s: not found" % argv[0]) from exc
    except PermissionError as exc:
        raise CheckFailed("cannot run %s: permission denied" % argv[0]) from exc
    except subprocess.TimeoutExpired as exc:
        raise CheckFailed("timed out after %g s" % timeout) from exc


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def _exit_detail(argv, proc) -> str:
    how = "exit %d" % proc.returncode if proc.returncode >= 0 else "killed by signal %d" % -proc.returncode
    last = _last_line(proc.stderr)
    return "%s: %s" % (how, last) if last else "%s %s" % (os.path.basename(argv[0]), how)


def gpu(check) -> str:
    devices = check.get("devices", [])
    missing = [d for d in devices if not os.path.exists(d)]
    if missing:
        raise CheckFailed("missing %s" % " ".join(missing))
    argv = check.get("command")
    if not argv:
        return "%d devices present" % len(devices)
    proc = _run(argv, check.timeout)
    if proc.returncode != 0:
        raise CheckFailed(_exit_detail(argv, proc))
    count = sum(1 for line in proc.stdout.splitlines() if line.startswith("GPU "))
    want = check.get("expect_count")
    if want is not None and count != want:
        raise CheckFailed("%s lists %d GPUs, expected %d" % (os.path.basename(argv[0]), count, want))
    return "%d devices, %d GPUs listed" % (len(devices), count)


def parse_slurmd_c(text: str) -> dict[str, int]:
    """The hardware line of ``slurmd -C`` (``NodeName=c1 CPUs=4 Boards=1 SocketsPerBoard=1 ...``) as integers.

    slurmd -C prints SocketsPerBoard, not Sockets; Sockets is Boards x SocketsPerBoard.
    """
    for line in text.splitlines():
        if line.startswith("NodeName="):
            fields = {}
            for token in line.split():
                key, _, value = token.partition("=")
                if value.isdigit():
                    fields[key] = int(value)
            if "Sockets" not in fields and "SocketsPerBoard" in fields:
                fields["Sockets"] = fields.get("Boards", 1) * fields["SocketsPerBoard"]
            return fields
    raise CheckFailed("slurmd -C printed no NodeName= line")


def slurmd_view(check) -> str:
    argv = [check.get("slurmd", config.DEFAULT_SLURMD), "-C"]
    proc = _run(argv, check.timeout)
    if proc.returncode != 0:
        raise CheckFailed(_exit_detail(argv, proc))
    seen = parse_slurmd_c(proc.stdout)
    at_least = check.get("compare", "equal") == "at_least"
    wrong = []
    for key, want in check.get("expect").items():
        got = seen.get(key)
        if got is None:
            wrong.append("no %s" % key)
        elif (key == "RealMemory" or at_least) and got < want:
            wrong.append("%s=%d < %d" % (key, got, want))
        elif key != "RealMemory" and not at_least and got != want:
            wrong.append("%s=%d != %d" % (key, got, want))
    if wrong:
        raise CheckFailed("slurmd sees " + ", ".join(wrong))
    return " ".join("%s=%s" % (key, seen.get(key)) for key in check.get("expect"))


def command(check) -> str:
    argv = check.get("command")
    proc = _run(argv, check.timeout)
    if proc.returncode != 0:
        raise CheckFailed(_exit_detail(argv, proc))
    return "exit 0"


CHECKS = {
    "mount": mount,
    "free_space": free_space,
    "memory": memory,
    "gpu": gpu,
    "slurmd_view": slurmd_view,
    "command": command,
}
assert set(CHECKS) == set(config.TYPES)
