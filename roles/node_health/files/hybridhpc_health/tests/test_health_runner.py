# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The runner: each check in its own child process, killed at its timeout; and the pure drain/resume decision."""

from __future__ import annotations

import os
import pathlib
import signal
import time

import pytest
from health_fakes import make_check

from hybridhpc_health import checks, runner
from hybridhpc_health.runner import Action, Result, decide, drain_reason

# Generous: the point is that the run ends (a hung check would hold it for 60 s or forever), not how fast.
BOUND = 20


@pytest.fixture(autouse=True)
def watchdog():
    """Fail (rather than hang the suite) if a run never ends: the alarm's exception makes run_checks kill its children."""
    def expired(signum, frame):
        raise TimeoutError("run_checks did not return within %d s" % (BOUND + 10))

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(BOUND + 10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def gone(pid: int, wait: float = 5.0) -> bool:
    """The process no longer runs (absent, or a zombie waiting for its reaper)."""
    end = time.monotonic() + wait
    while time.monotonic() < end:
        try:
            state = pathlib.Path("/proc/%d/stat" % pid).read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def test_results_come_back_in_config_order_through_the_child_processes(tmp_path):
    got = runner.run_checks([
        make_check("free_space", name="tmp", path=str(tmp_path), min_free_mb=10**12),
        make_check("command", name="ok", command=["true"]),
        make_check("command", name="bad", command=["sh", "-c", "echo broken >&2; exit 5"]),
    ])
    assert [(r.name, r.ok) for r in got] == [("tmp", False), ("ok", True), ("bad", False)]
    assert "needs 1e+12" in got[0].detail and got[1].detail == "exit 0" and got[2].detail == "exit 5: broken"
    assert all(r.seconds >= 0 for r in got)


def test_a_hung_command_is_killed_at_its_timeout_with_its_process_group(tmp_path):
    pidfile = tmp_path / "sleep.pid"
    started = time.monotonic()
    got = runner.run_checks([
        make_check("command", name="hang", timeout=1, command=["sh", "-c", "echo $$ > %s; exec sleep 60" % pidfile]),
        make_check("command", name="ok", command=["true"]),
    ])
    assert time.monotonic() - started < BOUND
    assert got[0] == Result("hang", False, "timed out after 1 s", got[0].seconds)
    assert got[1].ok
    assert gone(int(pidfile.read_text())), "the sleep the check started is still running"


def test_a_python_check_blocked_in_the_kernel_is_killed(tmp_path):
    fifo = tmp_path / "mountinfo"
    os.mkfifo(fifo)  # open() of a FIFO without a writer blocks forever, as stat() on a dead NFS mount does
    started = time.monotonic()
    got = runner.run_checks([make_check("mount", name="scratch", timeout=1.5, path=str(tmp_path), mountinfo=str(fifo))])
    assert time.monotonic() - started < BOUND
    assert got == [Result("scratch", False, "timed out after 1.5 s", got[0].seconds)]


def test_a_python_check_that_never_returns_is_killed_and_hung_checks_run_concurrently(tmp_path):
    def forever(check):
        (tmp_path / check.name).write_text(str(os.getpid()))
        while True:
            time.sleep(3600)

    functions = dict(checks.CHECKS, forever=forever)
    hung = [make_check("forever", name="f%d" % i, timeout=2) for i in range(4)]
    started = time.monotonic()
    got = runner.run_checks([*hung, make_check("command", name="ok", command=["true"])], functions=functions)
    assert time.monotonic() - started < BOUND
    assert [r.detail for r in got[:4]] == ["timed out after 2 s"] * 4
    assert got[4].ok
    assert all(gone(int((tmp_path / c.name).read_text())) for c in hung), "a killed check process still runs"


def test_checks_run_at_the_same_time(tmp_path):
    # "first" passes only if "second" starts while it runs: run one after the other, first would time out
    marker = tmp_path / "second-started"
    got = runner.run_checks([
        make_check("command", name="first", timeout=15, command=["sh", "-c", "while [ ! -e %s ]; do sleep 0.05; done" % marker]),
        make_check("command", name="second", timeout=1, command=["sh", "-c", "touch %s; exec sleep 60" % marker]),
    ])
    assert [(r.name, r.ok, r.detail) for r in got] == [("first", True, "exit 0"), ("second", False, "timed out after 1 s")]


def test_a_check_that_raises_or_dies_fails_with_the_reason():
    def boom(check):
        raise RuntimeError("no such interface ib0")

    def die(check):
        os._exit(7)

    got = runner.run_checks([make_check("boom"), make_check("die"), make_check("nosuch")], functions={"boom": boom, "die": die})
    assert got[0].detail == "RuntimeError: no such interface ib0" and not got[0].ok
    assert got[1].detail == "check process exited 7 without a result" and not got[1].ok
    assert got[2].detail == "unknown check type 'nosuch'" and not got[2].ok


# -- the decision --

def ok(name):
    return Result(name, True, "fine", 0.1)


def fail(name, detail):
    return Result(name, False, detail, 0.1)


def test_drain_reason_names_the_first_failure_and_counts_the_rest():
    failures = [fail("scratch", "/scratch is not mounted"), fail("gpu", "missing /dev/nvidia0"), fail("memory", "x")]
    assert drain_reason("healthcheck", failures) == "healthcheck: scratch: /scratch is not mounted (+2 more)"
    assert drain_reason("healthcheck", failures[:1]) == "healthcheck: scratch: /scratch is not mounted"


def test_drain_reason_is_one_line_without_double_quotes_and_under_200():
    reason = drain_reason("healthcheck", [fail("custom", 'bad "port"\nstate:\t' + "x" * 500), fail("gpu", "y")])
    assert len(reason) < 200 and "\n" not in reason and '"' not in reason and "\t" not in reason
    assert reason.startswith("healthcheck: custom: bad 'port' state: xxx") and reason.endswith("... (+1 more)")


FAILED = [ok("tmp"), fail("scratch", "/scratch is not mounted")]
OURS = "healthcheck: scratch: /scratch is not mounted"


@pytest.mark.parametrize("results,states,reason,expected", [
    (FAILED, {"IDLE"}, "", Action("drain", OURS)),
    (FAILED, {"ALLOCATED"}, "", Action("drain", OURS)),
    (FAILED, {"IDLE", "DRAIN"}, OURS, Action("none", "already drained with this reason")),
    (FAILED, {"IDLE", "DRAIN"}, "healthcheck: gpu: missing /dev/nvidia0", Action("drain", OURS)),
    (FAILED, {"IDLE", "DRAIN"}, "replacing DIMM", Action("none", "already drained by someone else (replacing DIMM)")),
    (FAILED, {"DOWN", "NOT_RESPONDING"}, "Not responding", Action("none", "node is DOWN: left to slurmctld")),
    (FAILED, None, "", Action("drain", OURS)),
    ([ok("tmp")], {"IDLE", "DRAIN"}, OURS, Action("resume")),
    ([ok("tmp")], {"MIXED", "DRAIN"}, "healthcheck: gpu: x (+1 more)", Action("resume")),
    ([ok("tmp")], {"IDLE", "DRAIN"}, "replacing DIMM", Action("none", "drained by someone else (replacing DIMM): left alone")),
    ([ok("tmp")], {"IDLE", "DRAIN"}, "healthcheckers said so", Action("none", "drained by someone else (healthcheckers said so): left alone")),
    ([ok("tmp")], {"DOWN", "DRAIN"}, OURS, Action("none", "node is DOWN: left to slurmctld")),
    ([ok("tmp")], {"IDLE"}, "", Action("none", "healthy")),
    ([ok("tmp")], None, "", Action("none", "node state unknown, nothing to resume")),
])
def test_decide(results, states, reason, expected):
    assert decide(results, frozenset(states) if states is not None else None, reason, "healthcheck") == expected
