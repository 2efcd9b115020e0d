# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Every Slurm call hybridhpc-health makes: the only module that runs scontrol.

``Scontrol(path).node_state(node) -> (states, reason)``
    ``scontrol show node -o <node>``: the State flags as a frozenset
    (``State=IDLE+DRAIN`` -> {"IDLE", "DRAIN"}) and the Reason without the
    `` [user@timestamp]`` Slurm appends.
``Scontrol(path).drain(node, reason)``
    ``scontrol update NodeName=<node> State=DRAIN Reason=<reason>``
``Scontrol(path).resume(node)``
    ``scontrol update NodeName=<node> State=RESUME``

argv lists, never a shell (the reason needs no quoting). ``dry_run=True``
prints the update instead of running it (``node_state`` still reads).
"""

from __future__ import annotations

import re
import subprocess

# Slurm appends " [<user>@<YYYY-MM-DDTHH:MM:SS>]" to a reason in scontrol show node
_REASON_SUFFIX = re.compile(r" \[[^\[\]\s@]+@\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\]")
_STATE = re.compile(r"(?:^|\s)State=(\S+)")
_REASON = re.compile(r"(?:^|\s)Reason=(.*)$")


class SlurmError(Exception):
    """scontrol failed or printed something unreadable."""


def parse_node_line(text: str) -> tuple[frozenset, str]:
    """(states, reason) from one ``scontrol show node -o`` line."""
    line = " ".join(text.strip().splitlines())
    state = _STATE.search(line)
    if not line.startswith("NodeName=") or not state:
        raise SlurmError("scontrol show node printed no NodeName=... State=...: %r" % text[:200])
    states = frozenset(flag.rstrip("*~#!%$@^-") for flag in state.group(1).split("+") if flag)
    reason = ""
    found = _REASON.search(line)
    if found:
        reason = found.group(1)
        suffix = _REASON_SUFFIX.search(reason)
        if suffix:
            reason = reason[:suffix.start()]
        reason = reason.strip()
        if reason == "(null)":
            reason = ""
    return states, reason


class Scontrol:
    def __init__(self, path: str = "/usr/bin/scontrol", timeout: float = 20, dry_run: bool = False, out=print):
        self.path = path
        self.timeout = timeout
        self.dry_run = dry_run
        self.out = out

    def _run(self, args) -> str:
        argv = [self.path, *args]
        try:
            proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, errors="replace", timeout=self.timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SlurmError("%s: %s" % (" ".join(argv[:3]), exc)) from exc
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["exit %d" % proc.returncode])[-1]
            raise SlurmError("%s: %s" % (" ".join(argv[:3]), last))
        return proc.stdout

    def _update(self, args) -> None:
        if self.dry_run:
            self.out("dry-run: would run: %s update %s" % (self.path, " ".join(args)))
            return
        self._run(["update", *args])

    def node_state(self, node: str) -> tuple[frozenset, str]:
        return parse_node_line(self._run(["show", "node", "-o", node]))

    def drain(self, node: str, reason: str) -> None:
        self._update(["NodeName=" + node, "State=DRAIN", "Reason=" + reason])

    def resume(self, node: str) -> None:
        self._update(["NodeName=" + node, "State=RESUME"])
