"""The vendored hostlist (through hostlists.py) and the transition log format."""

from __future__ import annotations

import io

import pytest

from hybridhpc_power import hostlists
from hybridhpc_power.logs import TransitionLog, format_line


@pytest.mark.parametrize("text,names", [
    ("cloud-dy-[1-3,5]", ["cloud-dy-1", "cloud-dy-2", "cloud-dy-3", "cloud-dy-5"]),
    ("cl-[01-02],gpu1", ["cl-01", "cl-02", "gpu1"]),
    ("c1,c1,c2", ["c1", "c2"]),  # slurmctld never repeats a node; if it did, one request per node
])
def test_expand(text, names):
    assert hostlists.expand(text) == names


@pytest.mark.parametrize("names,text", [
    (["c3", "c1", "c2", "c10"], "c[1-3,10]"),
    (["c2", "c1", "c2"], "c[1-2]"),
    (["a1", "b2"], "a1,b2"),
    ([], ""),
])
def test_compress_sorts_and_deduplicates(names, text):
    assert hostlists.compress(names) == text


def test_compress_falls_back_when_slurms_sort_would_break():
    # Mixed zero padding of one prefix: Slurm's own hostlistsorted misbehaves; we still name every node.
    names = ["n999", "n1000", "n0002"]
    assert sorted(hostlists.expand(hostlists.compress(names))) == sorted(names)


def test_log_lines_are_key_value_pairs_with_quoted_free_text():
    line = format_line(1795489200, {"node": "cloud-dy-1", "action": "resume", "result": "failed",
                                    "reason": 'quota "x" = 0', "instance": None, "empty": ""})
    assert line == '2026-11-24T03:00:00Z node=cloud-dy-1 action=resume result=failed reason="quota \\"x\\" = 0"'


def test_log_goes_to_file_and_stream(tmp_path):
    stream = io.StringIO()
    log = TransitionLog(str(tmp_path / "power.log"), stream, clock=lambda: 1795489200)
    log.node("c1", "resume", "started", instance="i-1")
    log.flush()
    expected = "2026-11-24T03:00:00Z node=c1 action=resume result=started instance=i-1\n"
    assert (tmp_path / "power.log").read_text() == expected and stream.getvalue() == expected


def test_an_unwritable_log_file_is_reported_on_the_stream_and_not_fatal(tmp_path):
    stream = io.StringIO()
    log = TransitionLog(str(tmp_path / "missing-dir" / "power.log"), stream, clock=lambda: 0)
    log.node("c1", "resume", "requested")
    log.flush()
    assert "node=c1" in stream.getvalue() and "cannot write" in stream.getvalue() and log.file_error
