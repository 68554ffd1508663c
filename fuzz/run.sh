#!/bin/sh
# run.sh - build the libFuzzer targets with clang and run each for a bounded
# time (CI). Usage: fuzz/run.sh [SECONDS] (default 60; env FUZZ_TIME too).
# Builds in build-fuzz/ (env FUZZ_BUILD_DIR) and grows a working corpus
# there, seeded from fuzz/corpus/; the seeds in the tree are not modified.
# Exit status: non-zero if the build fails or a crash is found (the
# reproducer is left in the build directory and named on stderr).
set -eu

src=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-${FUZZ_TIME:-60}}
build=${FUZZ_BUILD_DIR:-$src/build-fuzz}
jobs=${FUZZ_JOBS:-2}

cmake -S "$src" -B "$build" \
	-DCMAKE_C_COMPILER="${CC:-clang}" -DCMAKE_CXX_COMPILER="${CXX:-clang++}" \
	-DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMWQ_BUILD_FUZZ=ON \
	-DCMWQ_BUILD_TESTS=OFF -DCMWQ_BUILD_TOOLS=OFF -DCMWQ_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target fuzz_control

for target in control; do
	work="$build/fuzz/corpus-$target"
	mkdir -p "$work" "$build/fuzz/artifacts"
	"$build/fuzz/fuzz_$target" "$work" "$src/fuzz/corpus/$target" \
		-dict="$src/fuzz/$target.dict" -max_len=9000 -max_total_time="$secs" \
		-artifact_prefix="$build/fuzz/artifacts/$target-" -print_final_stats=1
done
