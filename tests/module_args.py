"""A module's arguments, set for AnsibleModule as the running ansible-core reads them.

ansible-core 2.19 reads a serialization profile beside the arguments and
ships ``ansible.module_utils.testing.patch_module_args`` to set both; 2.18
reads the JSON alone.
"""

import json

from ansible.module_utils import basic

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core 2.18
    patch_module_args = None


def encoded(args):
    """``(arguments as AnsibleModule reads them, profile or None)`` for ``args``."""
    if patch_module_args is None:
        return json.dumps({"ANSIBLE_MODULE_ARGS": args}).encode("utf-8"), None
    with patch_module_args(args):
        return basic._ANSIBLE_ARGS, basic._ANSIBLE_PROFILE


def set_module_args(monkeypatch, args):
    """Give the next AnsibleModule ``args`` (undone by monkeypatch at the test's end)."""
    data, profile = encoded(args)
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", data)
    if profile is not None:
        monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", profile)


# For a script run in a fresh interpreter: the same, as Python source.
SCRIPT_PRELUDE = r"""
from ansible.module_utils import basic
try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:
    import json as _json
    basic._ANSIBLE_ARGS = _json.dumps({"ANSIBLE_MODULE_ARGS": {}}).encode()
else:
    _patch = patch_module_args({})
    _patch.__enter__()
"""
