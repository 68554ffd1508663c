#!/usr/bin/env bash
# Builds the Debian packages (CPack), installs them with apt, checks what a
# user of each gets, and removes them again: the packages CI stage.
#
#   bash scripts/debs.sh [BUILD_DIR]     (as root; default build-deb/)
#
# Checks: the files land under /usr with the multiarch libdir; a C program
# and a C++ one build from pkg-config alone and run; find_package(cmwq)
# works; the tools run and their man pages are found; removal leaves none of
# the files behind.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${1:-build-deb}
if [[ $(id -u) -ne 0 ]]; then
	echo "scripts/debs.sh: installs packages, so it runs as root" >&2
	exit 2
fi
rm -rf "$build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr -DCMWQ_BUILD_TESTS=OFF
cmake --build "$build" -j "$(nproc)"
(cd "$build" && cpack -G DEB)
debs=("$build"/libcmwq0_*.deb "$build"/libcmwq-dev_*.deb "$build"/cmwq-tools_*.deb)
for d in "${debs[@]}"; do
	dpkg-deb -I "$d" | sed -n 's/^ \(Package\|Version\|Depends\):/  \1:/p'
done
# lintian: every tag printed; errors fail the stage, except the placeholder
# maintainer address (CMWQ_PACKAGE_CONTACT sets a real one for publishing).
if command -v lintian > /dev/null; then
	lint=$(lintian --allow-root "${debs[@]}" 2>&1 || true)
	printf '%s\n' "$lint"
	if printf '%s\n' "$lint" | grep '^E: ' | grep -v 'bogus-mail-host' | grep -q .; then
		echo "scripts/debs.sh: lintian reports errors" >&2
		exit 1
	fi
fi
abs=()
for d in "${debs[@]}"; do abs+=("$(realpath "$d")"); done
apt-get install -y --no-install-recommends "${abs[@]}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "scripts/debs.sh: $*" >&2; exit 1; }

multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
[[ -e /usr/lib/$multiarch/libcmwq.so.0 ]] || fail "libcmwq0 did not install /usr/lib/$multiarch/libcmwq.so.0"
pkg-config --exists cmwq || fail "pkg-config does not find cmwq"
cc -std=c11 -Wall -Wextra -Werror examples/kernel_style.c $(pkg-config --cflags --libs cmwq) -o "$work/kernel_style"
"$work/kernel_style" > /dev/null || fail "kernel_style (built from pkg-config) failed"
c++ -std=c++20 -Wall -Wextra -Werror examples/cxx_fanout.cpp $(pkg-config --cflags --libs cmwq) -o "$work/cxx_fanout"
"$work/cxx_fanout" | grep -q "1 failed" || fail "cxx_fanout (built from pkg-config) failed"
cmake -S examples -B "$work/examples" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$work/examples" -j "$(nproc)" > /dev/null
ctest --test-dir "$work/examples" --output-on-failure > /dev/null || fail "examples/ with find_package(cmwq) failed"
wq_dump --topology-only > /dev/null || fail "wq_dump from cmwq-tools failed"
wqctl > /dev/null || fail "wqctl from cmwq-tools failed"
man -w wqctl > /dev/null || fail "man wqctl does not find the page"
for page in wq_dump.1 wq_monitor.1 wqctl.1 wq_bench.1 wq_exporter.1 cmwq.7; do
	[[ -e /usr/share/man/man${page##*.}/$page || -e /usr/share/man/man${page##*.}/$page.gz ]] ||
		fail "man page $page not installed"
done
echo "scripts/debs.sh: installed packages pass"

apt-get remove -y cmwq-tools libcmwq-dev libcmwq0 > /dev/null
for f in /usr/lib/$multiarch/libcmwq.so.0 /usr/include/cmwq/workqueue.hpp /usr/bin/wqctl; do
	[[ ! -e $f ]] || fail "$f is left after removal"
done
echo "scripts/debs.sh: built, installed, checked and removed ${#debs[@]} packages"
