#!/usr/bin/python
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

DOCUMENTATION = r"""
module: federation_preflight
short_description: Check that this host resolves its federation peers and reaches their Slurm ports
description:
  - Resolves every name of O(peers) as the Slurm daemons will (the system resolver, C(getaddrinfo), as
    C(getent hosts) does), then opens a TCP connection to every pair of O(ports) whose name resolved, all at once,
    each tried until it answers or O(timeout) passes.
  - Fails, before C(sacctmgr) is touched, with one message naming every name that does not resolve and every port
    that does not answer, and what to look at.
  - Read-only; runs the same in check mode.
  - The role federation runs it on every controller and slurmdbd host.
version_added: 0.4.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  peers:
    description: Names that must resolve.
    type: list
    elements: str
    default: []
  ports:
    description: Pairs of name and TCP port that must answer (C([cloud-ctl1, 6817])).
    type: list
    elements: list
    default: []
  timeout:
    description: Seconds to wait for each port.
    type: int
    default: 5
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Every peer resolves and answers on its Slurm ports
  hybridhpc.slurm.federation_preflight:
    peers: [cloud-ctl1]
    ports:
      - [cloud-ctl1, 6817]
      - [cloud-ctl1, 6819]
"""

RETURN = r"""
unresolved:
  description: The names of O(peers) that do not resolve.
  returned: always
  type: list
  elements: str
unanswered:
  description: The pairs of O(ports) whose name resolved but that did not answer within O(timeout).
  returned: always
  type: list
  elements: list
  sample: [[cloud-ctl1, 6819]]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils import federation_preflight


def main():
    module = AnsibleModule(
        argument_spec=dict(
            peers=dict(type="list", elements="str", default=[]),
            ports=dict(type="list", elements="list", default=[]),
            timeout=dict(type="int", default=5),
        ),
        supports_check_mode=True,
    )
    for pair in module.params["ports"]:
        if len(pair) != 2 or not str(pair[1]).isdigit():
            module.fail_json(msg="ports: each entry is [name, port], got %r" % (pair,))
    result = federation_preflight.check(module.params["peers"], module.params["ports"], module.params["timeout"])
    message = federation_preflight.problem(result)
    if message:
        module.fail_json(msg=message, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
