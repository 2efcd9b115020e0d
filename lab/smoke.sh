#!/usr/bin/env bash
# Submit a job on the lab controller and show it COMPLETED in sinfo/sacct.
set -euo pipefail
ctl="${1:-lab-ctl1}"
run() { docker exec "$ctl" "$@"; }
echo "lab: sinfo"
run sinfo
jobid=$(run sbatch --parsable --wrap 'hostname; sleep 1')
echo "lab: submitted job $jobid"
for _ in $(seq 60); do
  state=$(run sacct -X -n -P -j "$jobid" -o State | head -1)
  [ "$state" = COMPLETED ] && break
  case "$state" in FAILED|CANCELLED*|NODE_FAIL|TIMEOUT|OUT_OF_MEMORY) break ;; esac
  sleep 1
done
run sacct -X -j "$jobid" -o JobID,JobName,Partition,NodeList,State,ExitCode
[ "$state" = COMPLETED ] || { echo "lab: job $jobid ended $state" >&2; exit 1; }
echo "lab: job $jobid COMPLETED"
