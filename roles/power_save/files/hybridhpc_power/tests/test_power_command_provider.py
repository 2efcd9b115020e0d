"""The command provider with small scripts in tmp_path."""

from __future__ import annotations

import stat
import time

import pytest

from hybridhpc_power.providers.base import Instance, ProviderError, Secrets
from hybridhpc_power.providers.command import CommandProvider, parse_machines


def script(tmp_path, name, body):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def provider(tmp_path, **options):
    defaults = {"resume_command": [script(tmp_path, "resume", 'echo "$@" >> %s/calls\n' % tmp_path)],
                "suspend_command": [script(tmp_path, "suspend", 'echo "$@" >> %s/calls\n' % tmp_path)]}
    return CommandProvider("t", {**defaults, **options}, Secrets(str(tmp_path / "munge.key")))


def test_resume_runs_the_command_once_with_the_hostlist_last(tmp_path):
    p = provider(tmp_path, resume_command=[script(tmp_path, "r", 'echo "$@" >> %s/calls\n' % tmp_path), "--pool", "gpu"])
    result = p.resume(["c3", "c1", "c2"])
    assert (tmp_path / "calls").read_text() == "--pool gpu c[1-3]\n"
    assert sorted(result.started) == ["c1", "c2", "c3"] and result.failed == {}
    assert result.started["c1"] == Instance("c1", "", "pending")


def test_resume_output_names_the_machines(tmp_path):
    p = provider(tmp_path, resume_command=[script(tmp_path, "r", 'echo "c1 i-0abc pending"; echo "# done"; echo "c2 i-0def running 10.1.0.7"\n')])
    result = p.resume(["c1", "c2"])
    assert result.started["c1"] == Instance("c1", "i-0abc", "pending") and result.started["c2"].address == "10.1.0.7"


def test_a_failing_command_fails_every_node_with_the_stderr_tail(tmp_path):
    body = 'echo "starting" ; echo "line 1" >&2; echo "line 2" >&2; echo "Error: quota exceeded" >&2; exit 3\n'
    p = provider(tmp_path, resume_command=[script(tmp_path, "r", body)])
    result = p.resume(["c1", "c2"])
    assert result.started == {}
    assert result.failed == dict.fromkeys(("c1", "c2"), "r exited 3: line 1 | line 2 | Error: quota exceeded")


def test_a_hung_command_is_killed_with_its_children_after_the_timeout(tmp_path):
    p = provider(tmp_path, timeout=0.5, suspend_command=[script(tmp_path, "s", "sleep 30 & echo $! > %s/child; wait\n" % tmp_path)])
    started = time.monotonic()
    result = p.suspend(["c1"])
    assert time.monotonic() - started < 5
    assert result.failed == {"c1": "%s timed out after 0.5s (option timeout)" % (tmp_path / "s")}
    child = int((tmp_path / "child").read_text())
    time.sleep(0.2)
    assert not alive(child), "the command's child survived the timeout"


def alive(pid: int) -> bool:
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie waits for its new parent to reap it
    except FileNotFoundError:
        return False


def test_a_missing_command_fails_every_node(tmp_path):
    p = provider(tmp_path, resume_command=[str(tmp_path / "nope")])
    assert p.resume(["c1"]).failed == {"c1": "cannot run %s: No such file or directory" % (tmp_path / "nope")}


def test_commands_get_a_small_fixed_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t")
    p = provider(tmp_path, suspend_command=[script(tmp_path, "s", "env > %s/env\n" % tmp_path)])
    assert p.suspend(["c1"]).stopped == ["c1"]
    env = dict(line.split("=", 1) for line in (tmp_path / "env").read_text().splitlines() if "=" in line)
    assert {k: env[k] for k in ("HYBRIDHPC_CLUSTER", "HYBRIDHPC_ACTION", "LANG")} == {
        "HYBRIDHPC_CLUSTER": "t", "HYBRIDHPC_ACTION": "suspend", "LANG": "C.UTF-8"}
    assert "AWS_SECRET_ACCESS_KEY" not in env


def test_no_shell_interprets_the_hostlist(tmp_path):
    p = provider(tmp_path)
    p.resume(["c1;id>pwned$(id>pwned)"])
    assert not (tmp_path / "pwned").exists() and (tmp_path / "calls").read_text() == "c1;id>pwned$(id>pwned)\n"


def test_instances_without_list_command_is_none(tmp_path):
    assert provider(tmp_path).instances() is None


def test_instances_parses_the_list_command(tmp_path):
    p = provider(tmp_path, list_command=[script(tmp_path, "l", 'printf "c1 i-1\\nc2 i-2 stopped\\n\\nc3 i-3 running 10.0.0.3\\n"\n')])
    assert p.instances() == {"c1": Instance("c1", "i-1", "running"), "c2": Instance("c2", "i-2", "stopped"),
                             "c3": Instance("c3", "i-3", "running", "10.0.0.3")}


@pytest.mark.parametrize("body,message", [
    ("echo oops >&2; exit 1\n", "l exited 1: oops"),
    ('echo "c1"\n', "list_command output line 1: expected"),
    ('echo "c1 i-1 exploded"\n', "state must be one of"),
])
def test_a_failed_or_garbled_list_is_an_error_not_an_empty_list(tmp_path, body, message):
    p = provider(tmp_path, list_command=[script(tmp_path, "l", body)])
    with pytest.raises(ProviderError, match=message):
        p.instances()


@pytest.mark.parametrize("options,message", [
    ({"resume_command": "/bin/true"}, "resume_command must be a non-empty list"),
    ({"resume_command": []}, "resume_command must be a non-empty list"),
    ({"suspend_command": ["true"]}, r"suspend_command\[0\] must be an absolute path"),
    ({"list_command": [1]}, "list_command must be a non-empty list"),
    ({"timeout": 0}, "timeout must be a number"),
    ({"shell": True}, "unknown option shell"),
])
def test_bad_options_are_rejected_with_the_option_name(tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        provider(tmp_path, **options)


def test_parse_machines_ignores_comments_and_blank_lines():
    assert parse_machines("# node id\n\n c1 i-1 \n") == {"c1": Instance("c1", "i-1", "running")}
