# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The whole program: config file in, check lines out, and the one scontrol update (or none) against a fake scontrol."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time

import pytest
from health_fakes import FakeScontrol, printing

from hybridhpc_health import __main__ as cli

SRC = pathlib.Path(__file__).resolve().parents[1] / "src"


@pytest.fixture
def scontrol(tmp_path):
    return FakeScontrol(tmp_path)


def write_config(tmp_path, scontrol, checks):
    path = tmp_path / "healthcheck.json"
    path.write_text(json.dumps({"node": "c1", "reason_prefix": "healthcheck", "scontrol": str(scontrol.path), "checks": checks}))
    return str(path)


def passing(tmp_path):
    return [{"name": "tmp", "type": "free_space", "path": str(tmp_path), "min_free_mb": 1},
            {"name": "custom", "type": "command", "command": ["true"]}]


def failing(tmp_path):
    ib = printing(tmp_path, "check-ib", "", 1, "mlx5_0 port 1: State Down\n")
    return [{"name": "tmp", "type": "free_space", "path": str(tmp_path), "min_free_mb": 1},
            {"name": "ib", "type": "command", "command": [str(ib)]},
            {"name": "scratch", "type": "mount", "path": str(tmp_path / "nowhere"), "timeout": 5}]


REASON = "healthcheck: ib: exit 1: mlx5_0 port 1: State Down (+1 more)"


def run(config, capsys, *extra):
    assert cli.main(["--config", config, *extra], syslog="") == 0
    return capsys.readouterr()


def test_a_failure_drains_the_node_with_the_reason(tmp_path, scontrol, capsys):
    out = run(write_config(tmp_path, scontrol, failing(tmp_path)), capsys)
    assert scontrol.updates() == [["update", "NodeName=c1", "State=DRAIN", "Reason=" + REASON]]
    lines = out.out.splitlines()
    assert lines[0].startswith("tmp pass ") and " MB free" in lines[0]
    assert lines[1].startswith("ib FAIL ") and lines[1].endswith("s exit 1: mlx5_0 port 1: State Down")
    assert lines[2].startswith("scratch FAIL ") and "is not mounted" in lines[2]
    assert lines[3] == "action: drain c1: " + REASON
    assert "drain c1: " + REASON in out.err  # the log (stderr here: no syslog socket)


def test_no_re_drain_when_the_node_already_has_this_reason(tmp_path, scontrol, capsys):
    scontrol.set("IDLE+DRAIN", REASON)
    out = run(write_config(tmp_path, scontrol, failing(tmp_path)), capsys)
    assert scontrol.calls() == [["show", "node", "-o", "c1"]]
    assert "action: none c1: already drained with this reason" in out.out


def test_a_new_failure_replaces_our_old_reason(tmp_path, scontrol, capsys):
    scontrol.set("IDLE+DRAIN", "healthcheck: gpu: missing /dev/nvidia0")
    run(write_config(tmp_path, scontrol, failing(tmp_path)), capsys)
    assert scontrol.updates() == [["update", "NodeName=c1", "State=DRAIN", "Reason=" + REASON]]


def test_all_passing_resumes_a_node_we_drained(tmp_path, scontrol, capsys):
    scontrol.set("IDLE+DRAIN", REASON)
    out = run(write_config(tmp_path, scontrol, passing(tmp_path)), capsys)
    assert scontrol.updates() == [["update", "NodeName=c1", "State=RESUME"]]
    assert "action: resume c1 (was: %s)" % REASON in out.out


@pytest.mark.parametrize("checks", [passing, failing])
def test_an_admin_drain_is_left_alone(tmp_path, scontrol, capsys, checks):
    scontrol.set("IDLE+DRAIN", "replacing DIMM B2, ticket 4711", who="alice@2026-12-01T09:00:00")
    out = run(write_config(tmp_path, scontrol, checks(tmp_path)), capsys)
    assert scontrol.updates() == []
    assert "(replacing DIMM B2, ticket 4711)" in out.out


@pytest.mark.parametrize("checks", [passing, failing])
def test_a_down_node_is_left_alone(tmp_path, scontrol, capsys, checks):
    scontrol.set("DOWN+DRAIN+NOT_RESPONDING", REASON)
    out = run(write_config(tmp_path, scontrol, checks(tmp_path)), capsys)
    assert scontrol.updates() == []
    assert "action: none c1: node is DOWN: left to slurmctld" in out.out


def test_a_healthy_node_gets_no_update(tmp_path, scontrol, capsys):
    out = run(write_config(tmp_path, scontrol, passing(tmp_path)), capsys)
    assert scontrol.updates() == []
    assert out.out.splitlines()[-1] == "action: none c1: healthy"


def test_dry_run_updates_nothing_and_prints_the_update(tmp_path, scontrol, capsys):
    out = run(write_config(tmp_path, scontrol, failing(tmp_path)), capsys, "--dry-run")
    assert scontrol.updates() == []  # only the read-only `show node`
    assert "dry-run: would run: %s update NodeName=c1 State=DRAIN Reason=%s" % (scontrol.path, REASON) in out.out
    scontrol.set("IDLE+DRAIN", REASON)
    out = run(write_config(tmp_path, scontrol, passing(tmp_path)), capsys, "--dry-run")
    assert scontrol.updates() == []
    assert "update NodeName=c1 State=RESUME" in out.out


def test_an_unreadable_node_state_still_drains_on_failure(tmp_path, capsys):
    broken = FakeScontrol(tmp_path)
    broken.node_file.write_text("")  # prints nothing: not a node line
    out = run(write_config(tmp_path, broken, failing(tmp_path)), capsys)
    assert broken.updates() == [["update", "NodeName=c1", "State=DRAIN", "Reason=" + REASON]]
    assert "cannot read the node state" in out.err


def test_the_module_as_slurmd_runs_it_exits_0_with_a_hung_check(tmp_path, scontrol):
    config = write_config(tmp_path, scontrol, [
        {"name": "hang", "type": "command", "command": ["sleep", "60"], "timeout": 1},
        {"name": "custom", "type": "command", "command": ["true"]},
    ])
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "hybridhpc_health", "--config", config], capture_output=True, text=True, timeout=30,
                          env={"PYTHONPATH": str(SRC)}, cwd=tmp_path)  # no PATH, as slurmd may run it
    assert time.monotonic() - started < 20
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0].startswith("hang FAIL ") and proc.stdout.splitlines()[0].endswith("timed out after 1 s")
    assert scontrol.updates() == [["update", "NodeName=c1", "State=DRAIN", "Reason=healthcheck: hang: timed out after 1 s"]]
    assert os.environ.get("PATH")  # untouched in this process
