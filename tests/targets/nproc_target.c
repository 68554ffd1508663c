/*
 * nproc_target.c - a program run under a tight RLIMIT_NPROC (1 to 4
 * processes for its user) by tests/test_nproc.cmake: library threads then
 * fail to start with EAGAIN. It must never crash or abort: it queues plain,
 * delayed and WQ_MEM_RECLAIM work, waits a bounded time for each, reports
 * what ran, and exits 0.
 */
#include <cmwq/linux/workqueue.h>

#include <stdio.h>
#include <time.h>

static volatile int ran;
static void count_fn(struct work_struct *w)
{
	(void)w;
	__atomic_fetch_add(&ran, 1, __ATOMIC_RELAXED);
}

static void wait_for(int n)
{
	for (int i = 0; i < 100 && __atomic_load_n(&ran, __ATOMIC_RELAXED) < n; i++) {
		struct timespec ts = {0, 10 * 1000 * 1000};
		nanosleep(&ts, NULL);
	}
}

int main(void)
{
	static struct work_struct w;
	static struct delayed_work dw;
	INIT_WORK(&w, count_fn);
	INIT_DELAYED_WORK(&dw, count_fn);
	queue_work(system_dfl_wq, &w);
	wait_for(1);
	queue_delayed_work(system_percpu_wq, &dw, 1);
	wait_for(2);
	struct workqueue_struct *reclaim = alloc_workqueue("nproc_reclaim", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	printf("nproc_target: %d of 2 items ran; WQ_MEM_RECLAIM workqueue %s\n",
	       __atomic_load_n(&ran, __ATOMIC_RELAXED), reclaim ? "created" : "refused");
	return 0;
}
