# -*- coding: utf-8 -*-
# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters and tests found once per run, not once per template and host.

Every template environment asks Ansible's Jinja2Loader (ansible-core 2.18)
for each filter and test it uses, and the loader keeps only Ansible's own
plugins found by their short name. For anything else it goes through every
file of a collection's ``plugins/filter`` (or ``plugins/test``), loads each
file's plugin, asks it for its functions, and keeps nothing:

- a collection's filter (``hybridhpc.slurm.slurm_packages``): every file of
  that collection's ``plugins/filter``;
- Jinja's own filters and tests (``default``, ``length``, ``select``, ``in``,
  ``defined``): not Ansible plugins, so every file of ``ansible.builtin``'s
  ``plugins/filter`` (or ``plugins/test``) before Jinja answers them.

About 0.5 ms for each lookup; the first play of site.yml makes a few hundred
per host, in ansible-playbook's own process and in every worker.

:func:`install` wraps the loader's lookup so that each answer, found or not
found, is kept for the rest of the run: the plugin files do not change during
a run. A lookup that raises (an invalid name, a removed plugin) is not kept
and raises again the next time.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

STATE = {"original": None}
FOUND = {}


def _kept_lookup(loader, name, *args, **kwargs):
    if args or kwargs or not isinstance(name, str):
        return STATE["original"](loader, name, *args, **kwargs)
    key = (loader.type, name)
    found = FOUND.get(key)
    if found is None:
        found = FOUND[key] = STATE["original"](loader, name)
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
