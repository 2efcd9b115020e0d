"""The filter plugins import no heavy library.

Each Ansible worker process (one per task and host) imports the filter
plugins it templates with afresh. httpx, imported through slurm_majors ->
slurmrestd, cost 0.18 s of CPU per worker: 13 of a no-op single3 converge's
47 s of worker CPU. The collection's filters need the standard library and
Ansible only.
"""

import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
HEAVY = ("httpx", "kubernetes", "boto3", "botocore", "prometheus_client", "yaml")


PREFIX = "ansible_collections.hybridhpc.slurm.plugins.module_utils."


def modules_after_loading_every_filter(expression):
    """``expression`` (over ``sys.modules``) printed by a fresh interpreter that imported every filter file."""
    filters = sorted(p.stem for p in (ROOT / "plugins" / "filter").glob("*.py"))
    assert filters
    code = "\n".join(
        ["import sys"]
        + ["import ansible_collections.hybridhpc.slurm.plugins.filter.%s" % name for name in filters]
        + ["print(','.join(sorted(%s)))" % expression]
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False,
                          env={"PYTHONPATH": str(ROOT / ".collections"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_filter_plugins_import_no_heavy_library():
    heavy = modules_after_loading_every_filter("m for m in %r if m in sys.modules" % (HEAVY,))
    assert heavy == "", "filter plugins import %s" % heavy


def test_filter_plugins_import_their_module_utils_when_used():
    """Loading every filter file (what finding one filter does in an Ansible worker) imports no module_utils but hostlist and jwt."""
    loaded = modules_after_loading_every_filter("m[len(%r):] for m in sys.modules if m.startswith(%r)" % (PREFIX, PREFIX))
    assert set(loaded.split(",")) <= {"hostlist", "jwt"}
