#!/usr/bin/env bash
# Can this machine run the kind e2e (`make e2e`, tests/e2e)? Prints what is missing and exits 1,
# or prints nothing and exits 0. The pytest e2e tier runs it too and skips with its message.
set -u
missing=()
if ! command -v docker >/dev/null 2>&1; then
  missing+=("docker is not installed (https://docs.docker.com/engine/install/)")
elif ! docker info >/dev/null 2>&1; then
  missing+=("no Docker engine answers ('docker info' failed): start dockerd, or use a machine that has one")
fi
if ! command -v kind >/dev/null 2>&1; then
  missing+=("kind is not installed (https://kind.sigs.k8s.io/docs/user/quick-start/#installation, e.g. 'go install sigs.k8s.io/kind@v0.30.0')")
fi
for tool in helm kubectl; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool is not on PATH (run 'make tools')")
done
if [ ${#missing[@]} -gt 0 ]; then
  joined=$(printf '%s; ' "${missing[@]}")
  echo "e2e cannot run here: ${joined%; }" >&2
  exit 1
fi
