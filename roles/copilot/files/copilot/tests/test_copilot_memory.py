"""What the daemon holds in memory: modules it never uses are not loaded."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import PACKAGE

# Modules httpx's command-line client pulls in (httpx._main): the daemon never runs it.
CLI_MODULES = ("httpx._main", "click", "rich", "pygments")


def _loaded_after(code: str) -> list[str]:
    """Which of CLI_MODULES a fresh interpreter holds after running ``code`` (the copilot importable)."""
    probe = code + "\nimport json, sys\nprint(json.dumps([m for m in %r if m in sys.modules]))" % (CLI_MODULES,)
    out = subprocess.run([sys.executable, "-c", probe], check=True, capture_output=True, text=True,
                         env={"PYTHONPATH": str(PACKAGE / "src"), "PATH": "/usr/bin:/bin"})
    loaded: list[str] = json.loads(out.stdout.splitlines()[-1])
    return loaded


def test_the_slurm_client_loads_httpx_without_its_command_line_client():
    # Where httpx's CLI dependencies are installed (Debian's python3-httpx depends on them), a plain
    # import loads them: the control that this test can fail here.
    assert set(_loaded_after("import httpx")) == set(CLI_MODULES)
    started = "from hybridhpc_copilot.slurm import RestSlurm\nslurm = RestSlurm('http://127.0.0.1:9')\n"
    assert _loaded_after(started) == []
    # httpx itself works, and a later explicit import of its CLI module still finds it.
    works = started + "import httpx\nassert httpx.Client and callable(httpx.main)\nimport httpx._main\n"
    assert _loaded_after(works) == ["httpx._main", "click", "rich", "pygments"]
