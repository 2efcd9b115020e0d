"""Every Slurm call hybridhpc-power makes, behind one small class.

Public names other tools import (keep them stable):

``parse_nodes(json_text: str | bytes) -> dict[str, SlurmNode]``
    Parse the output of ``scontrol --json show nodes`` (Slurm 24.11,
    data_parser v0.0.42) into nodes by name. Reads only ``name``, ``state``
    (a list of flags), ``reason`` and ``reason_changed_at``; raises
    :class:`SlurmError` when the text is not that document or lists errors.

``SlurmNode``
    ``name``, ``state`` (frozenset of flags such as IDLE, CLOUD,
    POWERED_DOWN), ``reason`` and ``reason_changed_at`` (Unix time, None when
    unset), plus the predicates the reconciler needs.

:class:`Scontrol` runs ``scontrol`` with argv lists (never a shell) and
compressed hostlists; tests use the in-memory fake in tests/power_fakes.py.
What each update does to a node was observed on Slurm 24.11.5 (README.md,
"Slurm 24.11 states, verified").
"""

from __future__ import annotations

import gc
import json
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from . import hostlists, names

# One argv element may not exceed MAX_ARG_STRLEN (128 KiB on Linux); a sparse
# hostlist of thousands of nodes can, so longer ones are split over several calls.
_MAX_HOSTLIST = 60000


class SlurmError(Exception):
    """A Slurm command failed or answered something unreadable."""


@dataclass(frozen=True, slots=True)
class SlurmNode:
    name: str
    state: frozenset
    reason: str = ""
    reason_changed_at: float | None = None

    @property
    def powered_down(self) -> bool:
        return names.STATE_POWERED_DOWN in self.state

    @property
    def powering_up(self) -> bool:
        return names.STATE_POWERING_UP in self.state

    @property
    def powering_down(self) -> bool:
        return names.STATE_POWERING_DOWN in self.state

    @property
    def down(self) -> bool:
        return names.STATE_DOWN in self.state

    @property
    def drain(self) -> bool:
        return names.STATE_DRAIN in self.state

    @property
    def up(self) -> bool:
        """Powered up and usable as far as power saving goes: no power transition, not DOWN."""
        return not (self.state & _NOT_UP)

    @property
    def reason_is_ours(self) -> bool:
        return self.reason.startswith(names.REASON_PREFIX)

    def describe(self) -> str:
        """State flags as one word (``IDLE+CLOUD+POWERED_DOWN``) for logs and status."""
        return "+".join(sorted(self.state, key=_flag_order)) or "?"


_NOT_UP = frozenset((names.STATE_POWERED_DOWN, names.STATE_POWERING_UP, names.STATE_POWERING_DOWN, names.STATE_DOWN))
# Base states first, then flags, like sinfo's long names read.
_BASE_STATES = ("IDLE", "ALLOCATED", "MIXED", "DOWN", "ERROR", "FUTURE", "UNKNOWN")


def _flag_order(flag: str):
    return (0, _BASE_STATES.index(flag)) if flag in _BASE_STATES else (1, flag)


def _time(value) -> float | None:
    """Slurm 24.11 writes times as {"set": true, "infinite": false, "number": N}; older parsers as N."""
    if isinstance(value, dict):
        if not value.get("set") or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        return None
    return float(value)


def parse_nodes(json_text: str | bytes) -> dict[str, SlurmNode]:
    """Nodes by name from ``scontrol --json show nodes`` output (see the module docstring)."""
    # 10,000 nodes are ~24 MB of JSON and ~600,000 containers: the cyclic
    # garbage collector would scan them again and again while json builds
    # them (none can be part of a cycle), which costs a third of the time.
    collecting = gc.isenabled()
    gc.disable()
    try:
        try:
            document = json.loads(json_text)
        except ValueError as err:
            raise SlurmError("scontrol --json show nodes printed no JSON: %s" % err) from None
        if not isinstance(document, dict) or not isinstance(document.get("nodes"), list):
            raise SlurmError("scontrol --json show nodes printed JSON without a nodes list")
        errors = document.get("errors") or []
        if errors:
            raise SlurmError("scontrol --json show nodes reported: %s" % "; ".join(
                str(e.get("description") or e.get("error") or e) if isinstance(e, dict) else str(e) for e in errors))
        out = {}
        frozen, node_type, time_of = frozenset, SlurmNode, _time
        for entry in document["nodes"]:
            name = entry.get("name")
            if not name:
                continue
            state = entry.get("state") or ()
            if isinstance(state, str):  # data_parser v0.0.39 and older: "IDLE" + state_flags
                state = [state, *(entry.get("state_flags") or ())]
            out[name] = node_type(name, frozen(state), entry.get("reason") or "", time_of(entry.get("reason_changed_at")))
        del document
        return out
    finally:
        if collecting:
            gc.enable()


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else "..." + text[-limit:]


def _chunks(nodes: list[str]) -> list[str]:
    """Hostlists for ``nodes``, each short enough for one argv element."""
    expression = hostlists.compress(nodes)
    if len(expression) <= _MAX_HOSTLIST or len(nodes) == 1:
        return [expression] if expression else []
    half = len(nodes) // 2
    return _chunks(nodes[:half]) + _chunks(nodes[half:])


class Scontrol:
    """The real Slurm: ``scontrol`` as a subprocess. Runs as root (worker, reconciler) or SlurmUser; both may update nodes."""

    def __init__(self, path: str = "/usr/bin/scontrol", timeout: float = 30.0, run: Callable = subprocess.run):
        self.path = path
        self.timeout = timeout
        self._run = run

    def _call(self, argv: list[str]) -> str:
        try:
            done = self._run([self.path, *argv], capture_output=True, text=True, timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired:
            raise SlurmError("scontrol %s did not answer within %gs (is slurmctld up?)" % (argv[0], self.timeout)) from None
        except OSError as err:
            raise SlurmError("cannot run %s: %s (set \"scontrol\" in the configuration)" % (self.path, err.strerror)) from None
        if done.returncode != 0:
            raise SlurmError("scontrol %s failed (exit %d): %s" % (" ".join(argv[:2]), done.returncode,
                                                                    _short(done.stderr or done.stdout or "no output")))
        return done.stdout

    def nodes(self, names_: Iterable[str] | None = None) -> dict[str, SlurmNode]:
        """Nodes by name: all of them (one call), or those of ``names_`` (unknown names are left out)."""
        if names_ is None:
            return parse_nodes(self._call(["--json", "show", "nodes"]))
        out: dict[str, SlurmNode] = {}
        for expression in _chunks(list(names_)):
            out.update(parse_nodes(self._call(["--json", "show", "nodes", expression])))
        return out

    def _update(self, nodes: Iterable[str], *fields: str) -> None:
        for expression in _chunks(list(nodes)):
            self._call(["update", "nodename=" + expression, *fields])

    def mark_down(self, nodes: Iterable[str], reason: str) -> None:
        """DOWN with ``reason``: Slurm requeues the nodes' jobs. A POWERING_UP node stays POWERING_UP until powered down."""
        self._update(nodes, "state=DOWN", "reason=" + reason)

    def power_down(self, nodes: Iterable[str]) -> None:
        """POWER_DOWN_FORCE: Slurm runs SuspendProgram (whose request removes the machine) and the nodes end POWERED_DOWN."""
        self._update(nodes, "state=POWER_DOWN_FORCE")

    def return_to_service(self, nodes: Iterable[str]) -> None:
        """RESUME: a DOWN+POWERED_DOWN node becomes IDLE+POWERED_DOWN (idle~), free to be resumed for a job."""
        self._update(nodes, "state=RESUME")
