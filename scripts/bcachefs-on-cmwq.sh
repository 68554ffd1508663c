#!/usr/bin/env bash
# The drop-in acceptance run: bcachefs-tools, a C program that carries its
# own kernel shims, built twice from a copy the caller provides (this script
# fetches nothing): once as it is, once with its include/linux/workqueue.h
# and include/linux/timer.h replaced by two-line wrappers of cmwq's headers,
# its linux/workqueue.c and linux/timer.c removed, and a small glue file
# that installs cmwq thread hooks giving each cmwq thread the program's
# `current` and a liburcu registration (what its own thread start did).
# Then `bcachefs format` and `bcachefs fsck` on a sparse image file, each
# build, alternated, with the wall time and the threads each run used.
#
#   scripts/bcachefs-on-cmwq.sh SRC STAGE [ROUNDS]
#     SRC    an unpacked bcachefs-tools source tree whose Makefile has
#            NO_RUST (v1.3.x is known to work; see docs/porting.md)
#     STAGE  an installed cmwq (e.g. build/stage after scripts/test.sh)
#     ROUNDS format+fsck rounds per build (default 5)
# Needs: libaio-dev libblkid-dev uuid-dev liburcu-dev libsodium-dev
# zlib1g-dev liblz4-dev libzstd-dev libudev-dev libkeyutils-dev udev valgrind.
set -euo pipefail
src=$(cd "$1" && pwd)
stage=$(cd "$2" && pwd)
rounds=${3:-5}
work=${CMWQ_BCH_WORK:-/tmp/bcachefs-on-cmwq}
libdir=lib
[[ -d $stage/lib/pkgconfig ]] || libdir=$(cd "$stage" && ls -d lib/*/pkgconfig | head -1 | xargs dirname)
export PKG_CONFIG_PATH=$stage/$libdir/pkgconfig
rm -rf "$work" && mkdir -p "$work"
cp -a "$src" "$work/own"
cp -a "$src" "$work/cmwq"

cd "$work/cmwq"
printf '/* The workqueue is cmwq'"'"'s. */\n#include <cmwq/linux/workqueue.h>\n' >include/linux/workqueue.h
printf '/* Timers are cmwq'"'"'s. */\n#include <cmwq/linux/timer.h>\n' >include/linux/timer.h
rm -f linux/workqueue.c linux/timer.c
# The glue: cmwq's threads get what the program's own kthread start gave
# its threads: a task_struct in `current` and a liburcu registration.
cat >linux/cmwq_threads.c <<'GLUE'
#include <stdlib.h>
#include <string.h>

#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/sched/task.h>
#include <linux/workqueue.h>

static void cmwq_thread_start(enum cmwq_thread_kind kind, void *arg)
{
	struct task_struct *p = malloc(sizeof(*p));

	(void)kind;
	(void)arg;
	memset(p, 0, sizeof(*p));
	p->state = TASK_RUNNING;
	atomic_set(&p->usage, 1);
	init_completion(&p->exited);
	current = p;
	rcu_register_thread();
}

static void cmwq_thread_stop(enum cmwq_thread_kind kind, void *arg)
{
	(void)kind;
	(void)arg;
	rcu_unregister_thread();
	put_task_struct(current);
	current = NULL;
}

__attribute__((constructor(102)))
static void cmwq_threads_init(void)
{
	static const struct cmwq_thread_hooks hooks = {
		.start = cmwq_thread_start,
		.stop = cmwq_thread_stop,
	};

	cmwq_set_thread_hooks(&hooks);
}
GLUE

jobs=$(nproc)
for b in own cmwq; do
	cd "$work/$b"
	extra_c= extra_l=
	if [[ $b == cmwq ]]; then
		extra_c=$(pkg-config --cflags cmwq)
		extra_l=$(pkg-config --libs cmwq)
	fi
	start=$SECONDS
	make -j"$jobs" NO_RUST=1 VERSION=bcachefs-on-cmwq EXTRA_CFLAGS="$extra_c" EXTRA_LDLIBS="$extra_l" \
		bcachefs >"$work/$b.build.log" 2>&1 || { tail -30 "$work/$b.build.log"; exit 1; }
	echo "build $b: $((SECONDS - start)) s, $(grep -c '\[CC\]' "$work/$b.build.log") files compiled, $(grep -ci 'warning' "$work/$b.build.log") warnings"
done

export LD_LIBRARY_PATH=$stage/$libdir
# run NAME BUILD CMD...: wall time in ms, peak threads (from /proc while it
# runs), exit status, and stderr kept apart.
run() {
	local name=$1 b=$2
	shift 2
	local t0 t1 pid peak=0 n
	t0=$(date +%s%N)
	"$work/$b/bcachefs" "$@" >"$work/$b.$name.out" 2>"$work/$b.$name.err" &
	pid=$!
	while kill -0 "$pid" 2>/dev/null; do
		n=$(ls "/proc/$pid/task" 2>/dev/null | wc -l)
		((n > peak)) && peak=$n
		sleep 0.002
	done
	wait "$pid" && rc=0 || rc=$?
	t1=$(date +%s%N)
	printf '%-5s %-6s %7.1f ms  %3d threads  exit %d\n' "$b" "$name" "$(((t1 - t0) / 1000))e-3" "$peak" "$rc"
	((rc == 0)) || { cat "$work/$b.$name.err"; return 1; }
}
for ((r = 1; r <= rounds; r++)); do
	for b in own cmwq; do
		img=$work/$b.img
		rm -f "$img" && truncate -s 8G "$img"
		run format "$b" format -q "$img"
		run fsck "$b" fsck "$img"
	done
done
