#!/usr/bin/env bash
# Makes sure a Docker daemon answers: uses the one DOCKER_HOST (or the
# default socket) points at, else, as root on a machine without systemd,
# starts Debian's dockerd (apt-get install docker.io) in the background with
# its log in ~/.cache/portcullis/dockerd.log. Idempotent.
set -euo pipefail
log() { printf '[docker-daemon] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

docker info >/dev/null 2>&1 && exit 0
command -v dockerd >/dev/null || "$(dirname "$0")/install-packages" docker.io ||
  die "no Docker daemon answers and dockerd is not installed (install Docker)"
[ "$(id -u)" = 0 ] || die "no Docker daemon answers, and starting dockerd needs root (or start Docker yourself)"
cache=${XDG_CACHE_HOME:-$HOME/.cache}/portcullis
mkdir -p "$cache"
log "starting dockerd (log: $cache/dockerd.log)"
setsid dockerd >"$cache/dockerd.log" 2>&1 </dev/null &
for _ in $(seq 150); do
  docker info >/dev/null 2>&1 && { log "dockerd ready"; exit 0; }
  kill -0 $! 2>/dev/null || { tail -n 20 "$cache/dockerd.log" >&2; die "dockerd exited"; }
  sleep 0.2
done
tail -n 20 "$cache/dockerd.log" >&2
die "dockerd did not answer within 30 s"
