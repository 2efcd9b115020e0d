# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters and tests found once per run: the same functions (or the same "not found") as Ansible's own lookup."""

import pytest
from ansible.plugins.loader import Jinja2Loader, filter_loader, test_loader
from ansible.template import Templar

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils import jinja_plugin_cache


@pytest.fixture(name="lookups")
def fixture_lookups(monkeypatch):
    """The cache installed over a counting copy of Ansible's lookup: the names Ansible really looked up."""
    jinja_plugin_cache.uninstall()
    seen = []
    original = Jinja2Loader.get_with_context

    def counted(loader, name, *args, **kwargs):
        seen.append(name)
        return original(loader, name, *args, **kwargs)

    monkeypatch.setattr(Jinja2Loader, "get_with_context", counted)
    assert jinja_plugin_cache.install()
    yield seen
    jinja_plugin_cache.uninstall()
    assert Jinja2Loader.get_with_context is counted


def test_a_collection_filter_is_looked_up_once_and_is_the_function_ansible_finds(lookups):
    name = "hybridhpc.slurm.hostlist_compress"
    first = filter_loader.get(name)
    assert filter_loader.get(name) is first
    assert lookups == [name]
    jinja_plugin_cache.uninstall()
    assert filter_loader.get(name).j2_function is first.j2_function


def test_templates_render_the_same_with_the_kept_filters_and_tests(lookups):
    text = "{{ ['c1', 'c2', 'c3'] | hybridhpc.slurm.hostlist_compress }}"
    assert Templar(loader=None).template(text) == "c[1-3]"
    assert Templar(loader=None).template(text) == "c[1-3]"
    assert lookups.count("hybridhpc.slurm.hostlist_compress") == 1


def test_jinjas_own_filters_and_names_not_found_are_looked_up_once(lookups):
    for _attempt in range(2):
        assert filter_loader.get("ansible.builtin.regex_replace") is not None
        # Jinja's own: not an Ansible plugin, Jinja answers it.
        assert filter_loader.get("default") is None
        assert filter_loader.get("hybridhpc.slurm.no_such_filter") is None
    assert lookups == ["ansible.builtin.regex_replace", "default", "hybridhpc.slurm.no_such_filter"]
    assert Templar(loader=None).template("{{ none_here | default('x') | length }}") == "1"


def test_a_lookup_that_raises_is_not_kept(lookups):
    for _attempt in range(2):
        with pytest.raises(KeyError):
            filter_loader.get("no_such_collection.anywhere.thing")
    assert lookups == ["no_such_collection.anywhere.thing"] * 2


def test_filters_and_tests_are_kept_apart(lookups):
    assert filter_loader.get("hybridhpc.slurm.hostlist_compress") is not None
    # The same name as a test is a test lookup of its own: the collection has
    # no test plugins, and Ansible says so, never the filter.
    with pytest.raises(KeyError):
        test_loader.get("hybridhpc.slurm.hostlist_compress")
    assert lookups == ["hybridhpc.slurm.hostlist_compress"] * 2
    assert test_loader.get("defined") is None and filter_loader.get("defined") is None
    assert lookups[2:] == ["defined", "defined"]
