# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Can this host reach its federation peers? Names through NSS, then TCP to their Slurm ports.

What ``getent hosts`` and ``wait_for`` did, one task per peer and port, in
one module run: every name resolved as the Slurm daemons will resolve it
(getaddrinfo: /etc/hosts, then DNS, as nsswitch.conf says), every port of a
name that resolves tried until it answers or the timeout passes, all ports
at once.
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import socket
import time
from concurrent.futures import ThreadPoolExecutor

# Between two connection attempts to a port that refused or timed out.
RETRY_DELAY = 1.0


def resolves(name):
    """Whether ``name`` has an address (as ``getent hosts`` says)."""
    try:
        return bool(socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP))
    except (socket.gaierror, UnicodeError):
        return False


def answers(host, port, timeout, clock=time.monotonic, sleep=time.sleep):
    """Whether a TCP connection to host:port opens within ``timeout`` seconds (retried, as wait_for does)."""
    deadline = clock() + timeout
    while True:
        left = deadline - clock()
        try:
            socket.create_connection((host, port), timeout=max(0.2, min(left, 5.0))).close()
            return True
        except OSError:
            if clock() + RETRY_DELAY >= deadline:
                return False
            sleep(RETRY_DELAY)


def check(peers, ports, timeout, resolve=resolves):
    """``{"unresolved": [names], "unanswered": [[host, port]]}``.

    ``peers``: names that must resolve; ``ports``: ``[host, port]`` pairs
    that must answer. A port of a name that does not resolve is not tried
    (the name is the problem to report).
    """
    unresolved = [name for name in peers if not resolve(name)]
    wanted = [(str(host), int(port)) for host, port in ports if host not in unresolved]
    if not wanted:
        return {"unresolved": unresolved, "unanswered": []}
    with ThreadPoolExecutor(max_workers=min(16, len(wanted))) as pool:
        results = list(pool.map(lambda pair: answers(pair[0], pair[1], timeout), wanted))
    return {"unresolved": unresolved,
            "unanswered": [[host, port] for (host, port), ok in zip(wanted, results) if not ok]}


def problem(result):
    """What to tell the admin (Ansible names the host), or None when every peer resolves and answers."""
    if not result["unresolved"] and not result["unanswered"]:
        return None
    parts = ["This host cannot reach its federation peers."]
    parts += ["%s: does not resolve (DNS, or set federation_name_resolution: hosts)." % name
              for name in result["unresolved"]]
    parts += ["%s port %s: no TCP connection (peering route between the networks, security group / firewall on %s,"
              " or the daemon is down)." % (peer, port, port) for peer, port in result["unanswered"]]
    return " ".join(parts)
