#!/bin/sh
# Whether this host can hold a mount namespace open by bind-mounting its
# /proc/PID/ns/mnt, as Slurm's per-job /tmp does (job_container/tmpfs before
# 25.11, namespace/linux from 25.11, in slurmstepd's _create_ns). Prints true
# when TRIES tries in a row succeed, else false and how many failed on stderr.
# On kernel 6.18 (the lab machine of December 2026), a docker container's bind
# fails most times (EINVAL from mount(2), ELOOP from move_mount), so a job
# there is requeued held ("launch failed") and never runs.
set -eu
tries="${1:-10}"
failed=0
i=0
while [ "$i" -lt "$tries" ]; do
  i=$((i + 1))
  d=$(mktemp -d /var/lib/hybridhpc-job-ns-probe.XXXXXX)
  mount --bind "$d" "$d"
  mount --make-rprivate "$d"
  : > "$d/ns"
  unshare -m sleep 30 &
  pid=$!
  # Once the child is in its own namespace (unshare runs before it execs sleep).
  n=0
  while [ "$(readlink "/proc/$pid/ns/mnt")" = "$(readlink /proc/self/ns/mnt)" ] && [ "$n" -lt 50 ]; do
    sleep 0.1; n=$((n + 1))
  done
  if mount --bind "/proc/$pid/ns/mnt" "$d/ns" 2>/dev/null; then umount "$d/ns"; else failed=$((failed + 1)); fi
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  umount "$d"
  rm -rf "$d"
done
if [ "$failed" -eq 0 ]; then echo true; else echo "job-ns-probe: $failed of $tries binds failed" >&2; echo false; fi
