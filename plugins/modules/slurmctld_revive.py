#!/usr/bin/python
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

DOCUMENTATION = r"""
module: slurmctld_revive
short_description: Restart a slurmctld that runs but does not answer
description:
  - Asks C(scontrol ping) whether the slurmctld on this controller answers. systemd calls a hung slurmctld
    (stopped, deadlocked, stuck on a lock) active, so a service task leaves it as it is and the run goes on
    against a controller that answers nobody.
  - When this host's slurmctld is active but C(scontrol ping) does not call it UP within O(timeout) seconds, it
    is restarted (systemd sends SIGCONT after SIGTERM, so a stopped process ends too; its StateSaveLocation keeps
    the jobs) and the module waits until it answers again. The restart is reported as a change and a warning.
  - Fails, with what C(scontrol ping) printed, when slurmctld does not answer after the restart either.
  - A slurmctld that is not active is left to the service task before this one.
version_added: 0.2.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  host:
    description: This controller's name as C(SlurmctldHost) gives it (what C(scontrol ping) prints).
    type: str
    required: true
  timeout:
    description: Seconds slurmctld gets to answer before it counts as hung.
    type: int
    default: 20
  restart_timeout:
    description: Seconds slurmctld gets to answer after the restart.
    type: int
    default: 90
attributes:
  check_mode:
    support: full
    details: In check mode a hung slurmctld is reported as one to restart, and nothing restarts.
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Restart slurmctld if it runs but does not answer
  hybridhpc.slurm.slurmctld_revive:
    host: "{{ inventory_hostname }}"
"""

RETURN = r"""
answered:
  description: Whether slurmctld answered before the module restarted anything.
  returned: always
  type: bool
ping:
  description: What the last C(scontrol ping) printed.
  returned: always
  type: str
"""

import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils import reconfigure_check


def wait_up(module, scontrol, host, timeout):
    """(up, last ping output): ping until this host's slurmctld is UP or timeout seconds passed."""
    deadline = time.time() + timeout
    while True:
        _rc, out, err = module.run_command([scontrol, "ping"])
        # A host the ping does not list (another name in SlurmctldHost): nothing to judge, nothing to restart.
        up = reconfigure_check.controller_up(out, host)
        if up or up is None:
            return True, out + err
        if time.time() >= deadline:
            return False, out + err
        time.sleep(1)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host=dict(type="str", required=True),
            timeout=dict(type="int", default=20),
            restart_timeout=dict(type="int", default=90),
        ),
        supports_check_mode=True,
    )
    params = module.params
    scontrol = module.get_bin_path("scontrol", required=True)
    systemctl = module.get_bin_path("systemctl", required=True)
    rc, _out, _err = module.run_command([systemctl, "is-active", "--quiet", "slurmctld"])
    if rc != 0:
        module.exit_json(changed=False, answered=False, ping="")
    up, ping = wait_up(module, scontrol, params["host"], params["timeout"])
    if up:
        module.exit_json(changed=False, answered=True, ping=ping)
    said = " | ".join(line.strip() for line in ping.splitlines() if line.strip())
    if module.check_mode:
        module.warn("slurmctld on %s runs but did not answer within %d s (%s): a run would restart it"
                    % (params["host"], params["timeout"], said))
        module.exit_json(changed=True, answered=False, ping=ping)
    rc, out, err = module.run_command([systemctl, "restart", "slurmctld"])
    if rc != 0:
        module.fail_json(msg="slurmctld on %s did not answer (%s) and would not restart: %s"
                         % (params["host"], said, (err or out).strip()), answered=False, ping=ping)
    again, ping_after = wait_up(module, scontrol, params["host"], params["restart_timeout"])
    if not again:
        module.fail_json(msg="slurmctld on %s did not answer (%s), and not within %d s of its restart either: %s"
                         % (params["host"], said, params["restart_timeout"], ping_after.strip()),
                         answered=False, ping=ping_after)
    module.warn("slurmctld on %s ran but did not answer within %d s (%s): restarted; it answers again and its "
                "StateSaveLocation kept the jobs" % (params["host"], params["timeout"], said))
    module.exit_json(changed=True, answered=False, ping=ping_after)


if __name__ == "__main__":
    main()
