# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run the checks, each in its own child process with a deadline, and decide what to do with the node.

``run_checks(checks, functions=checks.CHECKS) -> list[Result]``
    Forks one child per check (all at once), each in its own session so that
    the child and anything it started (a hung ``nvidia-smi``) are killed
    together with ``killpg`` at the check's timeout. The parent never waits on
    a child it killed for more than a moment: a process blocked in the kernel
    (stat() on a dead NFS mount) may not die at once and is left to be reaped
    later. The run is bounded by the largest timeout plus about a second.

    Plain ``os.fork`` rather than multiprocessing: multiprocessing joins its
    children at interpreter exit, which would wait on such an unkillable one.

``decide(results, states, reason, prefix) -> Action``
    Pure: what to do with the node, given the results and its Slurm state.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import time
from dataclasses import dataclass

from . import checks as checks_module

MAX_REASON = 199  # Slurm keeps longer reasons, but they are unreadable in sinfo; stay under 200
_REAP_WAIT = 1.0  # seconds to wait for a killed child before leaving it behind


@dataclass(frozen=True)
class Result:
    name: str
    ok: bool
    detail: str
    seconds: float


@dataclass(frozen=True)
class Action:
    kind: str  # "drain", "resume" or "none"
    reason: str = ""  # the drain reason (drain), or why nothing is done (none)


def _unknown_type(check):
    raise checks_module.CheckFailed("unknown check type %r" % check.type)


def _child(read_fd: int, write_fd: int, check, function) -> None:
    """In the forked child: run the check, write one JSON result, exit. Never returns."""
    try:
        os.close(read_fd)
        os.setsid()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        try:
            detail = function(check)
            result = {"ok": True, "detail": str(detail or "ok")}
        except checks_module.CheckFailed as exc:
            result = {"ok": False, "detail": str(exc) or "failed"}
        except Exception as exc:  # noqa: BLE001 - any error is the check failing, with its text
            result = {"ok": False, "detail": "%s: %s" % (type(exc).__name__, exc)}
        data = json.dumps(result).encode()[:60000]
        while data:
            data = data[os.write(write_fd, data):]
    finally:
        os._exit(0)


def _kill(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
        except (ProcessLookupError, PermissionError):
            pass


def _reap(pid: int, wait: float) -> int | None:
    """waitpid without blocking for more than ``wait`` seconds; the status, or None if still there."""
    end = time.monotonic() + wait
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return status
        if time.monotonic() >= end:
            return None
        time.sleep(0.02)


def _died(status: int | None) -> str:
    if status is None:
        return "check process ended without a result"
    if os.WIFSIGNALED(status):
        return "check process killed by signal %d" % os.WTERMSIG(status)
    return "check process exited %d without a result" % os.waitstatus_to_exitcode(status)


def run_checks(checks, functions=None) -> list[Result]:
    functions = checks_module.CHECKS if functions is None else functions
    results: list[Result | None] = [None] * len(checks)
    selector = selectors.DefaultSelector()
    running = {}  # read fd -> [index, pid, start, deadline, buffer]
    try:
        for index, check in enumerate(checks):
            function = functions.get(check.type) or _unknown_type  # looked up here: nothing may raise in the child before _child
            read_fd, write_fd = os.pipe()
            start = time.monotonic()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the child
                _child(read_fd, write_fd, check, function)
            os.close(write_fd)
            os.set_blocking(read_fd, False)
            running[read_fd] = [index, pid, start, start + check.timeout, bytearray()]
            selector.register(read_fd, selectors.EVENT_READ)

        def finish(fd, ok, detail, kill):
            index, pid, start, _deadline, _buffer = running.pop(fd)
            selector.unregister(fd)
            os.close(fd)
            if kill:
                _kill(pid)
            results[index] = Result(checks[index].name, ok, detail, time.monotonic() - start)
            return pid

        while running:
            wait = max(0.0, min(entry[3] for entry in running.values()) - time.monotonic())
            for key, _events in selector.select(wait):
                fd = key.fd
                try:
                    chunk = os.read(fd, 65536)
                except BlockingIOError:
                    continue
                if chunk:
                    running[fd][4].extend(chunk)
                    continue
                data = bytes(running[fd][4])
                pid = running[fd][1]
                try:
                    result = json.loads(data)
                    # kill (before reaping, so the pid cannot have been reused) anything the check left in its session
                    pid = finish(fd, bool(result["ok"]), str(result["detail"]), kill=True)
                    _reap(pid, _REAP_WAIT)
                except (ValueError, KeyError, TypeError):
                    _kill(pid)
                    finish(fd, False, _died(_reap(pid, _REAP_WAIT)), kill=False)
            now = time.monotonic()
            for fd, entry in list(running.items()):
                if now >= entry[3]:
                    pid = finish(fd, False, "timed out after %g s" % checks[entry[0]].timeout, kill=True)
                    _reap(pid, _REAP_WAIT / 4)
    finally:
        for fd, entry in list(running.items()):  # only on an exception in the parent
            _kill(entry[1])
            os.close(fd)
        selector.close()
    return results


def clean(text: str) -> str:
    """One line, no double quotes, single spaces: safe in a Slurm reason and in a log line."""
    return " ".join(text.replace('"', "'").split())


def drain_reason(prefix: str, failures) -> str:
    """``<prefix>: <first failed check>: <detail>[ (+N more)]``, under 200 characters."""
    first = failures[0]
    more = " (+%d more)" % (len(failures) - 1) if len(failures) > 1 else ""
    head = clean("%s: %s: %s" % (prefix, first.name, first.detail))
    if len(head) + len(more) > MAX_REASON:
        head = head[:MAX_REASON - len(more) - 3].rstrip() + "..."
    return head + more


def is_drained(states) -> bool:
    return bool({"DRAIN", "DRAINED", "DRAINING"} & set(states))


def decide(results, states, reason: str, prefix: str) -> Action:
    """What to do with the node. ``states`` is None when its state could not be read."""
    ours = prefix + ": "
    failures = [r for r in results if not r.ok]
    if states is None:
        if failures:
            return Action("drain", drain_reason(prefix, failures))
        return Action("none", "node state unknown, nothing to resume")
    if "DOWN" in states:
        return Action("none", "node is DOWN: left to slurmctld")
    drained = is_drained(states)
    if failures:
        wanted = drain_reason(prefix, failures)
        if drained and reason == wanted:
            return Action("none", "already drained with this reason")
        if drained and not reason.startswith(ours):
            return Action("none", "already drained by someone else (%s)" % (reason or "no reason"))
        return Action("drain", wanted)
    if drained and reason.startswith(ours):
        return Action("resume")
    if drained:
        return Action("none", "drained by someone else (%s): left alone" % (reason or "no reason"))
    return Action("none", "healthy")
