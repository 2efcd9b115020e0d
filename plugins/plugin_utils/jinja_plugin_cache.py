# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's filters and tests found once per run, not once per template and host.

To find a collection's filter (or test), ansible-core 2.18's Jinja2Loader
goes through every file of the collection's ``plugins/filter``, loads each
file's plugin and asks it for its filters, and keeps nothing: about 0.5 ms for
each lookup, and every template environment looks a filter up again (the
first play of site.yml renders the collection's filters a few hundred times
per host).

:func:`install` wraps the loader's lookup so that a name of this collection,
once found, is answered from a dictionary for the rest of the run. Only this
collection's names are kept, only when found, and only its own files answer
them; they do not change during a run. Another collection's names, and the
builtin ones (which Ansible caches itself), go through Ansible's lookup as
before.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

PREFIX = "hybridhpc.slurm."

STATE = {"original": None}
FOUND = {}


def _kept_lookup(loader, name, *args, **kwargs):
    if not isinstance(name, str) or not name.startswith(PREFIX) or args or kwargs:
        return STATE["original"](loader, name, *args, **kwargs)
    key = (loader.type, name)
    found = FOUND.get(key)
    if found is None:
        found = STATE["original"](loader, name)
        if found.object is None or not found.plugin_load_context.resolved:
            return found
        FOUND[key] = found
    return found


def install():
    """Wrap Jinja2Loader's lookup (in ansible-playbook's process, before any fork). False, changing nothing, when this
    Ansible has no such loader."""
    if STATE["original"] is not None:
        return True
    try:
        from ansible.plugins.loader import Jinja2Loader
    except ImportError:
        return False
    STATE["original"] = Jinja2Loader.get_with_context
    Jinja2Loader.get_with_context = _kept_lookup
    return True


def uninstall():
    """Ansible's own lookup again, and nothing kept (tests)."""
    if STATE["original"] is not None:
        from ansible.plugins.loader import Jinja2Loader

        Jinja2Loader.get_with_context = STATE["original"]
    STATE["original"] = None
    FOUND.clear()
