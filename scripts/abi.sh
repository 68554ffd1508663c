#!/usr/bin/env bash
# The shared library's ABI against the recorded baseline (abi/libcmwq.abi,
# written by libabigail's abidw from the last release's library).
#
#   bash scripts/abi.sh check LIB    fails when a public symbol was removed or
#                                    its type changed (added symbols pass),
#                                    unless abi/changes.supp records it
#   bash scripts/abi.sh update LIB   writes the baseline from LIB (at a release)
#
# LIB is libcmwq.so.X.Y.Z of a build with debug information (RelWithDebInfo
# or Debug): without it only symbol names can be compared, and the check
# refuses. abidw and abidiff come with Debian's abigail-tools.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
base=$root/abi/libcmwq.abi
supp=$root/abi/changes.supp
cmd=${1:-} lib=${2:-}
if [[ -z $lib || ! -f $lib ]] || [[ $cmd != check && $cmd != update ]]; then
	echo "usage: abi.sh check|update LIB (the built libcmwq.so.X.Y.Z)" >&2
	exit 2
fi
if ! readelf -S "$lib" | grep -q '\.debug_info'; then
	echo "abi.sh: $lib has no debug information; build with -DCMAKE_BUILD_TYPE=RelWithDebInfo" >&2
	exit 2
fi
if [[ $cmd == update ]]; then
	abidw --no-corpus-path --drop-undefined-syms --type-id-style hash --out-file "$base" "$lib"
	echo "abi.sh: $base written from $lib"
	exit 0
fi
rc=0
abidiff --no-added-syms --suppressions "$supp" "$base" "$lib" || rc=$?
# abidiff's status is a bit mask: 1 error, 2 usage, 4 an ABI change, 8 an
# incompatible one.
if ((rc & 3)); then
	echo "abi.sh: abidiff failed ($rc)" >&2
	exit 1
fi
if ((rc & 12)); then
	cat >&2 <<MSG
abi.sh: the public ABI changed against $base (report above).
A removed or changed symbol breaks programs built against the last release:
keep the old one (a moved declaration stays reachable from its old header
for a release, with a deprecation note), or, for an intended break, record
it in abi/changes.supp with why, and bump the SOVERSION at the release.
MSG
	exit 1
fi
echo "abi.sh: no removed or changed public symbol against $base"
