# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a site's Prometheus scrapes, derived from the inventory's clusters.

One Prometheus (the hosts of group ``monitoring``) watches every cluster of
the inventory, federated or not. For each cluster (module_utils/cluster_plan.py
decides its members):

* ``slurm_exporter``: the exporter on the cluster's first controller (the
  slurm_exporter role runs it there), one per cluster;
* ``slurmctld``: on Slurm 25.11 and later, slurmctld's own OpenMetrics
  endpoints (``/metrics/nodes``, ``/metrics/jobs``, ``/metrics/partitions``,
  ``/metrics/scheduler``) on the primary controller's SlurmctldPort; one scrape
  job per path, since a job has one metrics path;
* ``node``: prometheus-node-exporter on every host of the cluster that runs it
  (``monitoring_node_exporter``, true unless a host or group turns it off);
* ``copilot``: the copilot's ``/metrics`` on the controllers that run it.

Every target carries ``cluster`` (the alert rules name it) and ``instance``
is the inventory name with its port, not an address: alerts read
"onprem-c1:9100". ``__address__`` is where Prometheus connects
(``ansible_host`` when the inventory sets it).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.hybridhpc.slurm.plugins.module_utils import cluster_plan
from ansible_collections.hybridhpc.slurm.plugins.module_utils.slurm_majors import serves_openmetrics

OPENMETRICS_PATHS = ("nodes", "jobs", "partitions", "scheduler")


def cluster_names(groups, host_vars):
    """Every cluster of the inventory, in the order its controllers appear."""
    names = []
    for host in groups.get(cluster_plan.CONTROLLER_GROUP) or []:
        name = (host_vars(host) or {}).get("slurm_cluster_name")
        if name and name not in names:
            names.append(name)
    return names


def _address(host, hv, port):
    return "%s:%s" % (hv.get("ansible_host") or host, port)


def _target(host, hv, port, cluster):
    return {"targets": [_address(host, hv, port)], "labels": {"cluster": cluster, "instance": "%s:%s" % (host, port)}}


def exporter_host(members):
    """The host that runs a cluster's slurm exporter: its first controller."""
    return (members.get("controllers") or [None])[0]


def scrape_plan(groups, host_vars, settings, prometheus_hosts=()):
    """``{"jobs": {job name: [static_configs entries]}, "exporters": {cluster: host}, "problems": [...]}``.

    ``settings``: exporter_port, node_exporter_port, copilot_port,
    slurmctld_port (SlurmctldPort, default 6817). ``host_vars(host)`` gives a
    host's variables: slurm_cluster_name, slurm_common_major (``{"major":
    ...}``), monitoring_node_exporter, copilot_kubeconfig,
    copilot_metrics_address, copilot_metrics_port, ansible_host.
    ``prometheus_hosts``: where Prometheus runs (a loopback-only endpoint
    elsewhere is a problem).
    """
    jobs = {"slurm_exporter": [], "node": [], "copilot": []}
    for path in OPENMETRICS_PATHS:
        jobs["slurmctld_" + path] = []
    exporters, problems = {}, []
    for cluster in cluster_names(groups, host_vars):
        members = cluster_plan.cluster_members(cluster, groups, host_vars)
        primary = exporter_host(members)
        hv = host_vars(primary) or {}
        exporter = settings.get("slurm_exporter", True)
        if exporter and not members["rest_hosts"]:
            problems.append("cluster %s: the slurm exporter reads slurmrestd, and the cluster has none: add a host of the cluster "
                            "to group 'slurmrestd', or set monitoring_slurm_exporter: false" % cluster)
        if exporter:
            exporters[cluster] = primary
            jobs["slurm_exporter"].append(_target(primary, hv, settings["exporter_port"], cluster))
        major = (hv.get("slurm_common_major") or {}).get("major")
        if serves_openmetrics(major):
            for path in OPENMETRICS_PATHS:
                jobs["slurmctld_" + path].append(_target(primary, hv, settings.get("slurmctld_port") or 6817, cluster))
        for host in members["hosts"]:
            host_hv = host_vars(host) or {}
            if cluster_plan.truthy(host_hv.get("monitoring_node_exporter", True)):
                jobs["node"].append(_target(host, host_hv, settings["node_exporter_port"], cluster))
        for host in members["controllers"]:
            host_hv = host_vars(host) or {}
            if not host_hv.get("copilot_kubeconfig"):
                continue  # site.yml runs the copilot only where copilot_kubeconfig is set
            port = host_hv.get("copilot_metrics_port") or settings["copilot_port"]
            if str(host_hv.get("copilot_metrics_address", "127.0.0.1")).startswith("127.") and set(prometheus_hosts) - {host}:
                problems.append("%s: the copilot serves /metrics on %s only, which Prometheus on %s cannot reach: "
                                "set copilot_metrics_address: 0.0.0.0 (or the host's address)"
                                % (host, host_hv.get("copilot_metrics_address", "127.0.0.1"), ", ".join(prometheus_hosts)))
            jobs["copilot"].append(_target(host, host_hv, port, cluster))
    return {"jobs": {name: entries for name, entries in jobs.items() if entries}, "exporters": exporters, "problems": problems}


def scrape_configs(plan, interval, timeout, prometheus_port=None, alertmanager_port=None):
    """Prometheus's ``scrape_configs`` for a :func:`scrape_plan`, and Prometheus and Alertmanager themselves."""
    configs = []
    for name, port in (("prometheus", prometheus_port), ("alertmanager", alertmanager_port)):
        if port:
            configs.append({"job_name": name, "scrape_interval": interval, "scrape_timeout": timeout,
                            "static_configs": [{"targets": ["127.0.0.1:%s" % port]}]})
    for name, entries in sorted(plan["jobs"].items()):
        config = {"job_name": name, "scrape_interval": interval, "scrape_timeout": timeout, "static_configs": entries}
        if name.startswith("slurmctld_"):
            config["metrics_path"] = "/metrics/" + name[len("slurmctld_"):]
        configs.append(config)
    return configs
