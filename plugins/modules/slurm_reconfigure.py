#!/usr/bin/python
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

DOCUMENTATION = r"""
module: slurm_reconfigure
short_description: Apply a cluster's new configuration on its controller and check that slurmctld runs it
description:
  - Runs C(scontrol reconfigure) (or, with O(restart), restarts slurmctld), waits until C(scontrol ping) says
    slurmctld is up, then reads what slurmctld logged since, and its node records.
  - C(scontrol reconfigure) returns 0 even when slurmctld rejects the new files (it logs C(fatal) and
    C(reconfigure failed) and keeps the old ones), so the change counts as applied only when slurmctld answers,
    its log since the reconfigure has no such line, and no node record says it runs another configuration
    (C(INVAL), C(different slurm.conf), GRES C(reported lower than configured)).
  - Fails otherwise, with Slurm's own lines in the message and in RV(rejected) and RV(node_problems).
  - Lines about defunct or deprecated options are returned as warnings.
  - With O(restart_unanswered), a slurmctld that does not answer first is restarted instead (its
    StateSaveLocation keeps the jobs), which brings back a controller a rejected change left hung.
version_added: 0.2.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  log_file:
    description: slurmctld's log (C(SlurmctldLogFile)); without it, its journal is read.
    type: path
  restart:
    description: Restart slurmctld instead of C(scontrol reconfigure).
    type: bool
    default: false
  restart_unanswered:
    description: Restart slurmctld when it does not answer C(scontrol ping) within O(ping_timeout) first.
    type: bool
    default: false
  ping_timeout:
    description: Seconds to wait for an answer before the reconfigure, with O(restart_unanswered).
    type: int
    default: 10
  timeout:
    description: Seconds to wait for slurmctld to answer after the reconfigure or restart.
    type: int
    default: 60
  settle:
    description: Seconds the nodes get to register again before their records are read.
    type: int
    default: 3
attributes:
  check_mode:
    support: full
    details: In check mode nothing runs and the task reports a change.
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Apply the new configuration and check that slurmctld runs it
  hybridhpc.slurm.slurm_reconfigure:
    log_file: /var/log/slurm/slurmctld.log
"""

RETURN = r"""
action:
  description: What ran (V(reconfigure) or V(restart)).
  returned: always
  type: str
answered:
  description: Whether slurmctld answered afterwards.
  returned: always
  type: bool
rejected:
  description: The lines slurmctld logged since the reconfigure that say it did not take the new files.
  returned: always
  type: list
  elements: str
node_problems:
  description: The nodes whose records say they run another configuration.
  returned: always
  type: list
  elements: str
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils import reconfigure_check


def ping(module, scontrol):
    _rc, out, _err = module.run_command([scontrol, "ping"])
    return reconfigure_check.answered(out)


def wait_answer(module, scontrol, timeout):
    deadline = time.time() + timeout
    while True:
        if ping(module, scontrol):
            return True
        if time.time() >= deadline:
            return False
        time.sleep(0.5)


def log_size(path):
    """Where the log ends now (0 without a log file: the journal is read by time instead)."""
    if not path:
        return 0
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def log_since(module, path, offset, started):
    if path:
        try:
            with open(path, "rb") as handle:
                if os.fstat(handle.fileno()).st_size >= offset:
                    handle.seek(offset)
                return handle.read().decode("utf-8", "replace")
        except OSError:
            return ""
    journalctl = module.get_bin_path("journalctl")
    if not journalctl:
        return ""
    _rc, out, _err = module.run_command([journalctl, "-u", "slurmctld", "-o", "cat", "--no-pager",
                                         "--since", "@%d" % int(started)])
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            log_file=dict(type="path"),
            restart=dict(type="bool", default=False),
            restart_unanswered=dict(type="bool", default=False),
            ping_timeout=dict(type="int", default=10),
            timeout=dict(type="int", default=60),
            settle=dict(type="int", default=3),
        ),
        supports_check_mode=True,
    )
    params = module.params
    action = "restart" if params["restart"] else "reconfigure"
    if module.check_mode:
        module.exit_json(changed=True, action=action, answered=True, rejected=[], node_problems=[])
    scontrol = module.get_bin_path("scontrol", required=True)
    systemctl = module.get_bin_path("systemctl", required=True)

    if action == "reconfigure" and params["restart_unanswered"] and not wait_answer(module, scontrol, params["ping_timeout"]):
        action = "restart"
    offset, started = log_size(params["log_file"]), time.time()
    if action == "restart":
        rc, out, err = module.run_command([systemctl, "restart", "slurmctld"])
    else:
        rc, out, err = module.run_command([scontrol, "reconfigure"])
    rejected = reconfigure_check.command_rejected(action, rc, err or out)
    is_up = wait_answer(module, scontrol, params["timeout"])
    if is_up:
        # Settled before the log is read: a reconfigure whose reply was lost
        # logs its verdict as the controller comes back.
        time.sleep(max(params["settle"], 0))
    log_rejected, warned = reconfigure_check.log_verdict(log_since(module, params["log_file"], offset, started))
    rejected += log_rejected
    problems = []
    if is_up and not rejected:
        rc, out, err = module.run_command([scontrol, "show", "node", "-o"])
        if rc == 0:
            problems = reconfigure_check.node_problems(reconfigure_check.parse_nodes(out))
    for line in warned:
        module.warn("slurmctld: %s" % line)
    result = dict(changed=True, action=action, answered=is_up, rejected=rejected, node_problems=problems)
    if not is_up or rejected or problems:
        lines = rejected + problems + ([] if is_up else ["slurmctld did not answer within %d s" % params["timeout"]])
        module.fail_json(msg="slurmctld did not take the new configuration (%s): %s" % (action, " | ".join(lines)),
                         **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
