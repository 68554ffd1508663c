#!/usr/bin/env bash
# User-space instructions per operation of wq_asio_bench's lines, counted
# with valgrind's callgrind: deterministic where this machine's rates vary
# by 10% from run to run, so a change to the Asio adapter's code shows even
# when it is smaller than the noise of a timed run. Kernel time (most of an
# echo round trip) is not counted.
#
#   bash scripts/asio-instructions.sh [--protocol echo|actor] [--only TEXT] [BENCH] [-- BENCH-ARGS]
#
# Each line's count is the slope between two sizes (so start-up cancels
# out): the first line of the protocol (Asio's own pool) alone, then the
# first line with the one line matching TEXT (as wq_asio_bench's --only:
# contained in the label, or ending it when TEXT ends with $, as in
# "cmwq per-CPU, 16 executors$"). Under callgrind threads take
# turns and time runs about 50 times slower, so a reactor's runners give
# their items back more often than in a timed run (the library's share of
# the count is larger here), and how a ring's tokens meet varies from run
# to run: `-- --tokens 1` makes the actor ring's count repeat within 1%.
# BENCH: build-release/bench/wq_asio_bench.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
protocol=echo
only="unbound + reactor"
bench=build-release/bench/wq_asio_bench
extra=()
while [[ $# -gt 0 ]]; do
	case $1 in
	--protocol) protocol=$2; shift 2 ;;
	--only) only=$2; shift 2 ;;
	--) shift; extra=("$@"); break ;;
	-h | --help) sed -n '2,19p' "$0"; exit 0 ;;
	-*) echo "asio-instructions.sh: unknown option $1 (--protocol echo|actor, --only TEXT)" >&2; exit 2 ;;
	*) bench=$1; shift ;;
	esac
done
case $protocol in
echo) small=(--clients 2 --round-trips 1000) big=(--clients 2 --round-trips 4000) ops=6000 unit="round trip" ;;
actor) small=(--hops 100000) big=(--hops 400000) ops=300000 unit=hop ;;
*) echo "asio-instructions.sh: --protocol is echo or actor, not $protocol" >&2; exit 2 ;;
esac
command -v valgrind >/dev/null || { echo "asio-instructions.sh: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
[[ -x $bench ]] || { echo "asio-instructions.sh: no $bench (cmake --build build-release --target wq_asio_bench)" >&2; exit 2; }

# The lines a timed run with the same selection prints: the first and the
# selected one.
mapfile -t labels < <("$bench" --protocol "$protocol" --repeat 1 "${small[@]}" "${extra[@]}" --only "$only" | grep "^$protocol" |
	cut -c8-59 | sed 's/ *$//')
if [[ ${#labels[@]} -ne 2 ]]; then
	echo "asio-instructions.sh: --only \"$only\" must select one line of $protocol; it selects $((${#labels[@]} - 1))" >&2
	exit 2
fi
label=${labels[1]}

# ir ARGS...: the instructions of one run
ir() {
	valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bench" --protocol "$protocol" --repeat 1 "${extra[@]}" "$@" 2>&1 |
		sed -n 's/.*Collected : //p'
}
first_s=$(ir "${small[@]}" --only "(none)")
first_b=$(ir "${big[@]}" --only "(none)")
both_s=$(ir "${small[@]}" --only "$only")
both_b=$(ir "${big[@]}" --only "$only")
first=$(((first_b - first_s) / ops))
line=$(((both_b - both_s) / ops - first))
printf '%s: user instructions per %s (callgrind, %s vs %s)\n' "$protocol" "$unit" "${small[*]}" "${big[*]}"
printf '  %-52s %6d\n' "the first line (Asio's pool)" "$first"
printf '  %-52s %6d  %sx\n' "$label" "$line" "$(awk -v a="$line" -v b="$first" 'BEGIN { printf "%.2f", a / b }')"
