# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""slurm_auth_state: the controller's running type, the switch record, and while it moves, its nodes and jobs."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import json
import os
import time

import pytest

from ansible_collections.hybridhpc.slurm.plugins.modules import slurm_auth_state

NODES = ("NodeName=c1 State=MIXED SlurmdStartTime=2026-12-04T01:30:00\n"
         "NodeName=c2 State=IDLE+CLOUD+POWERED_DOWN SlurmdStartTime=None\n")
JOBS = "41|2026-12-04T01:25:00|c[1-2]\n"


@pytest.fixture
def lab(tmp_path, monkeypatch):
    """A slurm.conf, a record file and scontrol/squeue on PATH that log their calls."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    for name, out, rc in (("scontrol", NODES, 0), ("squeue", JOBS, 0)):
        script = bindir / name
        script.write_text("#!/bin/sh\necho %s \"$@\" >> %s\ncat <<'EOF'\n%sEOF\nexit %d\n" % (name, calls, out, rc))
        script.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ["PATH"]))
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    conf = tmp_path / "slurm.conf"
    yield {"conf": conf, "record": tmp_path / "state" / "auth.json", "calls": calls, "bin": bindir,
           "markers": tmp_path}
    monkeypatch.delenv("TZ")
    time.tzset()


@pytest.fixture
def run_module(module_main, lab):
    def run(args, check_mode=False):
        full = dict({"slurm_conf": str(lab["conf"]), "record_file": str(lab["record"]),
                     "markers_dir": str(lab["markers"])}, **args)
        return module_main(slurm_auth_state.main, full, check_mode)
    return run


def test_a_settled_cluster_is_read_without_asking_slurm(run_module, lab):
    lab["conf"].write_text("AuthType=auth/munge\nAuthAltTypes=auth/jwt\n")
    result = run_module({"wanted": "munge"})
    assert result["current"] == {"type": "auth/munge", "alt": ["auth/jwt"]}
    assert result["nodes"] is None and result["jobs"] is None and result["record"] is None
    assert not result["changed"] and not result["pending_restart"] and not lab["calls"].exists()
    # The run that switches reads the same, and nothing more either.
    assert run_module({"wanted": "slurm"})["nodes"] is None and not lab["calls"].exists()


def test_while_the_old_type_is_accepted_the_nodes_and_jobs_are_read(run_module, lab):
    lab["conf"].write_text("AuthType=auth/slurm\nAuthAltTypes=auth/munge,auth/jwt\n")
    lab["record"].parent.mkdir()
    lab["record"].write_text(json.dumps({"from": "munge", "to": "slurm", "since": 5.0}))
    (lab["markers"] / "hybridhpc-pending-restart").write_text("")
    result = run_module({"wanted": "slurm"})
    assert result["record"] == {"from": "munge", "to": "slurm", "since": 5.0}
    assert result["nodes"] == {"c1": 1796347800.0, "c2": None}
    assert result["jobs"] == [{"id": "41", "start": 1796347500.0, "nodes": ["c1", "c2"]}]
    assert result["pending_restart"] is True
    calls = lab["calls"].read_text()
    assert "scontrol -o show node" in calls and "squeue --local -h -t R,S,CG -o %i|%S|%N" in calls


def test_a_slurmctld_that_does_not_answer_leaves_nodes_and_jobs_unknown(run_module, lab):
    lab["conf"].write_text("AuthType=auth/slurm\nAuthAltTypes=auth/munge\n")
    (lab["bin"] / "squeue").write_text("#!/bin/sh\necho 'slurm_load_jobs error: Unable to contact' >&2\nexit 1\n")
    result = run_module({"wanted": "slurm"})
    assert result["nodes"] is None and result["jobs"] is None


def test_the_switch_is_recorded_now_and_not_in_check_mode(run_module, lab):
    before = time.time()
    assert run_module({"wanted": "slurm", "record": "munge"}, check_mode=True)["changed"]
    assert not lab["record"].exists()
    result = run_module({"wanted": "slurm", "record": "munge"})
    written = json.loads(lab["record"].read_text())
    assert result["changed"] and written == result["record"]
    assert written["from"] == "munge" and written["to"] == "slurm" and before <= written["since"] <= time.time()
