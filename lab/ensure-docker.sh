#!/usr/bin/env bash
# Make sure a Docker engine answers: install docker.io and start dockerd when
# absent (CI machines start with nothing running). Lab-only.
set -euo pipefail
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
need_pkgs=()
command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
# The lab is reached over SSH (lab/labctl.py makes the key and ssh_config).
command -v ssh-keygen >/dev/null 2>&1 || need_pkgs+=(openssh-client)
python3 -c 'import ensurepip, venv' 2>/dev/null || need_pkgs+=(python3-venv)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "lab: installing ${need_pkgs[*]}" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi
if ! docker info >/dev/null 2>&1; then
  if command -v systemctl >/dev/null 2>&1 && systemctl is-system-running >/dev/null 2>&1; then
    $SUDO systemctl start docker || true
  fi
fi
if ! docker info >/dev/null 2>&1; then
  echo "lab: starting dockerd" >&2
  $SUDO setsid dockerd >/var/log/hybridhpc-dockerd.log 2>&1 < /dev/null &
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
fi
if ! docker info >/dev/null 2>&1; then
  echo "lab: Docker does not answer (see /var/log/hybridhpc-dockerd.log); the lab needs a Docker engine that can run containers" >&2
  exit 1
fi
# Each lab container's systemd holds five inotify instances, and the kernel
# allows 128 per user by default: about 25 containers at once. The converge
# bench has 32 up together (its 3-, 9- and 17-node labs); past the limit a
# container's systemd exits with status 255 before it boots, saying nothing.
want=512
have=$(cat /proc/sys/fs/inotify/max_user_instances 2>/dev/null || echo "$want")
if [ "$have" -lt "$want" ]; then
  echo "lab: raising fs.inotify.max_user_instances from $have to $want (each lab container's systemd holds 5)" >&2
  $SUDO sysctl -q -w fs.inotify.max_user_instances="$want" \
    || echo "lab: could not raise fs.inotify.max_user_instances: more than about 25 lab containers at once will not boot" >&2
fi
