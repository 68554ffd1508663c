#!/bin/sh
# Builds program.c against the cmwq installed under STAGE (pkg-config), as
# C11 and C++20, in both include orders, with the program's own timers and
# with cmwq's, under -Wall -Wextra -Werror; runs each and fails if a check
# fails or anything reaches stderr (the program expects an empty stderr).
#   run.sh STAGE LIBDIR CC CXX WORKDIR
set -eu
stage=$1 libdir=$2 cc=$3 cxx=$4 work=$5
here=$(cd "$(dirname "$0")" && pwd)
export PKG_CONFIG_PATH="$stage/$libdir/pkgconfig"
pkg-config --exists liburcu || { echo "SKIP: no liburcu (liburcu-dev)"; exit 77; }
flags="-Wall -Wextra -Werror $(pkg-config --cflags cmwq liburcu)"
libs="$(pkg-config --libs cmwq liburcu) -lpthread"
mkdir -p "$work"
fail=0
for timer in cmwq own; do
	inc="-I$here/include"
	def=
	if [ $timer = own ]; then
		inc="-I$here/own_timer $inc"
		def=-DOWN_TIMER
	fi
	for first in 0 1; do
		for lang in c11 cxx20; do
			exe="$work/program_${timer}_first${first}_$lang"
			if [ $lang = c11 ]; then
				cmd="$cc -std=gnu11 $inc $def -DCMWQ_FIRST=$first $flags $here/program.c $libs -o $exe"
			else
				cmd="$cxx -std=gnu++20 -x c++ $inc $def -DCMWQ_FIRST=$first $flags $here/program.c -x none $libs -o $exe"
			fi
			echo "$cmd"
			if ! $cmd; then
				echo "FAIL: build ($timer timers, cmwq first: $first, $lang)"
				fail=1
				continue
			fi
			if ! LD_LIBRARY_PATH="$stage/$libdir" "$exe" 2>"$exe.stderr"; then
				echo "FAIL: run ($timer timers, cmwq first: $first, $lang)"
				fail=1
			fi
			# What the library says of the host's topology (a VM without
			# cache information in sysfs) is about the machine, not the shims.
			grep -v '^cmwq: topology: ' "$exe.stderr" >"$exe.stderr.own" || true
			mv "$exe.stderr.own" "$exe.stderr"
			if [ -s "$exe.stderr" ]; then
				echo "FAIL: stderr not empty ($timer timers, cmwq first: $first, $lang):"
				cat "$exe.stderr"
				fail=1
			fi
		done
	done
done
exit $fail
