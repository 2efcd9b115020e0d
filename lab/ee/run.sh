#!/usr/bin/env bash
# Run a command in an EE leg's container with the checkout mounted read-only.
#   lab/ee/run.sh [--ee] [--lab] LEG -- CMD...
# LEG is 2.21 or 2.20. The image is hybridhpc/slurm-ee-test:<leg> (the EE plus
# the test venv; `make ee` tags it), or with --ee the EE itself.
# The container runs as root with the host's $HOME path, like the host's make
# targets, and sees:
#  - the checkout at its own path, read-only (the .collections link is absolute,
#    and the checkout's git directory, for a worktree outside it, read-only too:
#    tests/sanity.sh lists files through git);
#  - a tmpfs over the checkout's .cache (the repository's ansible.cfg keeps its
#    fact cache in .cache/facts; the tests' scratch files go there too);
#  - a volume per leg at $HOME/.ansible (ansible-test's sanity venvs, built once);
#  - PYTHONDONTWRITEBYTECODE, hypothesis's database in /tmp (the mount is
#    read-only), pip on the system CA bundle (ansible-test's venvs), ANSIBLE_CONFIG, the colour settings and
#    HYBRIDHPC_LAB_IMAGE (the lab inventory's elastic nodes start from it) as the caller has them.
# --lab: for a converge of the lab from inside the EE: the host's network (the
# lab's containers and their published SSH ports) and the lab's SSH key and
# ssh_config (~/.cache/hybridhpc/lab-ssh, made by lab/labctl.py; read-write for
# the ControlPersist sockets under cp/) at the same path, which is where the
# lab inventory's ansible_ssh_common_args and the config's IdentityFile point.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
repo=hybridhpc/slurm-ee-test
lab=no
while [ $# -gt 0 ]; do
  case "$1" in
    --ee) repo=hybridhpc/slurm-ee; shift ;;
    --lab) lab=yes; shift ;;
    *) break ;;
  esac
done
leg="${1:?usage: run.sh [--ee] [--lab] LEG -- CMD...}"; shift
[ "${1:-}" = "--" ] && shift
[ $# -gt 0 ] || set -- bash
image="$repo:$leg"
docker image inspect "$image" >/dev/null 2>&1 || { echo "ee: $image missing (make ee)" >&2; exit 1; }

mkdir -p "$root/.cache"
args=(--rm -i --user 0 -e "HOME=$HOME" -w "$root" -v "$root:$root:ro" --tmpfs "$root/.cache:exec"
      -v "hybridhpc-ee-ansible-$leg:$HOME/.ansible"
      -e PYTHONDONTWRITEBYTECODE=1 -e HYPOTHESIS_STORAGE_DIRECTORY=/tmp/hypothesis
      -e PIP_CERT=/etc/ssl/certs/ca-certificates.crt)
git_common="$(git -C "$root" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)"
case "$git_common" in
  ""|"$root"/*) ;;
  *) args+=(-v "$git_common:$git_common:ro") ;;
esac
for var in ANSIBLE_CONFIG ANSIBLE_FORCE_COLOR PY_COLORS HYBRIDHPC_LAB_IMAGE; do
  [ -z "${!var:-}" ] || args+=(-e "$var=${!var}")
done
if [ "$lab" = yes ]; then
  ssh_dir="$HOME/.cache/hybridhpc/lab-ssh"
  [ -f "$ssh_dir/config" ] || { echo "ee: $ssh_dir/config missing (make lab, or lab/labctl.py up)" >&2; exit 1; }
  args+=(--network host -v "$ssh_dir:$ssh_dir")
  # The lab directory's CA and SSSD's bind password (lab/labctl.py), which
  # the inventory reads on the Ansible controller (role sssd).
  ldap_dir="$HOME/.cache/hybridhpc/lab-ldap"
  [ ! -d "$ldap_dir" ] || args+=(-v "$ldap_dir:$ldap_dir:ro")
fi
exec docker run "${args[@]}" "$image" "$@"
