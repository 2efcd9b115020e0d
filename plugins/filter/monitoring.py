# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's decisions: alert rules (module_utils/alert_rules.py) and scrape targets (module_utils/scrape_targets.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils.lazy_module import LazyModule

alert_rules = LazyModule("alert_rules")
cluster_plan = LazyModule("cluster_plan")
slurm_majors = LazyModule("slurm_majors")
scrape_targets = LazyModule("scrape_targets")
observability = LazyModule("observability")


def _host_vars(hostvars):
    return lambda host: hostvars[host] if host in hostvars else {}


def _plan(groups, hostvars, settings):
    settings = dict(settings or {})
    for key in ("exporter_port", "node_exporter_port", "copilot_port"):
        settings[key] = int(settings[key])
    settings["slurm_exporter"] = cluster_plan.truthy(settings.get("slurm_exporter", True))
    return settings, scrape_targets.scrape_plan(groups, _host_vars(hostvars), settings, list(settings.get("prometheus_hosts") or []))


def slurm_alert_rules(settings):
    """The Prometheus rules file (as data) for the monitoring_alerts settings."""
    try:
        return alert_rules.alert_rules(settings or {})
    except ValueError as exc:
        raise AnsibleFilterError("slurm_alert_rules: %s" % exc) from exc


def slurm_monitored_units(settings):
    """node-exporter's systemd unit-include regex: every unit the alert rules for these monitoring_alerts settings read."""
    problems = alert_rules.settings_problems(settings or {})
    if problems:
        raise AnsibleFilterError("slurm_monitored_units: %s" % "; ".join(problems))
    return alert_rules.monitored_units(settings or {})


def slurm_scrape_configs(groups, hostvars, settings):
    """Prometheus's scrape_configs for every cluster of the inventory."""
    settings, plan = _plan(groups, hostvars, settings)
    if plan["problems"]:
        raise AnsibleFilterError("slurm_scrape_configs: %s" % " | ".join(plan["problems"]))
    return scrape_targets.scrape_configs(plan, settings["interval"], settings["timeout"], settings.get("prometheus_port"),
                                         settings.get("alertmanager_port"))


def slurm_monitoring_problems(groups, hostvars, settings, alerts):
    """What the first play refuses in the monitoring inputs: alert settings, clusters the exporter cannot read."""
    problems = alert_rules.settings_problems(alerts if alerts is not None else {})
    return problems + _plan(groups, hostvars, settings)[1]["problems"]


def slurm_serves_openmetrics(major):
    """Whether this Slurm major's slurmctld serves its own metrics (25.11 and later)."""
    return slurm_majors.serves_openmetrics(major)


def slurm_observability_config(config, metrics, health, major, monitored):
    """slurm.conf's keys with MetricsType (Slurm 25.11+, when monitored) and the health check's keys added."""
    return observability.config(config, metrics, health or {}, major, cluster_plan.truthy(monitored))


def slurm_observability_problems(metrics, health, major, config, monitored):
    """What the first play refuses in slurm_metrics and slurm_health_check."""
    return observability.problems(metrics, health if health is not None else {}, major, config,
                                  cluster_plan.truthy(monitored))


class FilterModule(object):
    def filters(self):
        return {
            "slurm_alert_rules": slurm_alert_rules,
            "slurm_monitored_units": slurm_monitored_units,
            "slurm_scrape_configs": slurm_scrape_configs,
            "slurm_monitoring_problems": slurm_monitoring_problems,
            "slurm_serves_openmetrics": slurm_serves_openmetrics,
            "slurm_observability_config": slurm_observability_config,
            "slurm_observability_problems": slurm_observability_problems,
        }
