#!/bin/sh
# bench/plot.sh - render wq_bench --json output as PNG plots (gnuplot + jq).
#
# usage: bench/plot.sh [-o OUTDIR] RESULT.json...
#   OUTDIR defaults to docs/img. Each file contributes the sections it holds;
#   a later file's section replaces an earlier one's. Plots written:
#     wq_bench_scopes.png    kernel protocol: items/sec and queue-call p50/p95 per scope
#     wq_bench_peers.png     kernel protocol: cmwq, each peer and the limits (items/sec)
#     wq_bench_ab_wake.png   baseline (wake under lock) vs patched, per scope
#     wq_bench_shard.png     cache_shard size sweep: items/sec, p50 and pods
#     wq_bench_fanout.png    fan-out: items/sec per implementation
#     wq_bench_blocking.png  blocking: each item's sleep on a timeline (--timeline)
#     wq_bench_regression.png regression: items/sec and peak active items
# Needs gnuplot (Debian: gnuplot-nox) and jq.
set -eu

out=docs/img
while getopts o:h opt; do
	case $opt in
	o) out=$OPTARG ;;
	h) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: bench/plot.sh [-o OUTDIR] RESULT.json..." >&2; exit 2; }
for tool in gnuplot jq; do
	command -v $tool >/dev/null 2>&1 || { echo "plot.sh: $tool not found (apt-get install gnuplot-nox jq)" >&2; exit 2; }
done
mkdir -p "$out"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Pick, for each section, the last file that has it.
for f in "$@"; do
	jq -e . "$f" >/dev/null || { echo "plot.sh: $f is not JSON" >&2; exit 2; }
	for s in results peers ab_wake shard_sweep fanout blocking regression; do
		if [ "$(jq "(.$s // []) | length" "$f")" -gt 0 ]; then
			cp "$f" "$tmp/$s.json"
		fi
	done
done

style='set terminal pngcairo noenhanced size 900,520 font "DejaVu Sans,10"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set grid ytics lc rgb "#dddddd"
set key top right
set xtics nomirror
set ytics nomirror
set offsets 0, 0, graph 0.1, 0
set bmargin 6'

title() { # file -> "command | machine | date", for the second title line
	jq -r '"\(.command)  |  \(.machine.model), CPUs \(.machine.usable_cpus)  |  \(.machine.date)"' "$1"
}

if [ -f "$tmp/results.json" ]; then
	f=$tmp/results.json
	jq -r '.results[] | select(.ok) | "\(.scope) \(.items_per_sec) \(.p50_ns) \(.p95_ns) \(.items_per_sec_min) \(.items_per_sec_max)"' "$f" >"$tmp/scopes.dat"
	gnuplot <<EOF
$style
set output "$out/wq_bench_scopes.png"
set multiplot layout 1,2 title "kernel protocol per affinity scope"
set label 99 "$(title "$f")" at screen 0.01,0.015 font ",7"
set title "throughput"
set ylabel "items/sec"
set format y "%.1s%c"
set yrange [0:*]
set xtics rotate by 30 right
plot "$tmp/scopes.dat" using 2:xtic(1) title "median" lc rgb "#3b7dd8", \
     "" using 0:2:5:6 with yerrorbars lc rgb "black" pt -1 title "min-max"
set title "queue-call latency"
set key above
set ylabel "ns"
plot "$tmp/scopes.dat" using 3:xtic(1) title "p50" lc rgb "#3b7dd8", \
     "" using 4 title "p95" lc rgb "#e8913a"
unset multiplot
EOF
	echo "$out/wq_bench_scopes.png"
fi

if [ -f "$tmp/peers.json" ]; then
	f=$tmp/peers.json
	{
		jq -r '.results[] | select(.ok) | "\"cmwq \(.scope)\" \(.items_per_sec) \(.rt_p50_ns)"' "$f"
		jq -r '.peers[] | select(.ok) | "\"\(.impl)\" \(.items_per_sec) \(.rt_p50_ns)"' "$f"
	} >"$tmp/peers.dat"
	gnuplot <<EOF
$style
set output "$out/wq_bench_peers.png"
set terminal pngcairo noenhanced size 900,560 font "DejaVu Sans,10"
set title "kernel protocol: cmwq, peers and the physical limits"
set label 99 "$(title "$f")" at screen 0.01,0.015 font ",7"
set ylabel "items/sec"
set format y "%.1s%c"
set y2label "round trip p50 (us)"
set y2tics
set yrange [0:*]
set y2range [0:*]
set xtics rotate by 30 right
set bmargin 11
set key above
plot "$tmp/peers.dat" using 2:xtic(1) title "items/sec" lc rgb "#3b7dd8", \
     "" using 0:(\$3/1000) axes x1y2 with points pt 7 ps 1.3 lc rgb "#c0392b" title "round trip p50"
EOF
	echo "$out/wq_bench_peers.png"
fi

if [ -f "$tmp/ab_wake.json" ]; then
	f=$tmp/ab_wake.json
	jq -r '.ab_wake[] | select(.ok) | "\(.scope) \(.baseline_items_per_sec) \(.patched_items_per_sec) \(.gain_pct)"' "$f" >"$tmp/ab.dat"
	gnuplot <<EOF
$style
set output "$out/wq_bench_ab_wake.png"
set title "wake under the pool lock (baseline) vs after it (patched)"
set label 99 "$(title "$f")" at screen 0.01,0.015 font ",7"
set ylabel "items/sec"
set format y "%.1s%c"
set yrange [0:*]
plot "$tmp/ab.dat" using 2:xtic(1) title "baseline (cmwq.wake_under_lock=1)" lc rgb "#999999", \
     "" using 3 title "patched (=0)" lc rgb "#3b7dd8", \
     "" using 0:3:(sprintf("%+.0f%%", \$4)) with labels offset 2.2,0.7 notitle
EOF
	echo "$out/wq_bench_ab_wake.png"
fi

if [ -f "$tmp/shard_sweep.json" ]; then
	f=$tmp/shard_sweep.json
	jq -r '.shard_sweep[] | select(.ok) | "\(.shard_size) \(.items_per_sec) \(.p50_ns) \(.pods) \(.workers)"' "$f" >"$tmp/shard.dat"
	gnuplot <<EOF
$style
set output "$out/wq_bench_shard.png"
set title "cache_shard size sweep (workqueue.cache_shard_size)"
set label 99 "$(title "$f")" at screen 0.01,0.015 font ",7"
set xlabel "cache_shard_size (cores per shard); label: pods / workers"
set ylabel "items/sec"
set format y "%.1s%c"
set y2label "queue-call p50 (ns)"
set y2tics
set yrange [0:*]
set y2range [0:*]
plot "$tmp/shard.dat" using 2:xtic(1) title "items/sec" lc rgb "#3b7dd8", \
     "" using 0:3 axes x1y2 with linespoints pt 7 lc rgb "#c0392b" title "p50", \
     "" using 0:2:(sprintf("%d / %d", \$4, \$5)) with labels offset 0,0.8 notitle
EOF
	echo "$out/wq_bench_shard.png"
fi

if [ -f "$tmp/fanout.json" ]; then
	f=$tmp/fanout.json
	jq -r '.fanout[] | select(.ok) | "\"\(if .impl == "cmwq" then "cmwq (\(.workqueue))" else .impl end)\" \(.items_per_sec) \(.ns_per_queue)"' "$f" >"$tmp/fanout.dat"
	gnuplot <<EOF
$style
set output "$out/wq_bench_fanout.png"
set title "fan-out: one producer, then wait for all"
set label 99 "$(title "$f")" at screen 0.01,0.015 font ",7"
set ylabel "items/sec"
set format y "%.1s%c"
set y2label "ns per queue call"
set y2tics
set yrange [0:*]
set y2range [0:*]
set xtics rotate by 30 right
set bmargin 8
set key above
plot "$tmp/fanout.dat" using 2:xtic(1) title "items/sec" lc rgb "#3b7dd8", \
     "" using 0:3 axes x1y2 with points pt 7 ps 1.3 lc rgb "#c0392b" title "ns per queue call"
EOF
	echo "$out/wq_bench_fanout.png"
fi

if [ -f "$tmp/blocking.json" ] && [ "$(jq '[.blocking[] | select(.timeline_us)] | length' "$tmp/blocking.json")" -gt 0 ]; then
	f=$tmp/blocking.json
	n=$(jq '[.blocking[] | select(.timeline_us)] | length' "$f")
	i=0
	plots=""
	colors="#3b7dd8 #c0392b #27ae60 #8e44ad #e67e22 #16a085 #7f8c8d"
	while [ $i -lt "$n" ]; do
		jq -r "[.blocking[] | select(.timeline_us)][$i] | .timeline_us | to_entries[] | \"\(.value[0] / 1000) \(.key) \((.value[1] - .value[0]) / 1000)\"" "$f" >"$tmp/tl$i.dat"
		label=$(jq -r "[.blocking[] | select(.timeline_us)][$i] | \"\(if .impl == \"cmwq\" then \"cmwq \(.wq // \"percpu\"), hints \(.hints)\" else .impl end): \(.wall_ms) ms, \(.peak_threads) threads\"" "$f")
		c=$(echo $colors | cut -d' ' -f$((i % 7 + 1)))
		plots="$plots${plots:+, }\"$tmp/tl$i.dat\" using 1:(\$2 + $i * 0.15):3:(0) with vectors nohead lw 1 lc rgb \"$c\" title \"$label\""
		i=$((i + 1))
	done
	gnuplot <<EOF
set terminal pngcairo noenhanced size 900,560 font "DejaVu Sans,10"
set output "$out/wq_bench_blocking.png"
set title "blocking: each item's sleep, from its start to its end"
set label 99 "$(title "$f")" at screen 0.01,0.015 font ",7"
set xlabel "ms since the first queue call"
set ylabel "item"
set bmargin 6
set grid xtics lc rgb "#dddddd"
set key bottom right
set xrange [0:*]
plot $plots
EOF
	echo "$out/wq_bench_blocking.png"
fi

if [ -f "$tmp/regression.json" ]; then
	f=$tmp/regression.json
	jq -r '.regression[] | select(.ok) | "\"\(if .impl == "cmwq" then "cmwq max_active \(.max_active)" else .impl end)\" \(.items_per_sec) \(.peak_active)"' "$f" >"$tmp/regr.dat"
	gnuplot <<EOF
$style
set output "$out/wq_bench_regression.png"
set title "items on one shared lock (the 2023 max_active report)"
set label 99 "$(title "$f")" at screen 0.01,0.015 font ",7"
set ylabel "items/sec"
set format y "%.1s%c"
set y2label "peak active items"
set y2tics
set yrange [0:*]
set y2range [0:*]
set xtics rotate by 30 right
set bmargin 8
set key above
plot "$tmp/regr.dat" using 2:xtic(1) title "items/sec" lc rgb "#3b7dd8", \
     "" using 0:3 axes x1y2 with points pt 7 ps 1.3 lc rgb "#c0392b" title "peak active"
EOF
	echo "$out/wq_bench_regression.png"
fi
