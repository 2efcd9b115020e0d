# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The template lookup: ansible.builtin.template's text, without a deep copy of the host's variables."""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import pytest
import yaml
from ansible import constants as C
from ansible.parsing.dataloader import DataLoader
from ansible.plugins.lookup import template as builtin_template
from ansible.template import Templar

from ansible_collections.hybridhpc.slurm.plugins.lookup import template

TEMPLATE = """{{ ansible_managed | comment }}
ClusterName={{ cluster }}
{% for node in nodes %}NodeName={{ node.name }} CPUs={{ node.cpus }}
{% endfor %}{% set local = 'x' %}Extra={{ extra | default('none') }} {{ template_path | basename }}
"""


class NoDeepCopy(dict):
    """A value that refuses to be deep-copied (as the cluster model would be, at a cost)."""

    def __deepcopy__(self, memo):
        raise AssertionError("deep-copied")


def lookup_of(module, load_name, tmp_path):
    C.config.initialize_plugin_configuration_definitions(
        "lookup", load_name, yaml.safe_load(module.DOCUMENTATION)["options"])
    loader = DataLoader()
    plugin = module.LookupModule(loader=loader, templar=Templar(loader=loader))
    plugin._load_name = load_name
    return plugin


@pytest.fixture
def variables(tmp_path):
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "slurm.conf.j2").write_text(TEMPLATE)
    return {"ansible_search_path": [str(tmp_path)], "cluster": "onprem",
            "nodes": [{"name": "c1", "cpus": 4}, {"name": "c2", "cpus": 8}]}


def test_the_text_is_ansible_builtin_templates(tmp_path, variables):
    ours = lookup_of(template, "hybridhpc.slurm.template", tmp_path)
    builtin = lookup_of(builtin_template, "ansible.builtin.template", tmp_path)
    for kwargs in ({}, {"template_vars": {"extra": "given"}}):
        expected = builtin.run(["slurm.conf.j2"], dict(variables), **kwargs)
        assert ours.run(["slurm.conf.j2"], dict(variables), **kwargs) == expected
    assert "NodeName=c2 CPUs=8\n" in expected[0] and "Extra=given slurm.conf.j2" in expected[0]


def test_the_hosts_variables_are_not_deep_copied_nor_added_to(tmp_path, variables):
    variables["nodes"] = [NoDeepCopy(name="c1", cpus=4)]
    with pytest.raises(AssertionError, match="deep-copied"):
        lookup_of(builtin_template, "ansible.builtin.template", tmp_path).run(["slurm.conf.j2"], variables)
    given = dict(variables)
    text = lookup_of(template, "hybridhpc.slurm.template", tmp_path).run(
        ["slurm.conf.j2"], variables, template_vars={"extra": "given"})
    assert "NodeName=c1 CPUs=4\n" in text[0]
    # The template's added variables (template_path, extra, ...) went into its own dictionary.
    assert variables == given
