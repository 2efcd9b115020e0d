"""The alert rules as data: their settings are checked, and the settings reach the rules.

What the rules do is tested by promtool itself (tests/rules, make rules).
"""

import pathlib

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import alert_rules


def rules_by_name(settings=None):
    return {rule["alert"]: rule for group in alert_rules.alert_rules(settings)["groups"] for rule in group["rules"]}


def test_every_alert_has_a_meaning_and_a_first_check_in_the_table():
    assert set(rules_by_name()) == set(alert_rules.ALERTS)
    for name, rule in rules_by_name().items():
        assert rule["annotations"]["meaning"] == alert_rules.ALERTS[name][0]
        assert rule["labels"]["severity"] in ("critical", "warning")


def test_settings_reach_the_rules():
    rules = rules_by_name({"node_down_for": "30s", "pending_seconds": 3600, "daemons": ["slurmd", "my.unit"]})
    assert rules["SlurmNodeDown"]["for"] == "30s"
    assert rules["SlurmJobsPendingTooLong"]["expr"].endswith("> 3600")
    assert 'name=~"(slurmd\\\\.service|my\\\\.unit\\\\.service)", state="active"' in rules["SlurmDaemonInactive"]["expr"]


def test_units_keep_their_type_and_the_power_service_is_watched_by_its_real_units():
    rules = rules_by_name()
    # The power service has no hybridhpc-power.service: a path unit starts its worker, a timer its reconcile.
    assert "hybridhpc-power\\\\.path" in rules["SlurmDaemonInactive"]["expr"]
    assert "hybridhpc-power-reconcile\\\\.timer" in rules["SlurmDaemonInactive"]["expr"]
    assert "hybridhpc-power\\\\.service" not in rules["SlurmDaemonInactive"]["expr"]
    assert rules["SlurmUnitFailed"]["expr"] == (
        'node_systemd_unit_state{name=~"(hybridhpc-power-worker\\\\.service|hybridhpc-power-reconcile\\\\.service)", '
        'state="failed"} == 1')


def test_node_exporter_reports_every_unit_an_alert_reads():
    settings = {"daemons": ["slurmd", "extra.timer"], "oneshot_units": ["job"]}
    units = alert_rules.monitored_units(settings)
    assert units == "(slurmd\\.service|extra\\.timer|job\\.service|slurmdbd\\.service|mariadb\\.service|hybridhpc-slurm-exporter\\.service)"
    default = alert_rules.monitored_units()
    for name in alert_rules.DEFAULTS["daemons"] + alert_rules.DEFAULTS["oneshot_units"]:
        assert alert_rules.unit_name(name).replace(".", "\\.") in default


def test_the_readme_alert_table_is_the_alerts_table():
    readme = (pathlib.Path(__file__).resolve().parents[4] / "roles" / "monitoring" / "README.md").read_text()
    table = readme.split("| alert | meaning | first thing to check |", 1)[1].split("\n\n", 1)[0]
    rows = [line.split(" | ") for line in table.strip().splitlines()[1:]]
    assert {row[0].strip("| `"): (row[1], row[2].rstrip(" |")) for row in rows} == alert_rules.ALERTS


@pytest.mark.parametrize("settings, expected", [
    ({"node_down_for": "5 minutes"}, "monitoring_alerts.node_down_for: '5 minutes' is no Prometheus duration"),
    ({"pending_seconds": 0}, "monitoring_alerts.pending_seconds: must be a positive number, got 0"),
    ({"pending_seconds": True}, "monitoring_alerts.pending_seconds: must be a positive number"),
    ({"nodes_down_for": "5m"}, "monitoring_alerts.nodes_down_for: unknown setting; known: "),
    ({"daemons": ["slurmd.service; rm"]}, "monitoring_alerts.daemons: a list of systemd unit names"),
    ({"oneshot_units": "worker"}, "monitoring_alerts.oneshot_units: a list of systemd unit names"),
    ("5m", "monitoring_alerts: must be a mapping"),
])
def test_bad_settings_are_named(settings, expected):
    problems = alert_rules.settings_problems(settings)
    assert problems and problems[0].startswith(expected), problems
    if isinstance(settings, dict):
        with pytest.raises(ValueError, match="monitoring_alerts"):
            alert_rules.alert_rules(settings)


def test_good_durations_pass():
    assert alert_rules.settings_problems({"node_down_for": "1h30m", "federation_for": "90s", "copilot_errors_window": "500ms"}) == []
