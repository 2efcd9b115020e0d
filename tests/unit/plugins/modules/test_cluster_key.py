# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""cluster_key: a cluster key created on its source host when it has none, and read, in one module run."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import base64
import hashlib
import os

import pytest

from ansible_collections.hybridhpc.slurm.plugins.modules import cluster_key


@pytest.fixture
def run_module(module_main):
    return lambda args, check_mode=False: module_main(cluster_key.main, args, check_mode)


def test_a_missing_key_is_created_owner_only_and_returned(run_module, tmp_path):
    path = tmp_path / "munge.key"
    umask = os.umask(0o022)
    try:
        result = run_module({"path": str(path), "size": 1024})
    finally:
        os.umask(umask)
    key = path.read_bytes()
    assert result["changed"]
    assert len(key) == 1024 and result["size"] == 1024
    assert base64.b64decode(result["content"]) == key
    assert result["sha256"] == hashlib.sha256(key).hexdigest()
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_an_existing_key_is_read_and_never_changed(run_module, tmp_path):
    path = tmp_path / "jwt.key"
    path.write_bytes(b"k" * 40)
    os.chmod(path, 0o400)
    result = run_module({"path": str(path), "size": 32})
    assert not result["changed"]
    assert base64.b64decode(result["content"]) == b"k" * 40
    assert path.read_bytes() == b"k" * 40
    assert os.stat(path).st_mode & 0o777 == 0o400


def test_two_new_keys_differ(run_module, tmp_path):
    first = run_module({"path": str(tmp_path / "a.key"), "size": 32})
    second = run_module({"path": str(tmp_path / "b.key"), "size": 32})
    assert first["content"] != second["content"]


def test_check_mode_creates_nothing(run_module, tmp_path):
    path = tmp_path / "munge.key"
    result = run_module({"path": str(path), "size": 1024}, check_mode=True)
    assert result["changed"] and "content" not in result
    assert not path.exists()


def test_a_short_key_size_is_refused_by_name(run_module, tmp_path):
    result = run_module({"path": str(tmp_path / "k"), "size": 16})
    assert result["failed"] and result["msg"].startswith("size:")
    assert not (tmp_path / "k").exists()


def test_a_missing_directory_is_made_for_the_key(run_module, tmp_path):
    # /etc/slurm on a new source host, before Slurm's packages create it.
    result = run_module({"path": str(tmp_path / "none" / "k"), "size": 32})
    assert result["changed"] and (tmp_path / "none" / "k").stat().st_size == 32
    assert os.stat(tmp_path / "none").st_mode & 0o777 == 0o755
    assert not (tmp_path / "other").exists() and run_module({"path": str(tmp_path / "other" / "k"), "size": 32},
                                                            check_mode=True)["changed"]
    assert not (tmp_path / "other").exists()
