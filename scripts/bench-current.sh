#!/usr/bin/env bash
# Measures the current results of docs/benchmarks.md on this machine and
# rewrites the part of that page between its "results" markers: the machine,
# the commit, the date, and every table with the command that printed it.
# One sequence, one build (Release, in build-release/ unless CMWQ_BUILD_DIR
# says otherwise), nothing else running: a few minutes on 2 CPUs.
#
#   bash scripts/bench-current.sh            measure and rewrite the page
#   bash scripts/bench-current.sh --print    measure and print, page untouched
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
build=${CMWQ_BUILD_DIR:-build-release}
page=docs/benchmarks.md

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMWQ_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
bin=$build/bench/wq_bench
out=$(mktemp)

# section TITLE TEXT ARGS...: one table, its command as wq_bench prints it
# ($wrap, when set, runs it: the cgroup below).
wrap=()
section() {
	local title=$1 text=$2
	shift 2
	{
		printf '\n### %s\n\n%s\n\n```\n' "$title" "$text"
		"${wrap[@]}" "$bin" "$@" 2>&1 | sed -e '/^load average at the end/d'
		printf '```\n'
	} >>"$out"
}

# A cgroup with a quota of one CPU (v2 cpu.max, else v1), as a container's
# --cpus 1: root only; empty when none can be made.
quota_group=""
make_quota_group() {
	[[ $(id -u) -eq 0 ]] || return 0
	local v2 v1 name=cmwq_bench_quota_$$
	v2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
	v1=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpu(,|$)/ { print $2; exit }' /proc/mounts)
	if [[ -n $v2 ]] && grep -qw cpu "$v2/cgroup.controllers" 2>/dev/null &&
		{ grep -qw cpu "$v2/cgroup.subtree_control" || echo +cpu >"$v2/cgroup.subtree_control"; } 2>/dev/null &&
		mkdir "$v2/$name" 2>/dev/null; then
		quota_group=$v2/$name
		echo "100000 100000" >"$quota_group/cpu.max"
	elif [[ -n $v1 ]] && mkdir "$v1/$name" 2>/dev/null; then
		quota_group=$v1/$name
		echo 100000 >"$quota_group/cpu.cfs_period_us"
		echo 100000 >"$quota_group/cpu.cfs_quota_us"
	fi
}
trap 'rm -f "$out"; [[ -n $quota_group ]] && rmdir "$quota_group" 2>/dev/null; true' EXIT

model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
{
	echo "Measured $(date -u '+%Y-%m-%d %H:%M UTC') at commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- src bench include || echo ' (with uncommitted changes)')"
	echo "by \`bash scripts/bench-current.sh\`, one sequence, nothing else running:"
	echo
	echo "- ${model:-unknown CPU}, $(nproc) usable CPUs of $(getconf _NPROCESSORS_ONLN) online, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo),"
	echo "  Linux $(uname -r); $(${CXX:-c++} --version | head -1), Release build."
	echo "- Every row is a median of its runs with the range \`(max-min)/median\`; peers ran in"
	echo "  the same process and the same run, so compare ratios, not rows of different days."
} >"$out"

section "The kernel benchmark, every affinity scope" \
	"The kernel's \`test_workqueue\` protocol on an unbound workqueue, one row per scope (\`workers\`: threads that ran items; \`local\`: items run on the producer's CPU)." \
	--repeat 3
section "Beside the peers and the physical limits" \
	"The same protocol on every peer built in, each at its default size, and the futex and spinning hand-overs that bound it; \`ratio\` is the peer's throughput over cmwq's." \
	--scopes cache_shard,cpu --vs --repeat 3
section "Waking the worker after the pool lock is dropped (A/B)" \
	"Baseline wakes under the pool lock (\`cmwq.wake_under_lock=1\`, the order before the 2026 series), patched after dropping it; runs alternate." \
	--ab-wake --repeat 3
section "cache_shard size sweep" \
	"\`workqueue.cache_shard_size\` from 1 to 32 in the \`cache_shard\` scope; on a machine with one LLC of 2 CPUs every size above 1 is one pod." \
	--scopes cache_shard --shard-sizes 1,2,4,8,16,32 --repeat 3
section "Fan-out" \
	"One producer queues 1,000,000 tiny items and waits for all." \
	--protocol fanout --vs --repeat 3
section "Blocking items" \
	"200 items that sleep 1 ms each, with blocking hints and without; then every sizable peer at 32 threads (\`ratio\` is wall time, lower is faster)." \
	--protocol blocking --vs --repeat 3
section "One shared lock, max_active 8 vs 768 (the 2023 report)" \
	"20,000 items that each hold one shared \`std::mutex\` for 20 us, on an unbound workqueue with \`max_active\` 8 and 768." \
	--protocol regression --vs --repeat 3
section "The C++ task round trip" \
	"\`cmwq::task\` against the C API's queue-and-wait, alternated rounds." \
	--cxx --repeat 5

asio=$build/bench/wq_asio_bench
if [[ -x $asio ]]; then
	bin=$asio section "Asio's programs: the actor ring" \
		"Asio's actor example (examples/cpp11/executors/actor.cpp): 503 actors, each a strand over an \`any_io_executor\`, one token per actor, each hop a \`defer\` to the next actor; Asio's 16 x \`thread_pool(1)\` with consecutive blocks of 31 actors on one pool (as the example places them) and one \`thread_pool(N)\`; cmwq's executor over one workqueue of each kind, as one executor and as 16 (one in place of each of the example's pools, each with counters of its own; on a per-CPU workqueue each bound to a CPU with \`on_cpu\`, round robin), and the per-CPU 16 once more with \`cmwq.block_detect=sample\` (the blocked-worker detector sampling \`/proc\` instead of reacting to each context switch). The lines run in alternated rounds, each round starting one line further on; the best of each is printed, and in brackets the median over the rounds of its ratio to the first line's run in the same round." \
		--protocol actor --hops 5000000 --repeat 5
	bin=$asio section "Asio's programs: the actor ring, one token" \
		"The same ring with a single token: every hop waits for the last." \
		--protocol actor --tokens 1 --hops 1000000 --repeat 3
	bin=$asio section "Asio's programs: TCP echo" \
		"A TCP echo server on loopback (Asio's sockets, \`async_read_some\`/\`async_write\`), 8 blocking client threads x 20,000 round trips of 64 bytes; Asio's \`io_context\` run by N threads and \`thread_pool(N)\`, cmwq's executor (completions hop from Asio's reactor thread), then \`cmwq::asio::reactor\` (the reactor run by the workqueue's workers). Rounds as for the ring: the median of the rounds' ratios is the steadier figure here, where two runs of one line differ by up to 10%." \
		--protocol echo --repeat 9
fi

make_quota_group
if [[ -n $quota_group ]]; then
	wrap=(sh -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$quota_group")
	for mode in managed kernel; do
		section "In a container's CPU quota: one CPU of $(nproc), cmwq.unbound_concurrency=$mode" \
			"Run inside a cgroup with a quota of one CPU (as \`docker run --cpus 1\`), beside oneTBB and Asio in the same run; cmwq reads \`cmwq.cpu_quota=1\`, so a managed pool lets one worker run, the kernel mode lets the pod's." \
			--protocol kernel,fanout --scopes cache_shard --vs --peers tbb,asio --repeat 3 \
			--param cmwq.unbound_concurrency=$mode
	done
	wrap=()
else
	printf '\n(The CPU-quota tables need root and a cgroup with the cpu controller; not measured here.)\n' >>"$out"
fi
section "Idle wakeups after a burst" \
	"Each executor in its own process: 2000 items, a second to settle, then 20 s with nothing to do; the context switches of its threads, per minute (the kernel's workqueue wakes for its watchdog every 7.5 s)." \
	--idle-wakeups 20

if [[ ${1:-} == --print ]]; then
	cat "$out"
	exit 0
fi
python3 - "$page" "$out" <<'PY'
import sys
page, new = sys.argv[1], open(sys.argv[2]).read()
text = open(page).read()
begin, end = '<!-- results: written by scripts/bench-current.sh -->', '<!-- end of results -->'
i, j = text.index(begin) + len(begin), text.index(end)
open(page, 'w').write(text[:i] + '\n' + new.rstrip('\n') + '\n' + text[j:])
PY
echo "bench-current: $page rewritten"
