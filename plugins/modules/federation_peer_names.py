#!/usr/bin/python
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

DOCUMENTATION = r"""
module: federation_peer_names
short_description: Make this host resolve its federation peers, and report which firewall manager runs
description:
  - With O(name_resolution=auto), asks DNS alone (C(getent -s dns hosts)) for every peer of O(peers), then writes the
    peers DNS does not resolve, with their addresses, into a marked block of O(path). With V(hosts) every peer is
    written, with V(dns) the block is removed.
  - The block is the one C(ansible.builtin.blockinfile) writes with the marker
    C(BEGIN/END hybridhpc.slurm federation peers); the file is written in place, since containers bind-mount
    C(/etc/hosts) and a rename over it fails.
  - With O(firewall=auto), reports the firewall manager that runs (C(firewalld), C(ufw) or C(none)), from one
    C(systemctl is-active) call.
  - The role federation runs it on every controller and slurmdbd host before the daemons start, in one step instead of
    one per peer, one for the file and one for the firewall.
version_added: 0.2.0
author:
  - hybridhpc.slurm developers (@hybridhpc)
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
options:
  peers:
    description: The peers, each name with the address it is reached at.
    type: dict
    default: {}
  name_resolution:
    description: How peers are resolved (role variable C(federation_name_resolution)).
    type: str
    choices: [auto, dns, hosts]
    default: auto
  firewall:
    description: The firewall manager, or V(auto) to report the one that runs (role variable C(federation_firewall)).
    type: str
    choices: [auto, firewalld, ufw, none]
    default: auto
  path:
    description: The hosts file.
    type: path
    default: /etc/hosts
attributes:
  check_mode:
    support: full
  diff_mode:
    support: full
  platform:
    platforms: posix
"""

EXAMPLES = r"""
- name: Resolve the peers and find the firewall manager
  hybridhpc.slurm.federation_peer_names:
    peers:
      cloud-ctl1: 10.20.0.5
"""

RETURN = r"""
hosts_entries:
  description: The peers written into the hosts file's block.
  returned: always
  type: list
  elements: str
firewall:
  description: The firewall manager to open the peers' ports in (V(none) when none runs).
  returned: always
  type: str
  sample: none
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.hybridhpc.slurm.plugins.module_utils import peer_names


def dns_resolved(module, names):
    getent = module.get_bin_path("getent", required=True)
    resolved = set()
    for name in names:
        rc, _out, _err = module.run_command([getent, "-s", "dns", "hosts", name])
        if rc == 0:
            resolved.add(name)
    return resolved


def main():
    module = AnsibleModule(
        argument_spec=dict(
            peers=dict(type="dict", default={}),
            name_resolution=dict(type="str", choices=list(peer_names.RESOLUTION_MODES), default="auto"),
            firewall=dict(type="str", choices=list(peer_names.FIREWALLS), default="auto"),
            path=dict(type="path", default="/etc/hosts"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    peers = params["peers"]
    for name, address in peers.items():
        if not address:
            module.fail_json(msg="peers: %s has no address" % name)
    resolved = dns_resolved(module, list(peers)) if params["name_resolution"] == "auto" else set()
    names = peer_names.entries_needed(params["name_resolution"], list(peers), resolved)
    lines = ["%s %s" % (peers[name], name) for name in names]

    path = params["path"]
    try:
        with open(path) as handle:
            before = handle.read()
    except FileNotFoundError:
        before = ""
    after = peer_names.render_hosts(before, lines)
    changed = after != before
    if changed and not module.check_mode:
        # In place: a rename over a bind-mounted /etc/hosts fails.
        with open(path, "w") as handle:
            handle.write(after)

    firewall = params["firewall"]
    if firewall == "auto":
        systemctl = module.get_bin_path("systemctl")
        states = []
        if systemctl:
            _rc, out, _err = module.run_command([systemctl, "is-active", "firewalld.service", "ufw.service"])
            states = out.splitlines()
        firewall = peer_names.firewall_in_use("auto", states)

    result = dict(changed=changed, hosts_entries=names, firewall=firewall)
    if module._diff:
        result["diff"] = dict(before=before, after=after, before_header=path, after_header=path)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
