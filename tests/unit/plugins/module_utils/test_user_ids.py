# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""user_ids: slurm_users resolve to one uid and gid on every host."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import os
import pwd

from ansible_collections.hybridhpc.slurm.plugins.filter.users import slurm_user_id_problems
from ansible_collections.hybridhpc.slurm.plugins.module_utils import user_ids
from ansible_collections.hybridhpc.slurm.plugins.modules.slurm_host_facts import user_ids as resolve

REFERENCE = {"alice": [20001, 20001], "bob": [20002, 20002]}


def test_the_same_ids_everywhere_pass():
    assert user_ids.problems(["alice", "bob"], dict(REFERENCE), "c1", True, REFERENCE, "ctl1") == []


def test_a_user_unknown_where_jobs_run_is_named_with_the_fix():
    found = user_ids.problems(["alice", "bob"], {"alice": [20001, 20001], "bob": None}, "c1", True, REFERENCE, "ctl1")
    assert found == ["slurm_users: bob does not resolve on c1 (getent passwd bob finds no one), where its jobs run or it "
                     "logs in: create the user there, or point the host at the site's directory (SSSD)"]


def test_a_controller_may_not_know_the_users():
    assert user_ids.problems(["alice"], {"alice": None}, "ctl2", False, REFERENCE, "ctl1") == []


def test_another_uid_or_gid_than_on_the_reference_host_is_refused():
    found = user_ids.problems(["alice"], {"alice": [1001, 1001]}, "c1", True, REFERENCE, "ctl1")
    assert found == ["slurm_users: alice is uid 20001 gid 20001 on ctl1 but uid 1001 gid 1001 on c1: give it one uid and "
                     "gid on every host (one directory), or its jobs run as another user and shared files change hands"]
    assert user_ids.problems(["alice"], {"alice": [20001, 100]}, "c1", False, REFERENCE, "ctl1")


def test_the_filter_takes_slurm_users_entries():
    found = slurm_user_id_problems([{"name": "alice", "accounts": ["physics"]}, {"accounts": []}], {"alice": None}, "c1", "True")
    assert len(found) == 1 and "alice does not resolve on c1" in found[0]


def test_the_module_resolves_through_the_name_service():
    me = pwd.getpwuid(os.getuid())
    assert resolve(me.pw_name) == [me.pw_uid, me.pw_gid]
    assert resolve("hybridhpc-no-such-user") is None
