"""The pure pieces of module_utils/ack_values.py (tests/unit/test_ack_chart_values.py renders the whole values)."""

import base64

import pytest

from ansible_collections.hybridhpc.slurm.plugins.module_utils import ack_values as av


@pytest.mark.parametrize("given, expected", [
    ("jwt_key=/etc/slurm/jwt_hs256.key", "jwt_key=/var/jwt/jwt_hs256.key"),
    ("jwt_key=/etc/slurm/jwt_hs256.key,disable_token_creation", "jwt_key=/var/jwt/jwt_hs256.key,disable_token_creation"),
    (None, "jwt_key=/var/jwt/jwt_hs256.key"),
    ("disable_token_creation", "jwt_key=/var/jwt/jwt_hs256.key,disable_token_creation"),
])
def test_the_pods_read_the_jwt_key_where_it_is_mounted(given, expected):
    assert av.pod_auth_alt_parameters(given) == expected


@pytest.mark.parametrize("given, expected", [
    ("lua", ["k8s_resource_completion"]),
    ("lua,require_timelimit", ["k8s_resource_completion", "require_timelimit"]),
    (["require_timelimit"], ["require_timelimit"]),
    (None, ["k8s_resource_completion"]),
])
def test_acks_job_submit_plugin_replaces_the_collections_lua(given, expected):
    assert av.job_submit_plugins(given) == expected


def test_k8s_gres_are_found_by_name_in_any_spelling():
    assert av.has_k8s_gres([{"name": "k8scpu", "Flags": "CountOnly"}])
    assert not av.has_k8s_gres([{"Name": "gpu", "File": "/dev/nvidia0"}, "k8scpu"])
    assert not av.has_k8s_gres(None)


@pytest.mark.parametrize("key", ["", None, "not base64 !", "a2V5 !"])
def test_a_munge_key_that_is_not_one_is_refused(key):
    with pytest.raises(av.AckValuesError, match="^munge_key_b64: "):
        av.munge_content(key)


def test_the_munge_key_is_given_as_base64():
    key = bytes(range(256)) * 4
    assert base64.b64decode(av.munge_content(base64.b64encode(key).decode())) == key
