#!/usr/bin/env bash
# Installs what the harness needs on a fresh Debian 12 (bookworm) host:
# QEMU 10 from bookworm-backports, Debian's linux-source-6.12 tarball, the
# guest image's busybox-static and dropbear-bin, the kernel build tools, and
# the real suites matrix.yaml's `program` benchmarks run in the guest:
# stress-ng, rt-tests (hackbench) and linux-perf 6.12 (`perf bench`, from
# bookworm-backports).
# Idempotent: a second run only checks. Needs root (or sudo).
set -euo pipefail

if [ "$(id -u)" -ne 0 ]; then
    exec sudo -E "$0" "$@"
fi

export DEBIAN_FRONTEND=noninteractive
codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")

need_pkgs=(qemu-system-x86 linux-source-6.12 busybox-static dropbear-bin
    build-essential flex bison bc cpio xz-utils libelf-dev libssl-dev pkg-config
    kmod python3 ccache stress-ng rt-tests linux-perf)
missing=()
for p in "${need_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
qemu_ok=0
if command -v qemu-system-x86_64 >/dev/null; then
    major=$(qemu-system-x86_64 --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p' | head -1)
    [ "${major:-0}" -ge 9 ] && qemu_ok=1
fi
perf_ok=0
if command -v perf >/dev/null && perf version 2>/dev/null | grep -q '^perf version 6\.1[2-9]'; then
    perf_ok=1
fi
if [ ${#missing[@]} -eq 0 ] && [ $qemu_ok -eq 1 ] && [ $perf_ok -eq 1 ]; then
    echo "setup: host already has everything"
    exit 0
fi

if [ "$codename" = bookworm ]; then
    list=/etc/apt/sources.list.d/bookworm-backports.sources
    if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
        cat > "$list" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    fi
    backports=(-t bookworm-backports)
else
    backports=()
fi

apt-get update -q
# QEMU comes from backports on bookworm (bookworm's own QEMU 7.2 caps q35 at
# 288 vCPUs). linux-source-6.12 comes from bookworm-security (6.12.117,
# 6.12.118 since 2026-12), which is newer than the backports build, so it is
# installed without -t.
apt-get install -y -q --no-install-recommends "${backports[@]}" qemu-system-x86
# perf 6.12 (bookworm's own is 6.1): `perf bench` as the kernel under test ships it
apt-get install -y -q --no-install-recommends "${backports[@]}" linux-perf
apt-get install -y -q --no-install-recommends linux-source-6.12 busybox-static dropbear-bin \
    build-essential flex bison bc cpio xz-utils libelf-dev libssl-dev pkg-config kmod python3 ccache \
    stress-ng rt-tests
qemu-system-x86_64 --version | head -1
perf version
ls -l /usr/src/linux-source-6.12.tar.xz
echo "setup: done"
