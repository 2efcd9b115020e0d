"""The request queue: atomic files, oldest first, later requests supersede earlier ones."""

from __future__ import annotations

import json
import os

import pytest

from hybridhpc_power import names, queue
from hybridhpc_power.queue import Request


def req(action, nodes, at, id_=None):
    return Request(action, tuple(nodes), at, id_ or "%s-%s" % (action, at))


def test_a_written_request_reads_back_and_leaves_no_temporary_file(tmp_path):
    sent = queue.write(str(tmp_path), names.RESUME, ["c1", "c2"], now=1795489200.25)
    assert os.listdir(tmp_path) == [os.path.basename(sent.path)]
    data = json.loads(open(sent.path).read())
    assert data == {"action": "resume", "nodes": ["c1", "c2"], "at": "2026-11-24T03:00:00.250000Z", "id": sent.id}
    got, bad = queue.read(str(tmp_path))
    assert bad == [] and got == [Request("resume", ("c1", "c2"), 1795489200.25, sent.id, sent.path)]


def test_requests_read_oldest_first_whatever_their_file_names(tmp_path):
    late = queue.write(str(tmp_path), names.SUSPEND, ["c1"], now=2000.0)
    early = queue.write(str(tmp_path), names.RESUME, ["c1"], now=1000.0)
    got, _ = queue.read(str(tmp_path))
    assert [r.id for r in got] == [early.id, late.id]


def test_files_being_written_and_other_files_are_skipped(tmp_path):
    (tmp_path / (names.TMP_PREFIX + "abc")).write_text("{")
    (tmp_path / "README").write_text("x")
    assert queue.read(str(tmp_path)) == ([], [])


@pytest.mark.parametrize("content,why", [
    ("{", "Expecting"),
    ("[]", "not a JSON object"),
    ('{"action": "reboot", "nodes": ["c1"], "at": "2026-11-24T03:00:00Z", "id": "x"}', "action must be one of"),
    ('{"action": "resume", "nodes": "c1", "at": "2026-11-24T03:00:00Z", "id": "x"}', "nodes must be a list"),
    ('{"action": "resume", "nodes": ["c1"], "at": 5, "id": "x"}', "at must be"),
    ('{"action": "resume", "nodes": ["c1"], "at": "2026-11-24T03:00:00Z"}', "id must be"),
])
def test_unreadable_requests_are_reported_not_used(tmp_path, content, why):
    (tmp_path / "1-x.json").write_text(content)
    got, bad = queue.read(str(tmp_path))
    assert got == [] and len(bad) == 1 and why in bad[0][1]


def test_a_missing_queue_dir_is_an_empty_queue(tmp_path):
    assert queue.read(str(tmp_path / "nope")) == ([], [])


@pytest.mark.parametrize("requests,expected", [
    # one request: every node gets it
    ([req("resume", ["c1", "c2"], 1)], {"c1": "resume", "c2": "resume"}),
    # a later request supersedes an earlier one, both ways
    ([req("resume", ["c1"], 1), req("suspend", ["c1"], 2)], {"c1": "suspend"}),
    ([req("suspend", ["c1"], 1), req("resume", ["c1"], 2)], {"c1": "resume"}),
    ([req("resume", ["c1"], 1), req("resume-fail", ["c1"], 2)], {"c1": "resume-fail"}),
    ([req("resume-fail", ["c1"], 1), req("resume", ["c1"], 2)], {"c1": "resume"}),
    # input order does not matter, time does
    ([req("suspend", ["c1"], 2), req("resume", ["c1"], 1)], {"c1": "suspend"}),
    # partial overlap: only the shared node changes
    ([req("resume", ["c1", "c2", "c3"], 1), req("suspend", ["c2"], 2)], {"c1": "resume", "c2": "suspend", "c3": "resume"}),
    # equal times keep queue order
    ([req("resume", ["c1"], 5, "a"), req("suspend", ["c1"], 5, "b")], {"c1": "suspend"}),
    ([], {}),
])
def test_coalesce_keeps_the_latest_request_per_node(requests, expected):
    assert {n: r.action for n, r in queue.coalesce(requests).items()} == expected


def test_coalesce_keeps_the_deciding_request_for_its_time():
    first, second = req("resume", ["c1", "c2"], 1), req("resume", ["c2"], 7)
    decided = queue.coalesce([first, second])
    assert decided["c1"] is first and decided["c2"] is second


def test_by_action_groups_sorted_nodes():
    decided = queue.coalesce([req("resume", ["c3", "c1"], 1), req("suspend", ["c2"], 2)])
    assert queue.by_action(decided) == {"resume": ["c1", "c3"], "suspend": ["c2"]}


def test_stale_temporary_files_are_removed_fresh_ones_kept(tmp_path):
    old, fresh = tmp_path / (names.TMP_PREFIX + "old"), tmp_path / (names.TMP_PREFIX + "new")
    old.write_text("{")
    fresh.write_text("{")
    os.utime(old, (1000, 1000))
    os.utime(fresh, (1990, 1990))
    assert queue.remove_stale_tmp(str(tmp_path), now=2000.0) == [str(old)]
    assert sorted(os.listdir(tmp_path)) == [fresh.name]
