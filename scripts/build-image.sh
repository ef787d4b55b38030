#!/usr/bin/env bash
# Builds the pgwork image (the repository's Dockerfile) with podman, offline.
#
#   scripts/build-image.sh [TAG]          TAG defaults to $PGWORK_IMAGE or localhost/pgwork:dev
#
# The base image: $PYTHON_IMAGE if set; else python:3.11-slim-bookworm if it is present or can be
# pulled; else a local Debian bookworm base made with debootstrap (from the Debian mirror apt is
# configured with) and `podman import`. The build itself never touches the network: Python
# packages come from a wheelhouse filled by `pip download` beforehand (`--network none`).
#
# $PGWORK_VENV_OPTIONS is passed as the Dockerfile's VENV_OPTIONS (e.g. --system-site-packages, with
# PYTHON_IMAGE naming a CUDA/PyTorch base whose torch the handlers import).
#
# Nothing is written into the repository. Work files (containers.conf, the debootstrapped base,
# the wheelhouse) live in $PGWORK_IMAGE_CACHE (default /var/tmp/pgwork-image); a second run
# reuses the base and the wheelhouse. Prints the build time and the image size at the end.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TAG="${1:-${PGWORK_IMAGE:-localhost/pgwork:dev}}"
CACHE="${PGWORK_IMAGE_CACHE:-/var/tmp/pgwork-image}"
REAL_BASE="python:3.11-slim-bookworm"
LOCAL_BASE="localhost/pgwork-base:bookworm"
PULL_SECONDS="${PGWORK_PULL_SECONDS:-20}"
mkdir -p "$CACHE"
# One build at a time per cache: two at once (parallel test runs) debootstrapped into the same
# rootfs, and the loser's failure left a proc mount there that broke every later build.
exec 9>"$CACHE/.lock"
flock 9

say() { printf 'build-image: %s\n' "$*" >&2; }

# Rootful podman on hosts like CI's: crun refuses the hybrid cgroup layout, and the default
# nofile/nproc limits are above what the host grants. Our own file, never the system's.
cat >"$CACHE/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
export CONTAINERS_CONF="$CACHE/containers.conf"

command -v podman >/dev/null || { say "podman is not installed: run .ci/install-image-tools.sh"; exit 3; }

# The mirror apt already uses (deb822 "URIs:" or one-line "deb URL bookworm main"), not a
# hard-coded host: the first source that carries bookworm itself (not -security/-updates).
debian_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -r "$f" ] || continue
    awk '
      /^[[:space:]]*#/ { next }
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm" && uri != "") { print uri; exit } }
      /^deb[[:space:]]/ { u = $2; if ($2 ~ /^\[/) { u = $3; s = $4 } else { s = $3 }
                          if (s == "bookworm") { print u; exit } }
      /^$/ { uri = "" }
    ' "$f"
  done | head -n 1
}

# A debootstrap that failed mid-way can leave /proc (and others) mounted inside the rootfs.
unmount_below() {
  local target
  findmnt -rn -o TARGET | awk -v d="$1/" 'index($0, d) == 1' | sort -r | while read -r target; do
    umount -l "$target" || true
  done
}

local_base() {
  if podman image exists "$LOCAL_BASE"; then
    say "base: $LOCAL_BASE (already imported)"
    return
  fi
  command -v debootstrap >/dev/null || { say "debootstrap is not installed: run .ci/install-image-tools.sh"; exit 3; }
  local mirror rootfs
  mirror="$(debian_mirror)"
  [ -n "$mirror" ] || { say "no bookworm source in /etc/apt/sources.list*; set PYTHON_IMAGE"; exit 3; }
  rootfs="$CACHE/rootfs"
  unmount_below "$rootfs"
  rm -rf "$rootfs"
  say "base: debootstrap bookworm from apt's mirror into $rootfs"
  debootstrap --variant=minbase --include=python3,python3-venv,python-is-python3,ca-certificates \
    bookworm "$rootfs" "$mirror" >"$CACHE/debootstrap.log" 2>&1 \
    || { tail -20 "$CACHE/debootstrap.log" >&2; unmount_below "$rootfs"; exit 1; }
  # The base needs no package caches or docs; the runtime stage copies only the venv on top.
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
    "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/locale/*
  tar -C "$rootfs" -c . | podman import --quiet \
    --change 'CMD ["/bin/bash"]' --change 'ENV LANG=C.UTF-8' - "$LOCAL_BASE" >/dev/null
  rm -rf "$rootfs"
  say "base: imported $LOCAL_BASE"
}

choose_base() {
  if [ -n "${PYTHON_IMAGE:-}" ]; then
    BASE="$PYTHON_IMAGE"
  elif podman image exists "$REAL_BASE"; then
    BASE="$REAL_BASE"
  elif timeout "$PULL_SECONDS" podman pull --quiet "docker.io/library/$REAL_BASE" >/dev/null 2>&1; then
    BASE="docker.io/library/$REAL_BASE"
  else
    say "base: $REAL_BASE cannot be pulled (no registry reachable); using a local Debian base"
    local_base
    BASE="$LOCAL_BASE"
  fi
  say "base: $BASE"
}

wheelhouse() {
  local wheels="$CACHE/wheelhouse"
  mkdir -p "$wheels"
  # Everything `pip install .[operator,ui]` needs, and the build backend for pgwork itself.
  python3 -m pip download --quiet --dest "$wheels" --only-binary=:all: \
    "setuptools>=68" wheel >/dev/null
  python3 -m pip download --quiet --dest "$wheels" --only-binary=:all: "$ROOT[operator,ui]" >/dev/null
  rm -f "$wheels"/pgwork-*  # pgwork comes from the build context, not from here
  WHEELS="$wheels"
}

choose_base
wheelhouse
previous=$(podman image inspect --format '{{.Id}}' "$TAG" 2>/dev/null || true)
started=$(date +%s.%N)
podman build --quiet --network none \
  --volume "$WHEELS:/wheels:ro" \
  --build-arg "PYTHON_IMAGE=$BASE" \
  --build-arg "VENV_OPTIONS=${PGWORK_VENV_OPTIONS:-}" \
  --build-arg PIP_NO_INDEX=1 \
  --build-arg PIP_FIND_LINKS=/wheels \
  --tag "$TAG" \
  --file "$ROOT/Dockerfile" "$ROOT" >/dev/null
finished=$(date +%s.%N)
# Rebuilds would otherwise leave every earlier image behind, untagged (~270 MB each): drop the one the
# tag moved off (unless a container still uses it) and build-stage images older than an hour (this
# build's own stays, as the cache for the next one).
current=$(podman image inspect --format '{{.Id}}' "$TAG")
if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
  podman rmi "$previous" >/dev/null 2>&1 || true
fi
podman image prune --force --filter "label=org.opencontainers.image.title=pgwork-build" \
  --filter "until=1h" >/dev/null 2>&1 || true
size=$(podman image inspect --format '{{.Size}}' "$TAG")
seconds=$(awk -v a="$started" -v b="$finished" 'BEGIN { printf "%.1f", b - a }')
mib=$(awk -v s="$size" 'BEGIN { printf "%.0f", s / 1048576 }')
say "built $TAG on $BASE in ${seconds}s; image size ${mib} MiB"
printf '{"tag": "%s", "base": "%s", "build_seconds": %s, "size_bytes": %s}\n' \
  "$TAG" "$BASE" "$seconds" "$size" >"$CACHE/last-build.json"
echo "$TAG"
