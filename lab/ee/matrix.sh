#!/usr/bin/env bash
# One leg of `make matrix-ee`: STEPS (comma-separated) in the EE images of LEG.
#   lab/ee/matrix.sh LEG [unit,sanity,smoke]
# unit:   pytest -q tests/unit on the checkout (read-only), in the test image.
# sanity: tests/sanity.sh (ansible-test sanity for the leg's ansible-core; its
#         venvs are cached in the leg's volume, see run.sh).
# smoke:  the installed collection in the EE itself, as its default user, from
#         /tmp with a stock (empty) config and no checkout mounted:
#         ansible-doc -l hybridhpc.slurm, site.yml --syntax-check.
# converge: lab/converge-leg.sh with the EE's ansible-playbook (the installed
#         collection, an empty ansible.cfg, the lab's network and SSH config;
#         its SSH master sockets in the container's /tmp, so none is left
#         behind for the host's runs): the federated lab cold, again with
#         changed=0, a job on each cluster.
# Each step's output goes to .cache/matrix-ee/<leg>-<step>.log and its wall
# time is printed; the exit status is 1 if any step failed (all steps run).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
leg="${1:?usage: matrix.sh LEG [STEPS]}"
steps="${2:-unit,sanity,smoke,converge}"
logs="$root/.cache/matrix-ee"; mkdir -p "$logs"
rc=0
leg_start=$(date +%s)

smoke='set -e
cd /tmp && : > /tmp/empty.cfg && export ANSIBLE_CONFIG=/tmp/empty.cfg
coll=$(python3 -c "import ansible_collections.hybridhpc.slurm as c, os; print(os.path.dirname(c.__file__))" 2>/dev/null \
  || echo /usr/share/ansible/collections/ansible_collections/hybridhpc/slurm)
ansible --version | head -1
ansible-galaxy collection list hybridhpc.slurm
echo "ansible-doc -l hybridhpc.slurm:"; ansible-doc -l hybridhpc.slurm
for t in role filter lookup; do
  echo "ansible-doc -t $t -l hybridhpc.slurm:"; ansible-doc -t $t -l hybridhpc.slurm
done
ansible-playbook --syntax-check hybridhpc.slurm.site
ansible-playbook --syntax-check "$coll/playbooks/site.yml"
ansible-playbook --syntax-check -i "$coll/inventories/example/hosts.yml" "$coll/playbooks/site.yml"'

for step in ${steps//,/ }; do
  start=$(date +%s)
  log="$logs/$leg-$step.log"
  case "$step" in
    unit)   "$here/run.sh" "$leg" -- pytest -q -p no:cacheprovider --continue-on-collection-errors --basetemp=/tmp/pytest-unit tests/unit ;;
    sanity) "$here/run.sh" "$leg" -- env HYBRIDHPC_SANITY_DIR=/tmp/sanity tests/sanity.sh ;;
    smoke)  docker run --rm -i "hybridhpc/slurm-ee:$leg" bash -c "$smoke" ;;
    converge) "$root/lab/converge-leg.sh" "ee-$leg" "$here/run.sh" --ee --lab "$leg" -- bash -c \
                ': > /tmp/stock.cfg && ANSIBLE_CONFIG=/tmp/stock.cfg exec ansible-playbook "$@"' ansible-playbook \
                -e ansible_control_path_dir=/tmp/cp ;;
    *) echo "matrix-ee: unknown step $step (unit, sanity, smoke, converge)"; false ;;
  esac >"$log" 2>&1
  status=$?
  if [ $status -eq 0 ]; then result=passed; else result="FAILED (exit $status)"; rc=1; fi
  case "$step" in
    unit) summary="$(grep -E '^[0-9]+ (passed|failed|error)' "$log" | tail -1)" ;;
    sanity) summary="$(grep -cE '^Running sanity test' "$log") tests run$(sed -nE 's/^FATAL: The ([0-9]+) sanity test.*failed.*/, \1 failed/p' "$log" | head -1)" ;;
    converge) summary="$(grep -E '^matrix\[' "$log" | sed 's/^matrix\[[^]]*\]: //' | paste -sd';' -)" ;;
    *) summary="" ;;
  esac
  echo "matrix-ee: $leg $step: $result in $(( $(date +%s) - start ))s${summary:+ ($summary)}; log $log"
done
echo "matrix-ee: $leg: all steps in $(( $(date +%s) - leg_start ))s"
exit $rc
