# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""federation_peer_names: the peers' hosts block written in place in one step, check mode and diff honoured."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import os

import pytest

from ansible_collections.hybridhpc.slurm.plugins.modules import federation_peer_names

HOSTS = "127.0.0.1\tlocalhost\n"
PEERS = {"cloud-ctl1": "172.19.0.2", "cloud-dbd": "172.19.0.3"}


@pytest.fixture
def run_module(module_main):
    return lambda args, check_mode=False, diff=False: module_main(federation_peer_names.main, args, check_mode, diff)


@pytest.fixture
def hosts(tmp_path):
    path = tmp_path / "hosts"
    path.write_text(HOSTS)
    return path


def test_peers_dns_does_not_resolve_are_written_in_place(run_module, hosts, monkeypatch):
    monkeypatch.setattr(federation_peer_names, "dns_resolved", lambda module, names: {"cloud-dbd"})
    inode = os.stat(hosts).st_ino
    result = run_module({"peers": PEERS, "path": str(hosts), "firewall": "none"})
    assert result["changed"] and result["hosts_entries"] == ["cloud-ctl1"]
    assert "172.19.0.2 cloud-ctl1\n" in hosts.read_text() and "cloud-dbd" not in hosts.read_text()
    # A bind-mounted /etc/hosts cannot be renamed over: the same inode is written.
    assert os.stat(hosts).st_ino == inode
    again = run_module({"peers": PEERS, "path": str(hosts), "firewall": "none"})
    assert not again["changed"]


def test_dns_mode_removes_the_block(run_module, hosts):
    run_module({"peers": PEERS, "path": str(hosts), "name_resolution": "hosts", "firewall": "none"})
    result = run_module({"peers": PEERS, "path": str(hosts), "name_resolution": "dns", "firewall": "none"})
    assert result["changed"] and hosts.read_text() == HOSTS


def test_check_mode_writes_nothing_and_shows_the_diff(run_module, hosts):
    result = run_module({"peers": PEERS, "path": str(hosts), "name_resolution": "hosts", "firewall": "ufw"},
                        check_mode=True, diff=True)
    assert result["changed"] and hosts.read_text() == HOSTS
    assert "172.19.0.3 cloud-dbd" in result["diff"]["after"]
    assert result["firewall"] == "ufw"


def test_a_peer_without_address_is_refused(run_module, hosts):
    result = run_module({"peers": {"cloud-ctl1": ""}, "path": str(hosts), "name_resolution": "hosts"})
    assert result["failed"] and "cloud-ctl1 has no address" in result["msg"]
    assert hosts.read_text() == HOSTS
