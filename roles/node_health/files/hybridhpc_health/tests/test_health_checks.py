# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Each check type passing and failing, called directly (the runner's child process is tested in test_health_runner.py)."""

from __future__ import annotations

import os

import pytest
from health_fakes import calls, make_check, printing

from hybridhpc_health import checks
from hybridhpc_health.checks import CheckFailed

SLURMD_C = ("NodeName=c1 CPUs=4 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=3915\n"
            "UpTime=0-01:02:03\n")


def mountinfo(tmp_path, *entries):
    """A /proc/self/mountinfo with (mount point, fstype) entries after the root."""
    lines = ["22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw"]
    for i, (point, fstype) in enumerate(entries):
        escaped = point.replace(" ", "\\040")
        lines.append("%d 22 0:%d / %s rw,relatime shared:%d - %s srv:/export rw,vers=4.2" % (30 + i, 50 + i, escaped, 5 + i, fstype))
    path = tmp_path / "mountinfo"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


# -- mount --

def test_mount_passes_for_a_listed_mount_point_of_the_right_type(tmp_path):
    point = tmp_path / "my scratch"
    point.mkdir()
    check = make_check("mount", path=str(point), fstype="nfs4", mountinfo=mountinfo(tmp_path, (str(point), "nfs4")))
    assert checks.mount(check) == "%s mounted (nfs4)" % point


def test_mount_fails_when_not_mounted(tmp_path):
    point = tmp_path / "scratch"
    point.mkdir()
    check = make_check("mount", path=str(point), mountinfo=mountinfo(tmp_path, ("/elsewhere", "nfs4")))
    with pytest.raises(CheckFailed, match="is not mounted"):
        checks.mount(check)


def test_mount_fails_on_the_wrong_fstype(tmp_path):
    point = tmp_path / "scratch"
    point.mkdir()
    check = make_check("mount", path=str(point), fstype="nfs4", mountinfo=mountinfo(tmp_path, (str(point), "tmpfs")))
    with pytest.raises(CheckFailed, match="is tmpfs, not nfs4"):
        checks.mount(check)


def test_mount_of_the_real_root_passes():
    assert "mounted" in checks.mount(make_check("mount", path="/"))


# -- free_space --

def test_free_space_passes_and_fails_on_the_threshold(tmp_path):
    assert "MB free" in checks.free_space(make_check("free_space", path=str(tmp_path), min_free_mb=1))
    with pytest.raises(CheckFailed, match=r"MB free, needs 1e\+12"):
        checks.free_space(make_check("free_space", path=str(tmp_path), min_free_mb=10**12))


def test_free_space_of_a_missing_path_fails(tmp_path):
    with pytest.raises(FileNotFoundError):
        checks.free_space(make_check("free_space", path=str(tmp_path / "gone"), min_free_mb=1))


# -- memory --

def meminfo(tmp_path, available_kb):
    path = tmp_path / "meminfo"
    lines = ["MemTotal:        4015788 kB", "MemFree:          102400 kB"]
    if available_kb is not None:
        lines.append("MemAvailable:    %8d kB" % available_kb)
    lines.append("Buffers:           10240 kB")
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_memory_passes_with_enough_available(tmp_path):
    assert checks.memory(make_check("memory", min_available_mb=512, meminfo=meminfo(tmp_path, 2048000))) == "2000 MB available"


def test_memory_fails_below_the_minimum(tmp_path):
    with pytest.raises(CheckFailed, match="400 MB available, needs 512"):
        checks.memory(make_check("memory", min_available_mb=512, meminfo=meminfo(tmp_path, 409600)))


def test_memory_fails_without_memavailable(tmp_path):
    with pytest.raises(CheckFailed, match="no MemAvailable"):
        checks.memory(make_check("memory", min_available_mb=512, meminfo=meminfo(tmp_path, None)))


# -- gpu --

@pytest.fixture
def devices(tmp_path):
    paths = [tmp_path / "nvidia0", tmp_path / "nvidia1"]
    for p in paths:
        p.write_text("")
    return [str(p) for p in paths]


def nvidia_smi(tmp_path, gpus, exit_code=0, stderr=""):
    out = "".join("GPU %d: NVIDIA A100-SXM4-40GB (UUID: GPU-%08d)\n" % (i, i) for i in range(gpus))
    return printing(tmp_path, "nvidia-smi", out, exit_code, stderr)


def test_gpu_passes_with_devices_and_the_expected_count(tmp_path, devices):
    smi = nvidia_smi(tmp_path, 2)
    assert checks.gpu(make_check("gpu", devices=devices, command=[str(smi), "-L"], expect_count=2)) == "2 devices, 2 GPUs listed"
    assert calls(smi) == [["-L"]]


def test_gpu_fails_on_a_missing_device(tmp_path, devices):
    with pytest.raises(CheckFailed, match="missing .*/nvidia7"):
        checks.gpu(make_check("gpu", devices=[*devices, str(tmp_path / "nvidia7")]))


def test_gpu_fails_on_the_wrong_count(tmp_path, devices):
    smi = nvidia_smi(tmp_path, 1)
    with pytest.raises(CheckFailed, match="nvidia-smi lists 1 GPUs, expected 2"):
        checks.gpu(make_check("gpu", devices=devices, command=[str(smi), "-L"], expect_count=2))


def test_gpu_fails_when_the_command_fails(tmp_path, devices):
    smi = nvidia_smi(tmp_path, 0, exit_code=9, stderr="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n")
    with pytest.raises(CheckFailed, match="exit 9: NVIDIA-SMI has failed because it couldn't communicate"):
        checks.gpu(make_check("gpu", devices=devices, command=[str(smi), "-L"], expect_count=2))


def test_gpu_command_not_found_fails(tmp_path):
    with pytest.raises(CheckFailed, match="cannot run .*no-such-smi: not found"):
        checks.gpu(make_check("gpu", command=[str(tmp_path / "no-such-smi"), "-L"]))


# -- slurmd_view --

EXPECT = {"CPUs": 4, "RealMemory": 3000, "Sockets": 1, "CoresPerSocket": 2, "ThreadsPerCore": 2}


def test_parse_slurmd_c_derives_sockets_from_boards_and_sockets_per_board():
    fields = checks.parse_slurmd_c("NodeName=c1 CPUs=16 Boards=2 SocketsPerBoard=2 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=64000\n")
    assert fields["Sockets"] == 4 and fields["CPUs"] == 16 and fields["RealMemory"] == 64000


def test_slurmd_view_passes_when_slurmd_sees_the_declared_hardware(tmp_path):
    slurmd = printing(tmp_path, "slurmd", SLURMD_C)
    detail = checks.slurmd_view(make_check("slurmd_view", expect=EXPECT, slurmd=str(slurmd)))
    assert "CPUs=4" in detail and "RealMemory=3915" in detail
    assert calls(slurmd) == [["-C"]]


@pytest.mark.parametrize("line,message", [
    ("NodeName=c1 CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=1 ThreadsPerCore=2 RealMemory=3915", "CPUs=2 != 4, CoresPerSocket=1 != 2"),
    ("NodeName=c1 CPUs=4 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=2900", "RealMemory=2900 < 3000"),
    ("NodeName=c1 CPUs=4 Boards=1 SocketsPerBoard=2 CoresPerSocket=1 ThreadsPerCore=2 RealMemory=3915", "Sockets=2 != 1, CoresPerSocket=1 != 2"),
])
def test_slurmd_view_fails_on_a_mismatch(tmp_path, line, message):
    slurmd = printing(tmp_path, "slurmd", line + "\nUpTime=0-00:01:00\n")
    with pytest.raises(CheckFailed, match="slurmd sees " + message):
        checks.slurmd_view(make_check("slurmd_view", expect=EXPECT, slurmd=str(slurmd)))


def test_slurmd_view_more_memory_than_declared_passes(tmp_path):
    slurmd = printing(tmp_path, "slurmd", SLURMD_C.replace("3915", "128000"))
    assert "RealMemory=128000" in checks.slurmd_view(make_check("slurmd_view", expect=EXPECT, slurmd=str(slurmd)))


def test_slurmd_view_at_least_passes_more_and_fails_less(tmp_path):
    # As slurmctld judges a registering node: more than slurm.conf declares is fine, less is not.
    bigger = printing(tmp_path, "slurmd", "NodeName=c1 CPUs=8 Boards=1 SocketsPerBoard=2 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=8000\n")
    assert "CPUs=8" in checks.slurmd_view(make_check("slurmd_view", expect=EXPECT, slurmd=str(bigger), compare="at_least"))
    smaller = printing(tmp_path, "slurmd", "NodeName=c1 CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=8000\n")
    with pytest.raises(CheckFailed, match="slurmd sees CPUs=2 < 4, ThreadsPerCore=1 < 2"):
        checks.slurmd_view(make_check("slurmd_view", expect=EXPECT, slurmd=str(smaller), compare="at_least"))


def test_slurmd_view_fails_when_slurmd_fails(tmp_path):
    slurmd = printing(tmp_path, "slurmd", "", 1, "slurmd: error: Couldn't load specified plugin name\n")
    with pytest.raises(CheckFailed, match="exit 1: slurmd: error: Couldn't load"):
        checks.slurmd_view(make_check("slurmd_view", expect=EXPECT, slurmd=str(slurmd)))


# -- command --

def test_command_exit_0_passes(tmp_path):
    cmd = printing(tmp_path, "check-ib", "all ports up\n")
    assert checks.command(make_check("command", command=[str(cmd), "--quick"])) == "exit 0"
    assert calls(cmd) == [["--quick"]]


def test_command_failure_detail_is_the_last_stderr_line(tmp_path):
    cmd = printing(tmp_path, "check-ib", "stdout is ignored\n", 3, "checking mlx5_0\nmlx5_0 port 1: State Down\n\n")
    with pytest.raises(CheckFailed) as failed:
        checks.command(make_check("command", command=[str(cmd)]))
    assert str(failed.value) == "exit 3: mlx5_0 port 1: State Down"


def test_command_failure_without_stderr_names_the_exit(tmp_path):
    cmd = printing(tmp_path, "check-ib", "", 4)
    with pytest.raises(CheckFailed, match="^check-ib exit 4$"):
        checks.command(make_check("command", command=[str(cmd)]))


def test_every_config_type_has_a_check():
    from hybridhpc_health import config
    assert set(checks.CHECKS) == set(config.TYPES)
    assert os.path.basename(config.DEFAULT_MEMINFO) == "meminfo"
