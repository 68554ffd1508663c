/*
 * maxactive_target.cpp - the 2023 report's shape (700 kworkers on a
 * multi-node machine): an unbound workqueue with max_active 8 fed from a
 * thread pinned to every usable CPU at once, twice: with the default
 * min_active (8) and with min_active 1. max_active is system-wide for
 * unbound workqueues, enforced per node as the kernel's
 * wq_update_node_max_active does: node n may run
 * clamp(ceil(8 * its CPUs / CPUs), min_active, 8), so the whole workqueue
 * at most the sum of those (8 on one node; with the default floor of 8 per
 * node, 8 per node). Prints the peak and the bound, and the threads (not
 * one worker per queueing CPU). Run by CTest and in the many-CPU guest.
 */
#include <cmwq/linux/workqueue.h>
#include <cmwq/linux/cpumask.h>
#include <cmwq/topology.hpp>

#include <algorithm>
#include <map>

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
	int cpu = static_cast<int>(reinterpret_cast<long>(arg));
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	struct work_struct *ws = static_cast<struct work_struct *>(calloc(PER_CPU, sizeof(*ws)));
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

// The kernel's bound for max_active 8 and this min_active: the sum of the
// node shares.
static int node_bound(int min_active)
{
	cmwq::topology t = cmwq::current_topology();
	std::map<int, int> per_node;
	for (int c : t.usable)
		per_node[t.cpu_node[static_cast<size_t>(c)]]++;
	int total = static_cast<int>(t.usable.size()), sum = 0;
	for (auto &[node, n] : per_node)
		sum += std::clamp((8 * n + total - 1) / total, min_active, 8);
	return sum;
}

static int run(int min_active)
{
	active = peak = ran = threads_peak = 0;
	wq = alloc_workqueue("maxactive8_min%d", WQ_UNBOUND, 8, min_active);
	if (!wq)
		return 1;
	if (min_active != 8)
		workqueue_set_min_active(wq, min_active);
	int ncpu = 0, cpus[4096];
	const struct cpumask *usable = cmwq_usable_cpumask();
	for (unsigned c = 0; c < NR_CPUS && ncpu < 4096; c++)
		if (cpumask_test_cpu(c, usable))
			cpus[ncpu++] = (int)c;
	pthread_t *t = static_cast<pthread_t *>(calloc(static_cast<size_t>(ncpu), sizeof(*t)));
	for (int i = 0; i < ncpu; i++)
		pthread_create(&t[i], NULL, producer, reinterpret_cast<void *>(static_cast<long>(cpus[i])));
	void **ws = static_cast<void **>(calloc(static_cast<size_t>(ncpu), sizeof(*ws)));
	for (int i = 0; i < ncpu; i++)
		pthread_join(t[i], &ws[i]);
	flush_workqueue(wq);
	int threads = count_threads();
	int bound = node_bound(min_active);
	printf("maxactive_target: max_active 8, min_active %d: %d CPUs queued %d items, %d ran; peak active %d "
	       "(the node shares allow %d); threads at the peak of queueing %d, after %d\n",
	       min_active, ncpu, ncpu * PER_CPU, __atomic_load_n(&ran, __ATOMIC_RELAXED),
	       __atomic_load_n(&peak, __ATOMIC_RELAXED), bound, __atomic_load_n(&threads_peak, __ATOMIC_RELAXED),
	       threads);
	destroy_workqueue(wq);
	for (int i = 0; i < ncpu; i++)
		free(ws[i]);
	free(ws);
	free(t);
	return __atomic_load_n(&ran, __ATOMIC_RELAXED) == ncpu * PER_CPU && __atomic_load_n(&peak, __ATOMIC_RELAXED) <= bound
		       ? 0
		       : 1;
}

int main()
{
	int rc = run(8);
	return run(1) | rc;
}
