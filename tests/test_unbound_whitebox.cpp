// test_unbound_whitebox.cpp - unbound workqueues on this machine's pods: items queued
// from each CPU go to the pool of that CPU's pod for every scope, strict
// scopes keep execution inside the pod, and changing the scope or the
// default scope under load loses, doubles or reorders nothing.
#include <gtest/gtest.h>

#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>
#include <cmwq/topology.hpp>

#include "engine/engine.h"
#include "test_util.hpp"

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace {

struct probe_item {
	work_struct work;
	std::vector<int> pod;     // pool pod seen by the worker
	int ran_on = -1;
	std::atomic<bool> done{false};
};

void probe_fn(work_struct *w)
{
	auto *p = container_of(w, probe_item, work);
	p->pod = cmwq::detail::tl_worker->pool->pod_cpus;
	p->ran_on = sched_getcpu();
	p->done = true;
}

void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof(set), &set), 0);
}

const wq_affn_scope scopes[] = {WQ_AFFN_CPU, WQ_AFFN_SMT, WQ_AFFN_CACHE, WQ_AFFN_CACHE_SHARD, WQ_AFFN_NUMA,
				WQ_AFFN_SYSTEM};

} // namespace

TEST(unbound, item_goes_to_the_pool_of_the_queueing_cpus_pod_for_every_scope)
{
	auto topo = cmwq::current_topology();
	auto *wq = alloc_workqueue("t_pods", WQ_UNBOUND, 0);
	auto *attrs = alloc_workqueue_attrs();
	for (auto scope : scopes) {
		for (bool strict : {false, true}) {
			attrs->affn_scope = scope;
			attrs->affn_strict = strict;
			ASSERT_EQ(apply_workqueue_attrs(wq, attrs), 0);
			const auto &pt = topo.scope(static_cast<cmwq::affinity_scope>(scope));
			for (int cpu : topo.usable) {
				probe_item p;
				INIT_WORK(&p.work, probe_fn);
				std::thread t([&] {
					pin(cpu);
					queue_work(wq, &p.work);
				});
				t.join();
				flush_work(&p.work);
				ASSERT_TRUE(p.done.load());
				auto want = pt.pod_cpus[static_cast<size_t>(pt.cpu_pod[static_cast<size_t>(cpu)])];
				EXPECT_EQ(p.pod, want) << "scope " << cmwq::scope_name(static_cast<cmwq::affinity_scope>(scope))
						       << " cpu " << cpu;
				if (strict) {
					EXPECT_TRUE(std::count(want.begin(), want.end(), p.ran_on))
						<< "strict worker ran outside its pod on cpu " << p.ran_on;
				}
			}
		}
	}
	free_workqueue_attrs(attrs);
	destroy_workqueue(wq);
}

namespace {
struct load_item {
	work_struct work;
	std::atomic<long> runs{0};
};
void load_fn(work_struct *w) { container_of(w, load_item, work)->runs++; }

std::mutex seq_mu;
std::vector<int> seq_seen;
struct seq_item {
	work_struct work;
	int idx;
};
void seq_fn(work_struct *w)
{
	std::lock_guard lk(seq_mu);
	seq_seen.push_back(container_of(w, seq_item, work)->idx);
}
} // namespace

TEST(unbound, scope_and_default_scope_changes_under_load_lose_nothing)
{
	auto *wq = alloc_workqueue("t_load", WQ_UNBOUND, 0);
	auto *ord = alloc_ordered_workqueue("t_load_ord", 0);
	std::vector<load_item> items(64);
	std::vector<std::atomic<long>> queued(items.size());
	for (auto &it : items)
		INIT_WORK(&it.work, load_fn);
	std::vector<seq_item> seq(2000);
	std::atomic<bool> stop{false};
	std::thread producer([&] {
		size_t i = 0, s = 0;
		while (!stop || s < seq.size()) {
			if (queue_work(wq, &items[i % items.size()].work))
				queued[i % items.size()]++;
			i++;
			if (s < seq.size()) {
				seq[s].idx = static_cast<int>(s);
				INIT_WORK(&seq[s].work, seq_fn);
				queue_work(ord, &seq[s].work);
				s++;
			}
		}
	});
	auto *attrs = alloc_workqueue_attrs();
	const char *names[] = {"cpu", "smt", "cache", "cache_shard", "numa", "system"};
	for (int round = 0; round < 12; round++) {
		attrs->affn_scope = scopes[round % 6];
		ASSERT_EQ(apply_workqueue_attrs(wq, attrs), 0);
		ASSERT_EQ(apply_workqueue_attrs(ord, attrs), 0);
		ASSERT_EQ(cmwq_param_set("workqueue.default_affinity_scope", names[(round + 3) % 6]), 0);
	}
	stop = true;
	producer.join();
	flush_workqueue(wq);
	flush_workqueue(ord);
	for (size_t k = 0; k < items.size(); k++)
		EXPECT_EQ(items[k].runs.load(), queued[k].load()) << "item " << k;
	ASSERT_EQ(seq_seen.size(), seq.size());
	for (size_t i = 0; i < seq.size(); i++)
		ASSERT_EQ(seq_seen[i], static_cast<int>(i));
	ASSERT_EQ(cmwq_param_set("workqueue.default_affinity_scope", "cache_shard"), 0);
	free_workqueue_attrs(attrs);
	destroy_workqueue(wq);
	destroy_workqueue(ord);
}

TEST(unbound, affinity_scope_reads_default_with_the_effective_scope)
{
	auto *wq = alloc_workqueue("t_sysfs_attr", WQ_UNBOUND | WQ_SYSFS, 0);
	char buf[128];
	ASSERT_EQ(cmwq_sysfs_get("t_sysfs_attr", "affinity_scope", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "default (cache_shard)");
	EXPECT_EQ(cmwq_sysfs_set("t_sysfs_attr", "affinity_scope", "cache_shar"), -EINVAL);
	EXPECT_EQ(cmwq_sysfs_set("t_sysfs_attr", "affinity_scope", "numa"), 0);
	ASSERT_EQ(cmwq_sysfs_get("t_sysfs_attr", "affinity_scope", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "numa");
	EXPECT_EQ(cmwq_sysfs_set("t_sysfs_attr", "nice", "20"), -EINVAL);
	ASSERT_EQ(cmwq_sysfs_get("t_sysfs_attr", "nice", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "0");
	destroy_workqueue(wq);
}

namespace {
// The CPUs in the calling thread's affinity mask, and the one CPU when
// there is exactly one (else -1).
int affinity_cpus(int *only)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	sched_getaffinity(0, sizeof(set), &set);
	int n = CPU_COUNT(&set);
	*only = -1;
	for (int c = 0; n == 1 && c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			*only = c;
	return n;
}

std::atomic<int> lw_affinity_cpus{0};  // CPUs in the item's affinity mask
std::atomic<int> lw_only_cpu{-1};      // the one CPU, when there is one
void lw_record(work_struct *)
{
	int only;
	lw_affinity_cpus = affinity_cpus(&only);
	lw_only_cpu = only;
}

// The first usable CPU of this process when it may use two or more, else -1.
int first_of_two_cpus()
{
	cpu_set_t mine;
	CPU_ZERO(&mine);
	sched_getaffinity(0, sizeof(mine), &mine);
	if (CPU_COUNT(&mine) < 2)
		return -1;
	int cpu = 0;
	while (!CPU_ISSET(cpu, &mine))
		cpu++;
	return cpu;
}

// Runs fn on a thread pinned to cpu.
template <typename F>
void on_cpu(int cpu, F fn)
{
	std::thread t([&] {
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		pthread_setaffinity_np(pthread_self(), sizeof(one), &one);
		fn();
	});
	t.join();
}

// Queue-and-wait round trips of w on wq from a thread pinned to cpu, each
// after the pool had time to go idle, until done() holds (at most 400).
template <typename F>
bool round_trips_until(workqueue_struct *wq, work_struct *w, int cpu, F done)
{
	bool seen = false;
	on_cpu(cpu, [&] {
		for (int i = 0; i < 400 && !seen; i++) {
			queue_work(wq, w);
			flush_work(w);
			seen = done();
			std::this_thread::sleep_for(std::chrono::milliseconds(2)); // let it go idle
		}
	});
	return seen;
}

struct burst_item {
	work_struct work;
	std::atomic<int> cpus{0};   // CPUs in the affinity mask it ran with
	std::atomic<int> only{-1};
	std::atomic<pid_t> tid{0};  // the worker that ran it
};
std::vector<burst_item> burst(64);
std::atomic<pid_t> seed_tid{0};
std::atomic<bool> seeded{false};
std::atomic<int> seed_cpu{-1};
workqueue_struct *burst_wq;

void burst_record(work_struct *w)
{
	auto *b = container_of(w, burst_item, work);
	int only;
	b->cpus = affinity_cpus(&only);
	b->only = only;
	b->tid = static_cast<pid_t>(gettid());
}

// A round-trip item that, the first time it runs narrowed to seed_cpu,
// queues the whole burst from its worker before it returns.
void seed_fn(work_struct *)
{
	int only;
	if (seeded.load() || affinity_cpus(&only) != 1 || only != seed_cpu.load())
		return;
	seed_tid = static_cast<pid_t>(gettid());
	for (auto &b : burst) {
		INIT_WORK(&b.work, burst_record);
		queue_work(burst_wq, &b.work);
	}
	seeded = true;
}

std::atomic<bool> gate_open{false}, gate_started{false};
void gate_fn(work_struct *)
{
	gate_started = true;
	while (!gate_open.load())
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
}
} // namespace

// cmwq.unbound_local_wake: an idle unbound pool given one item keeps the
// worker on the queueing CPU (its affinity narrowed to that CPU, inside the
// pod), and widens it again once the parameter is off. Round trips are
// repeated until the pool was idle at a queue call (the worker may still be
// finishing the previous one), so nothing here depends on timing.
TEST(unbound_local_wake, a_lone_items_worker_is_kept_on_the_queueing_cpu)
{
	int cpu = first_of_two_cpus();
	if (cpu < 0)
		GTEST_SKIP() << "needs two usable CPUs";
	workqueue_struct *wq = alloc_workqueue("t_local_wake", WQ_UNBOUND, 0);
	ASSERT_NE(wq, nullptr);
	work_struct w;
	INIT_WORK(&w, lw_record);
	char old[8];
	ASSERT_EQ(cmwq_param_get("cmwq.unbound_local_wake", old, sizeof(old)), 0);
	ASSERT_EQ(cmwq_param_set("cmwq.unbound_local_wake", "1"), 0);
	EXPECT_TRUE(round_trips_until(wq, &w, cpu,
				      [&] { return lw_affinity_cpus.load() == 1 && lw_only_cpu.load() == cpu; }))
		<< "the worker never ran narrowed to the producer's CPU " << cpu;
	ASSERT_EQ(cmwq_param_set("cmwq.unbound_local_wake", "0"), 0);
	EXPECT_TRUE(round_trips_until(wq, &w, cpu, [&] { return lw_affinity_cpus.load() >= 2; }))
		<< "with the parameter off the worker kept its narrowed affinity";
	ASSERT_EQ(cmwq_param_set("cmwq.unbound_local_wake", old), 0);
	destroy_workqueue(wq);
}

// Producers on two CPUs: one producer's lone item is kept on its CPU even
// while a worker runs the other's (the pool is not idle), and a kick that
// finds more than one item waiting leaves the picked worker's affinity as
// it is, so one or two items waiting by turns do not narrow and widen a
// worker per item. A narrowed worker that starts an item with two or more
// still waiting takes the pool's CPUs back, so a burst spreads: the burst
// is queued by a narrowed worker itself, and since workers take the
// worklist in order, every burst item that worker runs before the last two
// had at least two behind it when it started. Nothing depends on timing.
TEST(unbound_local_wake, a_lone_item_is_kept_local_beside_a_busy_worker_and_a_backlog_widens)
{
	int cpu = first_of_two_cpus();
	if (cpu < 0)
		GTEST_SKIP() << "needs two usable CPUs";
	burst_wq = alloc_workqueue("t_local_burst", WQ_UNBOUND, 0);
	ASSERT_NE(burst_wq, nullptr);
	ASSERT_EQ(cmwq_param_set("cmwq.unbound_local_wake", "1"), 0);

	work_struct gate, w;
	INIT_WORK(&gate, gate_fn);
	INIT_WORK(&w, lw_record);
	queue_work(burst_wq, &gate);
	ASSERT_TRUE(wait_until([] { return gate_started.load(); }));
	EXPECT_TRUE(round_trips_until(burst_wq, &w, cpu,
				      [&] { return lw_affinity_cpus.load() == 1 && lw_only_cpu.load() == cpu; }))
		<< "beside a busy worker, a lone item's worker never ran narrowed to CPU " << cpu;
	gate_open = true;
	flush_work(&gate);

	seed_cpu = cpu;
	work_struct seed;
	INIT_WORK(&seed, seed_fn);
	ASSERT_TRUE(round_trips_until(burst_wq, &seed, cpu, [] { return seeded.load(); }))
		<< "the seed item never ran narrowed to CPU " << cpu;
	flush_workqueue(burst_wq);
	int by_seeder = 0;
	for (size_t i = 0; i < burst.size(); i++) {
		ASSERT_NE(burst[i].tid.load(), 0) << "burst item " << i << " did not run";
		if (i + 2 < burst.size() && burst[i].tid.load() == seed_tid.load()) {
			by_seeder++;
			EXPECT_GE(burst[i].cpus.load(), 2)
				<< "burst item " << i << " ran narrowed to CPU " << burst[i].only.load()
				<< " by the narrowed worker that met the backlog";
		}
	}
	RecordProperty("burst_items_run_by_the_narrowed_worker", by_seeder);
	destroy_workqueue(burst_wq);
}

// The idle workers that watch their wake word before sleeping: one per pod
// CPU, the latest to go idle there. A watcher displaced by a newer one sees
// its slot gone (and stops), and its release leaves the newer one in
// place; a CPU outside the pod has no slot. With a count of watchers per
// pool instead, two watchers on one CPU that its other threads kept from
// running held every place, and the worker a kick from the other CPU
// picked slept (docs/benchmarks-history.md, "Which idle worker watches: the latest on each CPU").
TEST(unbound_idle_watch, the_latest_watcher_on_a_cpu_takes_its_slot)
{
	using cmwq::detail::watch_slots;
	watch_slots ws;
	ws.init({0, 2, 5});
	int a, b, c;
	EXPECT_EQ(ws.claim(&a, 1), nullptr) << "CPU 1 is not in the pod";
	EXPECT_EQ(ws.claim(&a, 6), nullptr) << "CPU 6 is not in the pod";
	EXPECT_EQ(ws.nr_held(), 0);
	watch_slots::slot *sa = ws.claim(&a, 2);
	ASSERT_NE(sa, nullptr);
	EXPECT_TRUE(watch_slots::held(sa, &a));
	watch_slots::slot *sc = ws.claim(&c, 5);
	ASSERT_NE(sc, nullptr);
	EXPECT_NE(sc, sa) << "two CPUs share a slot";
	EXPECT_EQ(ws.nr_held(), 2);
	watch_slots::slot *sb = ws.claim(&b, 2);
	EXPECT_EQ(sb, sa) << "one CPU, two slots";
	EXPECT_FALSE(watch_slots::held(sa, &a)) << "the displaced watcher still holds CPU 2";
	EXPECT_TRUE(watch_slots::held(sb, &b));
	watch_slots::release(sa, &a); // the displaced one stops
	EXPECT_TRUE(watch_slots::held(sb, &b)) << "the displaced watcher's release emptied the newer one's slot";
	EXPECT_EQ(ws.nr_held(), 2);
	watch_slots::release(sb, &b);
	EXPECT_FALSE(watch_slots::held(sb, &b));
	EXPECT_EQ(ws.nr_held(), 1);
	ws.clear();
	EXPECT_EQ(ws.nr_held(), 0);
	EXPECT_NE(ws.claim(&a, 0), nullptr);
}
