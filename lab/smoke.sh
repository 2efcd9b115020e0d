#!/usr/bin/env bash
# Submit a job on the lab's on-prem controller and show it COMPLETED in
# sinfo/sacct; show the federation and a job sent to the cloud cluster.
set -euo pipefail
ctl="${1:-onprem-ctl1}"
run() { docker exec "$ctl" "$@"; }

wait_completed() {  # job id, sacct cluster option
  local state=""
  for _ in $(seq 90); do
    state=$(run sacct "$2" -X -n -P -j "$1" -o State | head -1)
    case "$state" in
      COMPLETED) return 0 ;;
      FAILED|CANCELLED*|NODE_FAIL|TIMEOUT|OUT_OF_MEMORY) break ;;
    esac
    sleep 1
  done
  echo "lab: job $1 ended ${state:-without a state}" >&2
  return 1
}

echo "lab: sinfo --federation"
run sinfo --federation
jobid=$(run sbatch --parsable --wrap 'hostname; sleep 1')
echo "lab: submitted job $jobid on $ctl"
wait_completed "$jobid" --federation
run sacct --federation -X -j "$jobid" -o JobID,JobName,Cluster,Partition,NodeList,State,ExitCode
echo "lab: job $jobid COMPLETED"
cloudjob=$(run sbatch -M cloud --parsable --wrap hostname | cut -d';' -f1)
wait_completed "$cloudjob" -Mcloud
run sacct -M cloud -X -j "$cloudjob" -o JobID,JobName,Cluster,NodeList,State
echo "lab: sbatch -M cloud job $cloudjob COMPLETED"
# The cloud cluster's elastic nodes are powered down (idle~) until a job needs
# one: this job asks for one (Features=dynamic), slurmctld resumes it, the
# docker provider starts its container, and the job shows CF until it runs.
echo "lab: sinfo -M cloud (elastic nodes idle~ until needed)"
run sinfo -M cloud
dynjob=$(run sbatch -M cloud --parsable --constraint=dynamic --wrap 'hostname; sleep 2' | cut -d';' -f1)
echo "lab: submitted job $dynjob to a powered-down cloud node"
for _ in $(seq 10); do
  run squeue -M cloud -h -j "$dynjob" -o '%i %T %N' || true
  sleep 1
done
wait_completed "$dynjob" -Mcloud
run sacct -M cloud -X -j "$dynjob" -o JobID,JobName,Cluster,NodeList,State
echo "lab: job $dynjob COMPLETED on a node that powered up for it; it powers down after SuspendTime"
