#!/usr/bin/env bash
# A real Kubernetes control plane on loopback: etcd, kube-apiserver (RBAC,
# tracing to Jaeger), kube-controller-manager (CSR signing with its own CA)
# and Jaeger, built from their Go modules by build-control-plane.sh.
#
#   control-plane.sh up DIR [--owner PID] [--node]
#                                           start; all state in DIR. --node also joins a real
#                                           node (scripts/node.sh: containerd, kubelet, kube-proxy,
#                                           kube-scheduler, CoreDNS) so that pods run
#   control-plane.sh down DIR               stop every process started (by pid), remove DIR
#   control-plane.sh status DIR             report each component; non-zero if any died
#
# DIR/env holds what a client needs (KUBECONFIG, ports). With --owner, a
# watchdog takes everything down when process PID exits (the test binary).
# A start that fails half-way takes down what it had started.
set -Eeuo pipefail

here=$(cd "$(dirname "$0")" && pwd)
log() { printf '[control-plane] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

components=(jaeger etcd kube-apiserver kube-controller-manager containerd coredns kube-scheduler kube-proxy kubelet)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

alive() { local pidfile="$1/pids/$2"; [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }

report_dead() {
  local dir=$1 dead=0
  for c in "${components[@]}"; do
    [ -f "$dir/pids/$c" ] || continue
    if ! alive "$dir" "$c"; then
      dead=1
      log "$c (pid $(cat "$dir/pids/$c")) is not running; last lines of $dir/logs/$c.log:"
      tail -n 20 "$dir/logs/$c.log" >&2 || true
    fi
  done
  return $dead
}

start() { # NAME COMMAND...
  local name=$1; shift
  mkdir -p "$dir/cmd"
  printf '%q ' "$@" >"$dir/cmd/$name"
  setsid "$@" >"$dir/logs/$name.log" 2>&1 < /dev/null &
  echo $! >"$dir/pids/$name"
}

# Stops component NAME and starts it again with the command it was started
# with (same ports, same data): an outage of that component, for tests.
# Returns once the process runs; whoever restarts it waits for readiness.
restart() { # NAME
  local name=${1:?restart needs a component name} pid
  [ -f "$dir/cmd/$name" ] || die "no component $name in $dir"
  pid=$(cat "$dir/pids/$name")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  setsid bash -c "exec $(cat "$dir/cmd/$name")" >>"$dir/logs/$name.log" 2>&1 < /dev/null &
  echo $! >"$dir/pids/$name"
  log "$name restarted"
}

wait_for() { # NAME SECONDS COMMAND...
  local name=$1 seconds=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    alive "$dir" "$name" || { report_dead "$dir" || true; die "$name exited during startup"; }
    [ $SECONDS -lt $deadline ] || { tail -n 30 "$dir/logs/$name.log" >&2; die "$name not ready after ${seconds}s"; }
    sleep 0.2
  done
  log "$name ready"
}

# Starts component NAME on loopback ports picked just before (etcd, the API
# server and Jaeger cannot report a port 0 they bound): pick_NAME picks them,
# launch_NAME starts the process, ready_NAME says it answers. Another process
# can take a picked port before NAME binds it; a start that fails with
# "address already in use" is retried on freshly picked ports, so a busy
# machine (CI) does not fail at random.
start_on_free_ports() { # NAME SECONDS
  local name=$1 seconds=$2 attempt
  for attempt in 1 2 3 4 5; do
    "pick_$name"
    "launch_$name"
    local deadline=$((SECONDS + seconds))
    until "ready_$name" >/dev/null 2>&1; do
      if ! alive "$dir" "$name"; then
        if grep -qi "address already in use" "$dir/logs/$name.log"; then
          log "$name: a picked port was taken before it bound it (attempt $attempt); picking again"
          continue 2
        fi
        report_dead "$dir" || true
        die "$name exited during startup"
      fi
      [ $SECONDS -lt $deadline ] || { tail -n 30 "$dir/logs/$name.log" >&2; die "$name not ready after ${seconds}s"; }
      sleep 0.2
    done
    log "$name ready"
    return 0
  done
  die "$name: its ports were taken five times in a row"
}

pki() {
  local p="$dir/pki"; mkdir -p "$p"
  cd "$p"
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=portcullis-dev-ca" \
    -keyout ca.key -out ca.crt 2>/dev/null
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=portcullis-dev-csr-signer" \
    -keyout signer.key -out signer.crt 2>/dev/null
  openssl genrsa -out sa.key 2048 2>/dev/null
  openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  leaf() { # NAME SUBJECT [SANS]
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "$2" -keyout "$1.key" -out "$1.csr" 2>/dev/null
    local ext="$1.ext"
    if [ -n "${3:-}" ]; then
      printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$3" >"$ext"
    else
      printf 'extendedKeyUsage=clientAuth\n' >"$ext"
    fi
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile "$ext" -out "$1.crt" 2>/dev/null
  }
  leaf apiserver "/CN=kube-apiserver" "IP:127.0.0.1,IP:10.244.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes.default.svc"
  leaf admin "/O=system:masters/CN=portcullis-admin"
  leaf alice "/CN=alice"
  leaf kcm "/CN=system:kube-controller-manager"
  cd - >/dev/null
}

kubeconfig() { # FILE USER
  local p="$dir/pki"
  cat >"$1" <<KC
apiVersion: v1
kind: Config
clusters:
- name: portcullis
  cluster:
    server: https://$API_HOST:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 <"$p/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 <"$p/$2.crt")
    client-key-data: $(base64 -w0 <"$p/$2.key")
contexts:
- name: portcullis
  context: {cluster: portcullis, user: $2}
current-context: portcullis
KC
}

up() {
  [ -e "$dir/env" ] && die "$dir already holds a control plane; run: $0 down $dir"
  mkdir -p "$dir/logs" "$dir/pids"
  dir=$(cd "$dir" && pwd)
  trap 'log "start failed: taking down what was started"; down' ERR
  local bin; bin=$("$here/build-control-plane.sh" all | tail -n 1)
  # With a node, the API server listens on the node's bridge address, which
  # pods reach (the `kubernetes` Service's endpoint); else on loopback only.
  API_HOST=127.0.0.1
  local node_flags=(--authorization-mode RBAC --disable-admission-plugins ServiceAccount)
  local kcm_flags=(--controllers csrsigning,csrcleaner,namespace,serviceaccount,garbagecollector,clusterrole-aggregation,validatingadmissionpolicy-status-controller
    --use-service-account-credentials=false)
  if [ "$node" = 1 ]; then
    "$here/node.sh" network "$dir"
    API_HOST=10.244.0.1
    node_flags=(--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction
      --enable-aggregator-routing=true --kubelet-preferred-address-types InternalIP
      --kubelet-client-certificate "$dir/pki/admin.crt" --kubelet-client-key "$dir/pki/admin.key")
    kcm_flags=(--controllers '*' --use-service-account-credentials=true
      --service-account-private-key-file "$dir/pki/sa.key")
  fi
  pki

  pick_jaeger() {
    JAEGER_OTLP_GRPC=$(free_port); JAEGER_OTLP_HTTP=$(free_port); JAEGER_QUERY=$(free_port)
    log "starting Jaeger (OTLP gRPC $JAEGER_OTLP_GRPC, query http://127.0.0.1:$JAEGER_QUERY)"
    sed -e "s/@GRPC@/$JAEGER_OTLP_GRPC/; s/@HTTP@/$JAEGER_OTLP_HTTP/; s/@QUERY@/$JAEGER_QUERY/" \
      "$here/jaeger.yaml" >"$dir/jaeger.yaml"
  }
  launch_jaeger() { start jaeger "$bin/jaeger" --config "$dir/jaeger.yaml"; }
  ready_jaeger() { curl -fsS "http://127.0.0.1:$JAEGER_QUERY/api/services"; }
  start_on_free_ports jaeger 60

  pick_etcd() {
    ETCD_PORT=$(free_port); ETCD_PEER_PORT=$(free_port)
    log "starting etcd on 127.0.0.1:$ETCD_PORT"
    rm -rf "$dir/etcd"
  }
  launch_etcd() {
    start etcd "$bin/etcd" --data-dir "$dir/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
      --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
      --unsafe-no-fsync --log-level warn
  }
  ready_etcd() { curl -fsS "http://127.0.0.1:$ETCD_PORT/health"; }
  start_on_free_ports etcd 60

  cat >"$dir/tracing.yaml" <<TR
apiVersion: apiserver.config.k8s.io/v1
kind: TracingConfiguration
endpoint: 127.0.0.1:$JAEGER_OTLP_GRPC
samplingRatePerMillion: 1000000
TR
  local p="$dir/pki"
  pick_kube-apiserver() {
    APISERVER_PORT=$(free_port)
    log "starting kube-apiserver on https://$API_HOST:$APISERVER_PORT"
    local user
    for user in admin alice kcm; do kubeconfig "$dir/$user.kubeconfig" "$user"; done
  }
  launch_kube-apiserver() {
    start kube-apiserver "$bin/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
      --cert-dir "$dir/apiserver" --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" \
      --secure-port "$APISERVER_PORT" --bind-address "$API_HOST" --advertise-address "$API_HOST" \
      --client-ca-file "$p/ca.crt" "${node_flags[@]}" \
      --service-account-issuer https://kubernetes.default.svc.cluster.local \
      --service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
      --service-cluster-ip-range 10.0.0.0/24 \
      --allow-privileged=true --tracing-config-file "$dir/tracing.yaml" --v=1
  }
  ready_kube-apiserver() { "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" get --raw /readyz; }
  start_on_free_ports kube-apiserver 120

  # kube-controller-manager runs with one identity (no per-controller
  # ServiceAccounts here): give it the CSR signing controller's role, as
  # system:controller:certificate-controller has in a kubeadm cluster, the
  # ClusterRole aggregation controller's (it writes admin/edit/view), and
  # the garbage collector's (it deletes what owner references tie to a
  # deleted owner, of any kind: the generated admission policies), and the
  # ValidatingAdmissionPolicy status controller's (it type-checks each
  # policy against the schemas: `status.typeChecking`).
  "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" create clusterrolebinding portcullis-kcm-csr-signing \
    --clusterrole=system:controller:certificate-controller --user=system:kube-controller-manager >/dev/null
  "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" create clusterrolebinding portcullis-kcm-clusterrole-aggregation \
    --clusterrole=system:controller:clusterrole-aggregation-controller --user=system:kube-controller-manager >/dev/null
  "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" create clusterrolebinding portcullis-kcm-garbage-collector \
    --clusterrole=system:controller:generic-garbage-collector --user=system:kube-controller-manager >/dev/null
  "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" create clusterrolebinding portcullis-kcm-vap-status \
    --clusterrole=system:controller:validatingadmissionpolicy-status-controller --user=system:kube-controller-manager >/dev/null
  log "starting kube-controller-manager (CSR signing, namespace cleanup, garbage collection, role aggregation, VAP type checking)"
  start kube-controller-manager "$bin/kube-controller-manager" --kubeconfig "$dir/kcm.kubeconfig" \
    --authentication-kubeconfig "$dir/kcm.kubeconfig" --authorization-kubeconfig "$dir/kcm.kubeconfig" \
    --bind-address 127.0.0.1 --secure-port 0 --leader-elect=false "${kcm_flags[@]}" \
    --cluster-signing-cert-file "$p/signer.crt" --cluster-signing-key-file "$p/signer.key" \
    --root-ca-file "$p/ca.crt"
  # Ready when it has done work: its ServiceAccount controller made "default".
  wait_for kube-controller-manager 60 "$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig" get serviceaccount default -n default
  if [ "$node" = 1 ]; then "$here/node.sh" up "$dir"; fi

  cat >"$dir/env" <<ENV
export KUBECONFIG=$dir/admin.kubeconfig
export PORTCULLIS_CP_DIR=$dir
export PORTCULLIS_CP_BIN=$bin
export PORTCULLIS_NONADMIN_KUBECONFIG=$dir/alice.kubeconfig
export PORTCULLIS_JAEGER_OTLP=http://127.0.0.1:$JAEGER_OTLP_GRPC
export PORTCULLIS_JAEGER_QUERY=http://127.0.0.1:$JAEGER_QUERY
export PORTCULLIS_CSR_SIGNER_CA=$p/signer.crt
export PORTCULLIS_NODE=$node
ENV
  if [ -n "$owner" ]; then
    setsid bash -c "while kill -0 $owner 2>/dev/null; do sleep 1; done; exec '$here/control-plane.sh' down '$dir'" \
      >"$dir/logs/watchdog.log" 2>&1 < /dev/null &
  fi
  trap - ERR
  log "up: source $dir/env"
}

down() {
  [ -d "$dir" ] || return 0
  "$here/node.sh" down "$dir" || true
  local reversed=() c
  for c in "${components[@]}"; do reversed=("$c" "${reversed[@]}"); done
  for c in "${reversed[@]}"; do
    [ -f "$dir/pids/$c" ] || continue
    local pid; pid=$(cat "$dir/pids/$c")
    if kill -0 "$pid" 2>/dev/null; then
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
  done
  rm -rf "$dir"
  log "down"
}

cmd=${1:-}; dir=${2:-}; owner=""; node=0; component=""
[ -n "$cmd" ] && [ -n "$dir" ] || die "usage: $0 up|down|status DIR [--owner PID] [--node] | restart DIR NAME"
shift 2
if [ "$cmd" = restart ]; then component=${1:?usage: $0 restart DIR NAME}; shift; fi
while [ $# -gt 0 ]; do
  case "$1" in
    --owner) owner=${2:?--owner needs a pid}; shift 2 ;;
    --node) node=1; shift ;;
    *) die "unknown option $1" ;;
  esac
done
case "$cmd" in
  up) up ;;
  down) down ;;
  status) report_dead "$dir" && log "all components running" ;;
  restart) restart "$component" ;;
  *) die "unknown command $cmd" ;;
esac
