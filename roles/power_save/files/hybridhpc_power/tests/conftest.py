"""Make hybridhpc_power (src layout) and the test helpers importable; vendor the hostlist module first."""

import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE = HERE.parent

subprocess.run(["sh", str(PACKAGE / "tools" / "vendor.sh")], check=True, stdout=subprocess.DEVNULL,
               env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})
for path in (PACKAGE / "src", HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))
