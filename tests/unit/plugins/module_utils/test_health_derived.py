"""The health checks a node's slurm.conf line and gres.conf imply."""

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import health_derived

NODES = [
    {"NodeName": "c[1-2]", "CPUs": 4, "Sockets": 2, "CoresPerSocket": 2, "ThreadsPerCore": 1, "RealMemory": 3000},
    {"NodeName": "g1", "CPUs": 8, "RealMemory": 16000, "Gres": "gpu:a100:2,mps:200"},
    {"NodeName": "g2", "CPUs": 8, "RealMemory": 16000, "Gres": "gpu:1"},
]
GRES = [
    {"Name": "gpu", "Type": "a100", "File": "/dev/nvidia[0-1]", "NodeName": "g1"},
    {"Name": "mps", "Count": 200, "NodeName": "g1"},
    {"Name": "gpu", "AutoDetect": "nvml", "NodeName": "g2"},
]


def test_slurmd_view_expects_at_least_the_lines_cpus_and_memory():
    assert health_derived.derived_checks("c2", NODES, GRES) == [
        {"name": "slurmd_view", "type": "slurmd_view", "expect": {"CPUs": 4, "RealMemory": 3000}, "compare": "at_least"}]


def test_gpus_of_the_line_are_checked_by_their_device_files_and_with_a_command_their_count():
    checks = {c["name"]: c for c in health_derived.derived_checks("g1", NODES, GRES)}
    assert checks["gpu"] == {"name": "gpu", "type": "gpu", "devices": ["/dev/nvidia0", "/dev/nvidia1"]}
    checks = {c["name"]: c for c in health_derived.derived_checks("g1", NODES, GRES, gpu_command=["/opt/smi", "-L"])}
    assert checks["gpu"]["command"] == ["/opt/smi", "-L"] and checks["gpu"]["expect_count"] == 2


def test_autodetect_nvml_gets_nvidia_smi_and_no_device_files():
    checks = {c["name"]: c for c in health_derived.derived_checks("g2", NODES, GRES)}
    assert checks["gpu"] == {"name": "gpu", "type": "gpu", "command": ["/usr/bin/nvidia-smi", "-L"], "expect_count": 1, "timeout": 30}


def test_gpus_without_files_or_a_command_add_no_check():
    assert [c["type"] for c in health_derived.derived_checks("g2", NODES, [])] == ["slurmd_view"]


def test_the_inventorys_check_of_a_type_wins_and_derive_false_adds_nothing():
    own = [{"name": "hw", "type": "slurmd_view", "expect": {"CPUs": 2}}]
    assert health_derived.node_checks(own, "c1", NODES, GRES) == own
    assert health_derived.node_checks([], "c1", NODES, GRES, derive=False) == []
    tmp = [{"name": "tmp", "type": "free_space", "path": "/tmp", "min_free_mb": 1}]
    assert [c["name"] for c in health_derived.node_checks(tmp, "g1", NODES, GRES)] == ["tmp", "slurmd_view", "gpu"]


def test_a_node_without_a_line_gets_nothing():
    assert health_derived.derived_checks("x9", NODES, GRES) == []


@pytest.mark.parametrize("pattern, paths", [
    ("/dev/nvidia0", ["/dev/nvidia0"]),
    ("/dev/nvidia[0-2]", ["/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2"]),
    ("/dev/nvidia[0,3]", ["/dev/nvidia0", "/dev/nvidia3"]),
    ("/dev/dri/renderD[128-129]", ["/dev/dri/renderD128", "/dev/dri/renderD129"]),
])
def test_gres_files_expand_their_ranges(pattern, paths):
    gres = [{"Name": "gpu", "File": pattern, "NodeName": "g1"}]
    checks = {c["name"]: c for c in health_derived.derived_checks("g1", NODES, gres)}
    assert checks["gpu"]["devices"] == paths


def test_the_derived_checks_are_valid_for_the_program():
    from ansible_collections.hybridhpc.slurm.plugins.filter.node_health import slurm_health_check_problems
    for node in ("c1", "g1", "g2"):
        assert slurm_health_check_problems(health_derived.derived_checks(node, NODES, GRES, gpu_command=None)) == []
