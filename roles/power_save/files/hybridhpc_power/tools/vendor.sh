#!/bin/sh
# Vendor the collection's Slurm hostlist module into the hybridhpc-power package.
#
#   tools/vendor.sh [--from COLLECTION_ROOT] [--to DEST_DIR]
#
# hybridhpc-power runs on the slurmctld host, which has no Ansible, so it
# cannot import ansible_collections.hybridhpc.slurm.plugins.module_utils;
# instead plugins/module_utils/hostlist.py (pure standard library) is copied
# (at build or install time, never committed: see .gitignore) into
# src/hybridhpc_power/_vendor/. The copy is checked: it must import with
# Ansible unavailable and expand/compress a hostlist like Slurm.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "$here/../../../.." && pwd)/plugins/module_utils
dest=$here/src/hybridhpc_power/_vendor
python=${PYTHON:-python3}

while [ $# -gt 0 ]; do
    case $1 in
        --from) src=$2/plugins/module_utils; shift 2 ;;
        --to) dest=$2; shift 2 ;;
        -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
        *) echo "vendor.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

if [ ! -f "$src/hostlist.py" ]; then
    echo "vendor.sh: $src/hostlist.py is missing: give the collection root with --from" >&2
    exit 1
fi
mkdir -p "$dest"
[ -f "$dest/__init__.py" ] || printf '"""Modules copied from the collection by tools/vendor.sh (not committed)."""\n' > "$dest/__init__.py"

header="# Vendored by roles/power_save/files/hybridhpc_power/tools/vendor.sh from plugins/module_utils: edit the original."
{ echo "$header"; cat "$src/hostlist.py"; } > "$dest/hostlist.py.tmp"

# An import of Ansible would break the tool on a host without it.
if grep -nE '^(from|import) (ansible|ansible_collections)([. ]|$)' "$dest/hostlist.py.tmp"; then
    echo "vendor.sh: hostlist.py imports Ansible now; teach vendor.sh to rewrite that import" >&2
    rm -f "$dest/hostlist.py.tmp"
    exit 1
fi
mv "$dest/hostlist.py.tmp" "$dest/hostlist.py"

# Prove it: import with Ansible hidden (a meta path finder refuses it) and round-trip a hostlist.
"$python" - "$dest" <<'PY'
import importlib, importlib.util, sys

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
hostlist = importlib.import_module("_vendor_check.hostlist")
assert hostlist.expand("cloud-dy-[1-3,5]") == ["cloud-dy-1", "cloud-dy-2", "cloud-dy-3", "cloud-dy-5"]
assert hostlist.compress(["n3", "n1", "n2"], sort=True) == "n[1-3]"
PY
echo "vendor.sh: vendored hostlist.py into $dest"
