#!/bin/sh
# exporter_test.sh - wq_exporter end to end: ctl_target (a cmwq process with
# its control endpoint) in a private XDG_RUNTIME_DIR, wq_exporter on a free
# port, scraped with curl in both formats and read back with the Prometheus
# client library's parsers (Debian python3-prometheus-client).
#
# usage: exporter_test.sh CTL_TARGET WQ_EXPORTER
# Exit 77 (skipped) without curl or the parsers.
set -u
target=$1
exporter=$2
py=/usr/bin/python3
command -v curl >/dev/null 2>&1 || { echo "curl not found: skipped"; exit 77; }
if ! [ -x $py ] || ! $py -c 'import prometheus_client.openmetrics.parser' 2>/dev/null; then
	echo "python3-prometheus-client not found: skipped"
	exit 77
fi

tmp=$(mktemp -d /tmp/cmwq-exporter-test.XXXXXX) || exit 1
export XDG_RUNTIME_DIR="$tmp"
tpid= epid=
cleanup() {
	for p in $epid $tpid; do
		kill -TERM "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$target" >"$tmp/target.out" 2>"$tmp/target.err" &
tpid=$!
i=0
until grep -q '^ready ' "$tmp/target.out" 2>/dev/null; do
	i=$((i + 1))
	[ $i -le 600 ] && kill -0 "$tpid" 2>/dev/null || fail "ctl_target did not become ready"
	sleep 0.1
done

"$exporter" --listen 127.0.0.1:0 >"$tmp/exp.out" 2>"$tmp/exp.err" &
epid=$!
i=0
until grep -q 'listening on' "$tmp/exp.out" 2>/dev/null; do
	i=$((i + 1))
	[ $i -le 300 ] && kill -0 "$epid" 2>/dev/null || fail "wq_exporter did not start: $(cat "$tmp/exp.err")"
	sleep 0.1
done
url="http://$(sed -n 's/.*listening on //p' "$tmp/exp.out")/metrics"

# OpenMetrics when asked for, with its content type.
curl -sf -D "$tmp/h1" -H 'Accept: application/openmetrics-text; version=1.0.0,text/plain;q=0.5' "$url" \
	>"$tmp/om" || fail "scrape failed"
grep -qi '^content-type: application/openmetrics-text; version=1.0.0; charset=utf-8' "$tmp/h1" ||
	fail "OpenMetrics content type: $(grep -i content-type "$tmp/h1")"
# The Prometheus text format otherwise.
curl -sf -D "$tmp/h2" "$url" >"$tmp/p4" || fail "scrape failed"
grep -qi '^content-type: text/plain; version=0.0.4; charset=utf-8' "$tmp/h2" ||
	fail "0.0.4 content type: $(grep -i content-type "$tmp/h2")"

$py - "$tmp/om" "$tmp/p4" "$tpid" <<'PY' || fail "the parsers refused the scrape or it lacks ctl_target"
import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families as om_parse
from prometheus_client.parser import text_string_to_metric_families as p4_parse
om, p4, pid = open(sys.argv[1]).read(), open(sys.argv[2]).read(), sys.argv[3]
for name, parse, text in (("openmetrics", om_parse, om), ("0.0.4", p4_parse, p4)):
    found = odd = False
    for fam in parse(text):
        for s in fam.samples:
            if s.labels.get("pid") == pid and s.labels.get("process") == "ctl_target":
                wq = s.labels.get("workqueue", "")
                if s.name == "cmwq_workqueue_started_total" and wq == "ctl_target_unbound" and s.value > 0:
                    found = True
                if wq == "ctl_target_odd\ufffd\nx":
                    odd = True
    if not (found and odd):
        print(name, "found", found, "odd name", odd)
        sys.exit(1)
PY
echo "wq_exporter: both formats parse, ctl_target's counters and odd name present"
