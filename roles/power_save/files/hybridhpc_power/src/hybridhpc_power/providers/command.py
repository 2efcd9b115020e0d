"""The ``command`` provider: a site's own scripts start and stop the machines.

Options::

    "resume_command":  ["/usr/local/sbin/site-resume", "--pool", "gpu"],   # required
    "suspend_command": ["/usr/local/sbin/site-suspend"],                   # required
    "list_command":    ["/usr/local/sbin/site-list"],                      # optional
    "timeout": 300                                                         # seconds per call

Each call appends the nodes as one compressed Slurm hostlist (the last
argument) and runs the command directly (argv, no shell), in its own process
group (a timeout kills the whole group), with a small fixed environment:
PATH, LANG, HYBRIDHPC_CLUSTER and HYBRIDHPC_ACTION (resume, suspend or list).
No secret is passed: a script that needs one reads it from where the site
keeps it.

Exit status 0: every node of the call succeeded; anything else: every node
failed, with the last lines of stderr as the reason. Output lines of the
form ``node instance_id [state] [address]`` (``#`` comments and blank lines
ignored) name the machines: optional for resume (the log then shows their
ids), required from ``list_command``. Without ``list_command``,
``instances()`` returns None and the reconciler skips the rules that need
to know the machines (leaked machine, instance gone, lost resume).
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Sequence

from .. import hostlists, names
from .base import Instance, Provider, ProviderError, ResumeResult, SuspendResult

STATES = (names.INSTANCE_PENDING, names.INSTANCE_RUNNING, names.INSTANCE_STOPPING, names.INSTANCE_STOPPED, names.INSTANCE_TERMINATED)
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_OPTIONS = ("resume_command", "suspend_command", "list_command", "timeout")


def _argv(options, key: str, required: bool) -> list[str] | None:
    value = options.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, list) or not value or not all(isinstance(a, str) and a for a in value):
        raise ValueError("%s must be a non-empty list of strings (the program and its arguments; the hostlist is appended), got %r"
                         % (key, value))
    if not os.path.isabs(value[0]):
        raise ValueError("%s[0] must be an absolute path (no PATH lookup for a root worker), got %r" % (key, value[0]))
    return list(value)


def parse_machines(text: str, where: str = "output") -> dict[str, Instance]:
    """``node instance_id [state] [address]`` lines -> node -> Instance; ValueError names the bad line."""
    out = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) < 2 or len(fields) > 4:
            raise ValueError("%s line %d: expected 'node instance_id [state] [address]', got %r" % (where, number, line[:200]))
        state = fields[2] if len(fields) > 2 else names.INSTANCE_RUNNING
        if state not in STATES:
            raise ValueError("%s line %d: state must be one of %s, got %r" % (where, number, ", ".join(STATES), state))
        out[fields[0]] = Instance(fields[0], fields[1], state, fields[3] if len(fields) > 3 else None)
    return out


def _tail(text: str, lines: int = 3, limit: int = 300) -> str:
    kept = [line.strip() for line in text.strip().splitlines() if line.strip()][-lines:]
    joined = " | ".join(kept)
    return joined if len(joined) <= limit else "..." + joined[-limit:]


class CommandProvider(Provider):
    name = "command"

    def __init__(self, cluster, options, secrets):
        super().__init__(cluster, options, secrets)
        unknown = sorted(set(self.options) - set(_OPTIONS))
        if unknown:
            raise ValueError("unknown option %s; the command provider knows %s" % (", ".join(unknown), ", ".join(_OPTIONS)))
        self.resume_command = _argv(self.options, "resume_command", True)
        self.suspend_command = _argv(self.options, "suspend_command", True)
        self.list_command = _argv(self.options, "list_command", False)
        timeout = self.options.get("timeout", 300)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError("timeout must be a number of seconds above 0, got %r" % (timeout,))
        self.timeout = float(timeout)

    def _run(self, argv: list[str], action: str) -> tuple[int, str, str]:
        """(exit status, stdout, stderr); a program that cannot start or overruns the timeout raises ProviderError."""
        env = {"PATH": PATH, "LANG": "C.UTF-8", "HYBRIDHPC_CLUSTER": self.cluster, "HYBRIDHPC_ACTION": action}
        try:
            process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       env=env, start_new_session=True, text=True, errors="replace")
        except OSError as err:
            raise ProviderError("cannot run %s: %s" % (argv[0], err.strerror)) from None
        try:
            stdout, stderr = process.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.communicate()
            raise ProviderError("%s timed out after %gs (option timeout)" % (argv[0], self.timeout)) from None
        return process.returncode, stdout, stderr

    def _failure(self, argv: list[str], status: int, stderr: str) -> str:
        return "%s exited %d: %s" % (os.path.basename(argv[0]), status, _tail(stderr) or "no error output")

    def resume(self, nodes: Sequence[str]) -> ResumeResult:
        if not nodes:
            return ResumeResult()
        argv = self.resume_command + [hostlists.compress(nodes)]
        try:
            status, stdout, stderr = self._run(argv, names.RESUME)
        except ProviderError as err:
            return ResumeResult(failed={n: str(err) for n in nodes})
        if status != 0:
            why = self._failure(argv, status, stderr)
            return ResumeResult(failed=dict.fromkeys(nodes, why))
        try:
            reported = parse_machines(stdout, "resume_command output")
        except ValueError:
            reported = {}  # the machines started; only their ids are unknown
        return ResumeResult(started={n: reported.get(n) or Instance(n, "", names.INSTANCE_PENDING) for n in nodes})

    def suspend(self, nodes: Sequence[str]) -> SuspendResult:
        if not nodes:
            return SuspendResult()
        argv = self.suspend_command + [hostlists.compress(nodes)]
        try:
            status, _, stderr = self._run(argv, names.SUSPEND)
        except ProviderError as err:
            return SuspendResult(failed={n: str(err) for n in nodes})
        if status != 0:
            why = self._failure(argv, status, stderr)
            return SuspendResult(failed=dict.fromkeys(nodes, why))
        return SuspendResult(stopped=list(nodes))

    def instances(self) -> dict[str, Instance] | None:
        if self.list_command is None:
            return None
        status, stdout, stderr = self._run(self.list_command, "list")
        if status != 0:
            raise ProviderError(self._failure(self.list_command, status, stderr))
        try:
            return parse_machines(stdout, "list_command output")
        except ValueError as err:
            # Half a list is worse than none: the reconciler would treat the missing nodes as gone.
            raise ProviderError(str(err)) from None
