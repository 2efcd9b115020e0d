# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the Kubernetes-sharing filters of plugins/filter/slurm_conf.py."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

from ansible_collections.hybridhpc.slurm.plugins.filter.slurm_conf import (
    FilterModule,
    slurm_k8s_copilot_nodes,
    slurm_nodes_from_hosts,
)

FACTS = {"processor_vcpus": 4, "processor_count": 1, "processor_cores": 4, "processor_threads_per_core": 1, "memtotal_mb": 8192}


def hostvars():
    return {
        "c1": {"ansible_facts": FACTS, "slurm_k8s_shared": True},
        "c2": {"ansible_facts": FACTS, "slurm_k8s_shared": True, "slurm_k8s_strategy": "placeholder", "slurm_node_name": "node2"},
        "c3": {"ansible_facts": FACTS},
    }


def test_only_gres_strategy_nodes_get_the_count_only_gres():
    records = slurm_nodes_from_hosts(["c1", "c2", "c3"], hostvars())
    gres = {r["NodeName"]: r.get("Gres", "") for r in records}
    assert "k8scpu" in gres["c1"]
    assert not any("k8scpu" in g for name, g in gres.items() if name != "c1")


def test_the_copilot_gets_counts_for_gres_nodes_and_the_strategy_for_placeholder_nodes():
    records = slurm_nodes_from_hosts(["c1", "c2", "c3"], hostvars())
    nodes = slurm_k8s_copilot_nodes(records, ["c1", "c2"], hostvars())
    assert nodes["node2"] == {"strategy": "placeholder"}
    assert set(nodes["c1"]) == {"k8scpu", "k8smemory"} and nodes["c1"]["k8scpu"] == 4
    assert "c3" not in nodes
    assert "slurm_k8s_copilot_nodes" in FilterModule().filters()
