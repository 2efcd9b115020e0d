"""ResumeProgram / SuspendProgram / ResumeFailProgram: expand, queue, log, return at once."""

from __future__ import annotations

import io
import json
import os
import pathlib
import subprocess
import sys

import pytest

from hybridhpc_power import names, queue
from hybridhpc_power.config import from_dict
from hybridhpc_power.logs import TransitionLog
from hybridhpc_power.programs import request

SRC = pathlib.Path(__file__).resolve().parents[1] / "src"


def make_config(tmp_path, nodes="cloud-dy-[1-4]"):
    (tmp_path / "queue").mkdir(exist_ok=True)
    return from_dict({"cluster": "t", "queue_dir": str(tmp_path / "queue"), "log_file": str(tmp_path / "power.log"),
                      "nodesets": [{"name": "dy", "nodes": nodes, "provider": "docker"}]})


@pytest.mark.parametrize("action", names.ACTIONS)
def test_one_request_file_per_call_and_one_log_line_per_node(tmp_path, action):
    config = make_config(tmp_path)
    stream = io.StringIO()
    assert request(config, action, "cloud-dy-[1-3]", TransitionLog(config.log_file, stream, clock=lambda: 0), now=100.0) == 0
    requests, bad = queue.read(config.queue_dir)
    assert bad == [] and [(r.action, r.nodes, r.at) for r in requests] == [(action, ("cloud-dy-1", "cloud-dy-2", "cloud-dy-3"), 100.0)]
    lines = stream.getvalue().splitlines()
    assert lines == ["1970-01-01T00:00:00Z node=cloud-dy-%d action=%s result=requested request=%s" % (i, action, requests[0].id)
                     for i in (1, 2, 3)]


def test_nodes_in_no_nodeset_are_not_queued_and_fail_the_call(tmp_path):
    config = make_config(tmp_path)
    stream = io.StringIO()
    assert request(config, names.RESUME, "cloud-dy-[4-5],login1", TransitionLog(None, stream)) == 1
    requests, _ = queue.read(config.queue_dir)
    assert [r.nodes for r in requests] == [("cloud-dy-4",)]
    assert "node=cloud-dy-5 action=resume result=rejected" in stream.getvalue()
    assert "node=login1 action=resume result=rejected" in stream.getvalue()


def test_only_unknown_nodes_queue_nothing(tmp_path):
    config = make_config(tmp_path)
    assert request(config, names.SUSPEND, "other-[1-2]", TransitionLog(None, io.StringIO())) == 1
    assert os.listdir(config.queue_dir) == []


def test_a_bad_hostlist_is_rejected(tmp_path):
    config = make_config(tmp_path)
    stream = io.StringIO()
    assert request(config, names.RESUME, "cloud-dy-[3-1]", TransitionLog(None, stream)) == 2
    assert os.listdir(config.queue_dir) == [] and "result=rejected" in stream.getvalue() and "reversed" in stream.getvalue()


def test_an_unwritable_queue_is_logged_and_fails_the_call(tmp_path):
    config = make_config(tmp_path)
    os.rmdir(config.queue_dir)
    stream = io.StringIO()
    assert request(config, names.RESUME, "cloud-dy-1", TransitionLog(None, stream)) == 1
    assert "node=cloud-dy-1 action=resume result=failed" in stream.getvalue()


def test_the_program_command_queues_ten_thousand_nodes_without_provider_or_slurm(tmp_path):
    """The real entry point, as slurmctld runs it: no provider import, no Slurm call, no waiting.

    Its seconds are measured by tests/bench/bench_power.py (make bench-power)."""
    config = make_config(tmp_path, "cloud-dy-[1-10000]")
    path = tmp_path / "power.json"
    path.write_text(json.dumps({"cluster": "t", "queue_dir": config.queue_dir, "log_file": config.log_file,
                                "nodesets": [{"name": "dy", "nodes": "cloud-dy-[1-10000]", "provider": "aws"}]}))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(SRC)}
    argv = [sys.executable, "-X", "importtime", "-m", "hybridhpc_power", "--config", str(path), "resume", "cloud-dy-[1-10000]"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    imported = done.stderr
    for module in ("boto3", "hybridhpc_power.providers.aws", "hybridhpc_power.providers.docker", "hybridhpc_power.service", "subprocess"):
        assert " %s\n" % module not in imported, "%s imported on the program path" % module
    requests, _ = queue.read(config.queue_dir)
    assert len(requests) == 1 and len(requests[0].nodes) == 10_000
    assert len(open(config.log_file).read().splitlines()) == 10_000
