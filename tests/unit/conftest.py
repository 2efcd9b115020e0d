# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fixtures shared by the unit tests."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001


import pytest
from ansible.module_utils import basic
from module_args import set_module_args


class _Finished(Exception):
    pass


@pytest.fixture
def module_main(monkeypatch):
    """``run(main, args, check_mode=False, diff=False) -> result``: an Ansible module's main() in this process.

    The result is what the module passed to exit_json, or to fail_json with
    ``failed: True`` added.
    """

    def finish(self, **kwargs):
        raise _Finished(kwargs)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", finish)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", lambda self, **kwargs: finish(self, failed=True, **kwargs))

    def run(main, args, check_mode=False, diff=False):
        module_args = dict(args, _ansible_check_mode=check_mode, _ansible_diff=diff)
        set_module_args(monkeypatch, module_args)
        with pytest.raises(_Finished) as outcome:
            main()
        return outcome.value.args[0]

    return run
