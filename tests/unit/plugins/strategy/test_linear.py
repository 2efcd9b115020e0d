# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Through ansible-playbook: hybridhpc.slurm.linear gives every result ansible.builtin.linear gives, with fewer workers.

Fewer workers: a false condition is decided before any worker
(plugin_utils/early_skip.py), and a controller-only task runs in
ansible-playbook's own process (plugin_utils/in_process.py).

A test-only callback (written here) records each runner event with its host,
task and result, and counts the workers ansible-playbook forks.
"""

import json
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[4]
PLAY = pathlib.Path(__file__).with_name("early_skip_play.yml")

RECORDER = '''
import json
import os
from ansible.executor.process.worker import WorkerProcess
from ansible.plugins.callback import CallbackBase

OUT = os.environ["RECORDED"]
FORKED = []
start = WorkerProcess.start


def counted(self):
    FORKED.append(1)
    return start(self)


WorkerProcess.start = counted
VOLATILE = {"start", "end", "delta", "_ansible_verbose_always"}


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "recorder"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.events = []

    def _record(self, event, result):
        kept = {key: value for key, value in result._result.items() if key not in VOLATILE}
        self.events.append([event, result._host.name, result._task.get_name(), json.dumps(kept, sort_keys=True, default=str)])

    def v2_runner_on_ok(self, result):
        self._record("ok", result)

    def v2_runner_on_skipped(self, result):
        self._record("skipped", result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record("failed ignored" if ignore_errors else "failed", result)

    def v2_runner_item_on_ok(self, result):
        self._record("item ok", result)

    def v2_runner_item_on_skipped(self, result):
        self._record("item skipped", result)

    def v2_playbook_on_stats(self, stats):
        totals = {host: stats.summarize(host) for host in sorted(stats.processed)}
        with open(OUT, "w") as out:
            json.dump({"events": sorted(self.events), "stats": totals, "forked": len(FORKED)}, out)
'''


def run_play(tmp_path, strategy, work_dir):
    plugins = tmp_path / "callbacks"
    plugins.mkdir(parents=True)
    (plugins / "recorder.py").write_text(RECORDER)
    recorded = tmp_path / "recorded.json"
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_CALLBACK_PLUGINS=str(plugins), ANSIBLE_CALLBACKS_ENABLED="hybridhpc.slurm.preload,recorder",
               ANSIBLE_STRATEGY=strategy, RECORDED=str(recorded), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    ansible_playbook = pathlib.Path(sys.executable).parent / "ansible-playbook"
    # The same directory for both strategies (the results name its files), emptied before each run.
    shutil.rmtree(work_dir, ignore_errors=True)
    work_dir.mkdir()
    done = subprocess.run([str(ansible_playbook), "-i", "h1,h2,h3", "-c", "local", "-e",
                           "ansible_python_interpreter=%s" % sys.executable, "-e", "work_dir=%s" % work_dir, str(PLAY)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(recorded.read_text())


def test_every_result_is_the_builtin_strategys_with_fewer_workers(tmp_path):
    work_dir = tmp_path / "work"
    builtin = run_play(tmp_path / "builtin", "ansible.builtin.linear", work_dir)
    early = run_play(tmp_path / "early", "hybridhpc.slurm.linear", work_dir)

    assert early["events"] == builtin["events"]
    assert early["stats"] == builtin["stats"]

    skipped = {(event[2], event[1]) for event in early["events"] if event[0] == "skipped"}
    # Decided without a worker: the plain conditional tasks false on a host.
    # The loop and the condition that fails to evaluate went to workers.
    early_skips = {
        ("False on h2 and h3, registered", "h2"), ("False on h2 and h3, registered", "h3"),
        ("A connection variable the play context adds (ansible_host)", "h1"),
        ("A connection variable the play context adds (ansible_host)", "h3"),
        ("Both the block's and its own", "h1"), ("Both the block's and its own", "h3"),
        ("A hidden result", "h1"), ("A hidden result", "h2"), ("A hidden result", "h3"),
        ("A role included only on h1", "h2"), ("A role included only on h1", "h3"),
        ("A handler notified on h1", "h2"), ("A handler notified on h1", "h3"),
        ("A conditional handler", "h1"),
    }
    assert early_skips <= skipped, skipped
    # What still needs a worker: the loop (3 hosts), the command on h1 (1),
    # and the configuration step whose record does not match (3: tried in
    # ansible-playbook's process first, then sent to a worker). Every other
    # task ran in ansible-playbook's process (the includes, and the debug
    # whose condition fails to evaluate, failing there with TaskExecutor's own
    # error) or was skipped there.
    assert early["forked"] == 7, early["forked"]
    assert builtin["forked"] > 40, builtin["forked"]

    # What the results say, so that "the same" is not "the same and empty".
    events = {(event[0], event[1], event[2]): json.loads(event[3]) for event in early["events"]}
    registered = events[("ok", "h2", "What the registered result says on each host")]["msg"]
    assert "'skipped', True" in registered and "first | bool" in registered
    assert "censored" in events[("skipped", "h2", "A hidden result")]
    assert "not_defined_anywhere" in events[("failed", "h1", "A condition that fails to evaluate fails in its worker, as always")]["msg"]
    assert ("ok", "h2", "A connection variable the play context adds (ansible_host)") in events
    assert ("ok", "h1", "early_skip_role : A task of an included role") in events
    assert events[("ok", "h3", "A task of an included file")]["msg"] == "INCLUDED h3 H3"
    assert ("ok", "h1", "A task of an included file") not in events
    assert ("skipped", "h1", "A conditional handler") in events
    # Run in ansible-playbook's process, with the results a worker gives.
    assert events[("ok", "h2", "What the earlier fact and registered result say")]["msg"] == "FACT h2 True 3 True"
    assert events[("ok", "h1", "What the earlier fact and registered result say")]["msg"] == "FACT h1 False 3 False"
    assert events[("failed ignored", "h2", "An assert that fails on h2, errors ignored")]["msg"] == "h2 refused"
    assert events[("ok", "h3", "What the rescue sees of the failure")]["msg"] == "RESCUED h3 fails"
    # The worker sends the task's fields as it finalized them: ignore_errors templated per host.
    templated = "An assert that fails on h2 and h3, its errors ignored only on h3"
    assert ("failed", "h2", templated) in events and ("failed ignored", "h3", templated) in events
    assert ("ok", "h2", "Rescued where the errors counted") in events
    assert ("ok", "h3", "Rescued where the errors counted") not in events
    assert "SECRET-FACT" not in json.dumps(early["events"])
    assert events[("ok", "h3", "The hidden fact is there")]["msg"] == "HIDDEN 11"
    assert events[("failed ignored", "h1", "A fact with a failed_when that fails on h1")]["failed_when_result"] is True
    assert events[("ok", "h2", "A handler run in ansible-playbook's process")]["msg"] == "HANDLER IN PROCESS h2"
    assert ("ok", "h1", "A handler run in ansible-playbook's process") not in events
    # The configuration step ran its module in a worker on every host.
    step = "A configuration step whose record does not match goes to a worker, which runs its module"
    for host in ("h1", "h2", "h3"):
        assert events[("ok", host, step)]["changed"] is True
        assert (work_dir / ("out-" + host) / "step.conf").read_text() == "STEP %s\n" % host
