#!/bin/sh
# Vendor the collection's slurmrestd client and JWT signer into the copilot package.
#
#   tools/vendor.sh [--from COLLECTION_ROOT] [--to DEST_DIR]
#
# The copilot runs on hosts without Ansible, so it cannot import
# ansible_collections.hybridhpc.slurm.plugins.module_utils; instead the two
# modules are copied (at build or install time, never committed) into
# src/hybridhpc_copilot/_vendor/ and their imports made relative:
#   - the jwt import becomes `from .jwt import ...`;
#   - ansible's env_fallback (only used by the Ansible argument spec) becomes
#     None.
# The result is checked: both modules must import with Ansible unavailable.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "$here/../../../.." && pwd)/plugins/module_utils
dest=$here/src/hybridhpc_copilot/_vendor
python=${PYTHON:-python3}

while [ $# -gt 0 ]; do
    case $1 in
        --from) src=$2/plugins/module_utils; shift 2 ;;
        --to) dest=$2; shift 2 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "vendor.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

for f in slurmrestd.py jwt.py; do
    if [ ! -f "$src/$f" ]; then
        echo "vendor.sh: $src/$f is missing: give the collection root with --from" >&2
        exit 1
    fi
done
mkdir -p "$dest"
[ -f "$dest/__init__.py" ] || printf '"""Modules copied from the collection by tools/vendor.sh (not committed)."""\n' > "$dest/__init__.py"

header="# Vendored by roles/copilot/files/copilot/tools/vendor.sh from plugins/module_utils: edit the original."
{ echo "$header"; cat "$src/jwt.py"; } > "$dest/jwt.py.tmp"
{ echo "$header"; sed \
    -e 's/^from ansible_collections\.hybridhpc\.slurm\.plugins\.module_utils\.jwt import/from .jwt import/' \
    -e 's/^from ansible\.module_utils\.common\.parameters import env_fallback$/env_fallback = None  # vendored: only the Ansible argument spec used it/' \
    "$src/slurmrestd.py"; } > "$dest/slurmrestd.py.tmp"

# Any other import of Ansible would break the copilot on a host without it.
if grep -nE '^(from|import) (ansible|ansible_collections)([. ]|$)' "$dest/slurmrestd.py.tmp" "$dest/jwt.py.tmp"; then
    echo "vendor.sh: the modules above import Ansible; teach vendor.sh to rewrite that import" >&2
    rm -f "$dest"/*.tmp
    exit 1
fi
mv "$dest/jwt.py.tmp" "$dest/jwt.py"
mv "$dest/slurmrestd.py.tmp" "$dest/slurmrestd.py"

# Prove it: import both with Ansible hidden (a meta path finder refuses it).
"$python" - "$dest" <<'PY'
import importlib.util, sys

class NoAnsible:
    def find_spec(self, name, path=None, target=None):
        if name == "ansible" or name.startswith(("ansible.", "ansible_collections")):
            raise ImportError("hidden by vendor.sh: %s" % name)
        return None

sys.meta_path.insert(0, NoAnsible())
dest = sys.argv[1]
pkg = importlib.util.spec_from_file_location("_vendor_check", dest + "/__init__.py", submodule_search_locations=[dest])
module = importlib.util.module_from_spec(pkg)
sys.modules["_vendor_check"] = module
pkg.loader.exec_module(module)
import importlib
importlib.import_module("_vendor_check.jwt").sign_hs256_token(b"k", "slurm", 60)
importlib.import_module("_vendor_check.slurmrestd").SlurmrestdClient
PY
echo "vendor.sh: vendored slurmrestd.py and jwt.py into $dest"
