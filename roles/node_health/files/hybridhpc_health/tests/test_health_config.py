# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The configuration: the documented example loads; every bad key is refused with a message naming it."""

from __future__ import annotations

import copy
import json

import pytest

from hybridhpc_health import __main__ as cli
from hybridhpc_health import config

EXAMPLE = {
    "node": "c1",
    "reason_prefix": "healthcheck",
    "scontrol": "/usr/bin/scontrol",
    "checks": [
        {"name": "scratch", "type": "mount", "path": "/scratch", "fstype": "nfs4", "timeout": 10},
        {"name": "tmp", "type": "free_space", "path": "/tmp", "min_free_mb": 1024, "timeout": 10},
        {"name": "memory", "type": "memory", "min_available_mb": 512},
        {"name": "gpu", "type": "gpu", "devices": ["/dev/nvidia0"], "command": ["nvidia-smi", "-L"], "expect_count": 1, "timeout": 20},
        {"name": "slurmd", "type": "slurmd_view", "expect": {"CPUs": 4, "RealMemory": 3000, "Sockets": 1, "CoresPerSocket": 2, "ThreadsPerCore": 2},
         "timeout": 15},
        {"name": "custom", "type": "command", "command": ["/usr/local/sbin/check-ib"], "timeout": 30},
    ],
}


def test_the_documented_example_is_valid_and_loads_with_defaults(tmp_path):
    assert config.validate(EXAMPLE) == []
    path = tmp_path / "healthcheck.json"
    path.write_text(json.dumps(EXAMPLE))
    cfg = config.load(path)
    assert cfg.node == "c1" and cfg.reason_prefix == "healthcheck" and cfg.scontrol == "/usr/bin/scontrol"
    assert [c.name for c in cfg.checks] == ["scratch", "tmp", "memory", "gpu", "slurmd", "custom"]
    assert cfg.checks[2].timeout == config.DEFAULT_TIMEOUT == 10
    assert cfg.checks[3].timeout == 20 and cfg.checks[3].get("expect_count") == 1
    assert "name" not in cfg.checks[0].options and cfg.checks[0].get("path") == "/scratch"


def bad(change):
    data = copy.deepcopy(EXAMPLE)
    change(data)
    return data


@pytest.mark.parametrize("change,expected", [
    (lambda d: d["checks"][0].update(type="nfs"), "checks[0] (scratch): type: unknown check type 'nfs'"),
    (lambda d: d["checks"][0].pop("type"), "checks[0] (scratch): type: required"),
    (lambda d: d["checks"][1].pop("name"), "checks[1]: name: required"),
    (lambda d: d["checks"][0].pop("path"), "checks[0] (scratch): path: required for a mount check"),
    (lambda d: d["checks"][1].pop("path"), "checks[1] (tmp): path: required for a free_space check"),
    (lambda d: d["checks"][1].update(name="scratch"), "checks[1] (scratch): name: duplicate of checks[0]"),
    (lambda d: d["checks"][0].update(timeout=0), "checks[0] (scratch): timeout: must be a positive number"),
    (lambda d: d["checks"][3].update(timeout=-5), "checks[3] (gpu): timeout: must be a positive number"),
    (lambda d: d["checks"][5].update(timeout="30"), "checks[5] (custom): timeout: must be a positive number"),
    (lambda d: d["checks"][5].update(timeout=True), "checks[5] (custom): timeout: must be a positive number"),
    (lambda d: d["checks"][0].update(path="scratch"), "checks[0] (scratch): path: must be an absolute path"),
    (lambda d: d["checks"][2].pop("min_available_mb"), "checks[2] (memory): min_available_mb: required"),
    (lambda d: d["checks"][1].update(min_free_mb=0), "checks[1] (tmp): min_free_mb: must be a positive number"),
    (lambda d: d["checks"][3].update(expect_count=0), "checks[3] (gpu): expect_count: must be a positive integer"),
    (lambda d: d["checks"][3].update(devices=[], command=None) or d["checks"][3].pop("command"), "checks[3] (gpu): devices: a gpu check needs"),
    (lambda d: d["checks"][4]["expect"].update(Cores=2), "checks[4] (slurmd): expect.Cores: unknown field"),
    (lambda d: d["checks"][4]["expect"].update(CPUs="4"), "checks[4] (slurmd): expect.CPUs: must be a positive integer"),
    (lambda d: d["checks"][4].update(compare="greater"), "checks[4] (slurmd): compare: equal or at_least, not 'greater'"),
    (lambda d: d["checks"][5].update(command="/usr/local/sbin/check-ib"), "checks[5] (custom): command: must be a non-empty list"),
    (lambda d: d["checks"][5].update(comand=["x"]), "checks[5] (custom): comand: unknown key for a command check"),
    (lambda d: d["checks"][0].update(name="my check"), "checks[0] (my check): name: must be"),
    (lambda d: d.pop("node"), "node: required"),
    (lambda d: d.update(reason_prefix="health check"), "reason_prefix: must be a word"),
    (lambda d: d.update(checks=[]), "checks: required"),
    (lambda d: d.update(nodes="c1"), "nodes: unknown key"),
])
def test_bad_configs_are_refused_naming_the_check_and_key(change, expected):
    data = bad(change)
    problems = config.validate(data)
    assert any(p.startswith(expected) for p in problems), problems
    with pytest.raises(ValueError, match=expected.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")):
        config.parse(data)


def test_validate_lists_every_problem_at_once():
    data = bad(lambda d: (d["checks"][0].update(timeout=0), d["checks"][1].pop("path"), d.pop("node")))
    problems = config.validate(data)
    assert len(problems) == 3, problems


def test_not_json_or_missing_file_is_a_config_error(tmp_path):
    path = tmp_path / "c.json"
    path.write_text("{nope")
    with pytest.raises(config.ConfigError, match="is not JSON"):
        config.load(path)
    with pytest.raises(config.ConfigError, match="cannot read"):
        config.load(tmp_path / "missing.json")


def test_main_exits_2_naming_the_key(tmp_path, capsys):
    path = tmp_path / "c.json"
    path.write_text(json.dumps(bad(lambda d: d["checks"][0].update(timeout=0))))
    assert cli.main(["--config", str(path)], syslog="") == 2
    err = capsys.readouterr().err
    assert "bad configuration" in err and "checks[0] (scratch): timeout" in err
