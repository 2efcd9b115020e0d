# Copyright: hybridhpc.slurm contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Through ansible-playbook: the preload callback compiles the collection's templates once, and no worker does.

A test-only callback (written here) counts each template a worker compiles,
in every worker forked for the play in templates_play.yml.
"""

import os
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[4]
PLAY = pathlib.Path(__file__).with_name("templates_play.yml")

COUNTER = '''
import os
import jinja2
from ansible.plugins.callback import CallbackBase

OUT = os.environ["COMPILED_DIR"]
MAIN = os.getpid()
parse = jinja2.Environment._parse


def counted(self, source, *args, **kwargs):
    # Every compile parses its source first; a kept template is not parsed.
    if os.getpid() != MAIN:
        with open(os.path.join(OUT, str(os.getpid())), "a") as out:
            out.write(repr(source) + "\\n")
    return parse(self, source, *args, **kwargs)


jinja2.Environment._parse = counted


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "compiled"
    CALLBACK_NEEDS_ENABLED = True
'''


def run_play(tmp_path, callbacks):
    plugins = tmp_path / "callbacks"
    plugins.mkdir(parents=True)
    (plugins / "compiled.py").write_text(COUNTER)
    compiled = tmp_path / "compiled"
    compiled.mkdir()
    # Ansible's own strategy: every task in a worker. The collection's would
    # run this play's debug tasks in ansible-playbook's process, where no
    # worker compiles anything (plugin_utils/in_process.py).
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_CALLBACK_PLUGINS=str(plugins), ANSIBLE_CALLBACKS_ENABLED=callbacks, COMPILED_DIR=str(compiled),
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default", ANSIBLE_STRATEGY="ansible.builtin.linear")
    ansible_playbook = pathlib.Path(sys.executable).parent / "ansible-playbook"
    done = subprocess.run([str(ansible_playbook), "-i", "h1,h2,h3", "-c", "local", "-e",
                           "ansible_python_interpreter=%s" % sys.executable, str(PLAY)],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    sources = [line for path in compiled.iterdir() for line in path.read_text().splitlines()]
    results = sorted(re.findall(r'"msg": "RESULT ([^"]*)"', done.stdout))
    drawn = re.findall(r'"msg": "DRAWN (\d+)"', done.stdout)
    return sources, results, drawn


def test_the_workers_compile_none_of_the_collections_templates(tmp_path):
    sources, results, drawn = run_play(tmp_path / "kept", "hybridhpc.slurm.preload,compiled")
    # Only the one that must not be kept: a filter folded at compile time.
    assert sources and all("random" in source for source in sources), sources
    assert results == ["h1 42 a/b", "h2 42 a/b", "h3 42 a/b"]
    # Each host drew its own number, as without the callback.
    assert len(set(drawn)) == 3

    # The same play without the callback: each worker compiles them again, with the same results.
    sources, alone, drawn = run_play(tmp_path / "alone", "compiled")
    assert len([source for source in sources if "RESULT" in source]) == 3
    assert len([source for source in sources if "__cres" in source]) == 3
    assert alone == results and len(set(drawn)) == 3
