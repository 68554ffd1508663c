/*
 * maxactive_target.c - the 2023 report's shape (700 kworkers on a
 * multi-node machine): an unbound workqueue with max_active 8 fed from a
 * thread pinned to every usable CPU at once. Prints the most items active
 * at once (never more than 8: max_active is system-wide for unbound
 * workqueues), how many CPUs' nodes ran items, and the process's threads
 * at the peak (bounded: not one worker per queueing CPU). Run on the host
 * by CTest and inside the many-CPU guest (scripts/guest-run.sh).
 */
#define _GNU_SOURCE
#include <cmwq/linux/workqueue.h>
#include <cmwq/linux/cpumask.h>

#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define PER_CPU 200

static int active, peak, ran, threads_peak;
static struct workqueue_struct *wq;

static int count_threads(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

static void item_fn(struct work_struct *w)
{
	(void)w;
	int now = __atomic_add_fetch(&active, 1, __ATOMIC_SEQ_CST);
	int p = __atomic_load_n(&peak, __ATOMIC_RELAXED);
	while (now > p && !__atomic_compare_exchange_n(&peak, &p, now, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	struct timespec ts = {0, 200 * 1000}; /* 200 us: items overlap */
	nanosleep(&ts, NULL);
	__atomic_sub_fetch(&active, 1, __ATOMIC_SEQ_CST);
	__atomic_add_fetch(&ran, 1, __ATOMIC_SEQ_CST);
}

static void *producer(void *arg)
{
	int cpu = (int)(long)arg;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	struct work_struct *ws = calloc(PER_CPU, sizeof(*ws));
	for (int i = 0; i < PER_CPU; i++) {
		INIT_WORK(&ws[i], item_fn);
		queue_work(wq, &ws[i]);
	}
	int t = count_threads();
	int p = __atomic_load_n(&threads_peak, __ATOMIC_RELAXED);
	while (t > p && !__atomic_compare_exchange_n(&threads_peak, &p, t, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
		;
	return ws;
}

int main(void)
{
	wq = alloc_workqueue("maxactive8", WQ_UNBOUND, 8);
	if (!wq)
		return 1;
	int ncpu = 0, cpus[4096];
	const struct cpumask *usable = cmwq_usable_cpumask();
	for (unsigned c = 0; c < NR_CPUS && ncpu < 4096; c++)
		if (cpumask_test_cpu(c, usable))
			cpus[ncpu++] = (int)c;
	pthread_t *t = calloc((size_t)ncpu, sizeof(*t));
	for (int i = 0; i < ncpu; i++)
		pthread_create(&t[i], NULL, producer, (void *)(long)cpus[i]);
	void **ws = calloc((size_t)ncpu, sizeof(*ws));
	for (int i = 0; i < ncpu; i++)
		pthread_join(t[i], &ws[i]);
	flush_workqueue(wq);
	int threads = count_threads();
	printf("maxactive_target: %d CPUs queued %d items, %d ran; peak active %d (max_active 8); "
	       "threads at the peak of queueing %d, after %d\n",
	       ncpu, ncpu * PER_CPU, __atomic_load_n(&ran, __ATOMIC_RELAXED), __atomic_load_n(&peak, __ATOMIC_RELAXED),
	       __atomic_load_n(&threads_peak, __ATOMIC_RELAXED), threads);
	destroy_workqueue(wq);
	for (int i = 0; i < ncpu; i++)
		free(ws[i]);
	int ok = __atomic_load_n(&ran, __ATOMIC_RELAXED) == ncpu * PER_CPU && __atomic_load_n(&peak, __ATOMIC_RELAXED) <= 8;
	return ok ? 0 : 1;
}
