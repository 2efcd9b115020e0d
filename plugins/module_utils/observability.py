# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The slurm.conf keys of Slurm's own metrics and of the node health check (slurm_metrics, slurm_health_check).

* ``MetricsType=metrics/openmetrics`` (Slurm 25.11 and later): slurmctld
  serves ``/metrics/...`` on its port. ``slurm_metrics: auto`` turns it on
  when the site is monitored (a ``monitoring`` group, or monitoring_exporters)
  and the major has it; true asks for it (refused on an older major); false
  leaves it off. Slurm disables its metrics when any PrivateData is set, so
  that is refused rather than silently serving nothing.
* ``HealthCheckProgram`` (the node_health role's hybridhpc-health),
  ``HealthCheckInterval`` and ``HealthCheckNodeState`` from
  ``slurm_health_check: {interval, node_state}``; an empty mapping leaves the
  health check off. Keys the inventory sets itself in slurm_config win.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hybridhpc.slurm.plugins.module_utils.slurm_majors import serves_openmetrics

HEALTH_CHECK_PROGRAM = "/usr/local/sbin/hybridhpc-health"
NODE_STATES = ("ALLOC", "ANY", "CYCLE", "IDLE", "MIXED", "NONDRAINED_IDLE")


def metrics_wanted(setting, major, monitored):
    """Whether slurm.conf gets MetricsType=metrics/openmetrics."""
    has = serves_openmetrics(major)
    if setting == "auto":
        return has and bool(monitored)
    return bool(setting) and has


def problems(metrics, health, major, config, monitored):
    """Messages naming the variable and the fix, for the first play."""
    found = []
    if metrics not in ("auto", True, False):
        found.append("slurm_metrics: %r: use auto, true or false" % (metrics,))
    elif metrics is True and not serves_openmetrics(major):
        found.append("slurm_metrics: true needs Slurm 25.11 or later (this cluster runs %s); set it to auto or false, "
                     "the slurm exporter serves the same names on older majors" % (major or "an unknown major"))
    if metrics_wanted(metrics, major, monitored) and (config or {}).get("PrivateData"):
        found.append("slurm_config.PrivateData: Slurm serves no metrics while PrivateData is set (%s); remove it, or set "
                     "slurm_metrics: false" % (config["PrivateData"],))
    if not isinstance(health, dict):
        found.append("slurm_health_check: a mapping (interval, node_state), or {} for no health check")
        return found
    unknown = sorted(set(health) - {"interval", "node_state"})
    if unknown:
        found.append("slurm_health_check: unknown keys %s; known: interval, node_state" % ", ".join(unknown))
    interval = health.get("interval", 300)
    if health and (isinstance(interval, bool) or not isinstance(interval, int) or interval <= 0):
        found.append("slurm_health_check.interval: seconds between checks, a positive integer, got %r" % (interval,))
    states = str(health.get("node_state", "ANY")).upper().split(",")
    bad = [s for s in states if s not in NODE_STATES]
    if health and bad:
        found.append("slurm_health_check.node_state: %s unknown; Slurm's HealthCheckNodeState takes %s (comma-separated)"
                     % (", ".join(bad), ", ".join(NODE_STATES)))
    return found


def config(base, metrics, health, major, monitored):
    """``base`` (the merged slurm.conf keys) with the metrics and health check keys; the inventory's own keys win."""
    merged = dict(base or {})
    if metrics_wanted(metrics, major, monitored):
        merged.setdefault("MetricsType", "metrics/openmetrics")
    if health:
        merged.setdefault("HealthCheckProgram", HEALTH_CHECK_PROGRAM)
        merged.setdefault("HealthCheckInterval", int(health.get("interval", 300)))
        merged.setdefault("HealthCheckNodeState", str(health.get("node_state", "ANY")).upper())
    return merged
