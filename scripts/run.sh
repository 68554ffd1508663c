#!/usr/bin/env bash
# The main job: sets up, builds Release and, on this machine, runs wq_bench
# briefly over every affinity scope, then wq_dump.
#
# The human tables go to the terminal; the JSON of both, and the benchmark's
# plot, are kept under <build>/results/. Tests are not built here
# (scripts/test.sh does that).
#
# Environment (all optional):
#   CMWQ_BUILD_DIR     build directory (default: build-release)
#   CMWQ_BENCH_ITEMS   measured items per producer (default: 20000)
#   CMWQ_BENCH_ARGS    extra wq_bench arguments, split on whitespace
#   CMWQ_JOBS          parallel build jobs (default: nproc)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=${CMWQ_BUILD_DIR:-build-release}
jobs=${CMWQ_JOBS:-$(nproc)}
items=${CMWQ_BENCH_ITEMS:-20000}
read -r -a extra <<<"${CMWQ_BENCH_ARGS:-}"

bash scripts/setup.sh

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMWQ_BUILD_TESTS=OFF
cmake --build "$build" -j "$jobs"
results=$build/results
mkdir -p "$results"

echo
echo "== wq_bench: $items items per producer, every affinity scope"
"$build/bench/wq_bench" --items "$items" --scopes all "${extra[@]}" \
	--json-out "$results/wq_bench.json"

if [[ -f bench/plot.sh ]]; then
	sh bench/plot.sh -o "$results" "$results/wq_bench.json"
fi

echo
echo "== wq_dump"
"$build/tools/wq_dump"
"$build/tools/wq_dump" --json >"$results/wq_dump.json"
echo
echo "results: $results/"
