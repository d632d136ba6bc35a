#!/usr/bin/env bash
# Build the local podman base images with debootstrap (no registry is reachable here).
#   tools/build-image.sh [--systemd] [--force]
# localhost/llmstack-debian13          minbase trixie + python3 (lab hosts, molecule)
# localhost/llmstack-debian13-systemd  + systemd-sysv, dbus; CMD /sbin/init (roles that manage services)
# An image that already exists is reused unless --force is given.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
variant=base
force=0
for arg in "$@"; do
  case "$arg" in
    --systemd) variant=systemd ;;
    --force) force=1 ;;
    *) echo "usage: $0 [--systemd] [--force]" >&2; exit 2 ;;
  esac
done
suite=${LLMSTACK_IMAGE_SUITE:-trixie}
if [ "$variant" = systemd ]; then
  image=${LLMSTACK_IMAGE_SYSTEMD:-localhost/llmstack-debian13-systemd}
  include=python3,systemd-sysv,dbus,ca-certificates
  change=(--change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL SIGRTMIN+3')
else
  image=${LLMSTACK_IMAGE:-localhost/llmstack-debian13}
  include=python3,ca-certificates
  change=(--change 'CMD ["sleep", "infinity"]')
fi
if [ "$force" = 0 ] && podman image exists "$image"; then
  echo "build-image: $image exists, reused (--force to rebuild)"
  exit 0
fi
mirror=$("$here/debian-mirror.sh")
work=$(mktemp -d /var/tmp/llmstack-image.XXXXXX)
trap 'rm -rf "$work"' EXIT
echo "build-image: debootstrap $suite from $mirror into $work (variant $variant)"
if ! debootstrap --variant=minbase --include="$include" "$suite" "$work/rootfs" "$mirror" >"$work/log" 2>&1; then
  echo "build-image: debootstrap failed; last lines of its log:" >&2
  tail -n 20 "$work/log" >&2
  tail -n 20 "$work/rootfs/debootstrap/debootstrap.log" 2>/dev/null >&2 || true
  exit 1
fi
# Keep the image small and free of host-specific state.
rm -rf "$work/rootfs/var/cache/apt/archives/"*.deb "$work/rootfs/var/lib/apt/lists/"*
: >"$work/rootfs/etc/machine-id"
tar -C "$work/rootfs" -c . | podman import "${change[@]}" - "$image" >/dev/null
echo "build-image: built $image"
