# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""federation_preflight: peers' names and Slurm ports, checked from this host in one module run.

Real TCP on loopback: a listening socket answers, a port nobody listens on
does not. Names other than localhost go through a resolver given to check():
an unknown name would otherwise be asked of DNS servers outside this machine.
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import socket
import time

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import federation_preflight as fp
from ansible_collections.hybridhpc.slurm.plugins.modules import federation_preflight


@pytest.fixture
def listening():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


@pytest.fixture
def closed_port():
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    return port


def test_a_listening_port_answers_and_a_closed_one_does_not_within_the_timeout(listening, closed_port):
    assert fp.answers("127.0.0.1", listening, timeout=2)
    started = time.monotonic()
    assert not fp.answers("127.0.0.1", closed_port, timeout=1.5)
    assert 1.0 <= time.monotonic() - started < 4


def test_a_port_that_opens_while_waiting_counts(closed_port):
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)

    def open_it(_seconds):
        server.bind(("127.0.0.1", closed_port))
        server.listen(1)
    try:
        assert fp.answers("127.0.0.1", closed_port, timeout=5, sleep=open_it)
    finally:
        server.close()


def test_unresolved_names_are_reported_and_their_ports_not_tried(listening, closed_port):
    known = {"localhost", "ctl-a"}
    ports = [["localhost", listening], ["127.0.0.1", closed_port], ["ctl-b", 6817]]
    result = fp.check(["localhost", "ctl-b"], ports, timeout=1, resolve=lambda name: name in known)
    assert result == {"unresolved": ["ctl-b"], "unanswered": [["127.0.0.1", closed_port]]}
    message = fp.problem(result)
    assert "ctl-b: does not resolve (DNS, or set federation_name_resolution: hosts)." in message
    assert "127.0.0.1 port %d: no TCP connection" % closed_port in message
    assert fp.problem({"unresolved": [], "unanswered": []}) is None


def test_the_ports_are_tried_at_once_not_one_after_another(closed_port):
    started = time.monotonic()
    result = fp.check([], [["127.0.0.1", closed_port]] * 4, timeout=1.5)
    assert len(result["unanswered"]) == 4
    assert time.monotonic() - started < 4  # one after another: 4 x 1.5 s or more


def test_the_module_passes_when_every_peer_answers_and_fails_naming_the_port(module_main, listening, closed_port):
    ok = module_main(federation_preflight.main, {"peers": ["localhost"], "ports": [["localhost", listening]]})
    assert not ok.get("failed") and ok["unanswered"] == [] and ok["unresolved"] == []
    bad = module_main(federation_preflight.main, {"ports": [["127.0.0.1", closed_port]], "timeout": 1})
    assert bad["failed"] and "127.0.0.1 port %d: no TCP connection" % closed_port in bad["msg"]
    # Keys Ansible reads as the host's state: "unreachable" would make a failed check an unreachable host.
    assert not {"unreachable", "skipped", "skip_reason"} & set(bad)
    wrong = module_main(federation_preflight.main, {"ports": [["127.0.0.1"]]})
    assert wrong["failed"] and wrong["msg"].startswith("ports: each entry is [name, port]")
