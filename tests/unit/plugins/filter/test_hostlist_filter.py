# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the hostlist_expand / hostlist_compress filters.

Expected outputs are those of scontrol 24.11.5 (show hostnames / hostlist /
hostlistsorted); the exhaustive checks live in
tests/unit/plugins/module_utils/test_hostlist.py.
"""

from __future__ import absolute_import, division, print_function  # noqa: UP010

__metaclass__ = type  # noqa: UP001

import jinja2
import pytest
from ansible.errors import AnsibleFilterError
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.hybridhpc.slurm.plugins.filter.hostlist import (
    FilterModule,
    hostlist_compress,
    hostlist_expand,
)

FILTERS = FilterModule().filters()


def test_filters_are_registered():
    assert FILTERS["hostlist_expand"] is hostlist_expand
    assert FILTERS["hostlist_compress"] is hostlist_compress


@pytest.mark.parametrize(
    "value, names",
    [
        ("n[1-3,7,010-012]", ["n1", "n2", "n3", "n7", "n010", "n011", "n012"]),
        ("rack[1-2]-n[01-02]", ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"]),
        ("n[1-3]-ib", ["n1-ib", "n2-ib", "n3-ib"]),
        ("n[9-11],login", ["n9", "n10", "n11", "login"]),
        (["gpu[1-2]", "n3,n1,n3"], ["gpu1", "gpu2", "n3", "n1", "n3"]),
        ("", []),
    ],
)
def test_expand(value, names):
    assert hostlist_expand(value) == names


@pytest.mark.parametrize(
    "value, sort, want",
    [
        (["n3", "n2", "n1"], False, "n[3,2,1]"),
        (["n3", "n2", "n1"], True, "n[1-3]"),
        (["n3", "n2", "n1", "n1", "n4"], True, "n[1,1-4]"),
        (["n9", "n10", "n010"], False, "n[9-10,010]"),
        (["b1", "a2", "a1", "c", "b"], True, "a[1-2],b,b1,c"),
        (["nid00002", "nid00003", "nid00004"], False, "nid[00002-00004]"),
        ("n[1-2],n[3-4]", False, "n[1-4]"),
        ([], True, ""),
    ],
)
def test_compress(value, sort, want):
    assert hostlist_compress(value, sort) == want
    assert hostlist_compress(value, sort=sort) == want


def test_compress_defaults_to_keeping_order():
    assert hostlist_compress(["n2", "n1"]) == "n[2,1]"


@pytest.mark.parametrize("sort, want", [("yes", "n[1-2]"), ("false", "n[2,1]"), (1, "n[1-2]"), (0, "n[2,1]")])
def test_compress_sort_accepts_ansible_booleans(sort, want):
    assert hostlist_compress(["n2", "n1"], sort) == want


@pytest.mark.parametrize("sort", ["sorted", None, [True]])
def test_compress_rejects_non_boolean_sort(sort):
    with pytest.raises(AnsibleFilterError, match="sort must be a boolean"):
        hostlist_compress(["n1"], sort)


@pytest.mark.parametrize(
    "value, fragment",
    [
        ("n[5-1]", "range '5-1' in 'n[5-1]' is reversed; write the lower bound first, e.g. 1-5"),
        ("n[1-2", "'[' in 'n[1-2' has no matching ']'"),
        ("n[a-b]", "range 'a-b' in 'n[a-b]' is not numeric"),
        ("n[]", "'n[]' has an empty range"),
        ("n[1-70000]", "holds 70000 hosts"),
        ("n1]", "']' in 'n1]' has no matching '['"),
        (5, "expects a hostlist string or a list of strings, got int"),
    ],
)
def test_errors_become_filter_errors_naming_the_input(value, fragment):
    with pytest.raises(AnsibleFilterError) as info:
        hostlist_expand(value)
    assert str(info.value).startswith("hostlist_expand: ")
    assert fragment in str(info.value)
    with pytest.raises(AnsibleFilterError) as info:
        hostlist_compress(value, True)
    assert str(info.value).startswith("hostlist_compress: ")
    assert fragment in str(info.value)


def test_compress_sort_error_on_slurm_bug_input():
    with pytest.raises(AnsibleFilterError, match="cannot sort hostlist 'n3000000000,n1'"):
        hostlist_compress(["n3000000000", "n1"], True)
    assert hostlist_compress(["n3000000000", "n1"]) == "n[3000000000,1]"


def test_in_jinja_templates():
    env = jinja2.Environment()
    env.filters.update(FILTERS)
    rendered = env.from_string(
        "{{ 'cn[01-03],gpu7' | hostlist_expand | join(' ') }}|"
        "{{ ['cn03', 'cn01', 'cn02'] | hostlist_compress }}|"
        "{{ ['cn03', 'cn01', 'cn02'] | hostlist_compress(true) }}|"
        "{{ ['cn03', 'cn01', 'cn02'] | hostlist_compress(sort=true) }}"
    ).render()
    assert rendered == "cn01 cn02 cn03 gpu7|cn[03,01-02]|cn[01-03]|cn[01-03]"


def test_large_list_through_filters():
    names = ["node%05d" % i for i in range(1, 12001)]
    expr = hostlist_compress(names[::-1], True)
    assert expr == "node[00001-12000]"
    assert hostlist_expand(expr) == names


@settings(max_examples=200, deadline=None)
@given(st.lists(st.builds(lambda p, num, pad: "%s%0*d" % (p, pad, num),
                          st.sampled_from(["n", "gpu-", "r1n", ""]), st.integers(0, 200),
                          st.integers(0, 4)), max_size=40))
def test_filters_round_trip(names):
    assert hostlist_expand(hostlist_compress(names)) == names
