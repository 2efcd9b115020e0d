# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""name_service_users: users' ids through NSS, waiting for a directory client that just started."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import os
import pwd

import pytest

from ansible_collections.hybridhpc.slurm.plugins.modules import name_service_users


@pytest.fixture
def run_module(module_main):
    return lambda args: module_main(name_service_users.main, args, False)


def test_known_and_unknown_names_at_once(run_module):
    me = pwd.getpwuid(os.getuid())
    result = run_module({"names": [me.pw_name, "hybridhpc-no-such-user"]})
    assert result["users"] == {me.pw_name: [me.pw_uid, me.pw_gid], "hybridhpc-no-such-user": None}
    assert not result["changed"]


def test_it_asks_again_until_a_late_user_resolves(run_module, monkeypatch):
    answers = iter([None, None, [20001, 20001]])
    monkeypatch.setattr(name_service_users, "user_ids", lambda name: next(answers))
    monkeypatch.setattr(name_service_users.time, "sleep", lambda seconds: None)
    result = run_module({"names": ["alice"], "timeout": 30})
    assert result["users"] == {"alice": [20001, 20001]}


def test_without_a_timeout_it_asks_once(run_module, monkeypatch):
    calls = []
    monkeypatch.setattr(name_service_users, "user_ids", calls.append)
    result = run_module({"names": ["alice"]})
    assert result["users"] == {"alice": None} and calls == ["alice"]
