#!/usr/bin/env bash
# One converge leg of the ansible-core matrix (make matrix): the federated lab
# converged by the collection as a user installs it (its built tarball) with a
# stock ansible.cfg (an empty one), cold, then again expecting changed=0 on
# every host, then a job on each cluster (lab/smoke.sh). The lab is made fresh
# for the leg and removed after it; make test's legs share one lab instead
# (make matrix-converge), through three settings:
#   LEG_LAB=reuse  the lab a leg before left converged: no cold run, no job,
#                  only the re-run, which must find every host converged
#   LEG_KEEP=1     leave the lab up for the next leg
#   LEG_LOCKED=1   the caller holds the lab's lock for all its legs
#
#   lab/converge-leg.sh LEG PLAYBOOK_COMMAND...
#
# PLAYBOOK_COMMAND is how this leg runs ansible-playbook: a venv's
# ansible-playbook, or `docker run ... <execution environment> ansible-playbook`.
# With LEG_GALAXY set (that leg's ansible-galaxy), the tarball is installed
# into a collections directory of the leg's own first; an execution
# environment has the collection installed already.
set -euo pipefail
cd "$(dirname "$0")/.."
leg="$1"; shift
root="$PWD"
work="$root/.cache/matrix/$leg"
image="$(cat .lab-image)"
py="$root/.venv/bin/python"
rm -rf "$work"; mkdir -p "$work" "$root/.cache/locks"
# The federated lab's host names are the molecule scenarios federation's and
# upgrade's too: one of them at a time (make test runs two chains at once).
if [ "${LEG_LOCKED:-}" != 1 ]; then
  exec 9>"$root/.cache/locks/lab.lock"
  flock 9
fi
reuse=$([ "${LEG_LAB:-fresh}" = reuse ] && echo 1 || true)
: > "$work/ansible.cfg"
export ANSIBLE_CONFIG="$work/ansible.cfg" HYBRIDHPC_LAB_IMAGE="$image" ANSIBLE_FORCE_COLOR=0
if [ -n "${LEG_GALAXY:-}" ]; then
  tarball="$(ls build/hybridhpc-slurm-*.tar.gz)"
  export ANSIBLE_COLLECTIONS_PATH="$work/collections"
  "$LEG_GALAXY" collection install --offline -p "$work/collections" "$tarball" >/dev/null
fi

# Only this lab (its hosts, elastic nodes and networks): a scenario running beside it keeps its own.
cleanup() { "$py" lab/labctl.py down --inventory inventories/lab/hosts.yml >/dev/null 2>&1 || true; }
[ "${LEG_KEEP:-}" = 1 ] || trap cleanup EXIT
if [ -z "$reuse" ]; then
  cleanup
  "$py" lab/labctl.py up --inventory inventories/lab/hosts.yml --image "$image" >/dev/null
fi

recap_ok() {  # log, what the recap must show of every host
  local log="$1" want="$2" recap bad
  recap=$(awk '/^PLAY RECAP/ {on=1; next} on && NF' "$log")
  bad=$(grep -v " failed=0 " <<<"$recap" || true)
  [ -z "$bad" ] || { echo "matrix[$leg]: failed hosts:"; echo "$bad"; return 1; }
  if [ "$want" = unchanged ]; then
    bad=$(grep -v " changed=0 " <<<"$recap" || true)
    [ -z "$bad" ] || { echo "matrix[$leg]: the re-run changed hosts:"; echo "$bad"; grep -B2 "^changed:" "$log" | head -40; return 1; }
  fi
}

run_site() {  # name, what the recap must show
  local start log="$work/$1.log"
  start=$(date +%s)
  "${playbook[@]}" -i inventories/lab/hosts.yml hybridhpc.slurm.site > "$log" 2>&1 \
    || { tail -40 "$log"; echo "matrix[$leg]: site.yml $1 failed (log: $log)"; return 1; }
  recap_ok "$log" "$2"
  echo "matrix[$leg]: site.yml $1 passed in $(( $(date +%s) - start ))s"
}

playbook=("$@")
version=$("${playbook[@]}" --version)
echo "matrix[$leg]: ${version%%$'\n'*}"
if [ -n "$reuse" ]; then
  echo "matrix[$leg]: on the lab an earlier leg converged"
  run_site again unchanged
  exit 0
fi
run_site cold changed
run_site again unchanged
lab/smoke.sh onprem-ctl1 > "$work/smoke.log" 2>&1 || { tail -30 "$work/smoke.log"; echo "matrix[$leg]: jobs failed"; exit 1; }
echo "matrix[$leg]: a job COMPLETED on each cluster (and on an elastic node that powered up for it)"
