#!/usr/bin/env bash
# Print the Debian mirror this machine's apt uses (never a hard-coded host).
# LLMSTACK_DEBIAN_MIRROR overrides it.
set -euo pipefail
if [ -n "${LLMSTACK_DEBIAN_MIRROR:-}" ]; then
  echo "$LLMSTACK_DEBIAN_MIRROR"
  exit 0
fi
# deb822 sources first (URIs: lines), then one-line sources (deb URL suite ...).
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  awk '/^URIs:/ {for (i = 2; i <= NF; i++) print $i}' "$f"
done | grep -E '/debian/?$' | head -n 1 | grep . && exit 0
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] || continue
  awk '$1 == "deb" {for (i = 2; i <= NF; i++) if ($i ~ /^(https?|file):/) {print $i; break}}' "$f"
done | grep -E '/debian/?$' | head -n 1 | grep . && exit 0
echo "debian-mirror: no Debian mirror found in /etc/apt sources; set LLMSTACK_DEBIAN_MIRROR" >&2
exit 1
