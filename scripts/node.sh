#!/usr/bin/env bash
# A real node for the local control plane: containerd + runc + CNI bridge,
# kubelet, kube-proxy (nftables), kube-scheduler and CoreDNS, so that
# deploy/ runs as pods and the API server reaches webhooks through their
# Services. Called by control-plane.sh (`up DIR --node`); state in DIR/node.
#
#   node.sh check                 what this machine lacks to run a node (non-zero if anything)
#   node.sh install               install what is missing (Debian packages, as root), then check
#   node.sh network DIR           the bridge and the safety rules (before the API server starts)
#   node.sh up DIR                containerd, CoreDNS, kube-scheduler, kube-proxy, kubelet; waits for Ready
#   node.sh load DIR IMAGE...     copy images from the Docker daemon into the node's containerd
#   node.sh deploy DIR            load every image scripts/images builds, `kubectl apply -k deploy/overlays/dev`
#                                 (Jaeger from the local image: no registry), wait for every Deployment
#   node.sh down DIR              stop the pods and every process, remove bridge, routes, rules, mounts
#
# Traffic stays on this machine: pods live on the bridge $BRIDGE ($POD_CIDR);
# Service IPs ($SERVICE_CIDR) are only ever translated to pod IPs by
# kube-proxy, and an `unreachable` route plus a forward rule make any
# mistake fail here instead of sending a packet out. The API server reaches
# webhooks at endpoint IPs (--enable-aggregator-routing). One node per
# machine at a time (the bridge name and the CIDRs are fixed).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
log() { printf '[node %s] %s\n' "$(date +%T)" "$*" >&2; }
die() { log "$*"; exit 1; }

BRIDGE=pcbr0
NODE_IP=10.244.0.1
POD_CIDR=10.244.0.0/24
SERVICE_CIDR=10.0.0.0/24
NODE_NAME=portcullis-node
NFT_TABLE=portcullis_node

missing() { # prints one line per missing part
  [ "$(id -u)" = 0 ] || echo "not root: a node needs root (network namespaces, mounts, cgroups)"
  local b
  for b in containerd containerd-shim-runc-v2 runc ctr nft ip iptables; do
    command -v "$b" >/dev/null || echo "$b is not installed"
  done
  [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/portmap ] ||
    echo "CNI plugins are not installed (/usr/lib/cni/{bridge,host-local,portmap})"
  for c in cpu memory pids; do
    [ -d "/sys/fs/cgroup/$c" ] || grep -qw "$c" /sys/fs/cgroup/cgroup.controllers 2>/dev/null ||
      echo "no $c cgroup controller"
  done
  [ -e /proc/sys/net/ipv4/ip_forward ] || echo "no IPv4 forwarding (/proc/sys/net/ipv4/ip_forward)"
}

install_packages() {
  [ -z "$(missing)" ] && return
  "$here/install-packages" containerd runc containernetworking-plugins nftables iptables iproute2 || true
  local lacking; lacking=$(missing)
  [ -z "$lacking" ] || die "this machine cannot run a node:
$lacking"
}

owner() { # the DIR of the node that made the bridge (kept as the bridge's alias)
  cat "/sys/class/net/$BRIDGE/ifalias" 2>/dev/null || true
}

dir_alive() { # DIR: does any process that DIR started (control plane or node) still run?
  local f
  for f in "$1"/pids/*; do
    [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && return 0
  done
  return 1
}

free_bridge() {
  # A node that is being taken down (a test binary's watchdog) frees it soon;
  # one whose processes are all gone (a killed run, a reboot of the sandbox)
  # left its network behind, and that is removed here.
  local deadline=$((SECONDS + 60)) holder
  while ip link show "$BRIDGE" >/dev/null 2>&1; do
    holder=$(owner)
    if [ -z "$holder" ] || ! dir_alive "$holder"; then
      log "bridge $BRIDGE was left by a node that no longer runs (${holder:-unknown DIR}): removing it"
      if [ -n "$holder" ]; then (dir=$holder; down); fi
      network_down
      continue
    fi
    [ $SECONDS -lt $deadline ] ||
      die "bridge $BRIDGE belongs to a running node in $holder (scripts/dev down, or control-plane.sh down $holder)"
    sleep 0.5
  done
}

network() {
  install_packages
  free_bridge
  mkdir -p "$dir/node"
  log "network: bridge $BRIDGE $NODE_IP ($POD_CIDR), Service IPs $SERVICE_CIDR unreachable off the node"
  ip link add "$BRIDGE" type bridge
  ip link set "$BRIDGE" alias "$dir"
  ip addr add "$NODE_IP/24" dev "$BRIDGE"
  ip link set "$BRIDGE" up
  ip route add unreachable "$SERVICE_CIDR"
  echo 1 >/proc/sys/net/ipv4/ip_forward
  # Pod traffic may only go back to the bridge; nothing from the pod range
  # leaves through another interface.
  nft -f - <<NFT
table inet $NFT_TABLE {
  chain forward {
    type filter hook forward priority -10; policy accept;
    ip saddr $POD_CIDR oifname != "$BRIDGE" counter drop
    ip daddr $POD_CIDR iifname != "$BRIDGE" counter drop
  }
}
NFT
  # Docker sets the iptables FORWARD policy to DROP: let bridge traffic
  # (pod to pod, pod to Service to pod) through.
  iptables -I FORWARD 1 -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT -m comment --comment portcullis-node
  touch "$dir/node/network"
}

pki_leaf() { # NAME SUBJECT
  local p="$dir/pki"
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "$2" -keyout "$p/$1.key" -out "$p/$1.csr" 2>/dev/null
  printf 'extendedKeyUsage=clientAuth\n' >"$p/$1.ext"
  openssl x509 -req -in "$p/$1.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -days 2 \
    -extfile "$p/$1.ext" -out "$p/$1.crt" 2>/dev/null
}

kubeconfig() { # FILE USER: the admin's kubeconfig with another client certificate
  sed -e "s#^\(\s*client-certificate-data:\).*#\1 $(base64 -w0 <"$dir/pki/$2.crt")#" \
      -e "s#^\(\s*client-key-data:\).*#\1 $(base64 -w0 <"$dir/pki/$2.key")#" "$dir/admin.kubeconfig" >"$1"
}

start() { # NAME COMMAND... (pid in DIR/pids, like control-plane.sh)
  local name=$1; shift
  setsid "$@" >"$dir/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$dir/pids/$name"
}

process_alive() { # NAME: does the process start() started as NAME still run?
  [ -f "$dir/pids/$1" ] && kill -0 "$(cat "$dir/pids/$1")" 2>/dev/null
}

wait_for() { # NAME SECONDS COMMAND...
  local name=$1 seconds=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    process_alive "$name" || { tail -n 30 "$dir/logs/$name.log" >&2; die "$name exited during startup"; }
    [ $SECONDS -lt $deadline ] || { tail -n 30 "$dir/logs/$name.log" >&2; die "$name not ready after ${seconds}s"; }
    sleep 0.2
  done
  log "$name ready"
}

up() {
  [ -f "$dir/node/network" ] || die "no node network in $dir (control-plane.sh up DIR --node)"
  local n="$dir/node" bin; bin=$("$here/build-control-plane.sh" node | tail -n 1)
  local kubectl=("$bin/kubectl" --kubeconfig "$dir/admin.kubeconfig")
  mkdir -p "$n"/{cni,ipam,containerd,kubelet,pod-logs}
  for who in "kubelet:/O=system:nodes/CN=system:node:$NODE_NAME" "kube-proxy:/CN=system:kube-proxy" \
    "kube-scheduler:/CN=system:kube-scheduler" "coredns:/CN=portcullis:coredns"; do
    pki_leaf "${who%%:*}" "${who#*:}"
    kubeconfig "$n/${who%%:*}.kubeconfig" "${who%%:*}"
  done

  cat >"$n/cni/10-portcullis.conflist" <<CNI
{"cniVersion": "0.4.0", "name": "portcullis", "plugins": [
  {"type": "bridge", "bridge": "$BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": "$n/ipam", "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]],
            "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
CNI
  # Its own root, state and socket, so it cannot clash with Docker's.
  # restrict_oom_score_adj: root here lacks CAP_SYS_RESOURCE.
  cat >"$n/containerd.toml" <<TOML
version = 2
root = "$n/containerd/root"
state = "$n/containerd/state"
[grpc]
  address = "$n/containerd.sock"
[ttrpc]
  address = "$n/containerd.sock.ttrpc"
[debug]
  address = "$n/containerd-debug.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "localhost/portcullis/pause:dev"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$n/cni"
TOML
  log "starting containerd ($n/containerd.sock)"
  start containerd containerd --config "$n/containerd.toml"
  wait_for containerd 30 ctr -a "$n/containerd.sock" version

  # CoreDNS on the node's address: cluster names for pods, nothing else
  # (no forwarding: no query leaves the machine).
  "${kubectl[@]}" apply -f - >/dev/null <<RBAC
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: portcullis:coredns}
rules:
  - {apiGroups: [""], resources: [endpoints, services, pods, namespaces], verbs: [list, watch]}
  - {apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: portcullis:coredns}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: portcullis:coredns}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: "portcullis:coredns"}]
RBAC
  cat >"$n/Corefile" <<DNS
.:53 {
    bind $NODE_IP
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $n/coredns.kubeconfig portcullis
        pods insecure
    }
    cache 5
}
DNS
  log "starting CoreDNS on $NODE_IP:53"
  start coredns "$bin/coredns" -conf "$n/Corefile"

  log "starting kube-scheduler"
  start kube-scheduler "$bin/kube-scheduler" --kubeconfig "$n/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig "$n/kube-scheduler.kubeconfig" --authorization-kubeconfig "$n/kube-scheduler.kubeconfig" \
    --leader-elect=false --bind-address 127.0.0.1 --secure-port 0

  cat >"$n/kube-proxy.yaml" <<KP
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
hostnameOverride: $NODE_NAME
clusterCIDR: $POD_CIDR
bindAddress: $NODE_IP
nodePortAddresses: [$NODE_IP/32]
healthzBindAddress: ""
metricsBindAddress: ""
clientConnection: {kubeconfig: $n/kube-proxy.kubeconfig}
conntrack: {maxPerCore: 0, min: 0}
nftables: {masqueradeAll: true}
KP
  log "starting kube-proxy (nftables)"
  start kube-proxy "$bin/kube-proxy" --config "$n/kube-proxy.yaml"

  : >"$n/resolv.conf"
  cat >"$n/kubelet.yaml" <<KL
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
# This VM has hybrid cgroups (v1 controllers) and no systemd.
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$n/containerd.sock
clusterDNS: [$NODE_IP]
clusterDomain: cluster.local
resolvConf: $n/resolv.conf
podLogsDir: $n/pod-logs
# Images cannot be pulled again here: never collect them, never evict for disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 100Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}
serializeImagePulls: false
# Mounted ConfigMaps (the cert-manager's trust bundle) refresh within seconds.
syncFrequency: 10s
KL
  log "starting kubelet ($NODE_NAME, $NODE_IP)"
  start kubelet "$bin/kubelet" --config "$n/kubelet.yaml" --kubeconfig "$n/kubelet.kubeconfig" \
    --root-dir "$n/kubelet" --cert-dir "$n/kubelet/pki" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v=1
  wait_for kubelet 120 "${kubectl[@]}" wait --for=condition=Ready "node/$NODE_NAME" --timeout=1s
  # The node lifecycle controller removes it too; do not wait for its next pass.
  "${kubectl[@]}" taint nodes "$NODE_NAME" node.kubernetes.io/not-ready:NoSchedule- >/dev/null 2>&1 || true
  wait_for coredns 30 grep -q "CoreDNS-" "$dir/logs/coredns.log"
  log "node $NODE_NAME Ready"
}

load() { # IMAGE...
  local image
  for image in "$@"; do
    docker image inspect "$image" >/dev/null 2>&1 || die "image $image is not in the Docker daemon (scripts/images builds it)"
  done
  log "loading into the node: $*"
  docker save "$@" | ctr -a "$dir/node/containerd.sock" -n k8s.io images import - >/dev/null
}

deploy() {
  # shellcheck disable=SC1091
  source "$dir/env"
  local kubectl=("$PORTCULLIS_CP_BIN/kubectl" --kubeconfig "$dir/admin.kubeconfig") images d
  mapfile -t images < <("$here/images" --list)
  load "${images[@]}"
  # kustomize takes only relative paths to other kustomizations.
  mkdir -p "$dir/overlay"
  cat >"$dir/overlay/kustomization.yaml" <<KUST
resources: [$(realpath --relative-to="$dir/overlay" "$here/../deploy/overlays/dev")]
images: [{name: jaegertracing/jaeger, newName: localhost/portcullis/jaeger, newTag: dev}]
KUST
  log "kubectl apply -k deploy/overlays/dev"
  "${kubectl[@]}" apply -k "$dir/overlay" >&2
  for d in $("${kubectl[@]}" -n portcullis-system get deployments -o name); do
    log "waiting for $d"
    "${kubectl[@]}" -n portcullis-system rollout status "$d" --timeout=240s >&2
  done
}

stop_pids() { # NAME...: SIGTERM to all, SIGKILL to what is left after 5 s
  local name pids=()
  for name in "$@"; do [ -f "$dir/pids/$name" ] && pids+=("$(cat "$dir/pids/$name")"); done
  [ ${#pids[@]} -gt 0 ] || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "${pids[@]}" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "${pids[@]}" 2>/dev/null || true
}

down() {
  [ -d "$dir/node" ] || return 0
  local n="$dir/node" sock="$dir/node/containerd.sock"
  stop_pids kubelet
  if [ -S "$sock" ]; then
    local ctr=(ctr -a "$sock" -n k8s.io) t
    for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks kill -a -s SIGKILL "$t" >/dev/null 2>&1 || true; done
    for t in $("${ctr[@]}" tasks ls -q 2>/dev/null); do "${ctr[@]}" tasks delete -f "$t" >/dev/null 2>&1 || true; done
  fi
  stop_pids kube-proxy kube-scheduler coredns containerd
  pkill -KILL -f "containerd-shim-runc-v2 .*-address $sock" 2>/dev/null || true
  # Mounts under the node's directory (volumes, rootfs, netns), deepest first.
  awk -v d="$n/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  if [ -f "$n/network" ]; then network_down; fi
  rm -rf "$n"
  log "down"
}

network_down() { # every rule, route and link network() made; each may be gone already
  nft delete table inet "$NFT_TABLE" 2>/dev/null || true
  nft delete table ip kube-proxy 2>/dev/null || true
  nft delete table ip6 kube-proxy 2>/dev/null || true
  while iptables -D FORWARD -i "$BRIDGE" -o "$BRIDGE" -j ACCEPT -m comment --comment portcullis-node 2>/dev/null; do :; done
  ip route del unreachable "$SERVICE_CIDR" 2>/dev/null || true
  local veth
  for veth in $(ip -o link show master "$BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do
    ip link del "$veth" 2>/dev/null || true
  done
  ip link del "$BRIDGE" 2>/dev/null || true
}

cmd=${1:-}; dir=${2:-}
case "$cmd" in
  check) lacking=$(missing); [ -z "$lacking" ] || { printf '%s\n' "$lacking"; exit 1; }; log "this machine can run a node" ;;
  install) install_packages; log "this machine can run a node" ;;
  network) [ -n "$dir" ] || die "usage: $0 network DIR"; network ;;
  up) [ -n "$dir" ] || die "usage: $0 up DIR"; up ;;
  load) [ -n "$dir" ] && [ -n "${3:-}" ] || die "usage: $0 load DIR IMAGE..."; shift 2; load "$@" ;;
  deploy) [ -n "$dir" ] || die "usage: $0 deploy DIR"; deploy ;;
  down) [ -n "$dir" ] || die "usage: $0 down DIR"; down ;;
  *) die "usage: $0 check|install|network|up|load|deploy|down [DIR]" ;;
esac
