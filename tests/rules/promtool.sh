#!/bin/sh
# Print the path of a promtool from Debian's prometheus package, extracted (not
# installed: no daemon starts) into .cache/tools/prometheus-<version>/, a cache
# keyed by the package's version. The core scenario (its monitoring) uses the promtool of
# the Prometheus it installs on the lab; this one checks the rules in make test.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
candidate() { apt-cache policy prometheus 2>/dev/null | awk '/Candidate:/ {print $2}'; }
version=$(candidate)
if [ -z "$version" ] || [ "$version" = "(none)" ]; then
    apt-get update -qq >/dev/null 2>&1 || true
    version=$(candidate)
fi
if [ -z "$version" ] || [ "$version" = "(none)" ]; then
    echo "promtool.sh: apt knows no prometheus package (is a Debian or Ubuntu source configured?)" >&2
    exit 1
fi
dir=$root/.cache/tools/prometheus-$(echo "$version" | tr ':+~' '___')
if [ ! -x "$dir/promtool" ]; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    (cd "$work" && apt-get download -qq "prometheus=$version" >/dev/null 2>&1) || {
        echo "promtool.sh: apt-get download prometheus=$version failed" >&2; exit 1; }
    dpkg-deb -x "$work"/prometheus_*.deb "$work/x"
    mkdir -p "$dir"
    install -m 0755 "$work/x/usr/bin/promtool" "$dir/promtool"
fi
echo "$dir/promtool"
