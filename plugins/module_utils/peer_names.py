# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""How a federation host names its peers, and which firewall manager it runs.

One module call does what used to be a getent task per peer, a blockinfile
task and a systemctl task: these functions hold its decisions, the module only
runs commands and writes the file.
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

MARKER = "# {mark} hybridhpc.slurm federation peers"
RESOLUTION_MODES = ("auto", "dns", "hosts")
FIREWALLS = ("auto", "firewalld", "ufw", "none")


def entries_needed(mode, peers, dns_resolved):
    """The peer names that need an /etc/hosts line, in the order given.

    mode 'dns': none (DNS is trusted for every peer); 'hosts': every peer;
    'auto': the peers DNS alone did not resolve (dns_resolved holds those it did).
    """
    if mode not in RESOLUTION_MODES:
        raise ValueError("federation_name_resolution: %r is not one of %s" % (mode, ", ".join(RESOLUTION_MODES)))
    if mode == "dns":
        return []
    if mode == "hosts":
        return list(peers)
    return [peer for peer in peers if peer not in dns_resolved]


def render_hosts(text, lines, marker=MARKER):
    """The hosts file with the marked block holding `lines` (removed when empty).

    The same text ansible.builtin.blockinfile writes with insertafter=EOF, so
    hosts converged by it stay unchanged: an existing block is replaced where it
    is, a new one is appended.
    """
    begin = marker.replace("{mark}", "BEGIN")
    end = marker.replace("{mark}", "END")
    current = text.splitlines()
    try:
        first = current.index(begin)
        last = current.index(end, first)
    except ValueError:
        first = last = None
    block = [begin] + list(lines) + [end] if lines else []
    if first is None:
        result = current + block
    else:
        result = current[:first] + block + current[last + 1:]
    if not result:
        return ""
    return "\n".join(result) + "\n"


def firewall_in_use(setting, states):
    """The firewall manager to open ports in.

    states: the lines of `systemctl is-active firewalld.service ufw.service`.
    """
    if setting not in FIREWALLS:
        raise ValueError("federation_firewall: %r is not one of %s" % (setting, ", ".join(FIREWALLS)))
    if setting != "auto":
        return setting
    states = list(states) + ["", ""]
    if states[0].strip() == "active":
        return "firewalld"
    if states[1].strip() == "active":
        return "ufw"
    return "none"
