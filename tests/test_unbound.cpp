// test_unbound.cpp - unbound workqueues on this machine's pods: items queued
// from each CPU go to the pool of that CPU's pod for every scope, strict
// scopes keep execution inside the pod, and changing the scope or the
// default scope under load loses, doubles or reorders nothing.
#include <gtest/gtest.h>

#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>
#include <cmwq/topology.hpp>

#include "engine.h"

#include <pthread.h>
#include <sched.h>

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
				if (strict)
					EXPECT_TRUE(std::count(want.begin(), want.end(), p.ran_on))
						<< "strict worker ran outside its pod on cpu " << p.ran_on;
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
