# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Slurm boundary: reading ``scontrol show node -o`` and the exact argv of each update, against a fake scontrol."""

from __future__ import annotations

import pytest
from health_fakes import FakeScontrol, script

from hybridhpc_health.slurm import Scontrol, SlurmError, parse_node_line


def test_parse_reads_state_flags_and_the_reason_without_slurms_suffix(tmp_path):
    fake = FakeScontrol(tmp_path)
    fake.set("IDLE+DRAIN", "healthcheck: scratch: /scratch is not mounted (+1 more)", who="slurm@2026-12-02T13:40:12")
    states, reason = parse_node_line(fake.node_file.read_text())
    assert states == {"IDLE", "DRAIN"}
    assert reason == "healthcheck: scratch: /scratch is not mounted (+1 more)"


def test_parse_without_reason_and_with_trailing_fields():
    states, reason = parse_node_line("NodeName=c1 Arch=x86_64 State=DOWN+NOT_RESPONDING ThreadsPerCore=2")
    assert states == {"DOWN", "NOT_RESPONDING"} and reason == ""
    states, reason = parse_node_line("NodeName=c1 State=IDLE+DRAIN Reason=replacing [the] DIMM [root@2026-12-01T09:00:00] Comment=ticket 42")
    assert states == {"IDLE", "DRAIN"} and reason == "replacing [the] DIMM"
    assert parse_node_line("NodeName=c1 State=IDLE Reason=(null)")[1] == ""


@pytest.mark.parametrize("text", ["", "Node c9 not found", "NodeName=c1 Arch=x86_64"])
def test_parse_refuses_what_is_not_a_node_line(text):
    with pytest.raises(SlurmError):
        parse_node_line(text)


def test_node_state_drain_and_resume_run_these_argvs(tmp_path):
    fake = FakeScontrol(tmp_path)
    fake.set("MIXED+DRAIN", "healthcheck: gpu: missing /dev/nvidia0")
    scontrol = Scontrol(str(fake.path))
    assert scontrol.node_state("c1") == ({"MIXED", "DRAIN"}, "healthcheck: gpu: missing /dev/nvidia0")
    scontrol.drain("c1", "healthcheck: tmp: /tmp has 3 MB free, needs 1024")
    scontrol.resume("c1")
    assert fake.calls() == [
        ["show", "node", "-o", "c1"],
        ["update", "NodeName=c1", "State=DRAIN", "Reason=healthcheck: tmp: /tmp has 3 MB free, needs 1024"],
        ["update", "NodeName=c1", "State=RESUME"],
    ]


def test_dry_run_prints_the_updates_and_runs_none(tmp_path):
    fake = FakeScontrol(tmp_path)
    printed = []
    scontrol = Scontrol(str(fake.path), dry_run=True, out=printed.append)
    scontrol.drain("c1", "healthcheck: x: y")
    scontrol.resume("c1")
    assert fake.calls() == []
    assert printed == ["dry-run: would run: %s update NodeName=c1 State=DRAIN Reason=healthcheck: x: y" % fake.path,
                       "dry-run: would run: %s update NodeName=c1 State=RESUME" % fake.path]


def test_a_failing_scontrol_is_a_slurm_error_with_its_message(tmp_path):
    bad = script(tmp_path, "scontrol", "echo 'slurm_load_node error: Unable to contact slurm controller' >&2; exit 1")
    with pytest.raises(SlurmError, match="Unable to contact slurm controller"):
        Scontrol(str(bad)).node_state("c1")
    with pytest.raises(SlurmError):
        Scontrol(str(tmp_path / "none")).resume("c1")
