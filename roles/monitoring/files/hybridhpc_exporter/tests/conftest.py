"""Make the exporter (src layout) importable; vendor the collection's slurmrestd client first (the copilot's vendor.sh)."""

import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
PACKAGE = HERE.parent
COLLECTION = PACKAGE.parents[3]

subprocess.run(["sh", str(COLLECTION / "roles/copilot/files/copilot/tools/vendor.sh"), "--from", str(COLLECTION),
                "--to", str(PACKAGE / "src/hybridhpc_exporter/_vendor")],
               check=True, stdout=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable})
if str(PACKAGE / "src") not in sys.path:
    sys.path.insert(0, str(PACKAGE / "src"))
