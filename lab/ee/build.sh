#!/usr/bin/env bash
# Build the execution environment's images locally, one per ansible-core leg,
# from the context `make ee-context` wrote (ansible-builder create of
# execution-environment.yml, with the collection's built tarball):
#   hybridhpc/slurm-ee:<leg>-<hash>        the EE (alias hybridhpc/slurm-ee:<leg>)
#   hybridhpc/slurm-ee-test:<leg>-<hash>   the EE plus a test venv (lab/ee/Containerfile.test)
#   hybridhpc/slurm-ee-deps:<leg>-<deps hash>, hybridhpc/slurm-ee-test-deps:<leg>-<deps hash>
#                                          the last full build of those dependencies (below)
# Legs: 2.21 (the definition's pins: ansible-core 2.21.5, ansible 14.5.0) and
# 2.20 (build arg ANSIBLE_INSTALL_REFS: ansible-core 2.20.10, ansible 13.8.0).
# The hash covers the context (Containerfile, requirement files, scripts; of the
# tarball its MANIFEST.json, which checksums every file, since the tarball's
# bytes change with mtimes), the leg's pins, the base image's id, this script
# and the test layer's files: an unchanged tree reuses the images.
#
# A change to the collection alone does not rebuild the EE's dependencies
# (about 3.5 minutes of pip and apt per leg, most of CI's EE time): each full
# ansible-builder build is also tagged hybridhpc/slurm-ee-deps:<leg>-<deps hash>,
# the hash of everything above but the collection's own files, and a later
# tree with the same dependencies is built from it (Containerfile.collection:
# the new tarball installed over the old with ansible-galaxy --force, which
# replaces the collection's directory, then the same check as the full
# build's last step). A change to execution-environment.yml, awx/'s
# requirement files, the base image, this script or a leg's pins builds in
# full; HYBRIDHPC_EE_FULL=1 always does.
# Usage: lab/ee/build.sh CONTEXT [LEG...]; prints "<leg> <test image>" per leg.
#
# The base image is the lab's trixie rootfs (lab/build-image.sh), never pulled.
# If the build machine trusts extra CAs (/usr/local/share/ca-certificates/*.crt,
# e.g. a TLS-intercepting egress proxy in front of PyPI), they go into a local
# base image first (hybridhpc/slurm-ee-base:<hash>, passed as EE_BASE_IMAGE),
# else pip in the build cannot reach PyPI; without them the rootfs is the base.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
ctx="$(cd "${1:?usage: build.sh CONTEXT [LEG...]}" && pwd)"; shift
legs=("$@"); [ ${#legs[@]} -gt 0 ] || legs=(2.21 2.20)
rootfs="${HYBRIDHPC_EE_ROOTFS:-hybridhpc/debian-trixie-rootfs:v2}"
ca_dir="${HYBRIDHPC_EE_CA_DIR:-/usr/local/share/ca-certificates}"
# Build logs beside the context, not in it (the context is hashed).
logs="${HYBRIDHPC_EE_LOG_DIR:-$(dirname "$ctx")/ee-logs}"
[ -f "$ctx/Containerfile" ] || { echo "ee: $ctx/Containerfile missing (make ee-context)" >&2; exit 1; }
mkdir -p "$logs"
docker image inspect "$rootfs" >/dev/null 2>&1 || { echo "ee: base image $rootfs missing (make image)" >&2; exit 1; }

refs_for() {
  case "$1" in
    2.21) echo "" ;;  # the Containerfile's default (execution-environment.yml)
    2.20) echo "ansible-core==2.20.10 ansible==13.8.0 ansible-runner==2.4.3" ;;
    *) echo "ee: unknown leg $1 (2.21 or 2.20)" >&2; return 1 ;;
  esac
}

base="$rootfs"
shopt -s nullglob
cas=("$ca_dir"/*.crt)
if [ ${#cas[@]} -gt 0 ]; then
  ca_ctx="$(mktemp -d)"; trap 'rm -rf "$ca_ctx"' EXIT
  cp "${cas[@]}" "$ca_ctx/"
  printf 'ARG BASE\nFROM ${BASE}\nCOPY *.crt /usr/local/share/ca-certificates/\nRUN update-ca-certificates >/dev/null\n' > "$ca_ctx/Containerfile"
  ca_hash="$( (docker image inspect -f '{{.Id}}' "$rootfs"; cat "$ca_ctx"/*) | sha256sum | cut -c1-12)"
  base="hybridhpc/slurm-ee-base:$ca_hash"
  if ! docker image inspect "$base" >/dev/null 2>&1; then
    echo "ee: building $base (the build machine's extra CAs on $rootfs)" >&2
    docker build -q --build-arg "BASE=$rootfs" -t "$base" -f "$ca_ctx/Containerfile" "$ca_ctx" >/dev/null
  fi
fi
base_id="$(docker image inspect -f '{{.Id}}' "$base")"
shopt -u nullglob

tarball="$(ls "$ctx"/_build/collections/hybridhpc-slurm-*.tar.gz)"
# What ansible-builder would introspect in the collection itself (none of these
# today: the EE's Python and system dependencies are awx/'s, in the context).
collection_deps="$(tar -tzf "$tarball" | grep -xE 'meta/execution-environment.yml|requirements.txt|bindep.txt' || true)"
deps_hash="$( (cd "$ctx" && find . -type f ! -name '*.tar.gz' -print0 | sort -z | xargs -0 sha256sum
               for f in $collection_deps; do echo "$f"; tar -xzOf "$tarball" "$f"; done; echo "$base_id"
               cat "$here/build.sh" "$here/Containerfile.test" "$here/Containerfile.collection" "$here/test-requirements.txt") | sha256sum | cut -c1-12)"
ctx_hash="$( (echo "$deps_hash"; tar -xzOf "$tarball" MANIFEST.json) | sha256sum | cut -c1-12)"

for leg in "${legs[@]}"; do
  refs="$(refs_for "$leg")"
  hash="$( (echo "$ctx_hash $leg $refs") | sha256sum | cut -c1-12)"
  dhash="$( (echo "$deps_hash $leg $refs") | sha256sum | cut -c1-12)"
  ee="hybridhpc/slurm-ee:$leg-$hash"
  test_image="hybridhpc/slurm-ee-test:$leg-$hash"
  # The last full build with these dependencies, and its test image.
  deps="hybridhpc/slurm-ee-deps:$leg-$dhash"
  deps_test="hybridhpc/slurm-ee-test-deps:$leg-$dhash"
  over=no
  [ "${HYBRIDHPC_EE_FULL:-0}" = 1 ] || { docker image inspect "$deps" >/dev/null 2>&1 \
    && docker image inspect "$deps_test" >/dev/null 2>&1 && over=yes; }
  start=$(date +%s)
  if docker image inspect "$ee" >/dev/null 2>&1 && docker image inspect "$test_image" >/dev/null 2>&1; then
    echo "ee: $ee is up to date" >&2
  elif [ "$over" = yes ]; then
    echo "ee: building $ee from $deps (the same dependencies, this tree's tarball installed over; log in $logs/build-$leg.log)" >&2
    for pair in "$deps $ee" "$deps_test $test_image"; do
      set -- $pair
      docker build --build-arg "EE_DEPS_IMAGE=$1" -t "$2" -f "$here/Containerfile.collection" "$ctx/_build/collections" \
        >>"$logs/build-$leg.log" 2>&1 \
        || { tail -30 "$logs/build-$leg.log" >&2; echo "ee: building $2 failed" >&2; exit 1; }
    done
  else
    echo "ee: building $ee (a few minutes cold; log in $logs/build-$leg.log)" >&2
    args=(--build-arg "EE_BASE_IMAGE=$base")
    [ -z "$refs" ] || args+=(--build-arg "ANSIBLE_INSTALL_REFS=$refs")
    docker build "${args[@]}" -t "$ee" -f "$ctx/Containerfile" "$ctx" >"$logs/build-$leg.log" 2>&1 \
      || { tail -30 "$logs/build-$leg.log" >&2; echo "ee: building $ee failed" >&2; exit 1; }
    echo "ee: building $test_image (the test venv)" >&2
    docker build -q --build-arg "EE_IMAGE=$ee" -t "$test_image" -f "$here/Containerfile.test" "$here" >/dev/null
    docker tag "$ee" "$deps"
    docker tag "$test_image" "$deps_test"
  fi
  docker tag "$ee" "hybridhpc/slurm-ee:$leg"
  docker tag "$test_image" "hybridhpc/slurm-ee-test:$leg"
  core="$(docker run --rm "$ee" ansible --version | sed -n '1s/.*\[core \(.*\)\]/\1/p')"
  size="$(docker image inspect -f '{{.Size}}' "$ee" | awk '{printf "%d MB", $1/1000000}')"
  echo "ee: $leg: $ee (ansible-core $core, $size) in $(( $(date +%s) - start ))s" >&2
  echo "$leg $test_image"
done
