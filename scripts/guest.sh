#!/usr/bin/env bash
# Runs cmwq's programs inside a QEMU guest with many vCPUs, several sockets
# (each with its own last-level cache) and NUMA nodes: what a 2-CPU machine
# cannot show. Debian's qemu-system-x86 and its 6.1 kernel (from the
# linux-image-amd64 package, extracted, never installed), an initramfs of
# busybox-static, the programs and the shared libraries they need; serial
# console on stdout; the guest's exit status is this script's.
#
#   bash scripts/guest.sh [--cpus N] [--nodes N] [--threads T] [--mem M] BUILD_DIR [COMMAND]
#
# BUILD_DIR holds a build (tests/, tools/, bench/). COMMAND runs in the
# guest's shell from that build's copy (default: scripts/guest-run.sh, the
# checks of the CI stage). --cpus (default 16) are split over --nodes
# sockets (default 4), one node and one LLC each; --threads 2 gives each
# core two SMT threads. Multi-threaded TCG (CMWQ_GUEST_KVM=1 tries KVM);
# timing inside means nothing. Exit 3: the guest never reported (no boot).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
cpus=16 nodes=4 threads=1 mem=${CMWQ_GUEST_MEM:-2048}
while [[ $# -gt 0 ]]; do
	case $1 in
	--cpus) cpus=$2; shift 2 ;;
	--nodes) nodes=$2; shift 2 ;;
	--threads) threads=$2; shift 2 ;;
	--mem) mem=$2; shift 2 ;;
	*) break ;;
	esac
done
build=${1:?usage: guest.sh [--cpus N] [--nodes N] [--threads T] BUILD_DIR [COMMAND]}
build=$(cd "$build" && pwd)
shift
command=${*:-sh /cmwq/scripts/guest-run.sh}
(( cpus % (nodes * threads) == 0 )) || { echo "guest.sh: --cpus must divide into --nodes x --threads" >&2; exit 2; }
cores=$((cpus / nodes / threads))

cache=${CMWQ_GUEST_CACHE:-$root/build-guest}
mkdir -p "$cache"
for p in qemu-system-x86_64 busybox; do
	command -v $p >/dev/null || { echo "guest.sh: $p missing (apt-get install qemu-system-x86 busybox-static)" >&2; exit 2; }
done
# The kernel: Debian's current linux-image-amd64, extracted once.
if ! ls "$cache"/kernel/boot/vmlinuz-* >/dev/null 2>&1; then
	(cd "$cache" && rm -f linux-image-*.deb &&
		dep=$(apt-cache depends linux-image-amd64 | awk '/Depends: linux-image-[0-9]/ { print $2; exit }') &&
		apt-get download "$dep" >/dev/null 2>&1 && mkdir -p kernel && dpkg-deb -x linux-image-*.deb kernel)
fi
kernel=$(ls "$cache"/kernel/boot/vmlinuz-* | head -1)

# The initramfs: busybox, the build's programs, the scripts, the data, and
# every shared library they load (ldd), at their paths.
ird=$(mktemp -d)
trap 'rm -rf "$ird"' EXIT
mkdir -p "$ird"/{bin,sbin,proc,sys,dev,tmp,run,etc,cmwq}
cp "$(command -v busybox)" "$ird/bin/busybox"
for a in $("$ird/bin/busybox" --list); do [[ $a == busybox ]] || ln -sf busybox "$ird/bin/$a"; done
mkdir -p "$ird/cmwq/build"
for d in tests tools bench src; do
	[[ -d $build/$d ]] && (cd "$build" && find "$d" -maxdepth 1 -type f -perm -u+x -o -maxdepth 1 -name '*.so*' | cpio -pdm --quiet "$ird/cmwq/build")
done
cp -r "$root/scripts" "$root/data" "$ird/cmwq/"
# The test programs name their data by the source tree's path.
mkdir -p "$ird$root" && ln -s /cmwq/data "$ird$root/data"
find "$ird/cmwq/build" -type f -perm -u+x | while read -r f; do
	ldd "$f" 2>/dev/null | awk '/=> \// { print $3 } /^\t\/lib/ { print $1 }'
done | sort -u | while read -r lib; do
	mkdir -p "$ird$(dirname "$lib")"
	cp -L "$lib" "$ird$lib"
done
# The dynamic loader, wherever ldd named it.
for l in /lib64/ld-linux-x86-64.so.2; do
	[[ -e $l ]] && mkdir -p "$ird$(dirname "$l")" && cp -L "$l" "$ird$l"
done
cat >"$ird/init" <<EOF
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev 2>/dev/null
export PATH=/bin:/sbin LD_LIBRARY_PATH=/cmwq/build/src HOME=/tmp XDG_RUNTIME_DIR=/tmp CMWQ_IN_GUEST=1
cd /cmwq
echo "guest: \$(nproc) CPUs, \$(ls -d /sys/devices/system/node/node* | wc -l) nodes, kernel \$(uname -r)"
$command
echo "GUEST-EXIT: \$?"
poweroff -f
EOF
chmod +x "$ird/init"
(cd "$ird" && find . | cpio -o -H newc --quiet | gzip -1) >"$cache/initrd.gz"

numa=()
per=$((cpus / nodes))
for ((n = 0; n < nodes; n++)); do
	numa+=(-numa "node,nodeid=$n,cpus=$((n * per))-$((n * per + per - 1)),memdev=m$n"
		-object "memory-backend-ram,id=m$n,size=$((mem / nodes))M")
done
# SMT siblings: on an AMD host TCG's "max" model is AMD's, whose threads
# need topoext, which TCG does not emulate (qemu warns, the guest sees no
# siblings); with Intel's vendor the guest reads threads and the LLC from
# CPUID leaves 0xB and 4, which TCG does give.
cpu=max
((threads > 1)) && cpu=max,vendor=GenuineIntel
accel=(-accel tcg,thread=multi -cpu "$cpu")
if [[ ${CMWQ_GUEST_KVM:-0} == 1 && -w /dev/kvm ]]; then
	accel=(-accel kvm -cpu host,-arch-capabilities)
fi
log=$cache/console.log
start=$SECONDS
timeout "${CMWQ_GUEST_TIMEOUT:-1200}" qemu-system-x86_64 "${accel[@]}" -m "$mem" \
	-smp "$cpus,sockets=$nodes,cores=$cores,threads=$threads" "${numa[@]}" \
	-kernel "$kernel" -initrd "$cache/initrd.gz" \
	-append "console=ttyS0 quiet panic=-1 mitigations=off" \
	-nographic -no-reboot -serial mon:stdio </dev/null | tee "$log" || true
echo "guest.sh: ${cpus} vCPUs, ${nodes} nodes, ${threads} thread(s) per core: $((SECONDS - start)) s"
rc=$(sed -n 's/^GUEST-EXIT: \([0-9]*\).*/\1/p' "$log" | tail -1)
# 3: the guest never ran the checks (no boot, killed by the time limit).
[[ -n $rc ]] || { echo "guest.sh: the guest did not report an exit status (see $log)" >&2; exit 3; }
exit "$rc"
