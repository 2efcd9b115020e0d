"""`ansible-galaxy collection build` ships the collection, not the lab or dev leftovers."""

import os
import pathlib
import subprocess
import tarfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
GALAXY = pathlib.Path(os.environ.get("VIRTUAL_ENV", ROOT / ".venv")) / "bin" / "ansible-galaxy"

JUNK = (".lab-image", ".hypothesis", ".cache", ".collections", ".venv", "lab/", "inventories/lab", "ansible.cfg", "Makefile",
        "_vendor", "__pycache__", ".pytest_cache", ".ci/", "tests/output")


def test_built_tarball_has_the_collection_and_no_junk(tmp_path):
    proc = subprocess.run([str(GALAXY), "collection", "build", "--output-path", str(tmp_path), str(ROOT)],
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (tarball,) = tmp_path.glob("hybridhpc-slurm-*.tar.gz")
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    for wanted in ("MANIFEST.json", "meta/runtime.yml", "roles/slurm_common/meta/argument_specs.yml",
                   "plugins/module_utils/hostlist.py", "playbooks/site.yml", "inventories/example/hosts.yml",
                   "roles/copilot/files/copilot/src/hybridhpc_copilot/core.py"):
        assert wanted in names, wanted
    leaks = [n for n in names if any(j in n for j in JUNK)]
    assert leaks == [], leaks
