# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's SSH bookkeeping: a removed container's entry and persistent connections go, others stay."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

LABCTL = pathlib.Path(__file__).resolve().parents[2] / "lab" / "labctl.py"


@pytest.fixture
def labctl(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("labctl", LABCTL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "SSH_DIR", str(tmp_path))
    (tmp_path / "hosts.d").mkdir()
    (tmp_path / "cp").mkdir()
    closed = []

    def fake_run(argv, **kwargs):
        closed.append(argv[2].split("=", 1)[1])
        pathlib.Path(argv[2].split("=", 1)[1]).unlink()

        class Done:
            returncode = 0
        return Done()

    monkeypatch.setattr(module.subprocess, "run", fake_run)
    module.closed = closed
    return module


def test_forgetting_a_host_closes_only_its_own_connections(labctl, tmp_path):
    (tmp_path / "hosts.d" / "c1.conf").write_text("Host c1\n  HostName 172.18.0.2\n")
    (tmp_path / "hosts.d" / "c2.conf").write_text("Host c2\n  HostName 172.18.0.21\n")
    for name in ("172.18.0.2-root", "172.18.0.21-root"):
        (tmp_path / "cp" / name).write_text("")
    labctl.forget_ssh_hosts(["c1"])
    assert sorted(p.name for p in (tmp_path / "hosts.d").iterdir()) == ["c2.conf"]
    assert sorted(p.name for p in (tmp_path / "cp").iterdir()) == ["172.18.0.21-root"]
    assert labctl.closed == [str(tmp_path / "cp" / "172.18.0.2-root")]


def test_the_ssh_config_names_hosts_through_their_files(labctl, tmp_path):
    labctl.write_ssh_config()
    text = (tmp_path / "config").read_text()
    assert f"Include {tmp_path}/hosts.d/*.conf" in text
    assert f"IdentityFile {tmp_path}/id_ed25519" in text
    assert "User root" in text
