# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Small executable shell scripts standing in for scontrol, slurmd -C and nvidia-smi.

Each records its argv (one call per line, arguments separated by \\x1f) in
``<name>.calls`` beside it and prints canned output.
"""

from __future__ import annotations

import pathlib
import stat

from hybridhpc_health.config import Check


def script(tmp_path: pathlib.Path, name: str, body: str) -> pathlib.Path:
    path = tmp_path / name
    calls = tmp_path / (name + ".calls")
    path.write_text("#!/bin/sh\n"
                    "for a in \"$@\"; do printf '%%s\\037' \"$a\"; done >> '%s'\n"
                    "echo >> '%s'\n%s\n" % (calls, calls, body))
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def calls(path: pathlib.Path) -> list[list[str]]:
    """The argv lists a fake script was called with, in order."""
    log = path.with_name(path.name + ".calls")
    if not log.exists():
        return []
    return [line.split("\x1f")[:-1] for line in log.read_text().splitlines()]


def printing(tmp_path: pathlib.Path, name: str, stdout: str, exit_code: int = 0, stderr: str = "") -> pathlib.Path:
    """A fake that prints ``stdout`` (and ``stderr``) and exits with ``exit_code``."""
    out = tmp_path / (name + ".stdout")
    err = tmp_path / (name + ".stderr")
    out.write_text(stdout)
    err.write_text(stderr)
    return script(tmp_path, name, "cat '%s'\ncat '%s' >&2\nexit %d" % (out, err, exit_code))


class FakeScontrol:
    """``scontrol``: ``show node`` prints the line in ``scontrol.node``; ``update`` prints nothing."""

    def __init__(self, tmp_path: pathlib.Path, node: str = "c1"):
        self.node_file = tmp_path / "scontrol.node"
        self.path = script(tmp_path, "scontrol", 'if [ "$1" = show ]; then cat \'%s\'; fi' % self.node_file)
        self.node = node
        self.set("IDLE")

    def set(self, state: str, reason: str = "", who: str = "root@2026-12-02T13:00:00"):
        line = ("NodeName=%s Arch=x86_64 CoresPerSocket=2 CPUAlloc=0 CPUEfctv=4 CPUTot=4 CPULoad=0.01 AvailableFeatures=(null) "
                "ActiveFeatures=(null) Gres=(null) NodeAddr=%s NodeHostName=%s Version=24.11.5 OS=Linux 6.1.0 "
                "RealMemory=3000 AllocMem=0 FreeMem=3500 Sockets=1 Boards=1 State=%s ThreadsPerCore=2 TmpDisk=0 Weight=1 "
                "Owner=N/A MCS_label=N/A Partitions=debug BootTime=2026-12-02T12:00:00 SlurmdStartTime=2026-12-02T12:01:00 "
                "LastBusyTime=2026-12-02T12:01:00 ResumeAfterTime=None CfgTRES=cpu=4,mem=3000M,billing=4 AllocTRES= "
                "CurrentWatts=0 AveWatts=0" % (self.node, self.node, self.node, state))
        if reason:
            line += " Reason=%s [%s]" % (reason, who)
        self.node_file.write_text(line + "\n")

    def calls(self) -> list[list[str]]:
        return calls(self.path)

    def updates(self) -> list[list[str]]:
        return [c for c in self.calls() if c and c[0] == "update"]


def make_check(kind: str, name: str | None = None, timeout: float = 10, **options) -> Check:
    return Check(name=name or kind, type=kind, timeout=timeout, options=options)
