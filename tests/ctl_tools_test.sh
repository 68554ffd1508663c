#!/bin/sh
# ctl_tools_test.sh - end-to-end tests of wqctl and wq_monitor against
# ctl_target, each run in a private XDG_RUNTIME_DIR.
#
# usage: ctl_tools_test.sh wqctl|wq_monitor CTL_TARGET WQCTL WQ_MONITOR
set -u

mode=$1
target=$2
wqctl=$3
monitor=$4

tmp=$(mktemp -d /tmp/cmwq-tools-test.XXXXXX) || exit 1
export XDG_RUNTIME_DIR="$tmp"
pid=
failures=0

cleanup() {
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}

# expect_rc RC CMD...: runs CMD, stdout to $tmp/o, stderr to $tmp/e.
expect_rc() {
	want=$1
	shift
	"$@" >"$tmp/o" 2>"$tmp/e"
	got=$?
	if [ "$got" -ne "$want" ]; then
		fail "exit $got (expected $want): $*"
		sed 's/^/  stdout: /' "$tmp/o" >&2
		sed 's/^/  stderr: /' "$tmp/e" >&2
		return 1
	fi
	return 0
}

# expect_out TEXT: $tmp/o is exactly TEXT.
expect_out() {
	out=$(cat "$tmp/o")
	[ "$out" = "$1" ] || fail "output '$out' (expected '$1')"
}

# expect_grep FILE PATTERN (fixed string)
expect_grep() {
	grep -q -F -- "$2" "$1" || { fail "'$2' not found in $(basename "$1")"; sed 's/^/  | /' "$1" >&2; }
}

"$target" 120 >"$tmp/target.out" 2>"$tmp/target.err" &
pid=$!
i=0
while ! grep -q '^ready ' "$tmp/target.out" 2>/dev/null; do
	i=$((i + 1))
	if [ $i -gt 600 ] || ! kill -0 "$pid" 2>/dev/null; then
		echo "FAIL: ctl_target did not become ready" >&2
		cat "$tmp/target.err" >&2
		exit 1
	fi
	sleep 0.1
done
sock=$(sed -n 's/^ready //p' "$tmp/target.out")
[ "$sock" = "$tmp/cmwq/$pid.sock" ] || fail "socket path $sock"

case "$mode" in
wqctl)
	expect_rc 0 "$wqctl" --help && expect_grep "$tmp/o" "usage: wqctl"
	expect_rc 0 "$wqctl" && expect_grep "$tmp/o" "ctl_target"
	grep -q "^$pid " "$tmp/o" || fail "pid $pid not listed"

	expect_rc 0 "$wqctl" "$pid" ls
	expect_grep "$tmp/o" ctl_target_unbound
	expect_grep "$tmp/o" ctl_target_percpu

	expect_rc 0 "$wqctl" "$pid" get ctl_target_unbound per_cpu && expect_out 0
	expect_rc 0 "$wqctl" "$pid" get ctl_target_percpu per_cpu && expect_out 1
	expect_rc 0 "$wqctl" "$pid" set ctl_target_unbound nice 5
	expect_rc 0 "$wqctl" "$pid" get ctl_target_unbound nice && expect_out 5
	expect_rc 0 "$wqctl" "$pid" set ctl_target_unbound affinity_scope numa
	expect_rc 0 "$wqctl" "$pid" get ctl_target_unbound affinity_scope && expect_out numa
	expect_rc 0 "$wqctl" "$pid" set ctl_target_percpu max_active 8
	expect_rc 0 "$wqctl" "$pid" get ctl_target_percpu max_active && expect_out 8

	expect_rc 1 "$wqctl" "$pid" set ctl_target_unbound affinity_scope cach &&
		expect_grep "$tmp/e" "EINVAL affinity_scope: accepted values are default, cpu, smt, cache, cache_shard, numa, system"
	expect_rc 1 "$wqctl" "$pid" set ctl_target_unbound nice 99 && expect_grep "$tmp/e" "EINVAL nice"
	expect_rc 0 "$wqctl" "$pid" get ctl_target_unbound nice && expect_out 5
	expect_rc 1 "$wqctl" "$pid" set ctl_target_unbound per_cpu 1 && expect_grep "$tmp/e" "EACCES"
	expect_rc 1 "$wqctl" "$pid" get no_such_wq nice && expect_grep "$tmp/e" "ENOENT"
	expect_rc 1 "$wqctl" "$pid" get ctl_target_percpu nice && expect_grep "$tmp/e" "ENOENT"

	expect_rc 0 "$wqctl" "$pid" get - cpumask
	[ -s "$tmp/o" ] || fail "empty global cpumask"

	expect_rc 0 "$wqctl" "$pid" params && expect_grep "$tmp/o" "default_affinity_scope="
	expect_rc 0 "$wqctl" "$pid" param default_affinity_scope
	[ -s "$tmp/o" ] || fail "empty default_affinity_scope"
	expect_rc 1 "$wqctl" "$pid" param no.such.param && expect_grep "$tmp/e" "ENOENT"

	expect_rc 0 "$wqctl" "$pid" dump
	expect_rc 0 "$wqctl" "$pid" metrics
	expect_grep "$tmp/o" 'cmwq_workqueue_started_total{workqueue="ctl_target_unbound"}'
	expect_grep "$tmp/o" "# TYPE cmwq_pool_workers gauge"
	[ "$(tail -n 1 "$tmp/o")" = "# EOF" ] || fail "metrics does not end with # EOF"
	expect_rc 0 "$wqctl" "$pid" stats && expect_grep "$tmp/o" " name=ctl_target_percpu"

	expect_rc 0 "$wqctl" "$sock" ls && expect_grep "$tmp/o" ctl_target_unbound

	expect_rc 2 "$wqctl" "$pid"
	expect_rc 2 "$wqctl" "$pid" frob
	expect_rc 2 "$wqctl" "$pid" get ctl_target_unbound
	expect_rc 2 "$wqctl" not-a-pid ls
	expect_rc 2 "$wqctl" --bogus && expect_grep "$tmp/e" "unknown option '--bogus'"
	expect_rc 2 "$wqctl" --timeout && expect_grep "$tmp/e" "timeout"
	expect_rc 3 "$wqctl" 999999999 ls
	;;
wq_monitor)
	expect_rc 0 "$monitor" --help
	for col in total infl CPUtime CPUitsv CMW/RPR mayday rescued; do
		expect_grep "$tmp/o" "$col"
	done

	expect_rc 0 "$monitor" "$pid" --interval 0 'ctl_target_(unbound|percpu)'
	expect_grep "$tmp/o" "CMW/RPR"
	[ "$(grep -c '^ctl_target_' "$tmp/o")" -eq 2 ] || fail "expected 2 rows"
	# The unbound one shows '-' for CPUitsv, mayday and rescued; the
	# per-CPU one has WQ_MEM_RECLAIM, so numbers.
	awk '$1 == "ctl_target_unbound" { exit !($5 == "-" && $7 == "-" && $8 == "-" && $2 >= 20) }' \
		"$tmp/o" || fail "unbound row: $(grep ctl_target_unbound "$tmp/o")"
	awk '$1 == "ctl_target_percpu" { exit !($5 != "-" && $7 != "-" && $8 != "-" && $2 >= 20) }' \
		"$tmp/o" || fail "per-CPU row: $(grep ctl_target_percpu "$tmp/o")"

	expect_rc 0 "$monitor" -i 0.2 -c 3 "$pid" 'unbound$'
	[ "$(grep -c 'CMW/RPR' "$tmp/o")" -eq 3 ] || fail "expected 3 headers"
	[ "$(grep -c '^ctl_target_unbound ' "$tmp/o")" -eq 3 ] || fail "expected 3 rows"
	grep -q percpu "$tmp/o" && fail "regex filter let ctl_target_percpu through"

	expect_rc 0 "$monitor" --json --interval 0.2 --count 3 "$pid" ctl_target_unbound
	[ "$(wc -l <"$tmp/o")" -eq 3 ] || fail "expected 3 JSON lines"
	for key in timestamp name unbound mem_reclaim started completed cpu_time \
		cpu_intensive cm_wakeup repatriated mayday rescued; do
		[ "$(grep -c "\"$key\": " "$tmp/o")" -eq 3 ] || fail "JSON key $key"
	done
	expect_grep "$tmp/o" '"name": "ctl_target_unbound", "unbound": true, "mem_reclaim": false'
	# Running totals never go down.
	sed 's/.*"started": \([0-9]*\).*/\1/' "$tmp/o" |
		awk 'NR > 1 && $1 < prev { exit 1 } { prev = $1 }' || fail "started went down"
	if command -v python3 >/dev/null 2>&1; then
		python3 -c 'import json,sys; [json.loads(l) for l in sys.stdin]' <"$tmp/o" ||
			fail "invalid JSON"
	fi

	# Non-UTF-8 bytes become U+FFFD and a line break stays one: valid JSON.
	expect_rc 0 "$monitor" --json -i 0 "$pid" ctl_target_odd
	if command -v python3 >/dev/null 2>&1; then
		python3 -c 'import json,sys
names = [json.loads(l)["name"] for l in sys.stdin]
sys.exit(0 if names == ["ctl_target_odd\ufffd\nx"] else 1)' <"$tmp/o" ||
			fail "odd name not carried as valid JSON: $(cat "$tmp/o")"
	fi

	expect_rc 2 "$monitor"
	expect_rc 2 "$monitor" "$pid" '('
	expect_rc 2 "$monitor" --interval -1 "$pid"
	expect_rc 3 "$monitor" 999999999
	;;
*)
	echo "unknown mode $mode" >&2
	exit 2
	;;
esac

# The socket goes away with the process.
kill -TERM "$pid"
wait "$pid"
rc=$?
[ "$rc" -eq 0 ] || fail "ctl_target exited with $rc: $(cat "$tmp/target.err")"
pid=
[ -e "$sock" ] && fail "socket $sock left behind after exit"
if [ "$mode" = wqctl ]; then
	expect_rc 0 "$wqctl"
	grep -q "ctl_target" "$tmp/o" && fail "exited process still listed"
fi

if [ "$failures" -ne 0 ]; then
	echo "$failures failure(s)" >&2
	exit 1
fi
echo "ok: $mode"
exit 0
