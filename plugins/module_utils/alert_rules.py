# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Prometheus alert rules of a Slurm site, as data (the monitoring role writes them as YAML).

The rules read the metrics of the slurm exporter (``hybridhpc_slurm_*``, and
``slurm_*`` named as Slurm 25.11's own metrics/openmetrics plugin names them),
node-exporter's systemd collector (``node_systemd_unit_state``), the copilot
(``hybridhpc_copilot_*``) and Prometheus's own ``up``. Every target carries a
``cluster`` label (module_utils/scrape_targets.py), so every alert names its
cluster. Durations and thresholds come from the role's variables.

Annotations are Prometheus (Go) templates: ``{{ $labels.node }}``. They are
built here as data so that no Jinja ever reads them.

:data:`ALERTS` is the table the README documents: name, meaning, first thing
to check.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

DEFAULTS = {
    "exporter_down_for": "5m",
    "controller_down_for": "1m",
    "backup_in_control_for": "2m",
    "daemon_inactive_for": "2m",
    "node_down_for": "2m",
    "node_drain_for": "15m",
    "resume_failed_for": "1m",
    "federation_for": "5m",
    "pending_seconds": 86400,
    "pending_for": "10m",
    "copilot_errors_window": "10m",
    "token_expiry_days": 7,
    # Units that stay active: a name without a unit type is a .service. The power
    # service is a path unit that starts its worker and a timer for its reconcile.
    "daemons": ["slurmctld", "slurmd", "slurmrestd", "munge", "sackd", "hybridhpc-copilot", "hybridhpc-power.path",
                "hybridhpc-power-reconcile.timer"],
    # Units that run and exit (the power service's worker and reconcile): inactive
    # between runs, so only systemd's "failed" is an alert.
    "oneshot_units": ["hybridhpc-power-worker", "hybridhpc-power-reconcile"],
}
UNIT_TYPES = (".service", ".path", ".timer", ".socket", ".mount")
# node-exporter's systemd collector reports these besides the alert settings' units:
# slurmdbd and MariaDB (SlurmdbdDown), the slurm exporter itself.
ALWAYS_MONITORED = ("slurmdbd.service", "mariadb.service", "hybridhpc-slurm-exporter.service")

DURATION = re.compile(r"^(?:\d+(?:ms|[smhdwy]))+$")

# name -> (what it means, the first thing to check): the README's alert table.
ALERTS = {
    "SlurmExporterDown": ("Prometheus cannot scrape a cluster's slurm exporter.",
                          "`systemctl status hybridhpc-slurm-exporter` on the cluster's first controller."),
    "SlurmUnreachable": ("The exporter runs but slurmrestd or every slurmctld of the cluster does not answer it.",
                         "`scontrol ping` on the controller; `journalctl -u hybridhpc-slurm-exporter` for the error."),
    "SlurmctldDown": ("No slurmctld of the cluster answers ping.",
                      "`systemctl status slurmctld` and the end of slurmctld's log on each controller."),
    "SlurmBackupControllerInControl": ("The primary slurmctld does not answer; a backup took over.",
                                       "Why the primary stopped: its host, its log, StateSaveLocation's storage."),
    "SlurmdbdDown": ("slurmdbd is not active: accounting is queued on the controllers, sacctmgr fails.",
                     "`systemctl status slurmdbd`, its log, and MariaDB on that host."),
    "SlurmDaemonInactive": ("A Slurm daemon (or munge, sackd, the copilot, the power service) is not active on a host.",
                            "`systemctl status <unit>` and `journalctl -u <unit>` on that host."),
    "SlurmUnitFailed": ("A run of a unit that runs and exits (the power service's worker or its reconcile) failed.",
                        "`journalctl -u <unit>` on that host: the run's error; `systemctl reset-failed <unit>` once fixed."),
    "SlurmNodeDown": ("A node is DOWN or not responding (not a powered-down elastic node).",
                      "The reason in the alert; `scontrol show node`, slurmd on the node, the network to it."),
    "SlurmNodeDrained": ("A node is drained or draining; the alert carries the reason.",
                         "The reason: a failed health check names the check; fix, and the check resumes it."),
    "SlurmElasticResumeFailed": ("An elastic (State=CLOUD) node failed to power up and is DOWN.",
                                 "The reason, and the power service's log (`journalctl -u hybridhpc-power`)."),
    "SlurmFederationMemberNotActive": ("A cluster of the federation is not ACTIVE in it.",
                                       "`scontrol show federation` on each controller; the peering between them."),
    "SlurmJobsPendingTooLong": ("The oldest pending job of a partition has waited longer than the threshold.",
                                "`squeue -t PD -p <partition> -o '%i %r'` for the reasons; nodes down or limits."),
    "SlurmExporterTokenExpiring": ("The exporter's slurmrestd token expires soon.",
                                   "Run site.yml (it renews the token), or check that it runs on schedule."),
    "CopilotReconcileErrors": ("The copilot met errors while reconciling Kubernetes and Slurm.",
                               "`journalctl -u hybridhpc-copilot`; the errors metric's kind label says which."),
    "NodeExporterDown": ("Prometheus cannot scrape a host's node-exporter: the host or its network may be down.",
                         "Whether the host is up; `systemctl status prometheus-node-exporter`."),
}


def settings_problems(settings, var="monitoring_alerts"):
    """Messages for bad alert settings (unknown keys, malformed durations, non-positive thresholds)."""
    problems = []
    if not isinstance(settings, dict):
        return ["%s: must be a mapping of %s" % (var, ", ".join(sorted(DEFAULTS)))]
    for key, value in settings.items():
        if key not in DEFAULTS:
            problems.append("%s.%s: unknown setting; known: %s" % (var, key, ", ".join(sorted(DEFAULTS))))
        elif key in ("daemons", "oneshot_units"):
            if not isinstance(value, list) or not all(isinstance(d, str) and re.match(r"^[A-Za-z0-9_.@-]+$", d) for d in value):
                problems.append("%s.%s: a list of systemd unit names (a name without a unit type is a .service)" % (var, key))
        elif key.endswith(("_for", "_window")):
            if not isinstance(value, str) or not DURATION.match(value):
                problems.append("%s.%s: %r is no Prometheus duration (e.g. 90s, 5m, 1h30m)" % (var, key, value))
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            problems.append("%s.%s: must be a positive number, got %r" % (var, key, value))
    return problems


def _merged(settings):
    merged = dict(DEFAULTS)
    merged.update(settings or {})
    return merged


def unit_name(name):
    """``slurmd`` -> ``slurmd.service``; a name with its unit type stays as it is (``hybridhpc-power.path``)."""
    return name if name.endswith(UNIT_TYPES) else name + ".service"


def _unit_regex(names):
    # PromQL strings know few escapes (no "\\-"): only the dots of the validated unit names need one.
    return "(%s)" % "|".join(unit_name(n).replace(".", "\\\\.") for n in names)


def monitored_units(settings=None):
    """node-exporter's ``--collector.systemd.unit-include`` for these alert settings: every unit an alert reads.

    One list for the rules and the collector, so a unit an alert names is always reported.
    """
    s = _merged(settings)
    names = []
    for name in [unit_name(n) for n in s["daemons"] + s["oneshot_units"]] + list(ALWAYS_MONITORED):
        if name not in names:
            names.append(name)
    return "(%s)" % "|".join(n.replace(".", "\\.") for n in names)


def _rule(name, expr, duration, severity, summary, description):
    rule = {"alert": name, "expr": expr}
    if duration:
        rule["for"] = duration
    rule["labels"] = {"severity": severity}
    rule["annotations"] = {"summary": summary, "description": description, "meaning": ALERTS[name][0], "check": ALERTS[name][1]}
    return rule


def alert_rules(settings=None):
    """The rules file (``{"groups": [...]}``) for these settings; bad settings raise ValueError."""
    problems = settings_problems(settings or {})
    if problems:
        raise ValueError("; ".join(problems))
    s = _merged(settings)
    # Elastic nodes that are powered down, powering up or down are not "down" (POWER covers the four power flags).
    not_power = 'state!~".*POWER.*"'
    slurm = [
        _rule("SlurmExporterDown", 'up{job="slurm_exporter"} == 0', s["exporter_down_for"], "critical",
              "Slurm exporter of cluster {{ $labels.cluster }} not scraped",
              "{{ $labels.instance }} has not answered Prometheus for " + s["exporter_down_for"] + "."),
        _rule("SlurmUnreachable", "hybridhpc_slurm_up == 0 unless on (cluster) (max by (cluster) (hybridhpc_slurm_controller_up) == 0)",
              s["controller_down_for"], "critical",
              "Slurm of cluster {{ $labels.cluster }} does not answer its exporter",
              "slurmrestd or slurmctld did not answer the exporter on {{ $labels.instance }}."),
        _rule("SlurmctldDown", "max by (cluster) (hybridhpc_slurm_controller_up) == 0", s["controller_down_for"], "critical",
              "No slurmctld of cluster {{ $labels.cluster }} answers",
              "Every slurmctld of {{ $labels.cluster }} has failed ping for " + s["controller_down_for"] + "."),
        _rule("SlurmBackupControllerInControl",
              'max by (cluster) (hybridhpc_slurm_controller_up{index="0"}) == 0 '
              'and on (cluster) max by (cluster) (hybridhpc_slurm_controller_up{index!="0"}) == 1',
              s["backup_in_control_for"], "warning",
              "A backup slurmctld is in control of cluster {{ $labels.cluster }}",
              "The primary slurmctld of {{ $labels.cluster }} does not answer; a backup does."),
        _rule("SlurmdbdDown", 'node_systemd_unit_state{name="slurmdbd.service", state="active"} == 0', s["daemon_inactive_for"],
              "critical", "slurmdbd is not active on {{ $labels.instance }}",
              "slurmdbd on {{ $labels.instance }} (cluster {{ $labels.cluster }}) is not active."),
        _rule("SlurmDaemonInactive",
              'node_systemd_unit_state{name=~"%s", state="active"} == 0' % _unit_regex(s["daemons"]), s["daemon_inactive_for"],
              "critical", "{{ $labels.name }} is not active on {{ $labels.instance }}",
              "{{ $labels.name }} on {{ $labels.instance }} (cluster {{ $labels.cluster }}) is not active."),
        _rule("SlurmUnitFailed",
              'node_systemd_unit_state{name=~"%s", state="failed"} == 1' % _unit_regex(s["oneshot_units"]), None,
              "warning", "{{ $labels.name }} failed on {{ $labels.instance }}",
              "The last run of {{ $labels.name }} on {{ $labels.instance }} (cluster {{ $labels.cluster }}) failed."),
        _rule("SlurmNodeDown",
              'hybridhpc_slurm_node_state_info{state=~"DOWN.*|.*NOT_RESPONDING.*", %s} == 1' % not_power,
              s["node_down_for"], "critical", "Node {{ $labels.node }} of cluster {{ $labels.cluster }} is down",
              "{{ $labels.node }} is {{ $labels.state }}: {{ $labels.reason }}"),
        _rule("SlurmNodeDrained", 'hybridhpc_slurm_node_state_info{state=~".*DRAIN.*"} == 1', s["node_drain_for"], "warning",
              "Node {{ $labels.node }} of cluster {{ $labels.cluster }} is drained",
              "{{ $labels.node }} is {{ $labels.state }}: {{ $labels.reason }}"),
        _rule("SlurmElasticResumeFailed", 'hybridhpc_slurm_node_state_info{state=~"DOWN\\\\+.*CLOUD.*"} == 1',
              s["resume_failed_for"], "warning",
              "Elastic node {{ $labels.node }} of cluster {{ $labels.cluster }} failed to start",
              "{{ $labels.node }} is {{ $labels.state }}: {{ $labels.reason }}"),
        _rule("SlurmFederationMemberNotActive", "hybridhpc_slurm_federation_member_active == 0", s["federation_for"], "warning",
              "Cluster {{ $labels.member }} is not ACTIVE in federation {{ $labels.federation }}",
              "As {{ $labels.cluster }} sees it, {{ $labels.member }} is {{ $labels.state }}."),
        _rule("SlurmJobsPendingTooLong", "hybridhpc_slurm_partition_pending_oldest_seconds > %s" % s["pending_seconds"],
              s["pending_for"], "warning",
              "Jobs of partition {{ $labels.partition }} ({{ $labels.cluster }}) pending too long",
              "The oldest pending job of {{ $labels.partition }} has waited {{ $value | humanizeDuration }}."),
        _rule("SlurmExporterTokenExpiring",
              "hybridhpc_slurm_exporter_token_expiry_timestamp_seconds - time() < %d" % (s["token_expiry_days"] * 86400),
              None, "warning", "The slurm exporter's token of cluster {{ $labels.cluster }} expires soon",
              "It expires in {{ $value | humanizeDuration }}; the next site.yml run renews it."),
    ]
    copilot = [
        _rule("CopilotReconcileErrors", "increase(hybridhpc_copilot_errors_total[%s]) > 0" % s["copilot_errors_window"], None,
              "warning", "The copilot on {{ $labels.instance }} met {{ $labels.kind }} errors",
              "{{ $value }} {{ $labels.kind }} errors in the last " + s["copilot_errors_window"] + "."),
    ]
    hosts = [
        _rule("NodeExporterDown", 'up{job="node"} == 0', s["exporter_down_for"], "warning",
              "{{ $labels.instance }} ({{ $labels.cluster }}) not scraped",
              "node-exporter on {{ $labels.instance }} has not answered for " + s["exporter_down_for"] + "."),
    ]
    return {"groups": [{"name": "slurm", "rules": slurm}, {"name": "copilot", "rules": copilot}, {"name": "hosts", "rules": hosts}]}
