"""The alert rules as data: their settings are checked, and the settings reach the rules.

What the rules do is tested by promtool itself (tests/rules, make rules).
"""

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
    assert '(slurmd|my\\\\.unit)\\\\.service' in rules["SlurmDaemonInactive"]["expr"]


@pytest.mark.parametrize("settings, expected", [
    ({"node_down_for": "5 minutes"}, "monitoring_alerts.node_down_for: '5 minutes' is no Prometheus duration"),
    ({"pending_seconds": 0}, "monitoring_alerts.pending_seconds: must be a positive number, got 0"),
    ({"pending_seconds": True}, "monitoring_alerts.pending_seconds: must be a positive number"),
    ({"nodes_down_for": "5m"}, "monitoring_alerts.nodes_down_for: unknown setting; known: "),
    ({"daemons": ["slurmd.service; rm"]}, "monitoring_alerts.daemons: a list of systemd unit names"),
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
