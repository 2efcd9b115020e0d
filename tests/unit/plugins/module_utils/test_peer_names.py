# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""peer_names: which peers get an /etc/hosts line, the block as blockinfile writes it, the firewall manager."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import peer_names

HOSTS = "127.0.0.1\tlocalhost\n172.18.0.2\tonprem-ctl1\n"
BLOCK = "# BEGIN hybridhpc.slurm federation peers\n172.19.0.2 cloud-ctl1\n# END hybridhpc.slurm federation peers\n"


def test_auto_writes_only_the_peers_dns_does_not_resolve():
    assert peer_names.entries_needed("auto", ["a", "b", "c"], {"b"}) == ["a", "c"]


def test_hosts_writes_every_peer_and_dns_none():
    assert peer_names.entries_needed("hosts", ["a", "b"], {"a", "b"}) == ["a", "b"]
    assert peer_names.entries_needed("dns", ["a", "b"], set()) == []


def test_an_unknown_mode_names_the_variable():
    with pytest.raises(ValueError, match="federation_name_resolution"):
        peer_names.entries_needed("mdns", ["a"], set())


def test_a_new_block_is_appended_as_blockinfile_does():
    assert peer_names.render_hosts(HOSTS, ["172.19.0.2 cloud-ctl1"]) == HOSTS + BLOCK


def test_the_block_blockinfile_wrote_is_left_as_it_is():
    assert peer_names.render_hosts(HOSTS + BLOCK, ["172.19.0.2 cloud-ctl1"]) == HOSTS + BLOCK


def test_an_existing_block_is_replaced_where_it_is():
    text = BLOCK + HOSTS
    new = peer_names.render_hosts(text, ["172.19.0.9 cloud-ctl1", "172.19.0.3 cloud-dbd"])
    assert new.splitlines()[1:3] == ["172.19.0.9 cloud-ctl1", "172.19.0.3 cloud-dbd"]
    assert new.endswith(HOSTS)


def test_no_lines_remove_the_block_and_nothing_else():
    assert peer_names.render_hosts(HOSTS + BLOCK, []) == HOSTS
    assert peer_names.render_hosts(HOSTS, []) == HOSTS


def test_firewall_auto_picks_the_active_manager():
    assert peer_names.firewall_in_use("auto", ["active", "inactive"]) == "firewalld"
    assert peer_names.firewall_in_use("auto", ["inactive", "active"]) == "ufw"
    assert peer_names.firewall_in_use("auto", ["inactive", "inactive"]) == "none"
    assert peer_names.firewall_in_use("auto", []) == "none"
    assert peer_names.firewall_in_use("ufw", ["active", "inactive"]) == "ufw"
