"""The typed configuration: valid files load; every broken rule names its key and the fix."""

from __future__ import annotations

import copy
import json

import pytest

from hybridhpc_power.config import ConfigError, from_dict, load

VALID = {
    "cluster": "cloud",
    "queue_dir": "/var/spool/hybridhpc-power",
    "state_file": "/var/lib/hybridhpc-power/state.json",
    "lock_file": "/run/hybridhpc-power.lock",
    "log_file": "/var/log/slurm/hybridhpc-power.log",
    "scontrol": "/usr/bin/scontrol",
    "munge_key_file": "/etc/munge/munge.key",
    "failed_retry_after": 30,
    "resume_grace": 60,
    "nodesets": [
        {"name": "dy", "nodes": "cloud-dy-[1-4]", "provider": "docker", "options": {"image": "x"}},
        {"name": "site", "nodes": "cloud-st-[01-02],cloud-gpu1", "provider": "command"},
    ],
}


def test_the_example_loads_with_expanded_node_sets():
    config = from_dict(VALID)
    assert config.cluster == "cloud" and config.failed_retry_after == 30.0
    assert config.nodesets[0].members == ("cloud-dy-1", "cloud-dy-2", "cloud-dy-3", "cloud-dy-4")
    assert config.nodesets[1].options == {}
    assert config.node_map()["cloud-gpu1"] == "site" and len(config.node_map()) == 7
    assert config.nodeset("site").provider == "command"


def test_defaults_fill_in_what_is_not_given():
    config = from_dict({"cluster": "c", "nodesets": [{"name": "a", "nodes": "n1", "provider": "command"}]})
    assert config.queue_dir == "/var/spool/hybridhpc-power" and config.log_file == "/var/log/slurm/hybridhpc-power.log"
    assert config.failed_retry_after == 300.0 and config.resume_grace == 60.0 and config.scontrol_timeout == 30.0


def test_log_file_null_means_stdout_only():
    assert from_dict({**VALID, "log_file": None}).log_file is None


def changed(path, value):
    data = copy.deepcopy(VALID)
    target = data
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


@pytest.mark.parametrize("data,message", [
    (changed(["cluster"], KeyError), "cluster is required"),
    (changed(["cluster"], ""), "cluster must be a non-empty string"),
    (changed(["cluster"], "a b"), "cluster must be letters"),
    (changed(["clusters"], "x"), "unknown key 'clusters' in the configuration"),
    (changed(["nodesets"], []), "nodesets must be a non-empty list"),
    (changed(["nodesets"], KeyError), "nodesets must be a non-empty list"),
    (changed(["nodesets", 0], "dy"), "nodesets[0] must be an object"),
    (changed(["nodesets", 0, "name"], KeyError), "nodesets[0].name is required"),
    (changed(["nodesets", 0, "name"], "d y"), "nodesets[0].name must be letters"),
    (changed(["nodesets", 0, "nodes"], KeyError), "nodesets[0].nodes is required"),
    (changed(["nodesets", 0, "nodes"], "cloud-dy-[4-1]"), "nodesets[0] (dy).nodes: invalid hostlist"),
    (changed(["nodesets", 0, "nodes"], "cloud-dy-[1-4"), "has no matching ']'"),
    (changed(["nodesets", 0, "provider"], "gce"), "nodesets[0] (dy).provider must be one of aws, command, docker"),
    (changed(["nodesets", 0, "options"], ["x"]), "nodesets[0] (dy).options must be an object"),
    (changed(["nodesets", 0, "image"], "x"), "unknown key 'image' in nodesets[0]"),
    (changed(["nodesets", 1, "nodes"], "cloud-dy-4"), "node cloud-dy-4 is in node sets 'dy' and 'site'"),
    (changed(["nodesets", 1, "name"], "dy"), "node set names must be unique; dy"),
    (changed(["queue_dir"], "spool"), "queue_dir must be an absolute path"),
    (changed(["scontrol"], None), "scontrol must be a non-empty string"),
    (changed(["failed_retry_after"], -1), "failed_retry_after must be a number of seconds"),
    (changed(["resume_grace"], "60"), "resume_grace must be a number of seconds"),
    (changed(["resume_grace"], True), "resume_grace must be a number of seconds"),
    ([], "must be a JSON object"),
])
def test_broken_rules_name_the_key_and_the_fix(data, message):
    with pytest.raises(ConfigError) as caught:
        from_dict(data)
    assert message in str(caught.value)


def test_load_reads_json_and_names_the_file_in_errors(tmp_path):
    path = tmp_path / "power.json"
    path.write_text(json.dumps(VALID))
    assert load(str(path)).cluster == "cloud"
    path.write_text('{"cluster": "c",\n "nodesets": [}')
    with pytest.raises(ConfigError, match=r"power.json is not valid JSON: .* line 2"):
        load(str(path))
    path.write_text(json.dumps(changed(["cluster"], KeyError)))
    with pytest.raises(ConfigError, match=r"power.json: cluster is required"):
        load(str(path))
    with pytest.raises(ConfigError, match="cannot read the configuration .*nope.json.*--config"):
        load(str(tmp_path / "nope.json"))
