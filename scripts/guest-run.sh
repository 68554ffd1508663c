#!/bin/sh
# The checks run inside the guest of scripts/guest.sh (busybox sh), from
# /cmwq: the pods wq_dump reports for the guest's own sysfs against the
# pods the sysfs files give directly, the topology, unbound, guarantees,
# multinode and stress test programs, cache_shard pods per shard size, a
# short wq_bench over every scope, and the 2023
# regression's shape (max_active 8 fed from every CPU: never more than 8
# active, workers bounded), and CPU hotplug under load. Exit status 0 when
# every check passes.
B=/cmwq/build
fail=0
say() { echo "guest-run: $*"; }
bad() { echo "guest-run: FAIL: $*"; fail=1; }

# "0-2,5" -> "0,1,2,5"
expand() {
	echo "$1" | awk -F, '{ out = ""; for (i = 1; i <= NF; i++) { n = split($i, r, "-"); a = r[1]; b = n == 2 ? r[2] : r[1];
		for (c = a; c <= b; c++) out = out (out == "" ? "" : ",") c } print out }'
}

# The pods of a scope from the sysfs files alone, as wq_dump's JSON prints
# them: [a,b],[c,d] ordered by their lowest CPU.
sysfs_pods() {
	for d in /sys/devices/system/cpu/cpu[0-9]*; do
		c=${d##*cpu}
		[ -f "$d/online" ] && [ "$(cat "$d/online")" = 0 ] && continue
		case $1 in
		cpu) echo "$c" ;;
		smt) expand "$(cat "$d/topology/thread_siblings_list")" ;;
		cache)
			llc="" lvl=0
			for i in "$d"/cache/index*; do
				l=$(cat "$i/level")
				[ "$l" -ge "$lvl" ] && lvl=$l && llc=$i
			done
			expand "$(cat "$llc/shared_cpu_list")" ;;
		numa) expand "$(cat "$(ls -d "$d"/node* | head -1)/cpulist")" ;;
		system) expand "$(cat /sys/devices/system/cpu/online)" ;;
		esac
	done | sort -t, -k1,1n -u | awk '{ printf "%s[%s]", (NR > 1 ? "," : ""), $0 } END { print "" }'
}

say "topology of the guest:"
for d in /sys/devices/system/cpu/cpu0 /sys/devices/system/cpu/cpu$(($(nproc) - 1)); do
	say "  ${d##*/}: package $(cat "$d/topology/physical_package_id") core $(cat "$d/topology/core_id")" \
		"siblings $(cat "$d/topology/thread_siblings_list") llc $(cat "$d"/cache/index3/shared_cpu_list 2>/dev/null || echo none)"
done

"$B/tools/wq_dump" --json --topology-only >/tmp/dump.json || bad "wq_dump failed"
for scope in cpu smt cache numa system; do
	want=$(sysfs_pods $scope)
	got=$(sed -n "s/^  \"$scope\": \[\(.*\)\],\{0,1\}\$/\1/p" /tmp/dump.json)
	if [ "$want" = "$got" ]; then
		say "pods $scope: $(echo "$got" | awk -F'],' '{ print NF }') pods match sysfs"
	else
		bad "pods $scope: wq_dump [$got] but sysfs gives [$want]"
	fi
done
say "cache_shard pods: $(sed -n 's/^  "cache_shard": \[\(.*\)\],\{0,1\}$/\1/p' /tmp/dump.json)"

# cache_shard over shard sizes, as the kernel splits each LLC
# (precompute_cache_shard_ids): max(1, DIV_ROUND_CLOSEST(cores, size))
# shards an LLC, each inside its LLC, their sizes a core apart at most,
# every CPU in one shard.
llc=$(sysfs_pods cache)
tpc=$(expand "$(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list)" | awk -F, '{ print NF }')
for size in 1 2 4 8; do
	shards=$(CMWQ_PARAMS="workqueue.cache_shard_size=$size" "$B/tools/wq_dump" --json --topology-only |
		sed -n 's/^  "cache_shard": \[\(.*\)\],\{0,1\}$/\1/p')
	if r=$(echo "$llc|$shards|$size|$tpc" | awk -F'|' '
		function groups(s, g,   n, i, parts) {
			gsub(/^\[|\]$/, "", s); n = split(s, parts, /\],\[/)
			for (i = 1; i <= n; i++) g[i] = parts[i]
			return n
		}
		{
			nl = groups($1, L); ns = groups($2, S); size = $3; tpc = $4
			for (i = 1; i <= nl; i++) { m = split(L[i], c, ","); cpus[i] = m; for (j = 1; j <= m; j++) { llc_of[c[j]] = i; nc++ } }
			for (i = 1; i <= ns; i++) {
				m = split(S[i], c, ","); home = llc_of[c[1]]
				for (j = 1; j <= m; j++) { if (llc_of[c[j]] != home) { print "shard [" S[i] "] spans two LLCs"; exit 1 }
					if (seen[c[j]]++) { print "CPU " c[j] " in two shards"; exit 1 } }
				per[home]++; total += m
				if (!(home in lo) || m < lo[home]) lo[home] = m
				if (!(home in hi) || m > hi[home]) hi[home] = m
			}
			for (i = 1; i <= nl; i++) { cores = cpus[i] / tpc; w = int((cores + int(size / 2)) / size); if (w < 1) w = 1
				if (per[i] != w) { print "LLC " i " has " per[i] " shards, want " w; exit 1 }
				if (hi[i] - lo[i] > tpc) { print "LLC " i " has shards of " lo[i] " and " hi[i] " CPUs"; exit 1 } }
			if (total != nc) { print total " CPUs in shards of " nc; exit 1 }
			print ns " pods"
		}'); then
		say "cache_shard size $size: $r, round(cores/size) per LLC, each inside its LLC, balanced"
	else
		bad "cache_shard size $size: $r ([$shards] over LLCs [$llc])"
	fi
done

for t in test_topology test_unbound_whitebox test_guarantees test_multinode test_stress; do
	[ -x "$B/tests/$t" ] || { bad "$t not built"; continue; }
	env=""
	[ $t = test_multinode ] && env="CMWQ_SYSFS_ROOT=/cmwq/data/topologies/two-nodes-16/sys"
	if env $env CMWQ_PARAMS=cmwq.panic_on_warn=1 "$B/tests/$t" --gtest_brief=1 >/tmp/$t.log 2>&1; then
		say "$t: $(grep -a 'PASSED' /tmp/$t.log | tail -1)"
	else
		tail -30 /tmp/$t.log
		bad "$t"
	fi
done

if "$B/bench/wq_bench" --quick --scopes all --timeout "${CMWQ_GUEST_BENCH_TIMEOUT:-600}" >/tmp/bench.log 2>&1; then
	say "wq_bench --quick --scopes all: completed; workers per scope:"
	awk '/items\/sec/ { for (i = 1; i <= NF; i++) if ($i ~ /^workers=/) print "guest-run:   " $1 " " $i }' /tmp/bench.log
else
	tail -20 /tmp/bench.log
	bad "wq_bench --quick --scopes all"
fi

# The 2023 report's shape: an unbound workqueue with max_active 8 fed from
# a thread on every CPU of every node at once, within the kernel's node
# shares (min_active 8 by default: 8 per node; min_active 1: 8 in all).
if out=$("$B/tests/maxactive_target" 2>&1); then
	say "$out"
else
	echo "$out"
	bad "max_active 8 from every CPU"
fi
# CPU hotplug under load: three CPUs offline and back while items flow to
# every CPU (tests/targets/hotplug_target.cpp): nothing lost or doubled,
# the offline CPU's items still run, its workers bound to it again after.
# A returning CPU the scheduler did not take threads on yet is tried again
# (src/engine/hotplug.cpp); how often that happened is printed.
if out=$(CMWQ_HOTPLUG_REAL=1 "$B/tests/hotplug_target" 2>&1); then
	echo "$out" | grep -a '^hotplug_target' | sed 's/^/guest-run: /'
	echo "guest-run: hotplug: $(echo "$out" | grep -ac 'take no threads yet') returns waited for the CPU to take threads"
else
	echo "$out" | tail -30
	bad "CPU hotplug under load"
fi
exit $fail
