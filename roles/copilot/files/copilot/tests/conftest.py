"""Make the copilot (src layout) and the API server double importable; vendor the Slurm client first."""

import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE = HERE.parent
COLLECTION = PACKAGE.parents[2]

subprocess.run(["sh", str(PACKAGE / "tools" / "vendor.sh")], check=True, stdout=subprocess.DEVNULL,
               env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})
for path in (PACKAGE / "src", COLLECTION / "tests", HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
