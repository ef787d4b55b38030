#!/usr/bin/env bash
# Installs what the image tests need (tests/ship/test_image.py, scripts/build-image.sh): podman,
# buildah, runc and debootstrap from Debian. Idempotent: nothing is done when all are present.
# The tests build the image themselves, once per session (scripts/build-image.sh).
set -euo pipefail

missing=()
for tool in podman buildah runc debootstrap; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ "${#missing[@]}" -gt 0 ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "image tools: ${missing[*]} missing and apt-get not available; install them by hand" >&2
    exit 1
  fi
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "image tools: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq podman buildah runc debootstrap >/dev/null
fi
echo "image tools: $(podman --version), $(buildah --version | cut -d' ' -f1-3), $(runc --version | head -1)"
