#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
module: slurm_auth_state
short_description: Read what a cluster's move to another authentication type still needs, or record its start
description:
  - Run on the cluster's first controller. Reads the authentication the controller's slurm.conf names (C(AuthType),
    C(AuthAltTypes)) and the record of the last switch. While slurm.conf still accepts the other type (a switch in
    progress), also lists every node's slurmd start time (C(scontrol -o show node)) and the running, suspended and
    completing jobs of this cluster (C(squeue --local)), so that the role decides in Python
    (module_utils/auth_plan.py) whether a job can still hold the old type.
  - With O(record), writes the record of a switch to O(record_file) (the time it is written, before slurmctld
    restarts with the new type), and reads nothing else.
  - Reading changes nothing, also outside check mode.
version_added: 0.5.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  slurm_conf:
    description: The controller's slurm.conf.
    type: path
    default: /etc/slurm/slurm.conf
  wanted:
    description: The type the inventory asks for (C(munge) or C(slurm)); the nodes and jobs are read only while the
      running slurm.conf has it as C(AuthType) and still accepts the other.
    type: str
    choices: [munge, slurm]
    required: true
  record:
    description: Record a switch to O(wanted) from this type (C(munge) or C(slurm)) now, instead of reading.
    type: str
    choices: [munge, slurm]
  record_file:
    description: The record of the last switch (JSON).
    type: path
    default: /var/lib/slurm/hybridhpc-auth-transition.json
  markers_dir:
    description: Where the collection's pending restart marker lives (a restart left pending by an interrupted run
      means slurmctld may still run the old type).
    type: path
    default: /var/lib/slurm
  timeout:
    description: Seconds each Slurm command may take; one that does not answer leaves the nodes and jobs unknown.
    type: int
    default: 30
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Read the cluster's authentication switch in progress
  hybridhpc.slurm.slurm_auth_state:
    wanted: slurm
  register: auth_state

- name: Record that the cluster switches from MUNGE to auth/slurm now
  hybridhpc.slurm.slurm_auth_state:
    wanted: slurm
    record: munge
"""

RETURN = r"""
current:
  description: C(type) (AuthType) and C(alt) (AuthAltTypes) of the running slurm.conf; empty when it has none.
  returned: when reading
  type: dict
record:
  description: The last switch (C(from), C(to), C(since) in epoch seconds), or null.
  returned: always
  type: dict
nodes:
  description: Node name to its slurmd's start (epoch seconds; null where no slurmd answers); null when not read.
  returned: when reading
  type: dict
pending_restart:
  description: Whether a restart of the controller's daemons is pending (an interrupted run).
  returned: when reading
  type: bool
jobs:
  description: The cluster's running, suspended and completing jobs (C(id), C(start), C(nodes)); null when not read.
  returned: when reading
  type: list
  elements: dict
"""

import json
import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils import auth_plan, config_files, hostlist


def _local_epoch(text):
    # Slurm prints times in the controller's local time zone: read them here, where it is that zone.
    return time.mktime(time.strptime(text, "%Y-%m-%dT%H:%M:%S"))


def _read_record(path):
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (IOError, OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _slurm(module, argv, timeout):
    rc, out, _err = module.run_command(["timeout", str(timeout)] + argv)
    return out if rc == 0 else None


def main():
    module = AnsibleModule(
        argument_spec=dict(
            slurm_conf=dict(type="path", default="/etc/slurm/slurm.conf"),
            wanted=dict(type="str", choices=list(auth_plan.TYPES), required=True),
            record=dict(type="str", choices=list(auth_plan.TYPES)),
            record_file=dict(type="path", default=auth_plan.RECORD_FILE),
            markers_dir=dict(type="path", default="/var/lib/slurm"),
            timeout=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["record"]:
        record = {"from": params["record"], "to": params["wanted"], "since": time.time()}
        if not module.check_mode:
            if not os.path.isdir(os.path.dirname(params["record_file"])):
                os.makedirs(os.path.dirname(params["record_file"]))
            config_files.write_atomically(module, params["record_file"],
                                          (json.dumps(record, sort_keys=True) + "\n").encode(), ".auth_state.")
        module.exit_json(changed=True, record=record)
    try:
        with open(params["slurm_conf"]) as handle:
            text = handle.read()
    except (IOError, OSError):
        text = None
    current = auth_plan.conf_auth(text)
    result = dict(changed=False, current=current, record=_read_record(params["record_file"]), nodes=None, jobs=None,
                  pending_restart=os.path.exists(config_files.marker_path(params["markers_dir"], "restart")))
    if auth_plan.in_transition(current, params["wanted"]):
        scontrol = module.get_bin_path("scontrol")
        squeue = module.get_bin_path("squeue")
        if scontrol and squeue:
            nodes = _slurm(module, [scontrol, "-o", "show", "node"], params["timeout"])
            jobs = _slurm(module, [squeue, "--local", "-h", "-t", "R,S,CG", "-o", "%i|%S|%N"], params["timeout"])
            if nodes is not None and jobs is not None:
                result["nodes"] = auth_plan.parse_nodes(nodes, _local_epoch)
                result["jobs"] = auth_plan.parse_jobs(jobs, _local_epoch, hostlist.expand)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
