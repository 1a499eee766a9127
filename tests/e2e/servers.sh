#!/usr/bin/env bash
# Builds (once per version) and optionally starts the real servers the end-to-end tests use:
# kube-apiserver v1.35.4 and etcd from the Go module in tests/go (pinned by its go.sum).
#
#   tests/e2e/servers.sh build        build if not cached; print the binary directory
#   tests/e2e/servers.sh start [DIR]  start etcd + kube-apiserver on loopback for experiments;
#                                     writes DIR/kubeconfig (default DIR: a new temp dir), Ctrl-C stops
#
# Binaries are cached under ${INFORMER_GEN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/informer-gen},
# keyed by the Kubernetes version and a hash of tests/go (go.mod, go.sum, cmd/) and the build
# flags, so `cargo clean` keeps them and any change to what they are built from rebuilds them.
set -euo pipefail

KUBE_VERSION=v1.35.4
here="$(cd "$(dirname "$0")" && pwd)"
gomod="$here/../go"
v=k8s.io/component-base/version
LDFLAGS="-s -w -X $v.gitVersion=$KUBE_VERSION -X $v.gitMajor=1 -X $v.gitMinor=35 -X $v.gitTreeState=clean -X $v.buildDate=1970-01-01T00:00:00Z"
# The cache key covers everything the binaries are built from.
key="$( (cat "$gomod/go.mod" "$gomod/go.sum"; find "$gomod/cmd" -type f | sort | xargs cat; echo "$LDFLAGS") | sha256sum | cut -c1-12)"
cache="${INFORMER_GEN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/informer-gen}"
bin="$cache/kube-$KUBE_VERSION-$key"

build() {
    if [[ -x "$bin/kube-apiserver" && -x "$bin/etcd" && -x "$bin/clientgo-events" ]]; then
        echo "$bin"
        return
    fi
    command -v go >/dev/null || { echo "servers.sh: Go is not installed" >&2; exit 3; }
    mkdir -p "$cache"
    # One build at a time even when several test binaries ask at once.
    exec 9>"$cache/.build.lock"
    flock 9
    if [[ -x "$bin/kube-apiserver" && -x "$bin/etcd" && -x "$bin/clientgo-events" ]]; then
        echo "$bin"
        return
    fi
    local tmp="$bin.tmp.$$"
    rm -rf "$tmp" && mkdir -p "$tmp"
    local start=$SECONDS
    (
        cd "$gomod"
        export GOFLAGS="-mod=readonly -buildvcs=false" CGO_ENABLED=0
        echo "servers.sh: building kube-apiserver $KUBE_VERSION, etcd and clientgo-events into $bin (a few minutes, once)" >&2
        go build -trimpath -ldflags "$LDFLAGS" -o "$tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
        go build -trimpath -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
        go build -trimpath -ldflags "-s -w" -o "$tmp/clientgo-events" ./cmd/clientgo-events
    ) >&2
    rm -rf "$bin" && mv "$tmp" "$bin"
    echo "servers.sh: built in $((SECONDS - start)) s" >&2
    echo "$bin"
}

# Prints $1 distinct ports free on 127.0.0.1 (all bound at once before any is released),
# below the kernel's ephemeral range when it starts above 11000, so that no outgoing
# connection of etcd or kube-apiserver can take one before its server binds it (as in
# tests/src/e2e.rs).
free_ports() {
    python3 -c 'import random, socket, sys
n = int(sys.argv[1])
try:
    end = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    end = 0
socks = []
if end > 11000:
    for port in random.sample(range(10000, end), end - 10000):
        if len(socks) == n:
            break
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            socks.append(s)
        except OSError:
            s.close()
while len(socks) < n:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

etcd_pid=""
api_pid=""
cleanup() {
    kill -KILL $api_pid $etcd_pid 2>/dev/null || true
    wait 2>/dev/null || true
}

start() {
    local dir="${1:-$(mktemp -d)}"
    mkdir -p "$dir"
    build >/dev/null
    local etcd_port peer_port api_port
    read -r etcd_port peer_port api_port < <(free_ports 3)
    local token="informer-gen-e2e"
    echo "$token,admin,admin,system:masters" >"$dir/tokens.csv"
    "$bin/etcd" --data-dir "$dir/etcd" --listen-client-urls "http://127.0.0.1:$etcd_port" \
        --advertise-client-urls "http://127.0.0.1:$etcd_port" \
        --listen-peer-urls "http://127.0.0.1:$peer_port" >"$dir/etcd.log" 2>&1 &
    etcd_pid=$!
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    openssl genrsa -out "$dir/sa.key" 2048 2>/dev/null
    "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$etcd_port" \
        --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$api_port" \
        --cert-dir "$dir/certs" --token-auth-file "$dir/tokens.csv" --authorization-mode AlwaysAllow \
        --service-account-issuer https://kubernetes.default.svc --service-account-key-file "$dir/sa.key" \
        --service-account-signing-key-file "$dir/sa.key" --service-cluster-ip-range 10.0.0.0/24 \
        --disable-admission-plugins ServiceAccount --enable-priority-and-fairness=false \
        >"$dir/kube-apiserver.log" 2>&1 &
    api_pid=$!
    cat >"$dir/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: "https://127.0.0.1:$api_port", insecure-skip-tls-verify: true}
users:
- name: admin
  user: {token: $token}
contexts:
- name: e2e
  context: {cluster: e2e, user: admin, namespace: default}
current-context: e2e
KC
    until curl -skf -H "Authorization: Bearer $token" "https://127.0.0.1:$api_port/readyz" >/dev/null; do
        kill -0 $api_pid 2>/dev/null || { tail -20 "$dir/kube-apiserver.log"; exit 1; }
        sleep 0.5
    done
    echo "kube-apiserver ready at https://127.0.0.1:$api_port; KUBECONFIG=$dir/kubeconfig (Ctrl-C stops)"
    wait $api_pid
}

case "${1:-}" in
    build) build ;;
    start) shift; start "$@" ;;
    *) echo "usage: $0 build | start [DIR]" >&2; exit 2 ;;
esac
