# syntax=docker/dockerfile:1
# One image for the operator, the workers and the reaper: `pgwork operator`, `pgwork worker --app ...`,
# `pgwork reap`. Build your job code on top of it (FROM pgwork/pgwork:0.1.0, then COPY your module).
# The base is an argument so an offline build can use a local Debian base with Python 3.11
# (scripts/build-image.sh makes one with debootstrap when no registry is reachable), and so GPU
# teams can install pgwork into the CUDA/PyTorch image they already run (docs/worker.md, GPU workers):
#   --build-arg PYTHON_IMAGE=pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime \
#   --build-arg VENV_OPTIONS=--system-site-packages
# Any base with `python` >= 3.11 on PATH works; the venv then sees the base's torch and CUDA wheels.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# Named so scripts/build-image.sh can remove this stage's leftovers from earlier builds.
LABEL org.opencontainers.image.title="pgwork-build"
# Set by scripts/build-image.sh for an offline build from a wheelhouse (pip reads them from the
# environment); unset, pip uses its index as usual.
ARG PIP_NO_INDEX PIP_FIND_LINKS
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# A virtualenv is copied whole into the final stage, so nothing from this stage (pip caches,
# build backends, sources) reaches the runtime image.
# --system-site-packages for a base whose packages (torch, CUDA libraries) the handlers import;
# empty by default, so the slim image's venv holds only what pgwork installs.
ARG VENV_OPTIONS=""
RUN python -m venv ${VENV_OPTIONS} /opt/pgwork
COPY pyproject.toml README.md ./
COPY pgwork ./pgwork
# pip stays in the venv so images built FROM this one can add their handlers' dependencies.
# The ui extra too: the chart's optional console (console.enabled) runs `pgwork ui` from this image.
RUN /opt/pgwork/bin/pip install --no-compile ".[operator,ui]"

FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="pgwork" \
      org.opencontainers.image.description="PostgreSQL work queue: operator, worker and reaper" \
      org.opencontainers.image.licenses="Apache-2.0"
# The chart runs with a read-only root filesystem: no bytecode writes, unbuffered logs.
ENV PATH=/opt/pgwork/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/pgwork /opt/pgwork
# Numeric UID/GID so Kubernetes can verify runAsNonRoot without an /etc/passwd lookup.
USER 10001:10001
WORKDIR /tmp
EXPOSE 8080 9100
ENTRYPOINT ["pgwork"]
CMD ["--help"]
