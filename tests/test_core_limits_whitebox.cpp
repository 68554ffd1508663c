// test_core_limits_whitebox.cpp - behaviour of the engine through the
// kernel-compatible API, continued from test_core_whitebox.cpp: max_active
// peaks, ordering across attribute changes, freeze/thaw, refusal of bad
// input, the counters, the C++ wrapper, a randomized stress test that
// accounts every execution, and the pool's batched wakeups.
// Bounds are about order and counts, never speed.
#include <gtest/gtest.h>

#include <cmwq/linux/delay.h>
#include <cmwq/linux/workqueue.h>
#include <cmwq/log.h>
#include <cmwq/params.h>
#include <cmwq/stats.h>
#include <cmwq/workqueue.hpp>

#include "engine/engine.h"
#include "core_test_util.hpp"
#include "test_util.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <chrono>
#include <filesystem>
#include <latch>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <unistd.h>

using namespace std::chrono_literals;
namespace d = cmwq::detail;

// ---- max_active and ordering ------------------------------------------------------

struct peak_probe {
	std::atomic<int> inside{0}, peak{0}, runs{0};
	void enter()
	{
		int in = ++inside;
		int m = peak.load();
		while (in > m && !peak.compare_exchange_weak(m, in)) {
		}
	}
};
static peak_probe probe;
static void peak_fn(work_struct *)
{
	probe.enter();
	msleep(5);
	probe.inside--;
	probe.runs++;
}

TEST(max_active, unbound_limit_is_system_wide)
{
	probe.peak = 0;
	probe.runs = 0;
	auto *wq = alloc_workqueue("t_max8", WQ_UNBOUND, 3);
	std::vector<work_struct> ws(40);
	for (auto &w : ws) {
		INIT_WORK(&w, peak_fn);
		queue_work(wq, &w);
	}
	flush_workqueue(wq);
	EXPECT_EQ(probe.runs.load(), 40);
	EXPECT_LE(probe.peak.load(), 3);
	EXPECT_GE(probe.peak.load(), 2);
	destroy_workqueue(wq);
}

TEST(max_active, percpu_limit_is_per_cpu)
{
	probe.peak = 0;
	probe.runs = 0;
	auto *wq = alloc_workqueue("t_pc2", WQ_PERCPU, 2);
	int cpu = cmwq::current_topology().usable.front();
	std::vector<work_struct> ws(12);
	for (auto &w : ws) {
		INIT_WORK(&w, peak_fn);
		queue_work_on(cpu, wq, &w);
	}
	flush_workqueue(wq);
	EXPECT_EQ(probe.runs.load(), 12);
	EXPECT_EQ(probe.peak.load(), 2); // msleep hints let a second one start
	destroy_workqueue(wq);
}

TEST(max_active, raising_the_limit_activates_waiting_items)
{
	probe.peak = 0;
	probe.runs = 0;
	auto *wq = alloc_workqueue("t_raise", WQ_UNBOUND, 1);
	std::vector<work_struct> ws(10);
	for (auto &w : ws) {
		INIT_WORK(&w, peak_fn);
		queue_work(wq, &w);
	}
	workqueue_set_max_active(wq, 4);
	flush_workqueue(wq);
	EXPECT_EQ(probe.runs.load(), 10);
	EXPECT_LE(probe.peak.load(), 4);
	destroy_workqueue(wq);
}

static std::vector<int> order_seen;
static std::mutex order_mu;
struct ordered_item {
	work_struct work;
	int idx;
};
static void order_fn(work_struct *w)
{
	probe.enter();
	{
		std::lock_guard lk(order_mu);
		order_seen.push_back(container_of(w, ordered_item, work)->idx);
	}
	probe.inside--;
}

TEST(ordered, runs_one_at_a_time_in_queue_order_across_attr_changes)
{
	probe.peak = 0;
	order_seen.clear();
	auto *wq = alloc_ordered_workqueue("t_ord", 0);
	std::vector<ordered_item> items(300);
	auto *attrs = alloc_workqueue_attrs();
	for (int i = 0; i < 300; i++) {
		items[i].idx = i;
		INIT_WORK(&items[i].work, order_fn);
		ASSERT_TRUE(queue_work(wq, &items[i].work));
		if (i % 50 == 25) {
			attrs->nice = (i / 50) % 2;
			ASSERT_EQ(apply_workqueue_attrs(wq, attrs), 0);
		}
	}
	flush_workqueue(wq);
	free_workqueue_attrs(attrs);
	ASSERT_EQ(order_seen.size(), 300u);
	for (int i = 0; i < 300; i++)
		EXPECT_EQ(order_seen[i], i);
	EXPECT_EQ(probe.peak.load(), 1);
	destroy_workqueue(wq);
}

TEST(freezer, frozen_queue_holds_new_items_until_thaw)
{
	auto *wq = alloc_workqueue("t_frz", WQ_UNBOUND | WQ_FREEZABLE, 0);
	counted c;
	INIT_WORK(&c.work, counted_fn);
	freeze_workqueues_begin();
	ASSERT_TRUE(queue_work(wq, &c.work));
	std::this_thread::sleep_for(50ms);
	EXPECT_EQ(c.runs.load(), 0);
	EXPECT_FALSE(freeze_workqueues_busy());
	thaw_workqueues();
	flush_workqueue(wq);
	EXPECT_EQ(c.runs.load(), 1);
	destroy_workqueue(wq);
}

TEST(validation, bad_flags_and_max_active_are_refused_or_clamped)
{
	EXPECT_EQ(alloc_workqueue("t_bh_bad", WQ_BH | WQ_UNBOUND, 0), nullptr);
	EXPECT_EQ(alloc_workqueue("t_bh_max", WQ_BH | WQ_PERCPU, 4), nullptr);
	EXPECT_EQ(alloc_workqueue("t_unknown", WQ_UNBOUND | (1u << 12), 0), nullptr);
	testing::internal::CaptureStderr();
	auto *wq = alloc_workqueue("t_clamp", WQ_UNBOUND | WQ_SYSFS, 100000);
	std::string err = testing::internal::GetCapturedStderr();
	ASSERT_NE(wq, nullptr);
	char buf[64];
	ASSERT_EQ(cmwq_sysfs_get("t_clamp", "max_active", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "2048") << "clamped to WQ_MAX_ACTIVE";
	EXPECT_NE(err.find("max_active 100000 requested for t_clamp is out of range, clamping between 1 and 2048"),
		  std::string::npos)
		<< err;
	destroy_workqueue(wq);
	auto *attrs = alloc_workqueue_attrs();
	attrs->nice = 40;
	EXPECT_EQ(apply_workqueue_attrs(system_percpu_wq, attrs), -EINVAL);
	EXPECT_EQ(apply_workqueue_attrs(system_dfl_wq, attrs), -EINVAL);
	free_workqueue_attrs(attrs);
}

TEST(counters, started_equals_completed_equals_items)
{
	auto *wq = alloc_workqueue("t_cnt", WQ_UNBOUND, 0);
	std::vector<counted> cs(100);
	for (auto &c : cs) {
		INIT_WORK(&c.work, counted_fn);
		queue_work(wq, &c.work);
	}
	flush_workqueue(wq);
	uint64_t st[PWQ_NR_STATS];
	cmwq_workqueue_stats(wq, st);
	EXPECT_EQ(st[PWQ_STAT_STARTED], 100u);
	EXPECT_EQ(st[PWQ_STAT_COMPLETED], 100u);
	destroy_workqueue(wq);
}

TEST(cpp_api, run_lambda_and_wait_and_raii_destroy)
{
	std::atomic<int> n{0};
	{
		cmwq::workqueue wq("t_cpp", WQ_UNBOUND, 4);
		auto h = cmwq::submit(wq, [&] { n += 1; });
		h.wait();
		EXPECT_TRUE(h.ready());
		cmwq::work w([&] { n += 10; });
		EXPECT_TRUE(wq.queue(w));
		cmwq::delayed_work dw([&] { n += 100; });
		EXPECT_TRUE(wq.queue(dw, 500ms));
		(void)dw.flush(); // may have run already between queueing and waiting
		(void)w.flush();
		EXPECT_FALSE(dw.pending());
	}
	EXPECT_EQ(n.load(), 111);
}

// ---- randomized stress: every successful queue is run or cancelled once ----------

struct stress_item {
	work_struct work;
	std::atomic<long> runs{0};
};
static void stress_fn(work_struct *w) { container_of(w, stress_item, work)->runs++; }

TEST(stress, no_lost_or_doubled_runs_under_random_operations)
{
	constexpr int nitems = 32;
	std::vector<stress_item> items(nitems);
	std::vector<std::atomic<long>> queued(nitems), cancelled(nitems);
	for (auto &it : items)
		INIT_WORK(&it.work, stress_fn);
	workqueue_struct *wqs[3] = {alloc_workqueue("s_pc", WQ_PERCPU, 4), alloc_workqueue("s_ub", WQ_UNBOUND, 3),
				    alloc_ordered_workqueue("s_ord", 0)};
	std::atomic<bool> stop{false};
	std::vector<std::thread> ts;
	for (int t = 0; t < 4; t++)
		ts.emplace_back([&, t] {
			std::mt19937 rng(static_cast<unsigned>(t) * 7919u + 1);
			for (int i = 0; i < 3000 && !stop; i++) {
				int k = static_cast<int>(rng() % nitems);
				// each item stays on one workqueue (non-reentrancy contract)
				workqueue_struct *wq = wqs[k % 3];
				switch (rng() % 8) {
				case 0: case 1: case 2: case 3:
					if (queue_work(wq, &items[k].work))
						queued[k]++;
					break;
				case 4:
					if (cancel_work(&items[k].work))
						cancelled[k]++;
					break;
				case 5:
					if (cancel_work_sync(&items[k].work))
						cancelled[k]++;
					break;
				case 6: flush_work(&items[k].work); break;
				case 7:
					if (k % 3 != 2 && rng() % 16 == 0)
						workqueue_set_max_active(wq, 1 + static_cast<int>(rng() % 6));
					break;
				}
			}
		});
	for (auto &t : ts)
		t.join();
	for (auto *wq : wqs)
		destroy_workqueue(wq);
	for (int k = 0; k < nitems; k++)
		EXPECT_EQ(queued[k].load(), items[k].runs.load() + cancelled[k].load()) << "item " << k;
}

// Bug caught: a wakeup dropped when one locked batch picks more workers than
// the deferred batch holds (MAX_DEFERRED_WAKES; kick_pool wakes the rest at
// once). Whitebox: six pools, each with an idle worker, kicked into one
// deferred batch. A wake that is never delivered keeps its pin.
TEST(wake, more_picks_than_the_deferred_batch_holds_are_all_woken)
{
	using namespace cmwq::detail;
	constexpr int n = MAX_DEFERRED_WAKES + 2;
	std::vector<workqueue_struct *> wqs;
	std::vector<worker_pool *> pools;
	int cpu0 = g().usable.front();
	for (int i = 0; i < n; i++) {
		workqueue_struct *wq = alloc_workqueue("t_wake%d", WQ_UNBOUND, 0, i);
		ASSERT_NE(wq, nullptr);
		workqueue_attrs *a = alloc_workqueue_attrs();
		a->nice = 11 + i; // pools of their own
		a->affn_scope = WQ_AFFN_SYSTEM;
		ASSERT_EQ(apply_workqueue_attrs(wq, a), 0);
		free_workqueue_attrs(a);
		work_struct w;
		INIT_WORK(&w, plain_fn);
		queue_work(wq, &w);
		flush_work(&w);
		wqs.push_back(wq);
		pools.push_back(pwq_pool(wq->cpu_pwq[static_cast<size_t>(cpu0)].load()));
	}
	// Every worker idle: the one that ran the item may still be on its way
	// back when flush_work returns (slow under emulation), and a second
	// worker may have been started to keep one idle. A kick then finds the
	// pool busy or a worker returning, and picks nobody.
	auto idle = [](worker_pool *p) {
		lock_guard lk(p->lock);
		return p->nr_idle > 0 && p->nr_idle == p->nr_workers && p->nr_running == 0 &&
		       p->nr_returning.load() == 0;
	};
	for (auto *p : pools)
		ASSERT_TRUE(wait_until([&] { return idle(p); }));
	deferred d;
	std::vector<work_struct> dummy(n);
	std::vector<worker *> picked;
	for (int i = 0; i < n; i++) {
		worker_pool *p = pools[static_cast<size_t>(i)];
		lock_guard lk(p->lock);
		cmwq_init_work_fields(&dummy[static_cast<size_t>(i)], plain_fn);
		list_add_tail(&dummy[static_cast<size_t>(i)].entry, &p->worklist); // makes the pool need a worker
		EXPECT_TRUE(kick_pool(p, d));
		worker *w = nullptr;
		for (list_head *e = p->idle_list.next; e != &p->idle_list; e = e->next)
			if (container_of(e, worker, entry)->kicked)
				w = container_of(e, worker, entry);
		list_del_init(&dummy[static_cast<size_t>(i)].entry); // gone before any worker can look
		EXPECT_NE(w, nullptr) << "pool " << i << " picked no idle worker";
		if (w)
			picked.push_back(w);
	}
	EXPECT_EQ(d.nr_wake, MAX_DEFERRED_WAKES);
	d.run();
	for (worker *w : picked)
		EXPECT_TRUE(wait_until([&] { return w->pins.load() == 0; })) << "a picked worker was never woken";
	for (auto *wq : wqs)
		destroy_workqueue(wq);
}
