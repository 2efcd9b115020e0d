#!/usr/bin/env bash
# make k8s-bin: kube-apiserver, kube-scheduler, kubectl, etcd and kwok (with
# its stages), built from the Go module proxy into DIR (the Makefile's K8S_BIN_DIR, keyed by the
# versions), once per machine: when DIR holds every binary, nothing is done.
# The versions are the Makefile's (K8S_VERSION, ETCD_VERSION, KWOK_VERSION);
# this script checks that the wrapper modules beside it (kubernetes/, etcd/,
# kwok/: go.mod and go.sum) build exactly those, and fails if they do not.
# The binaries are built into a temporary directory beside DIR, which is then
# renamed to DIR: a stopped build leaves no half-filled DIR, and two builds at
# once are serialised by a lock beside it.
#
# usage: K8S_VERSION=v1.37.2 ETCD_VERSION=v3.6.17 KWOK_VERSION=v0.8.0 build.sh DIR
set -eo pipefail

dir=${1:?usage: build.sh DIR}
: "${K8S_VERSION:?}" "${ETCD_VERSION:?}" "${KWOK_VERSION:?}"
here=$(cd "$(dirname "$0")" && pwd)
bins=(kube-apiserver kube-scheduler kubectl etcd kwok)
# kwok's stages (what it does to Nodes and Pods) come as YAML in its module,
# not in the binary: the ones kwokctl's default cluster uses are copied here.
stages=(node/fast/node-initialize node/heartbeat/node-heartbeat pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete)

complete() {
	local b s
	for b in "${bins[@]}"; do [ -x "$1/$b" ] || return 1; done
	for s in "${stages[@]}"; do [ -s "$1/kwok-stages/${s##*/}.yaml" ] || return 1; done
}

if complete "$dir"; then
	echo "make: k8s-bin: cached in $dir"
	exit 0
fi

# The module proxy only (no direct fallback to the modules' origins), the
# installed Go only (no toolchain download), go.sum as committed (readonly).
export GOPROXY=https://proxy.golang.org GOTOOLCHAIN=local GOFLAGS='-mod=readonly -buildvcs=false' CGO_ENABLED=0
command -v go >/dev/null || { echo "make: k8s-bin needs Go (go1.26 or newer)" >&2; exit 1; }

parent=$(dirname "$dir")
mkdir -p "$parent"
exec 9>"$dir.lock"
flock 9
if complete "$dir"; then
	echo "make: k8s-bin: cached in $dir (built by another make meanwhile)"
	exit 0
fi
rm -rf "$dir"
tmp=$(mktemp -d "$dir.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# The Kubernetes staging modules' release of K8S_VERSION: v1.37.2 -> v0.37.2.
staging=v0.${K8S_VERSION#v1.}

# mod_version MODULE_DIR MODULE: the version MODULE is built at in MODULE_DIR
# (its replacement's, when replaced).
mod_version() {
	(cd "$1" && go list -m -f '{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}' "$2")
}

start=$(date +%s)
echo "make: k8s-bin: go mod download (kubernetes $K8S_VERSION, etcd $ETCD_VERSION, kwok $KWOK_VERSION)"
for m in kubernetes etcd kwok; do (cd "$here/$m" && go mod download); done
downloaded=$(date +%s)

# The versions the modules pin are the Makefile's.
bad=0
check() { # module_dir module want
	local got
	got=$(mod_version "$here/$1" "$2")
	[ "$got" = "$3" ] || { echo "make: k8s-bin: lab/k8s-bin/$1/go.mod builds $2 $got, the Makefile says $3" >&2; bad=1; }
}
check kubernetes k8s.io/kubernetes "$K8S_VERSION"
# Every module replaced there (kubernetes' staging modules, which it requires
# at v0.0.0) is replaced with the staging release of K8S_VERSION.
replaced=$(cd "$here/kubernetes" && go list -m -f '{{if .Replace}}{{.Path}}{{end}}' all)
[ -n "$replaced" ] || { echo "make: k8s-bin: lab/k8s-bin/kubernetes/go.mod replaces no staging module" >&2; exit 1; }
for path in $replaced; do check kubernetes "$path" "$staging"; done
for m in go.etcd.io/etcd/server/v3 go.etcd.io/etcd/api/v3 go.etcd.io/etcd/client/pkg/v3 go.etcd.io/etcd/client/v3 go.etcd.io/etcd/pkg/v3; do
	check etcd "$m" "$ETCD_VERSION"
done
check kwok sigs.k8s.io/kwok "$KWOK_VERSION"
[ $bad -eq 0 ]

# As Kubernetes' own release builds: its version stamped in (kubectl version,
# the server's /version), no symbol tables, its build tags.
major=${K8S_VERSION#v}; major=${major%%.*}
minor=${K8S_VERSION#v*.}; minor=${minor%%.*}
kver=
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
	kver+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
done
echo "make: k8s-bin: go build kube-apiserver kube-scheduler kubectl (k8s.io/kubernetes $K8S_VERSION)"
(cd "$here/kubernetes" && go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "-s -w$kver" -o "$tmp/" \
	k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kubectl)
echo "make: k8s-bin: go build etcd (go.etcd.io/etcd/server/v3 $ETCD_VERSION)"
(cd "$here/etcd" && go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3)
echo "make: k8s-bin: go build kwok (sigs.k8s.io/kwok $KWOK_VERSION)"
(cd "$here/kwok" && go build -trimpath -ldflags "-s -w" -o "$tmp/kwok" sigs.k8s.io/kwok/cmd/kwok)
kwok_dir=$(cd "$here/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
mkdir "$tmp/kwok-stages"
for s in "${stages[@]}"; do install -m 644 "$kwok_dir/kustomize/stage/$s.yaml" "$tmp/kwok-stages/"; done
complete "$tmp"
chmod 755 "$tmp"
mv -T "$tmp" "$dir"
trap - EXIT
end=$(date +%s)
echo "make: k8s-bin: in $dir ($(du -sh "$dir" | cut -f1)): modules $((downloaded - start))s, build $((end - downloaded))s, $((end - start))s in all"
