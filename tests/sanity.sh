#!/usr/bin/env bash
# ansible-test sanity needs the collection at .../ansible_collections/hybridhpc/slurm;
# the repo root is the collection, so copy the files git would ship there.
# ansible-test builds its own pinned test venvs from PyPI, but bootstraps pip in
# them with get-pip.py from a host outside PyPI that is unreachable here. The
# stand-in below does the same job from ensurepip + PyPI, so the sanity tests
# run with the exact tool versions ansible-test pins.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="${HYBRIDHPC_SANITY_DIR:-$root/.cache/sanity}"
dest="$work/ansible_collections/hybridhpc/slurm"
rm -rf "$dest"; mkdir -p "$dest"
cd "$root"
git ls-files -co --exclude-standard -z | grep -zv '^\.collections' | xargs -0 cp --parents -t "$dest" 2>/dev/null || true
cd "$dest"
git init -q . && git add -A >/dev/null  # ansible-test lists files through git
pip_version="$(python3 -c 'import ansible_test, pathlib, re; p = pathlib.Path(ansible_test.__file__).parent / "_internal/python_requirements.py"; print(re.search(r"pip=.([0-9.]+).,", p.read_text()).group(1))')"
cache="$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py"
if [ ! -s "$cache" ]; then
  mkdir -p "$(dirname "$cache")"
  cat > "$cache" <<'PY'
# Stand-in for get-pip.py (written by hybridhpc.slurm tests/sanity.sh): pip from ensurepip, then PyPI.
import subprocess
import sys
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"], stdout=subprocess.DEVNULL)
args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-q"] + args)
PY
fi
py="$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
# lab/ and extensions/ are test tooling; the copilot and hybridhpc-power are
# standalone Python 3.11 packages (not Ansible plugin code) shipped as role
# files, linted by ruff.
exec ansible-test sanity --venv --requirements --python "$py" --color no \
  --exclude lab/ --exclude extensions/ --exclude roles/copilot/files/copilot/ \
  --exclude roles/power_save/files/hybridhpc_power/ --exclude roles/monitoring/files/hybridhpc_exporter/ \
  --exclude roles/node_health/files/hybridhpc_health/ "$@"
