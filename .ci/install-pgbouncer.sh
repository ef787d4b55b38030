#!/usr/bin/env bash
# Installs PgBouncer from Debian (1.18 on bookworm) for the pooler tests (tests/reliability/test_pooler.py,
# tests/support/pgbouncer.py) and `pgwork bench --only pooler`. Idempotent. The distribution's service is
# stopped and disabled: the tests start their own, as the postgres user, on a free port.
set -euo pipefail

if [ ! -x /usr/sbin/pgbouncer ]; then
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "pgbouncer missing and apt-get not available; install it by hand" >&2
    exit 1
  fi
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "pgbouncer: installing"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq pgbouncer >/dev/null
  if command -v systemctl >/dev/null 2>&1; then
    $sudo systemctl disable --now pgbouncer >/dev/null 2>&1 || true
  fi
fi
echo "pgbouncer: $(/usr/sbin/pgbouncer --version | head -1)"
