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
