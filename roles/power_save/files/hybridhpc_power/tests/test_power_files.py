"""files.write_atomically: the queue's requests, the state file and the aws provider's state all go through it."""

import os

import pytest

from hybridhpc_power import files, names, queue, state


def test_the_file_gets_its_mode_only_whole_and_no_temporary_file_stays(tmp_path):
    target = tmp_path / "state.json"
    files.write_atomically(str(target), "{}", 0o644)
    assert target.read_text() == "{}"
    assert target.stat().st_mode & 0o777 == 0o644
    assert os.listdir(tmp_path) == ["state.json"]


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "state.json"
    target.write_text("old")

    def refuse(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        files.write_atomically(str(target), "new", 0o644)
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["state.json"]


def test_requests_are_group_readable_and_state_world_readable(tmp_path):
    """SlurmUser writes requests the root worker reads (0640); status runs as any user (0644)."""
    request = queue.write(str(tmp_path), names.RESUME, ["cloud-dy-1"], now=1.0)
    assert os.stat(request.path).st_mode & 0o777 == 0o640
    state_file = tmp_path / "state" / "state.json"
    state.save(str(state_file), {})
    assert state_file.stat().st_mode & 0o777 == 0o644
