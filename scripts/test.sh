#!/usr/bin/env bash
# Sets up, builds, installs into <build>/stage and runs the whole test suite.
#
# The suite includes the installed-package checks of tests/test_install.cmake
# (pkg-config and find_package consumers of <build>/stage, the C API test,
# the USDT notes) and check_headers. This is the command README.md gives and
# .ci/run calls, so the two cannot diverge.
#
# Environment (all optional):
#   CMWQ_BUILD_DIR     build directory (default: build)
#   CMWQ_BUILD_TYPE    CMAKE_BUILD_TYPE (default: RelWithDebInfo)
#   CMWQ_CMAKE_ARGS    extra configure arguments, split on whitespace
#   CMWQ_JOBS          parallel build and test jobs (default: nproc)
#   CMWQ_TEST_TIMEOUT  per-test timeout in seconds (default: 60; tests that need
#                      longer say so with their own TIMEOUT)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build=${CMWQ_BUILD_DIR:-build}
jobs=${CMWQ_JOBS:-$(nproc)}
read -r -a extra <<<"${CMWQ_CMAKE_ARGS:-}"

bash scripts/setup.sh

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE="${CMWQ_BUILD_TYPE:-RelWithDebInfo}" "${extra[@]}"
cmake --build "$build" -j "$jobs"
cmake --install "$build" --prefix "$build/stage" >/dev/null
echo "test: installed into $build/stage"
ctest --test-dir "$build" --output-on-failure -j "$jobs" \
	--timeout "${CMWQ_TEST_TIMEOUT:-60}"
