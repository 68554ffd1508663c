/*
 * quota_target.c - run by tests/cgroup_quota_test.sh inside a cgroup with a
 * CPU quota (and outside one, as the control): prints the quota the library
 * read (cmwq.cpu_quota, whole CPUs), then the most CPU-bound items a managed
 * unbound workqueue ran at once. Each item uses 2 ms of its thread's CPU
 * time, well below the hog threshold, so only the managed concurrency
 * bound decides how many run together. With the argument "follow" it then
 * waits (up to 40 s) for the library to notice a new quota, and runs the
 * items again.
 */
#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>

#include <stdio.h>
#include <string.h>
#include <time.h>

#define ITEMS 60

static int running, peak, done;

static long long thread_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void burn_fn(struct work_struct *w)
{
	(void)w;
	int now = __atomic_add_fetch(&running, 1, __ATOMIC_SEQ_CST);
	int p = __atomic_load_n(&peak, __ATOMIC_RELAXED);
	while (now > p && !__atomic_compare_exchange_n(&peak, &p, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	long long t0 = thread_ns();
	while (thread_ns() - t0 < 2000000)
		;
	__atomic_sub_fetch(&running, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&done, 1, __ATOMIC_SEQ_CST);
}

static void burst(struct workqueue_struct *wq, const char *quota)
{
	static struct work_struct items[ITEMS];
	__atomic_store_n(&peak, 0, __ATOMIC_SEQ_CST);
	__atomic_store_n(&done, 0, __ATOMIC_SEQ_CST);
	for (int i = 0; i < ITEMS; i++) {
		INIT_WORK(&items[i], burn_fn);
		queue_work(wq, &items[i]);
	}
	flush_workqueue(wq);
	printf("cpu_quota=%s peak=%d done=%d\n", quota, __atomic_load_n(&peak, __ATOMIC_RELAXED),
	       __atomic_load_n(&done, __ATOMIC_RELAXED));
	fflush(stdout);
}

int main(int argc, char **argv)
{
	char quota[32] = "?";
	if (cmwq_param_set("cmwq.unbound_concurrency", "managed") != 0) {
		fprintf(stderr, "quota_target: cmwq.unbound_concurrency=managed refused\n");
		return 1;
	}
	cmwq_param_get("cmwq.cpu_quota", quota, sizeof(quota));
	struct workqueue_struct *wq = alloc_workqueue("quota_managed", WQ_UNBOUND, 0);
	if (!wq)
		return 1;
	burst(wq, quota);
	if (argc > 1 && !strcmp(argv[1], "follow")) {
		char now[32] = "";
		for (int i = 0; i < 400; i++) {
			struct timespec ts = {0, 100 * 1000 * 1000};
			nanosleep(&ts, NULL);
			cmwq_param_get("cmwq.cpu_quota", now, sizeof(now));
			if (strcmp(now, quota))
				break;
		}
		burst(wq, now);
	}
	destroy_workqueue(wq);
	return 0;
}
