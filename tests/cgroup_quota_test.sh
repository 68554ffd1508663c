#!/usr/bin/env bash
# A real cgroup with a CPU quota of half a CPU (cgroup v2 cpu.max, else v1
# cpu.cfs_quota_us): a process in it reads cmwq.cpu_quota=1 and a managed
# unbound workqueue runs one CPU-bound item at a time; the same program
# outside it (the control) runs one per usable CPU; raised to two CPUs while
# the program runs, the quota is followed (cmwq.cpu_quota=2, two at once).
# Root only, and only
# where a cgroup with the cpu controller can be made: otherwise it says why
# and exits 77 (ctest reports the test skipped).
#
#   cgroup_quota_test.sh QUOTA_TARGET
set -euo pipefail
prog=$1
skip() { echo "SKIP: $*"; exit 77; }
[[ $(id -u) -eq 0 ]] || skip "creating a cgroup needs root"
group=""
cleanup() { [[ -n $group ]] && rmdir "$group" 2>/dev/null || true; }
trap cleanup EXIT
name=cmwq_quota_test_$$
v2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
v1=$(awk '$3 == "cgroup" && $4 ~ /(^|,)cpu(,|$)/ { print $2; exit }' /proc/mounts)
if [[ -n $v2 ]] && grep -qw cpu "$v2/cgroup.controllers" 2>/dev/null; then
	grep -qw cpu "$v2/cgroup.subtree_control" || echo +cpu >"$v2/cgroup.subtree_control" 2>/dev/null ||
		skip "cannot enable the cpu controller under $v2"
	group=$v2/$name
	mkdir "$group" 2>/dev/null || { group=""; skip "cannot create a cgroup under $v2"; }
	echo "50000 100000" >"$group/cpu.max"
	raise() { echo "200000 100000" >"$group/cpu.max"; }
	kind="cgroup v2 cpu.max"
elif [[ -n $v1 ]]; then
	group=$v1/$name
	mkdir "$group" 2>/dev/null || { group=""; skip "cannot create a cgroup under $v1"; }
	echo 100000 >"$group/cpu.cfs_period_us"
	echo 50000 >"$group/cpu.cfs_quota_us"
	raise() { echo 200000 >"$group/cpu.cfs_quota_us"; }
	kind="cgroup v1 cpu.cfs_quota_us"
else
	skip "no cgroup hierarchy with the cpu controller is mounted"
fi
inside=$(sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2"' sh "$group" "$prog")
outside=$("$prog")
echo "in a group with a quota of half a CPU ($kind): $inside"
echo "outside it: $outside"
[[ $inside =~ cpu_quota=1\ peak=1\ done=60 ]] || { echo "FAIL: expected cpu_quota=1 peak=1 done=60 inside"; exit 1; }
[[ $outside =~ done=60 ]] || { echo "FAIL: the control did not run every item"; exit 1; }
# The control shows the bound could have been missed: outside, with no quota
# and two usable CPUs or more, two items run at once.
if [[ $outside =~ cpu_quota=0\ peak=([0-9]+) ]] && (( $(nproc) >= 2 )) && (( BASH_REMATCH[1] < 2 )); then
	echo "FAIL: outside the group only ${BASH_REMATCH[1]} item ran at a time: the check inside proves nothing"
	exit 1
fi
# Raised while the program runs: the library follows the new quota.
if (( $(nproc) >= 2 )); then
	out=$(mktemp)
	sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2" follow' sh "$group" "$prog" >"$out" &
	pid=$!
	for _ in $(seq 100); do
		[[ -s $out ]] && break
		sleep 0.1
	done
	raise
	wait "$pid" || true
	echo "quota raised to two CPUs while it ran: $(tr '\n' ' ' <"$out")"
	second=$(sed -n 2p "$out")
	rm -f "$out"
	[[ $second =~ cpu_quota=2\ peak=2\ done=60 ]] || { echo "FAIL: expected cpu_quota=2 peak=2 after the raise"; exit 1; }
fi
echo PASS
