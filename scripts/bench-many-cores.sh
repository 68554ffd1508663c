#!/usr/bin/env bash
# The many-core benchmark set behind docs/benchmarks-history.md "16 CPUs": what a
# 2-CPU machine cannot show (16 producers contending across scopes, the
# shard-size sweep with shards of more than one CPU, the pod layout of a
# 16-CPU snapshot). Runs already-built binaries, so it can run on a machine
# that has no compiler or packages:
#
#   bash scripts/bench-many-cores.sh BIN_DIR OUT_DIR [ITEMS] [REPEAT]
#
# BIN_DIR holds wq_bench and wq_dump (or is a build tree's bench/, with
# wq_dump in ../tools); shared libraries they need when they are not
# installed go in BIN_DIR/../lib. Every step's command is
# echoed into OUT_DIR/log.txt beside its output; each JSON object goes to
# OUT_DIR/<step>.json.
set -uo pipefail
bin=${1:?BIN_DIR}
out=${2:?OUT_DIR}
items=${3:-50000}
repeat=${4:-3}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$out"
export LD_LIBRARY_PATH="$bin/../lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
log=$out/log.txt

step() { # step NAME SECONDS COMMAND...
	local name=$1 limit=$2
	shift 2
	{
		echo
		echo "== $name ($(date -u +%FT%TZ)): $*"
	} | tee -a "$log"
	local t0=$SECONDS
	timeout "$limit" "$@" 2>&1 | tee -a "$log"
	echo "-- $name: rc=${PIPESTATUS[0]} in $((SECONDS - t0)) s" | tee -a "$log"
}

{
	echo "machine: $(nproc) usable CPUs of $(getconf _NPROCESSORS_CONF)," \
		"$(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)," \
		"kernel $(uname -r)"
	grep -m1 'model name' /proc/cpuinfo
	grep -m1 -o 'hypervisor' /proc/cpuinfo || true
	echo "load: $(cat /proc/loadavg)"
} | tee "$log"

dump=$bin/wq_dump
[[ -x $dump ]] || dump=$bin/../tools/wq_dump
step wq_dump 30 "$dump"
"$dump" --json >"$out/wq_dump.json" 2>/dev/null

step kernel_vs 240 "$bin/wq_bench" --scopes all --items "$items" \
	--repeat "$repeat" --vs --json-out "$out/kernel_vs.json"
step percpu 60 "$bin/wq_bench" --percpu --items "$items" \
	--repeat "$repeat" --json-out "$out/percpu.json"
step shard_sweep 120 "$bin/wq_bench" --scopes cache_shard --items "$items" \
	--shard-sizes 1,2,4,8,16 --repeat "$repeat" --json-out "$out/shard_sweep.json"
step ab_wake 120 "$bin/wq_bench" --scopes all --items "$items" --ab-wake --repeat "$repeat" \
	--json-out "$out/ab_wake.json"
# One process per protocol, blocking first: threads left idle by an earlier
# protocol (the unbound fan-out's workers) would count in its thread peak.
for p in blocking fanout regression; do
	step "$p" 120 "$bin/wq_bench" --protocol "$p" --repeat "$repeat" --vs \
		--json-out "$out/$p.json"
done
if [[ -d $here/data/topologies/two-nodes-16/sys ]]; then
	step two_nodes_16 120 "$bin/wq_bench" --scopes all --items "$items" \
		--sysfs-root "$here/data/topologies/two-nodes-16/sys" \
		--json-out "$out/two_nodes_16.json"
fi
echo "load at the end: $(cat /proc/loadavg)" | tee -a "$log"
