# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kept compiled templates: served only for the source and environment they were compiled for."""

import jinja2
import pytest
from ansible.parsing.dataloader import DataLoader
from ansible.playbook.conditional import Conditional
from ansible.template import AnsibleNativeEnvironment, Templar

from ansible_collections.hybridhpc.slurm.plugins.plugin_utils import template_cache


@pytest.fixture(name="parsed")
def fixture_parsed(monkeypatch):
    """The kept code installed, and every source Jinja really compiles (each is parsed first)."""
    template_cache.uninstall()
    assert template_cache.install()
    seen = []
    parse = jinja2.Environment._parse
    monkeypatch.setattr(jinja2.Environment, "_parse", lambda env, source, *a: seen.append(source) or parse(env, source, *a))
    yield seen
    template_cache.uninstall()


def render(text, **variables):
    return Templar(loader=None, variables=variables).template(text)


def test_a_prefilled_template_is_not_compiled_again_and_renders_the_same(parsed):
    text = "{{ members.controllers | first }}-{{ 'a\\b' | regex_replace('\\\\', '/') }}"
    assert template_cache.prefill([text]) == 1
    del parsed[:]
    assert render(text, members={"controllers": ["ctl1", "ctl2"]}) == "ctl1-a/b"
    assert render(text, members={"controllers": ["x"]}) == "x-a/b"
    assert parsed == []
    # Prefilled twice, compiled once.
    assert template_cache.prefill([text]) == 0


def test_a_condition_is_kept_in_the_form_ansible_evaluates(parsed):
    template_cache.prefill(template_cache.sources({"name": "t", "when": ["count | int > 2"]}))
    del parsed[:]
    templar = Templar(loader=None)
    condition = Conditional(loader=DataLoader())
    condition.when = ["count | int > 2"]
    assert condition.evaluate_conditional(templar, {"count": "3"}) is True
    assert condition.evaluate_conditional(templar, {"count": "1"}) is False
    assert parsed == []


def test_a_filter_folded_at_compile_time_with_a_new_result_each_call_is_never_kept(parsed):
    assert template_cache.prefill(["{{ 1000000000 | random }}", "{{ [1, 2, 3, 4, 5, 6] | shuffle }}"]) == 0
    drawn = {render("{{ 1000000000 | random }}") for _draw in range(3)}
    assert len(drawn) == 3


def test_another_environment_is_not_served(parsed):
    body = "<< value >> {{ value + 1 }}"
    template_cache.prefill([body])
    templar = Templar(loader=None, variables={"value": 1})
    assert templar.template(body) == "<< value >> 2"
    # The same source under other delimiters (an override header makes an overlay, so does a lookup's).
    del parsed[:]
    header = "#jinja2: variable_start_string:'<<', variable_end_string:'>>'\n"
    assert templar.template(header + body) == "1 {{ value + 1 }}"
    assert parsed == [body]
    # Another environment class compiles its own.
    del parsed[:]
    native = templar.copy_with_new_env(environment_class=AnsibleNativeEnvironment)
    assert native.template(body) == "<< value >> 2"
    assert parsed == [body]


def test_only_the_collections_own_tasks_are_read(tmp_path):
    class Role:
        _role_collection = "someone.else"
        _default_vars = {"d": "{{ x }}"}
        _role_vars = {}

        @staticmethod
        def get_role_path():
            return str(tmp_path / "roles" / "r")

    class Task:
        _ds = {"name": "n", "ansible.builtin.debug": {"msg": "{{ y }}"}, "when": "z"}
        when = ["z", "inherited"]
        _role = Role()

        @staticmethod
        def get_path():
            return str(tmp_path / "elsewhere" / "main.yml") + ":3"

    ours = tmp_path / "collection"
    (ours / "roles").mkdir(parents=True)
    assert template_cache.task_sources(Task(), "hybridhpc.slurm", str(ours), set()) == []
    Task._role._role_collection = "hybridhpc.slurm"
    seen = set()
    found = template_cache.task_sources(Task(), "hybridhpc.slurm", str(ours), seen)
    assert "{{ y }}" in found and "{{ x }}" in found
    assert template_cache.condition_template("inherited") in found
    assert template_cache.condition_template("z") in found
    # The role's defaults once.
    assert "{{ x }}" not in template_cache.task_sources(Task(), "hybridhpc.slurm", str(ours), seen)
