"""The command line, wired for real: config file, scontrol (a stub printing real 24.11 output), the command provider."""

from __future__ import annotations

import json
import pathlib
import stat

import pytest

from hybridhpc_power import queue, state
from hybridhpc_power.__main__ import main

FIXTURE = pathlib.Path(__file__).parent / "data" / "scontrol_show_nodes_24.11.json"


def executable(path: pathlib.Path, body: str) -> str:
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def setup(tmp_path):
    (tmp_path / "queue").mkdir()
    scontrol = executable(tmp_path / "scontrol", '#!/bin/sh\necho "$@" >> %s/scontrol.calls\n'
                          'if [ "$1" = "--json" ]; then cat %s; fi\n' % (tmp_path, FIXTURE))
    # Fails any call that includes cl-4 (its hostlist argument is cl-4 or cl-[3-4]).
    resume = executable(tmp_path / "resume", '#!/bin/sh\ncase "$1" in *4*) echo "cl-4: no capacity" >&2; exit 1;; esac\n'
                        'echo "cl-3 vm-3 pending"\n')
    suspend = executable(tmp_path / "suspend", "#!/bin/sh\nexit 0\n")
    listing = executable(tmp_path / "list", '#!/bin/sh\necho "cl-2 vm-2 running 10.0.0.2"\necho "cl-5 vm-5 running"\n')
    config = {"cluster": "t", "queue_dir": str(tmp_path / "queue"), "state_file": str(tmp_path / "state.json"),
              "lock_file": str(tmp_path / "lock"), "log_file": str(tmp_path / "power.log"), "scontrol": scontrol,
              "failed_retry_after": 30, "resume_grace": 60,
              "nodesets": [{"name": "cl", "nodes": "cl-[1-5]", "provider": "command",
                            "options": {"resume_command": [resume], "suspend_command": [suspend], "list_command": [listing]}}]}
    path = tmp_path / "power.json"
    path.write_text(json.dumps(config))
    return tmp_path, str(path), config


def test_program_then_worker_then_status(setup, capsys):
    tmp_path, path, config = setup
    assert main(["--config", path, "resume", "cl-[3-4]"]) == 0
    assert len(queue.read(config["queue_dir"])[0]) == 1
    assert main(["--config", path, "work"]) == 0
    assert queue.read(config["queue_dir"])[0] == []
    # cl-3 and cl-4 were one command call; its failure failed both (the command provider is all-or-nothing).
    records = state.load(config["state_file"])
    assert records["cl-3"]["result"] == "failed" and "no capacity" in records["cl-3"]["reason"]
    calls = (tmp_path / "scontrol.calls").read_text().splitlines()
    assert calls == ["update nodename=cl-[3-4] state=DOWN reason=hybridhpc-power: resume failed: resume exited 1: cl-4: no capacity",
                     "update nodename=cl-[3-4] state=POWER_DOWN_FORCE"]
    log = (tmp_path / "power.log").read_text()
    assert "node=cl-3 action=resume result=requested" in log and "node=cl-4 action=resume result=failed" in log
    capsys.readouterr()
    assert main(["status", "--config", path]) == 0
    out = capsys.readouterr().out
    assert "cl-2" in out and "vm-2 running 10.0.0.2" in out and "resume failed" in out
    assert main(["--config", path, "status", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["node"] for r in rows] == ["cl-1", "cl-2", "cl-3", "cl-4", "cl-5"]


def test_reconcile_dry_run_prints_the_plan_from_real_scontrol_output(setup, capsys):
    tmp_path, path, config = setup
    assert main(["--config", path, "reconcile", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "terminate nodeset=cl nodes=cl-5" in out  # POWERING_DOWN with a machine
    assert "resume-again nodeset=cl nodes=cl-3" in out
    assert "return-to-service nodeset=cl nodes=cl-1" in out
    assert (tmp_path / "scontrol.calls").read_text().splitlines() == ["--json show nodes"]
    assert queue.read(config["queue_dir"])[0] == []


def test_reconcile_applies(setup):
    tmp_path, path, config = setup
    assert main(["--config", path, "reconcile"]) == 0
    calls = (tmp_path / "scontrol.calls").read_text().splitlines()
    assert calls == ["--json show nodes", "update nodename=cl-1 state=RESUME"]
    assert [r.nodes for r in queue.read(config["queue_dir"])[0]] == [("cl-3",)]


def test_check_builds_every_provider(setup, capsys):
    tmp_path, path, config = setup
    assert main(["--config", path, "check"]) == 0
    assert "is valid (1 node sets, 5 nodes)" in capsys.readouterr().out
    config["nodesets"][0]["options"]["resume_command"] = ["resume.sh"]
    pathlib.Path(path).write_text(json.dumps(config))
    assert main(["--config", path, "check"]) == 2
    assert "nodesets 'cl' (provider command) options: resume_command[0] must be an absolute path" in capsys.readouterr().err


def test_a_bad_config_exits_2_naming_the_file_and_key(setup, capsys, monkeypatch):
    tmp_path, path, config = setup
    config["resume_grace"] = "soon"
    pathlib.Path(path).write_text(json.dumps(config))
    monkeypatch.setenv("HYBRIDHPC_POWER_CONFIG", path)
    assert main(["resume", "cl-1"]) == 2
    assert "power.json: resume_grace must be a number of seconds" in capsys.readouterr().err


def test_an_unknown_node_from_slurm_exits_non_zero(setup):
    tmp_path, path, config = setup
    assert main(["--config", path, "suspend", "cl-9"]) == 1
    assert queue.read(config["queue_dir"])[0] == []
