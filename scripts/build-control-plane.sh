#!/usr/bin/env bash
# Builds pinned kube-apiserver, kube-controller-manager, kubectl, etcd and
# Jaeger from their Go modules into a cache outside the checkout, so a fresh
# clone (and CI) reuses them. Prints the bin directory on the last line.
#
#   build-control-plane.sh [all]   the control plane: etcd, Jaeger, kube-apiserver, kube-controller-manager, kubectl
#   build-control-plane.sh node    a node's parts: kubelet, kube-proxy, kube-scheduler, CoreDNS
#   build-control-plane.sh compose the `docker compose` v2 CLI plugin (into ~/.docker/cli-plugins)
#   build-control-plane.sh prometheus  Prometheus and promtool (the monitoring component's tests)
set -euo pipefail

K8S_VERSION=${PORTCULLIS_K8S_VERSION:-v1.36.3}
ETCD_VERSION=${PORTCULLIS_ETCD_VERSION:-v3.6.16}
JAEGER_VERSION=${PORTCULLIS_JAEGER_VERSION:-v1.76.0}
COREDNS_VERSION=${PORTCULLIS_COREDNS_VERSION:-v1.15.0}
COMPOSE_VERSION=${PORTCULLIS_COMPOSE_VERSION:-v2.40.3}
# Prometheus v3's module versions are v0.3MM.P (v0.316.0 is Prometheus 3.16.0).
PROMETHEUS_VERSION=${PORTCULLIS_PROMETHEUS_VERSION:-v0.316.0}

CACHE=${PORTCULLIS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/portcullis}
BIN="$CACHE/bin"
export GOTOOLCHAIN=local CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -trimpath"

log() { printf '[build-control-plane] %s\n' "$*" >&2; }

command -v go >/dev/null 2>&1 || {
  log "Go is not installed: the control plane is built from the Go module proxy (https://go.dev/dl, or apt-get install golang)"
  exit 1
}
mkdir -p "$BIN"

# build_in_scratch NAME VERSION GO_GET_ARGS... -- PACKAGES...
scratch() {
  local dir="$CACHE/src/$1"
  mkdir -p "$dir"
  if [ ! -f "$dir/go.mod" ]; then (cd "$dir" && go mod init "portcullis.local/$1" >/dev/null 2>&1); fi
  printf '%s' "$dir"
}

build_kubernetes() { # BINARIES...
  local want=("$@") missing=0
  for b in "${want[@]}"; do [ -x "$BIN/$b-$K8S_VERSION" ] || missing=1; done
  [ "$missing" = 1 ] || { log "kubernetes $K8S_VERSION: cached"; return; }
  local dir; dir=$(scratch "kubernetes-$K8S_VERSION")
  local minor=${K8S_VERSION#v1.}; local staging="v0.$minor"
  log "kubernetes $K8S_VERSION: resolving modules (staging $staging)"
  (
    cd "$dir"
    modfile=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    for m in $(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$modfile"); do
      go mod edit -replace "$m=$m@$staging"
    done
    local b pkgs=()
    for b in "${want[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b@$K8S_VERSION"); done
    go get "${pkgs[@]}" >&2
    local ld="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
    ld+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor%%.*}"
    ld+=" -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
    for b in "${want[@]}"; do
      log "kubernetes $K8S_VERSION: building $b (several minutes on 2 cores)"
      go build -ldflags "$ld" -o "$BIN/$b-$K8S_VERSION.tmp" "k8s.io/kubernetes/cmd/$b"
      mv "$BIN/$b-$K8S_VERSION.tmp" "$BIN/$b-$K8S_VERSION"
    done
  )
}

# build_main NAME VERSION PACKAGE: `go get PACKAGE@VERSION` in a scratch
# module, then build its main package into $BIN/NAME-VERSION.
build_main() {
  local name=$1 version=$2 package=$3
  [ -x "$BIN/$name-$version" ] && { log "$name $version: cached"; return; }
  local dir; dir=$(scratch "$name-$version")
  log "$name $version: building"
  (
    cd "$dir"
    go get "$package@$version" >&2
    go build -ldflags "-s -w" -o "$BIN/$name-$version.tmp" "$package"
    mv "$BIN/$name-$version.tmp" "$BIN/$name-$version"
  )
}

build_etcd() { build_main etcd "$ETCD_VERSION" go.etcd.io/etcd/server/v3; }

# The checksum database reachable here has no entries for many of the
# OpenTelemetry collector versions Jaeger pins; the module proxy serves
# them, and go.sum in the scratch module records their hashes. Scoped to
# this one build of a test-only tool.
build_jaeger() { GOSUMDB=off build_main jaeger "$JAEGER_VERSION" github.com/jaegertracing/jaeger/cmd/jaeger; }

build_coredns() { build_main coredns "$COREDNS_VERSION" github.com/coredns/coredns; }

# Built one after the other, so the second reuses Go's build cache of the
# first's packages. `remove_all_sd` leaves out the cloud service discoveries
# (static, file and HTTP targets stay): the tests need none, and the module
# proxy here does not serve the pseudo-version of Nomad's API they pin.
# Without the `builtinassets` tag the web UI is left out; the HTTP API
# (what the tests query) is all there.
build_prometheus() {
  local GOFLAGS="$GOFLAGS -tags=remove_all_sd"
  export GOFLAGS
  build_main promtool "$PROMETHEUS_VERSION" github.com/prometheus/prometheus/cmd/promtool
  build_main prometheus "$PROMETHEUS_VERSION" github.com/prometheus/prometheus/cmd/prometheus
}

# Compose's go.mod has exclude directives, so `go install` refuses it: build
# inside the downloaded module directory instead.
build_compose() {
  local plugins="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
  [ -x "$BIN/docker-compose-$COMPOSE_VERSION" ] || {
    log "docker compose $COMPOSE_VERSION: building (a few minutes on 2 cores)"
    local moddir
    moddir=$(go mod download -json "github.com/docker/compose/v2@$COMPOSE_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
    (
      cd "$moddir"
      go build -mod=mod -modcacherw -ldflags "-s -w -X github.com/docker/compose/v2/internal.Version=$COMPOSE_VERSION" \
        -o "$BIN/docker-compose-$COMPOSE_VERSION.tmp" ./cmd
    )
    mv "$BIN/docker-compose-$COMPOSE_VERSION.tmp" "$BIN/docker-compose-$COMPOSE_VERSION"
  }
  mkdir -p "$plugins"
  ln -sf "$BIN/docker-compose-$COMPOSE_VERSION" "$plugins/docker-compose"
  log "docker compose $COMPOSE_VERSION: $plugins/docker-compose"
}

case "${1:-all}" in
  kubernetes) build_kubernetes kube-apiserver kube-controller-manager kubectl ;;
  etcd) build_etcd ;;
  jaeger) build_jaeger ;;
  coredns) build_coredns ;;
  compose) build_compose ;;
  prometheus) build_prometheus ;;
  node) build_kubernetes kubelet kube-proxy kube-scheduler; build_coredns ;;
  all) build_etcd; build_jaeger; build_kubernetes kube-apiserver kube-controller-manager kubectl ;;
  *) log "usage: $0 [all|kubernetes|etcd|jaeger|node|coredns|compose|prometheus]"; exit 2 ;;
esac
for b in kube-apiserver kube-controller-manager kubectl kubelet kube-proxy kube-scheduler; do
  [ -x "$BIN/$b-$K8S_VERSION" ] && ln -sf "$b-$K8S_VERSION" "$BIN/$b"
done
[ -x "$BIN/etcd-$ETCD_VERSION" ] && ln -sf "etcd-$ETCD_VERSION" "$BIN/etcd"
[ -x "$BIN/jaeger-$JAEGER_VERSION" ] && ln -sf "jaeger-$JAEGER_VERSION" "$BIN/jaeger"
[ -x "$BIN/coredns-$COREDNS_VERSION" ] && ln -sf "coredns-$COREDNS_VERSION" "$BIN/coredns"
for b in promtool prometheus; do
  [ -x "$BIN/$b-$PROMETHEUS_VERSION" ] && ln -sf "$b-$PROMETHEUS_VERSION" "$BIN/$b"
done
printf '%s\n' "$BIN"
