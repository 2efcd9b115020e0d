"""slurm.conf's metrics and health check keys, and what the first play refuses (module_utils/observability.py)."""

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import observability as ob


def test_metrics_auto_only_where_slurm_has_them_and_the_site_is_monitored():
    assert ob.config({}, "auto", {}, "26.05", True) == {"MetricsType": "metrics/openmetrics"}
    assert ob.config({}, "auto", {}, "26.05", False) == {}
    assert ob.config({}, "auto", {}, "24.11", True) == {}
    assert ob.config({}, False, {}, "26.05", True) == {}
    assert ob.config({"MetricsType": "metrics/none"}, True, {}, "26.05", False) == {"MetricsType": "metrics/none"}


def test_health_check_keys_from_slurm_health_check():
    assert ob.config({}, False, {"interval": 60, "node_state": "idle,cycle"}, "24.11", False) == {
        "HealthCheckProgram": "/usr/local/sbin/hybridhpc-health", "HealthCheckInterval": 60, "HealthCheckNodeState": "IDLE,CYCLE"}
    assert ob.config({"HealthCheckInterval": 30}, False, {"interval": 60}, "24.11", False)["HealthCheckInterval"] == 30
    assert ob.config({}, False, {}, "24.11", False) == {}


@pytest.mark.parametrize("metrics, health, major, config, expected", [
    (True, {}, "24.11", {}, "slurm_metrics: true needs Slurm 25.11 or later (this cluster runs 24.11)"),
    ("yes", {}, "26.05", {}, "slurm_metrics: 'yes': use auto, true or false"),
    ("auto", {}, "26.05", {"PrivateData": "jobs"}, "slurm_config.PrivateData: Slurm serves no metrics while PrivateData is set"),
    ("auto", {"interval": 0}, "24.11", {}, "slurm_health_check.interval: seconds between checks, a positive integer, got 0"),
    ("auto", {"node_state": "busy"}, "24.11", {}, "slurm_health_check.node_state: BUSY unknown"),
    ("auto", {"every": 5}, "24.11", {}, "slurm_health_check: unknown keys every"),
    ("auto", [], "24.11", {}, "slurm_health_check: a mapping"),
])
def test_bad_inputs_are_named(metrics, health, major, config, expected):
    found = ob.problems(metrics, health, major, config, monitored=True)
    assert found and found[0].startswith(expected), found


def test_private_data_is_fine_when_metrics_are_off_or_unavailable():
    assert ob.problems("auto", {}, "24.11", {"PrivateData": "jobs"}, True) == []
    assert ob.problems(False, {}, "26.05", {"PrivateData": "jobs"}, True) == []
    assert ob.problems("auto", {"interval": 300, "node_state": "ANY"}, "26.05", {}, True) == []
