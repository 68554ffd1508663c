// test_core_whitebox.cpp - behaviour of the engine through the kernel-compatible API:
// the policy predicates without threads, the PENDING state machine, one
// suite run over per-CPU, unbound and ordered workqueues (max_active,
// ordering, freezing and stress: test_core_limits_whitebox.cpp).
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

#include <sched.h>
#include <unistd.h>

using namespace std::chrono_literals;
namespace d = cmwq::detail;

// ---- the pool lock ---------------------------------------------------------------

// Bugs caught in pool_mutex: two holders at once (a lost update of the
// plain counter), or a sleeper never woken (the test hangs). Some holders
// sleep while holding it, so waiters take the futex path, not only the spin.
TEST(pool_mutex, excludes_and_wakes_sleepers_under_contention)
{
	d::pool_mutex m;
	long counter = 0; // guarded by m, deliberately not atomic
	constexpr int threads = 4, rounds = 20000;
	std::vector<std::thread> ts;
	for (int t = 0; t < threads; t++)
		ts.emplace_back([&, t] {
			for (int i = 0; i < rounds; i++) {
				if ((i + t) % 2000 == 0) {
					m.lock();
					long v = counter;
					std::this_thread::sleep_for(200us);
					counter = v + 1;
					m.unlock();
				} else if (i % 7 == 0) {
					while (!m.try_lock())
						std::this_thread::yield();
					counter++;
					m.unlock();
				} else {
					m.lock();
					counter++;
					m.unlock();
				}
			}
		});
	for (auto &t : ts)
		t.join();
	EXPECT_EQ(counter, long(threads) * rounds);
}

// ---- run-time checks ------------------------------------------------------------

// The kernel's WARN_ON_ONCE sanity checks and lockdep_assert_held fire in
// every build: a worker entering idle twice and a pool lock asserted but not
// held each give one message through the log handler, naming the function
// and the condition, once per site; the broken call changes nothing.
// (The rest of the suite runs with cmwq.panic_on_warn=1, tests/CMakeLists.txt:
// a check that fires there fails the test.)
TEST(warn_on_once, a_broken_invariant_is_reported_once_naming_function_and_condition)
{
	char was[8] = "";
	ASSERT_EQ(cmwq_param_get("cmwq.panic_on_warn", was, sizeof(was)), 0);
	if (const char *env = getenv("CMWQ_PARAMS"); env && strstr(env, "cmwq.panic_on_warn=1")) {
		EXPECT_TRUE(was[0] == '1' || was[0] == 'Y') << "CMWQ_PARAMS did not turn it on: " << was;
	}
	ASSERT_EQ(cmwq_param_set("cmwq.panic_on_warn", "0"), 0);
	static std::vector<std::string> lines;
	static std::mutex lines_lock;
	cmwq_set_log_handler(
		[](int, const char *msg, void *) {
			std::lock_guard lk(lines_lock);
			lines.emplace_back(msg);
		},
		nullptr);
	auto pool = std::make_unique<d::worker_pool>();
	d::worker w;
	w.pool = pool.get();
	d::INIT_LIST_HEAD(&w.entry);
	pool->lock.lock();
	pool->nr_workers = 1;
	pool->nr_idle = 1;
	w.flags = d::WORKER_IDLE;
	d::worker_enter_idle(&w); // already idle
	d::worker_enter_idle(&w); // the same site again: no second message
	EXPECT_EQ(pool->nr_idle, 1) << "the broken call changed the counts";
	pool->lock.unlock();
	pool->lock.assert_held(); // not held
	cmwq_set_log_handler(nullptr, nullptr);
	cmwq_param_set("cmwq.panic_on_warn", was);
	std::lock_guard lk(lines_lock);
	int idle = 0, held = 0;
	for (auto &l : lines) {
		if (l.find("cmwq: WARNING: worker_enter_idle(): w->flags & WORKER_IDLE (pool.cpp:") == 0)
			idle++;
		if (l.find("!pool_mutex::held()") != std::string::npos &&
		    l.find("TestBody") != std::string::npos)
			held++;
	}
	EXPECT_EQ(idle, 1) << testing::PrintToString(lines);
	EXPECT_EQ(held, 1) << testing::PrintToString(lines);
}

// Idle costs nothing: once the engine has no items and no running worker,
// the monitor sleeps a whole watchdog period (watchdog_thresh / 4, 7.5 s by
// default, as the kernel's idle watchdog) instead of waking on a tick.
// Bug caught: a fixed 250 ms wait, about 12 wakeups in these 3 s.
TEST(idle, the_monitor_sleeps_a_watchdog_period_once_the_engine_is_idle)
{
	ASSERT_EQ(cmwq_param_set("workqueue.watchdog_thresh", "30"), 0);
	workqueue_struct *wq = alloc_workqueue("t_idle", WQ_UNBOUND, 0);
	ASSERT_NE(wq, nullptr);
	static std::atomic<int> done{0};
	std::vector<work_struct> items(2000);
	for (auto &w : items) {
		INIT_WORK(&w, [](work_struct *) { done++; });
		queue_work(wq, &w);
	}
	flush_workqueue(wq);
	EXPECT_EQ(done.load(), 2000);
	// Let a watchdog pass (at most 1 s apart while busy) see it idle.
	std::this_thread::sleep_for(2500ms);
	uint64_t before = d::monitor_wakeups();
	EXPECT_GT(before, 0u) << "the monitor never ran";
	std::this_thread::sleep_for(3000ms);
	uint64_t woke = d::monitor_wakeups() - before;
	EXPECT_LE(woke, 2u) << "the idle monitor woke " << woke << " times in 3 s";
	destroy_workqueue(wq);
}

// The monitor makes itself a SCHED_BATCH thread (sys.cpp); a thread it
// starts (a pool's worker, when its kick finds the pool has none) must not
// inherit that: it gets SCHED_OTHER, the policy the monitor had. A
// program's own SCHED_BATCH thread is the program's choice: what it starts
// inherits it. Bug caught: without the explicit policy the first spawn
// inherits SCHED_BATCH.
TEST(thread_policy, a_thread_the_monitor_starts_gets_sched_other_back)
{
	static std::atomic<int> child{-1};
	auto spawn_and_read = [] {
		child = -1;
		EXPECT_EQ(d::spawn_thread(
				  CMWQ_THREAD_CONTROL,
				  [](void *) -> void * {
					  child = sched_getscheduler(0);
					  return nullptr;
				  },
				  nullptr),
			  0);
		EXPECT_TRUE(wait_until([] { return child.load() != -1; }, 10000ms));
		return child.load();
	};
	bool allowed = false;
	std::thread t([&] {
		sched_param sp{};
		allowed = sched_setscheduler(0, SCHED_BATCH, &sp) == 0;
		if (!allowed)
			return;
		d::tl_made_batch = true; // as on the monitor
		EXPECT_EQ(spawn_and_read(), SCHED_OTHER);
		d::tl_made_batch = false; // a program's batch thread
		EXPECT_EQ(spawn_and_read(), SCHED_BATCH);
	});
	t.join();
	if (!allowed)
		GTEST_SKIP() << "this process may not use SCHED_BATCH";
}

// The cgroup CPU quota, from a fake /proc/self/cgroup and cgroup tree:
// v2 cpu.max along the path (the least limit wins, "max" is none), v1's
// cfs_quota_us / cfs_period_us (-1 is none), rounded up to whole CPUs.
TEST(cpu_quota, is_read_from_cgroup_v2_and_v1_and_rounded_up)
{
	namespace fs = std::filesystem;
	fs::path root = fs::temp_directory_path() / ("cmwq-cg-" + std::to_string(getpid()));
	fs::remove_all(root);
	auto put = [](const fs::path &p, const std::string &text) {
		fs::create_directories(p.parent_path());
		FILE *f = fopen(p.c_str(), "w");
		ASSERT_NE(f, nullptr);
		fputs(text.c_str(), f);
		fclose(f);
	};
	std::string cg = (root / "proc_cgroup").string(), mnt = (root / "cg").string();
	put(root / "proc_cgroup", "0::/a/b\n");
	put(root / "cg/a/b/cpu.max", "max 100000\n");
	put(root / "cg/a/cpu.max", "150000 100000\n");
	EXPECT_EQ(d::read_cpu_quota(cg, mnt), 2u) << "1.5 CPUs on the parent, rounded up";
	put(root / "cg/a/b/cpu.max", "50000 100000\n");
	EXPECT_EQ(d::read_cpu_quota(cg, mnt), 1u) << "the child's lower limit";
	put(root / "proc_cgroup", "0::/\n");
	EXPECT_EQ(d::read_cpu_quota(cg, mnt), 0u) << "no cpu.max at the root: no quota";
	put(root / "proc_cgroup", "5:cpu,cpuacct:/x\n3:memory:/x\n");
	put(root / "cg/cpu,cpuacct/x/cpu.cfs_quota_us", "250000\n");
	put(root / "cg/cpu,cpuacct/x/cpu.cfs_period_us", "100000\n");
	EXPECT_EQ(d::read_cpu_quota(cg, mnt), 3u) << "v1: 2.5 CPUs, rounded up";
	put(root / "cg/cpu,cpuacct/x/cpu.cfs_quota_us", "-1\n");
	EXPECT_EQ(d::read_cpu_quota(cg, mnt), 0u) << "v1: -1 is no quota";
	EXPECT_EQ(d::read_cpu_quota((root / "none").string(), mnt), 0u);
	fs::remove_all(root);
}

// ---- the item clock --------------------------------------------------------------

// Bugs caught in worker_clock_ns: a wrong counter rate (the derived time
// drifts from CLOCK_MONOTONIC within the 200 us window), a window that
// never expires (drift grows without bound), or time going backwards.
TEST(worker_clock, follows_the_monotonic_clock_and_never_goes_back)
{
	d::worker w;
	uint64_t last = d::worker_clock_anchor(&w);
	w.clock_ns = last;
	auto until = std::chrono::steady_clock::now() + 300ms; // well past the 10 ms calibration
	int checks = 0;
	while (std::chrono::steady_clock::now() < until) {
		if (checks % 16 == 0)
			w.clock_ns = d::worker_clock_anchor(&w);
		uint64_t before = d::now_ns();
		std::this_thread::sleep_for(std::chrono::microseconds(20 + (checks % 10) * 30));
		uint64_t lo = d::now_ns();
		uint64_t v = d::worker_clock_ns(&w);
		uint64_t hi = d::now_ns();
		ASSERT_GE(v, w.clock_ns) << "went back";
		// Within 20 us of the clock (the rate is learnt over at least 10 ms).
		ASSERT_GE(v + 20000, lo) << "behind the clock by " << (lo - v) << " ns";
		ASSERT_LE(v, hi + 20000) << "ahead of the clock by " << (v - hi) << " ns";
		ASSERT_GE(v, before);
		w.clock_ns = v;
		checks++;
	}
	EXPECT_GT(checks, 100);
}

// Bug caught: a rate learnt late. Until the counter's rate is known, every
// item end reads the clock (a counter read on each side of it); learnt
// from reads 100 ms apart, a process's first million-item fan-out paid
// that some 30,000 times. The first pair 10 ms from the base teaches it.
// Runs in a process of its own (ctest), so its first read is the base.
TEST(worker_clock, the_counter_takes_over_within_tens_of_milliseconds)
{
	d::worker w;
	auto start = std::chrono::steady_clock::now();
	w.clock_ns = d::worker_clock_anchor(&w);
	std::chrono::steady_clock::duration took{};
	bool counter = false;
	while (!counter && std::chrono::steady_clock::now() - start < 400ms) {
		std::this_thread::sleep_for(200us);
		w.clock_ns = d::worker_clock_anchor(&w); // each read may teach the rate
		unsigned long long anchored = w.anchor_cycles;
		w.clock_ns = d::worker_clock_ns(&w);
		// Derived from the counter: no new anchor was taken.
		counter = w.anchor_ns && w.anchor_cycles == anchored;
		took = std::chrono::steady_clock::now() - start;
	}
	if (!counter)
		GTEST_SKIP() << "the cycle counter is not used as a clock on this machine";
	EXPECT_LT(took, 60ms) << "the counter's rate was learnt only after "
			      << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms";
}

// ---- predicates and state word, no threads -------------------------------------

TEST(policy, need_more_worker_only_when_items_wait_and_nothing_runs)
{
	EXPECT_TRUE(d::need_more_worker({false, 0, 1, 1, false}));
	EXPECT_FALSE(d::need_more_worker({false, 1, 1, 2, false}));
	EXPECT_FALSE(d::need_more_worker({true, 0, 1, 1, false}));
}

TEST(policy, keep_working_while_at_most_one_runs)
{
	EXPECT_TRUE(d::keep_working({false, 1, 0, 1, false}));
	EXPECT_FALSE(d::keep_working({false, 2, 0, 2, false}));
	EXPECT_FALSE(d::keep_working({true, 0, 0, 1, false}));
}

TEST(policy, a_managed_unbound_pool_runs_as_many_as_its_concurrency)
{
	// Two CPUs in the pod: a second worker may start, a third may not.
	EXPECT_TRUE(d::need_more_worker({false, 1, 1, 2, false, 2}));
	EXPECT_FALSE(d::need_more_worker({false, 2, 1, 3, false, 2}));
	EXPECT_TRUE(d::keep_working({false, 2, 0, 2, false, 2}));
	EXPECT_FALSE(d::keep_working({false, 3, 0, 3, false, 2}));
}

TEST(policy, need_to_create_worker_when_no_idle_worker)
{
	EXPECT_TRUE(d::need_to_create_worker({false, 0, 0, 1, false}));
	EXPECT_FALSE(d::need_to_create_worker({false, 0, 1, 2, false}));
	EXPECT_TRUE(d::may_start_working({false, 0, 1, 1, false}));
}

TEST(policy, too_many_workers_keeps_two_idle_and_the_ratio)
{
	EXPECT_FALSE(d::too_many_workers({true, 0, 2, 2, false}));
	EXPECT_TRUE(d::too_many_workers({true, 0, 3, 3, false}));
	// 3 idle, 4 busy: (3-2)*4 >= 4
	EXPECT_TRUE(d::too_many_workers({true, 0, 3, 7, false}));
	EXPECT_FALSE(d::too_many_workers({true, 0, 3, 8, false}));
	// the manager counts as idle
	EXPECT_TRUE(d::too_many_workers({true, 0, 2, 3, true}));
}

TEST(state_word, offq_fields_round_trip)
{
	unsigned long v = d::make_offq(1234, 7, true);
	EXPECT_EQ(d::offq_pool(v), 1234u);
	EXPECT_EQ(d::offq_depth(v), 7u);
	EXPECT_TRUE(v & (1UL << WORK_OFFQ_BH_BIT));
	EXPECT_EQ(d::offq_pool(WORK_STRUCT_NO_POOL), WORK_OFFQ_POOL_NONE);
}

TEST(state_word, disable_counts_and_enable_reports_zero)
{
	DECLARE_WORK(w, counted_fn);
	EXPECT_FALSE(disable_work(&w));
	EXPECT_FALSE(disable_work(&w));
	EXPECT_FALSE(queue_work(system_dfl_wq, &w));
	EXPECT_FALSE(work_pending(&w));
	EXPECT_FALSE(enable_work(&w));
	EXPECT_TRUE(enable_work(&w));
	EXPECT_EQ(work_busy(&w), 0u);
}

// ---- the same suite over the three kinds ---------------------------------------

enum class kind { percpu, unbound, ordered };

class wq_suite : public ::testing::TestWithParam<kind> {
protected:
	void SetUp() override
	{
		switch (GetParam()) {
		case kind::percpu: wq = alloc_workqueue("t_percpu", WQ_PERCPU, 0); break;
		case kind::unbound: wq = alloc_workqueue("t_unbound", WQ_UNBOUND, 0); break;
		case kind::ordered: wq = alloc_ordered_workqueue("t_ordered", 0); break;
		}
		ASSERT_NE(wq, nullptr);
	}
	void TearDown() override { destroy_workqueue(wq); }
	workqueue_struct *wq = nullptr;
};

TEST_P(wq_suite, queue_returns_false_while_pending_and_runs_once)
{
	std::atomic<bool> gate{false};
	counted blocker, c;
	INIT_WORK(&blocker.work, counted_fn);
	INIT_WORK(&c.work, counted_fn);
	blocker.gate = &gate;
	// On an ordered queue the blocker keeps c pending.
	ASSERT_TRUE(queue_work(wq, &blocker.work));
	ASSERT_TRUE(wait_until([&] { return blocker.inside.load() == 1; }));
	if (GetParam() == kind::ordered) {
		EXPECT_TRUE(queue_work(wq, &c.work));
		EXPECT_FALSE(queue_work(wq, &c.work));
		EXPECT_TRUE(work_busy(&c.work) & WORK_BUSY_PENDING);
	}
	gate = true;
	flush_workqueue(wq);
	if (GetParam() == kind::ordered) {
		EXPECT_EQ(c.runs.load(), 1);
	}
	EXPECT_FALSE(flush_work(&c.work));
	EXPECT_EQ(blocker.runs.load(), 1);
	// On every kind: an item pending on its timer is pending for queue_work too.
	delayed_work dw;
	INIT_DELAYED_WORK(&dw, plain_fn);
	int runs0 = plain_runs.load();
	EXPECT_TRUE(queue_delayed_work(wq, &dw, 60000));
	EXPECT_FALSE(queue_delayed_work(wq, &dw, 60000));
	EXPECT_FALSE(queue_work(wq, &dw.work));
	EXPECT_TRUE(work_busy(&dw.work) & WORK_BUSY_PENDING);
	EXPECT_TRUE(mod_delayed_work(wq, &dw, 0));
	flush_delayed_work(&dw);
	EXPECT_EQ(plain_runs.load(), runs0 + 1) << "pending three times over, run once";
}

TEST_P(wq_suite, flush_work_waits_for_running_instance_and_false_when_idle)
{
	counted c;
	INIT_WORK(&c.work, counted_fn);
	c.sleep_ms = 30;
	EXPECT_FALSE(flush_work(&c.work));
	ASSERT_TRUE(queue_work(wq, &c.work));
	EXPECT_TRUE(flush_work(&c.work));
	EXPECT_EQ(c.runs.load(), 1);
	EXPECT_FALSE(flush_work(&c.work));
}

TEST_P(wq_suite, non_reentrant_under_concurrent_requeue_from_several_threads)
{
	counted c;
	INIT_WORK(&c.work, counted_fn);
	std::atomic<int> queued{0};
	std::vector<std::thread> ts;
	for (int t = 0; t < 4; t++)
		ts.emplace_back([&] {
			for (int i = 0; i < 2000; i++)
				if (queue_work(wq, &c.work))
					queued++;
		});
	for (auto &t : ts)
		t.join();
	flush_workqueue(wq);
	EXPECT_EQ(c.max_inside.load(), 1);
	EXPECT_EQ(c.runs.load(), queued.load());
}

TEST_P(wq_suite, flush_workqueue_waits_only_for_items_queued_before_it)
{
	std::atomic<bool> gate_a{false}, gate_b{false};
	counted a, b;
	INIT_WORK(&a.work, counted_fn);
	INIT_WORK(&b.work, counted_fn);
	a.gate = &gate_a;
	b.gate = &gate_b;
	ASSERT_TRUE(queue_work(wq, &a.work));
	std::atomic<bool> flushed{false};
	std::thread f([&] {
		flush_workqueue(wq);
		flushed = true;
	});
	std::this_thread::sleep_for(50ms);
	ASSERT_TRUE(queue_work(wq, &b.work)); // after the flush started
	EXPECT_FALSE(flushed.load());
	gate_a = true;
	EXPECT_TRUE(wait_until([&] { return flushed.load(); }));
	EXPECT_EQ(a.runs.load(), 1);
	EXPECT_EQ(b.runs.load(), 0);
	f.join();
	gate_b = true;
	flush_workqueue(wq);
	EXPECT_EQ(b.runs.load(), 1);
}

struct chain {
	work_struct work;
	workqueue_struct *wq;
	std::atomic<int> left;
	std::atomic<int> runs{0};
};

static void chain_fn(work_struct *w)
{
	auto *c = container_of(w, chain, work);
	c->runs++;
	if (--c->left > 0)
		queue_work(c->wq, &c->work);
}

TEST_P(wq_suite, drain_accepts_only_chained_queueing_and_runs_the_chain)
{
	chain c;
	INIT_WORK(&c.work, chain_fn);
	c.wq = wq;
	c.left = 50;
	ASSERT_TRUE(queue_work(wq, &c.work));
	drain_workqueue(wq);
	EXPECT_EQ(c.runs.load(), 50);
}

TEST_P(wq_suite, cancel_removes_pending_item_and_sync_waits_for_running_one)
{
	std::atomic<bool> gate{false};
	counted blocker, c;
	INIT_WORK(&blocker.work, counted_fn);
	INIT_WORK(&c.work, counted_fn);
	blocker.gate = &gate;
	ASSERT_TRUE(queue_work(wq, &blocker.work));
	ASSERT_TRUE(wait_until([&] { return blocker.inside.load() == 1; }));
	// A delayed queueing keeps c pending on every kind of workqueue.
	delayed_work dw;
	INIT_DELAYED_WORK(&dw, plain_fn);
	ASSERT_TRUE(queue_delayed_work(wq, &dw, 10000));
	EXPECT_TRUE(cancel_delayed_work(&dw));
	EXPECT_FALSE(cancel_delayed_work(&dw));
	std::thread t([&] {
		std::this_thread::sleep_for(50ms);
		gate = true;
	});
	EXPECT_FALSE(cancel_work_sync(&blocker.work)); // running, not pending
	EXPECT_EQ(blocker.runs.load(), 1);             // and it waited
	t.join();
	EXPECT_FALSE(work_pending(&dw.work));
}

TEST_P(wq_suite, delayed_work_delay_zero_and_mod_return_values)
{
	delayed_work dw;
	INIT_DELAYED_WORK(&dw, plain_fn);
	EXPECT_FALSE(mod_delayed_work(wq, &dw, 10000)); // was idle
	EXPECT_TRUE(mod_delayed_work(wq, &dw, 10000));  // was pending
	EXPECT_TRUE(cancel_delayed_work_sync(&dw));
	int runs0 = plain_runs.load();
	EXPECT_TRUE(queue_delayed_work(wq, &dw, 0));
	flush_delayed_work(&dw); // false when it already ran: the run is what counts
	EXPECT_FALSE(work_pending(&dw.work));
	EXPECT_EQ(plain_runs.load(), runs0 + 1) << "delay 0 queues at once, and the flush waits for the run";
	int before = plain_runs.load();
	EXPECT_TRUE(queue_delayed_work(wq, &dw, 10000));
	EXPECT_FALSE(queue_delayed_work(wq, &dw, 20));
	// Queues at once and waits; true unless it already ran in between.
	(void)flush_delayed_work(&dw);
	EXPECT_EQ(plain_runs.load(), before + 1);
	EXPECT_FALSE(work_pending(&dw.work));
}

TEST_P(wq_suite, destroy_runs_queued_items_first)
{
	std::vector<counted> cs(20);
	for (auto &c : cs) {
		INIT_WORK(&c.work, counted_fn);
		c.sleep_ms = 2;
		ASSERT_TRUE(queue_work(wq, &c.work));
	}
	destroy_workqueue(wq);
	for (auto &c : cs)
		EXPECT_EQ(c.runs.load(), 1);
	SetUp(); // TearDown destroys again
}

INSTANTIATE_TEST_SUITE_P(kinds, wq_suite, ::testing::Values(kind::percpu, kind::unbound, kind::ordered),
			 [](const auto &p) {
				 return std::string(p.param == kind::percpu   ? "percpu"
						    : p.param == kind::unbound ? "unbound"
										  : "ordered");
			 });
