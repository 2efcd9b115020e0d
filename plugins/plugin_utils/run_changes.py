# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which hosts a task changed (or may have changed) in this run, for the action plugins forked after it.

The facts step of the first play checks each step's record on the host
(module_utils/config_step.py). Its answer holds only while nothing else
changes the host: a package installed or a file written between the facts
step and the step would make it stale. The preload callback runs in
ansible-playbook's own process and sees every result before the next task's
workers are forked (the linear strategy waits for a task's results before the
next task); it records here each host a task changed or failed on. Each
worker is forked from that process and finds the hosts recorded so far.

Without the callback nothing is recorded and ``tracking`` stays false: the
action plugins then never take a record's word, and every step runs its
module as before.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

STATE = {"tracking": False, "changed": set()}


def start():
    """The callback is loaded: results are recorded from now on (called before the first task)."""
    STATE["tracking"] = True
    STATE["changed"] = set()


def record(host, result):
    """One task's result for one host (and the host it was delegated to): changed or failed marks them."""
    if not (result.get("changed") or result.get("failed")):
        return
    STATE["changed"].add(host)
    # A loop's items may each go to another host (delegate_to: "{{ item }}").
    for entry in [result] + [item for item in result.get("results") or [] if isinstance(item, dict)]:
        delegated = (entry.get("_ansible_delegated_vars") or {}).get("ansible_delegated_host")
        if delegated:
            STATE["changed"].add(delegated)


def unchanged(host):
    """True when results are recorded and no task changed or failed on host in this run so far."""
    return STATE["tracking"] and host not in STATE["changed"]
