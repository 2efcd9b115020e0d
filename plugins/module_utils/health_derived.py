# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's health checks: the inventory's, plus the ones its slurm.conf line and gres.conf imply.

The node health role writes what :func:`node_checks` returns for one node.
Beside ``node_health_checks`` from the inventory it adds, unless the
inventory has a check of that type already:

* ``slurmd_view``: ``slurmd -C`` sees at least the CPUs and RealMemory the
  node's slurm.conf line declares, the two counts slurmctld itself drains a
  registering node for ("low cpu count", "Low RealMemory"); a node that lost
  CPUs or memory since it registered is drained with what slurmd sees,
  instead of taking jobs it cannot run. Sockets, cores and threads are left
  out: the facts a line is made from and slurmd's hwloc may split the same
  CPUs differently (slurmctld compares only their product).
* ``gpu``, when the line's Gres has GPUs: the device files gres.conf names
  for the node exist, and, with a command (``node_health_gpu_command``, or
  ``nvidia-smi -L`` where gres.conf says ``AutoDetect=nvml``), it lists as
  many GPUs as the line declares. Without device files or a command there is
  nothing to look at, and no check is added.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.hybridhpc.slurm.plugins.module_utils.cluster_plan import record_node_names
from ansible_collections.hybridhpc.slurm.plugins.module_utils.hostlist import HostlistError, expand
from ansible_collections.hybridhpc.slurm.plugins.module_utils.site_inputs import gres_files_of_node

HARDWARE_KEYS = ("CPUs", "RealMemory")
NVIDIA_SMI = ["/usr/bin/nvidia-smi", "-L"]
_GPU = re.compile(r"(?:^|,)gpu(?::[^:,(]+)?:(\d+)")


def gpu_count(gres):
    """GPUs in a slurm.conf Gres value: ``gpu:2``, ``gpu:a100:2``, ``gpu:a100:1,gpu:v100:1``, ``mps:100`` (0)."""
    return sum(int(n) for n in _GPU.findall(str(gres or "")))


def _expand(hostlist):
    try:
        return expand(hostlist)
    except HostlistError:  # a hostlist the first play refused already: it names no node here
        return []


def node_record(nodes, node):
    """The slurm.conf node line (a mapping) whose NodeName covers ``node``, or None."""
    return next((r for r in nodes or [] if node in record_node_names([r], _expand)), None)


def _gpu_records_of(gres, node):
    """gres.conf's GPU records that apply to ``node`` (no NodeName: every node)."""
    gpus = [g for g in gres or [] if isinstance(g, dict) and str(next((v for k, v in g.items() if k.lower() == "name"), "")).lower() == "gpu"]
    return [g for g in gpus if not any(k.lower() == "nodename" for k in g) or node in record_node_names([g], _expand)]


def _positive_int(value):
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number > 0 else None


def derived_checks(node, nodes, gres, gpu_command=None):
    """The checks the node's slurm.conf line and gres.conf imply (see the module's description)."""
    record = node_record(nodes, node)
    if record is None:
        return []
    checks = []
    expect = {}
    for key in HARDWARE_KEYS:
        value = _positive_int(record.get(key))
        if value is not None:
            expect[key] = value
    if expect:
        checks.append({"name": "slurmd_view", "type": "slurmd_view", "expect": expect, "compare": "at_least"})
    count = gpu_count(record.get("Gres"))
    if count:
        records = _gpu_records_of(gres, node)
        devices = gres_files_of_node(records, node)
        command = list(gpu_command or [])
        if not command and any(str(g.get("AutoDetect", "")).lower() == "nvml" for g in records):
            command = list(NVIDIA_SMI)
        check = {"name": "gpu", "type": "gpu"}
        if devices:
            check["devices"] = devices
        if command:
            check.update(command=command, expect_count=count, timeout=30)
        if devices or command:
            checks.append(check)
    return checks


def node_checks(checks, node, nodes, gres, derive=True, gpu_command=None):
    """The inventory's checks, then each derived check whose type (and name) the inventory does not have already."""
    checks = list(checks or [])
    if not derive:
        return checks
    types = {c.get("type") for c in checks if isinstance(c, dict)}
    names = {c.get("name") for c in checks if isinstance(c, dict)}
    return checks + [c for c in derived_checks(node, nodes, gres, gpu_command) if c["type"] not in types and c["name"] not in names]
