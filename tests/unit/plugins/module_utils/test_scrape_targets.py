"""What Prometheus scrapes, from the inventory's clusters (module_utils/scrape_targets.py)."""

from ansible_collections.hybridhpc.slurm.plugins.module_utils import scrape_targets as st

GROUPS = {
    "all": ["a-ctl1", "a-ctl2", "a-c1", "a-c2", "b-ctl1", "b-c1", "login1", "mon1"],
    "slurmctld": ["a-ctl1", "a-ctl2", "b-ctl1"],
    "slurmdbd": ["a-ctl1"],
    "slurmrestd": ["a-ctl1", "b-ctl1"],
    "slurmd": ["a-c1", "a-c2", "b-c1"],
    "login": ["login1"],
    "monitoring": ["mon1"],
}
SETTINGS = {"exporter_port": 9341, "node_exporter_port": 9100, "copilot_port": 9466}


def hostvars(**extra):
    hv = {h: {"slurm_cluster_name": "alpha", "slurm_common_major": {"major": "24.11"}} for h in ("a-ctl1", "a-ctl2", "a-c1", "a-c2")}
    hv.update({h: {"slurm_cluster_name": "beta", "slurm_common_major": {"major": "26.05"}} for h in ("b-ctl1", "b-c1", "login1")})
    hv["mon1"] = {}
    for host, values in extra.items():
        hv[host.replace("_", "-")].update(values)
    return hv


def plan(hv, prometheus=("mon1",)):
    return st.scrape_plan(GROUPS, lambda h: hv.get(h, {}), SETTINGS, list(prometheus))


def targets(result, job):
    return [(e["targets"][0], e["labels"]["cluster"], e["labels"]["instance"]) for e in result["jobs"].get(job, [])]


def test_one_exporter_per_cluster_on_its_first_controller():
    result = plan(hostvars(a_ctl1={"ansible_host": "10.0.0.5"}))
    assert targets(result, "slurm_exporter") == [("10.0.0.5:9341", "alpha", "a-ctl1:9341"), ("b-ctl1:9341", "beta", "b-ctl1:9341")]
    assert result["exporters"] == {"alpha": "a-ctl1", "beta": "b-ctl1"}
    assert result["problems"] == []


def test_slurmctld_openmetrics_only_from_25_11_one_job_per_path():
    result = plan(hostvars())
    for path in st.OPENMETRICS_PATHS:
        assert targets(result, "slurmctld_" + path) == [("b-ctl1:6817", "beta", "b-ctl1:6817")]
    configs = {c["job_name"]: c for c in st.scrape_configs(result, "15s", "10s")}
    assert configs["slurmctld_nodes"]["metrics_path"] == "/metrics/nodes"
    assert "metrics_path" not in configs["node"]


def test_node_exporter_on_every_cluster_host_unless_turned_off():
    result = plan(hostvars(a_c2={"monitoring_node_exporter": False}, login1={"monitoring_node_exporter": "no"}))
    assert [t[2] for t in targets(result, "node")] == ["a-ctl1:9100", "a-ctl2:9100", "a-c1:9100", "b-ctl1:9100", "b-c1:9100"]


def test_a_cluster_without_slurmrestd_is_a_problem_naming_the_fix():
    groups = dict(GROUPS, slurmrestd=["a-ctl1"])
    result = st.scrape_plan(groups, lambda h: hostvars().get(h, {}), SETTINGS, ["mon1"])
    assert result["problems"] == ["cluster beta: the slurm exporter reads slurmrestd, and the cluster has none: add a host of the "
                                  "cluster to group 'slurmrestd', or set monitoring_slurm_exporter: false"]


def test_the_copilot_is_scraped_where_it_runs_and_a_loopback_endpoint_elsewhere_is_refused():
    result = plan(hostvars(b_ctl1={"copilot_kubeconfig": "/k", "copilot_metrics_address": "0.0.0.0", "copilot_metrics_port": 9999}))
    assert targets(result, "copilot") == [("b-ctl1:9999", "beta", "b-ctl1:9999")] and result["problems"] == []
    result = plan(hostvars(b_ctl1={"copilot_kubeconfig": "/k"}))
    assert result["problems"] and "set copilot_metrics_address: 0.0.0.0" in result["problems"][0]
    assert plan(hostvars(b_ctl1={"copilot_kubeconfig": "/k"}), prometheus=("b-ctl1",))["problems"] == []
