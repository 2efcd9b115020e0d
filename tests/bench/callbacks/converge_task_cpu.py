# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark-only callback: the Ansible controller's CPU per task of a playbook run.

tests/bench/bench_converge.py enables it for its runs (ANSIBLE_CALLBACK_PLUGINS
points here); it is not part of the collection. Each task's share is the CPU
the controller spent from its start to the next task's start: ansible-playbook
itself plus its reaped children (the worker processes of that task, which do
the templating, and their ssh or docker clients). The ssh ControlMaster
processes outlive the run and are not counted.

When E(HYBRIDHPC_BENCH_HOST_CPU_FILES) names the lab containers' cgroup CPU
files (os.pathsep between them), each task also gets C(hosts_cpu_s): the CPU
the lab's hosts spent over the same span (modules, the daemons they started,
sshd).
"""

from __future__ import annotations

import json
import os
import resource
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: converge_task_cpu
type: aggregate
short_description: the controller's CPU per task (benchmark use)
description:
  - Writes C([{"task", "cpu_s", "wall_s", "hosts_cpu_s", "hosts"}]) to the file named by E(HYBRIDHPC_BENCH_TASK_CPU).
requirements: []
"""


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def hosts_cpu_seconds(files: list[str]) -> float:
    """The lab hosts' CPU so far: cgroup v1 cpuacct.usage (ns) or v2 cpu.stat usage_usec.

    bench_converge.py reads the whole run's host CPU with it too.
    """
    total = 0.0
    for path in files:
        try:
            with open(path, encoding="ascii") as handle:
                text = handle.read()
        except OSError:
            continue
        if path.endswith("cpu.stat"):
            for line in text.splitlines():
                if line.startswith("usage_usec "):
                    total += int(line.split()[1]) / 1e6
        else:
            total += int(text) / 1e9
    return total


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "converge_task_cpu"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self._rows: list[dict] = []
        self._current: dict | None = None
        self._mark = _cpu_seconds()
        self._wall_mark = time.monotonic()
        self._host_files = [f for f in os.environ.get("HYBRIDHPC_BENCH_HOST_CPU_FILES", "").split(os.pathsep) if f]
        self._host_mark = hosts_cpu_seconds(self._host_files)

    def _start(self, name: str | None) -> None:
        now = _cpu_seconds()
        wall_now = time.monotonic()
        host_now = hosts_cpu_seconds(self._host_files) if self._host_files else 0.0
        if self._current is not None:
            self._current["cpu_s"] = round(now - self._mark, 4)
            self._current["wall_s"] = round(wall_now - self._wall_mark, 4)
            if self._host_files:
                self._current["hosts_cpu_s"] = round(host_now - self._host_mark, 4)
            self._rows.append(self._current)
        self._current = None if name is None else {"task": name, "hosts": {}}
        self._mark = now
        self._wall_mark = wall_now
        self._host_mark = host_now

    def _count(self, status: str) -> None:
        if self._current is not None:
            self._current["hosts"][status] = self._current["hosts"].get(status, 0) + 1

    def v2_playbook_on_play_start(self, play) -> None:
        self._start("play: " + play.get_name())

    def v2_playbook_on_task_start(self, task, is_conditional) -> None:
        self._start(task.get_name())

    def v2_playbook_on_handler_task_start(self, task) -> None:
        self._start("handler: " + task.get_name())

    def v2_runner_on_ok(self, result) -> None:
        self._count("changed" if result._result.get("changed") else "ok")

    def v2_runner_on_skipped(self, result) -> None:
        self._count("skipped")

    def v2_runner_on_failed(self, result, ignore_errors=False) -> None:
        self._count("failed")

    def v2_playbook_on_stats(self, stats) -> None:
        self._start(None)
        path = os.environ.get("HYBRIDHPC_BENCH_TASK_CPU")
        if path:
            with open(path, "w", encoding="utf-8") as out:
                json.dump(self._rows, out, indent=1)
