// test_guarantees.cpp - documented guarantees that weaker tests let slip:
// non-reentrancy across pools, raising max_active, the watchdog's
// threshold, delayed work order and lateness, cache_shard_size 0. Each test
// names the bug it catches; docs/testing.md lists the mutants they kill.
#include <cmwq/topology.hpp>
#include <gtest/gtest.h>

#include <cmwq/introspect.hpp>
#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>

#include "test_util.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer drops a race report when it cannot restore the earlier
// access's stack from that thread's history; with the default history it
// missed no_lost_event's race (below) in some runs. This program starts
// few threads, so the longest history costs little.
extern "C" const char *__tsan_default_options() { return "history_size=7"; }
#endif

namespace {

void pin(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

std::vector<int> usable_cpus()
{
	const cpumask *usable = cmwq_usable_cpumask();
	std::vector<int> cpus;
	for (unsigned c = 0; c < NR_CPUS; c++)
		if (cpumask_test_cpu(c, usable))
			cpus.push_back(static_cast<int>(c));
	return cpus;
}

// The kernel's per-node share of an unbound workqueue's max_active
// (wq_update_node_max_active): clamp(ceil(max * node's CPUs / CPUs),
// min_active, max), for the node of `cpu`. One node: max itself.
int node_share(int max, int min, int cpu)
{
	cmwq::topology t = cmwq::current_topology();
	int node = t.cpu_node[static_cast<size_t>(cpu)];
	int cnt = 0, total = static_cast<int>(t.usable.size());
	for (int c : t.usable)
		cnt += t.cpu_node[static_cast<size_t>(c)] == node;
	return std::clamp((max * cnt + total - 1) / total, min, max);
}

std::atomic<int> reent_inside{0}, reent_max{0}, reent_runs{0};
void reent_fn(work_struct *)
{
	int in = ++reent_inside;
	int m = reent_max.load();
	while (in > m && !reent_max.compare_exchange_weak(m, in)) {
	}
	std::this_thread::sleep_for(30ms);
	reent_inside--;
	reent_runs++;
}

} // namespace

// Bug caught: queue_work on another CPU's pool while the item still runs on
// the first (the redirect to the pool where it runs disabled): it would run
// twice at once.
TEST(non_reentrancy, item_running_on_one_cpu_queued_from_another_never_runs_twice_at_once)
{
	std::vector<int> cpus = usable_cpus();
	if (cpus.size() < 2)
		GTEST_SKIP() << "needs two CPUs";
	workqueue_struct *wq = alloc_workqueue("t_reent", WQ_PERCPU, 0);
	ASSERT_NE(wq, nullptr);
	work_struct w;
	INIT_WORK(&w, reent_fn);
	for (int round = 0; round < 5; round++) {
		ASSERT_TRUE(queue_work_on(cpus[0], wq, &w));
		ASSERT_TRUE(wait_until([] { return reent_inside.load() == 1; }));
		std::thread t([&] {
			pin(cpus[1]);
			EXPECT_TRUE(queue_work_on(cpus[1], wq, &w)); // while it runs on cpus[0]
		});
		t.join();
		flush_work(&w);
		flush_work(&w);
	}
	EXPECT_EQ(reent_max.load(), 1) << "ran twice at once";
	EXPECT_EQ(reent_runs.load(), 10);
	destroy_workqueue(wq);
}

namespace {
std::atomic<bool> raise_gate{false};
std::atomic<int> raise_inside{0};
void raise_fn(work_struct *)
{
	raise_inside++;
	while (!raise_gate.load())
		std::this_thread::sleep_for(1ms);
	raise_inside--;
}
} // namespace

// Bug caught: raising max_active activating only one waiting item; every
// waiting item must start at once when the limit allows it.
TEST(max_active, raising_the_limit_starts_every_waiting_item_it_allows)
{
	for (unsigned flags : {unsigned(WQ_UNBOUND), unsigned(WQ_PERCPU | WQ_CPU_INTENSIVE)}) {
		raise_gate = false;
		workqueue_struct *wq = alloc_workqueue("t_raise_all", flags, 1);
		ASSERT_NE(wq, nullptr);
		std::vector<work_struct> ws(6);
		for (auto &w : ws) {
			INIT_WORK(&w, raise_fn);
			// One CPU, so the per-CPU limit is the workqueue's.
			ASSERT_TRUE(queue_work_on(0, wq, &w));
		}
		ASSERT_TRUE(wait_until([] { return raise_inside.load() == 1; }));
		std::this_thread::sleep_for(50ms);
		EXPECT_EQ(raise_inside.load(), 1) << "max_active 1 let more start";
		workqueue_set_max_active(wq, 6);
		// Unbound: the node of CPU 0 gets its share of 6 (min_active is 1,
		// as max_active was at creation); all 6 on a one-node machine.
		int want = (flags & WQ_UNBOUND) ? node_share(6, 1, 0) : 6;
		EXPECT_TRUE(wait_until([&] { return raise_inside.load() == want; }, 20000ms))
			<< "only " << raise_inside.load() << " of " << want << " running after raising max_active to 6";
		std::this_thread::sleep_for(50ms);
		EXPECT_EQ(raise_inside.load(), want) << "more started than the node's share";
		raise_gate = true;
		flush_workqueue(wq);
		destroy_workqueue(wq);
	}
}

namespace {
std::atomic<bool> lost_gate{false}, lost_first_in{false};
// Plain: only the work state word orders it. On a line of its own, so the
// race detector's record of the caller's store is not pushed out by the
// polled flags beside it.
alignas(64) int lost_payload = 0;
std::atomic<int> lost_seen{-1};
void lost_first_fn(work_struct *)
{
	lost_first_in = true;
	while (!lost_gate.load(std::memory_order_relaxed))
		std::this_thread::sleep_for(1ms);
}
void lost_second_fn(work_struct *) { lost_seen = lost_payload; }
} // namespace

// The kernel's no-lost-event rule for an item waiting behind max_active: a
// queue_work that finds it PENDING returns false, and the run that follows
// sees what that caller stored before the call. Bug caught (under
// CMWQ_SANITIZE=thread, as a data race on lost_payload, in 9 of 12 runs of
// the mutant): the activation that moves the item to the worklist
// rewriting its state word with a plain store and no acquire load of the
// word before it (pwq_activate_work's, or move_linked_works's), so the
// failed caller's release is lost before the worker's exchange. Nothing
// else carries the caller's stores to the worker: its end is seen through
// a relaxed flag, the item's run is awaited the same way, and the caller
// is joined only after the run.
TEST(no_lost_event, a_failed_queue_of_a_waiting_item_is_seen_by_its_run)
{
	lost_gate = false; // a fresh start under --gtest_repeat
	lost_first_in = false;
	lost_seen = -1;
	workqueue_struct *wq = alloc_workqueue("t_lost_event", WQ_PERCPU, 1);
	ASSERT_NE(wq, nullptr);
	work_struct first, second;
	INIT_WORK(&first, lost_first_fn);
	INIT_WORK(&second, lost_second_fn);
	ASSERT_TRUE(queue_work_on(0, wq, &first));
	ASSERT_TRUE(wait_until([] { return lost_first_in.load(); }));
	ASSERT_TRUE(queue_work_on(0, wq, &second)); // waits: max_active 1
	std::atomic<bool> caller_done{false};
	std::atomic<bool> caller_queued{true};
	std::thread caller([&] {
		lost_payload = 42;
		caller_queued.store(queue_work_on(0, wq, &second), std::memory_order_relaxed);
		caller_done.store(true, std::memory_order_relaxed);
		// Alive until the run has read the value (a finished thread's
		// accesses may be forgotten by the race detector).
		while (lost_seen.load(std::memory_order_relaxed) == -1)
			std::this_thread::sleep_for(1ms);
	});
	while (!caller_done.load(std::memory_order_relaxed))
		std::this_thread::sleep_for(1ms);
	lost_gate.store(true, std::memory_order_relaxed);
	// Not flush_work: its barrier reads the word before the activation does
	// and would carry the caller's release to the worker through the lock.
	bool ran = wait_until([] { return lost_seen.load(std::memory_order_relaxed) != -1; });
	EXPECT_TRUE(ran) << "the waiting item never ran";
	if (!ran)
		lost_seen = -2; // lets the caller's thread end
	caller.join();
	EXPECT_FALSE(caller_queued.load()) << "the waiting item was not PENDING";
	EXPECT_EQ(lost_seen.load(), 42) << "the run did not see the failed caller's store";
	destroy_workqueue(wq);
}

namespace {
std::atomic<int> slot_inside{0}, slot_max{0}, slot_runs[2];
std::atomic<int> slot_side0_when_side1_began{-1};
std::atomic<bool> slot_gate{true};
struct slot_item {
	work_struct work;
	int side;
};
void slot_fn(work_struct *w)
{
	int side = container_of(w, slot_item, work)->side;
	int in = ++slot_inside;
	int m = slot_max.load();
	while (in > m && !slot_max.compare_exchange_weak(m, in)) {
	}
	if (side == 1) {
		int none = -1;
		slot_side0_when_side1_began.compare_exchange_strong(none, slot_runs[0].load());
	}
	std::this_thread::sleep_for(200us);
	while (!slot_gate.load())
		std::this_thread::sleep_for(1ms);
	slot_runs[side]++;
	slot_inside--;
}
} // namespace

// Bugs caught in how an unbound completion passes on its node slot (the
// system-wide max_active): handed straight back to its own pwq's backlog
// while a pwq of another pool waits (that one starves until the first
// drains), reused after max_active was lowered (the node runs more than its
// new limit), or lost (fewer run than the limit allows afterwards).
TEST(max_active, unbound_node_slots_go_round_every_waiter_and_follow_a_lowered_limit)
{
	std::vector<int> cpus = usable_cpus();
	if (cpus.size() < 2)
		GTEST_SKIP() << "needs two CPUs";
	workqueue_struct *wq = alloc_workqueue("t_node_slots", WQ_UNBOUND, 3);
	ASSERT_NE(wq, nullptr);
	workqueue_attrs *attrs = alloc_workqueue_attrs();
	attrs->affn_scope = WQ_AFFN_CPU; // a pool per CPU, one node limit
	ASSERT_EQ(apply_workqueue_attrs(wq, attrs), 0);
	free_workqueue_attrs(attrs);
	constexpr int per_side = 300;
	std::vector<slot_item> items(2 * per_side);
	auto queue_side = [&](int side) {
		std::thread t([&] {
			pin(cpus[static_cast<size_t>(side)]);
			for (int i = 0; i < per_side; i++) {
				slot_item &it = items[static_cast<size_t>(side * per_side + i)];
				it.side = side;
				INIT_WORK(&it.work, slot_fn);
				EXPECT_TRUE(queue_work(wq, &it.work));
			}
		});
		t.join();
	};
	queue_side(0);
	ASSERT_TRUE(wait_until([] { return slot_runs[0].load() >= 20; }));
	queue_side(1); // side 0 still has a backlog of about 280
	ASSERT_TRUE(wait_until([] { return slot_runs[1].load() >= 20; }, 20000ms));
	EXPECT_LT(slot_side0_when_side1_began.load(), per_side - 50)
		<< "the second pool's items waited until the first pool's backlog drained";
	EXPECT_LE(slot_max.load(), 3) << "more items ran at once than max_active 3";
	flush_workqueue(wq);
	EXPECT_EQ(slot_runs[0].load(), per_side);
	EXPECT_EQ(slot_runs[1].load(), per_side);

	// One pool's backlog alone (each completion's slot goes back to it),
	// then max_active lowered to 1.
	slot_runs[0] = 0;
	queue_side(0);
	ASSERT_TRUE(wait_until([] { return slot_runs[0].load() >= 20; }));
	workqueue_set_max_active(wq, 1);
	// Items activated before the change may still start; after this many
	// more completions the active set has turned over.
	int seen = slot_runs[0].load();
	ASSERT_TRUE(wait_until([&] { return slot_runs[0].load() >= seen + 30; }, 20000ms));
	slot_max = slot_inside.load();
	flush_workqueue(wq);
	EXPECT_EQ(slot_runs[0].load(), per_side);
	EXPECT_LE(slot_max.load(), 1) << "the node ran more than the lowered max_active 1";

	// No slot was lost: raised again, the node's share of 3 gated items run
	// at once (all three on one node; min_active is 1 since the lowering).
	workqueue_set_max_active(wq, 3);
	slot_gate = false;
	std::thread q([&] {
		pin(cpus[0]);
		for (int i = 0; i < 3; i++) {
			slot_item &it = items[static_cast<size_t>(i)];
			INIT_WORK(&it.work, slot_fn);
			EXPECT_TRUE(queue_work(wq, &it.work));
		}
	});
	q.join();
	int want = node_share(3, 1, cpus[0]);
	EXPECT_TRUE(wait_until([&] { return slot_inside.load() == want; }, 20000ms))
		<< "only " << slot_inside.load() << " of " << want << " running: a node slot was lost";
	slot_gate = true;
	flush_workqueue(wq);
	destroy_workqueue(wq);
}

namespace {
std::atomic<bool> wd_release{false};
void wd_stuck_fn(work_struct *)
{
	while (!wd_release.load()) {
	} // runnable throughout: neither blocked nor (with hogs off) a hog
}
void wd_behind_fn(work_struct *) {}
} // namespace

// Bug caught: the watchdog firing at once or at twice its threshold. The
// pool's stuck time (snapshot hung_s) grows until the report resets it; the
// largest value seen before the reset is when the report came.
TEST(watchdog, reports_after_the_threshold_not_before_and_not_twice_as_late)
{
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_thresh_us", "0"), 0);
	ASSERT_EQ(cmwq_param_set("workqueue.watchdog_thresh", "3"), 0);
	workqueue_struct *wq = alloc_workqueue("t_wd_thresh", WQ_PERCPU, 0);
	ASSERT_NE(wq, nullptr);
	work_struct s, b;
	INIT_WORK(&s, wd_stuck_fn);
	INIT_WORK(&b, wd_behind_fn);
	testing::internal::CaptureStderr();
	ASSERT_TRUE(queue_work_on(0, wq, &s));
	ASSERT_TRUE(queue_work_on(0, wq, &b));
	double seen = 0, at_report = -1;
	auto end = steady::now() + 20s;
	while (steady::now() < end && at_report < 0) {
		double hung = 0;
		for (const auto &p : cmwq::snapshot().pools)
			if (p.cpu == 0 && !p.highpri && p.nr_pending > 0)
				hung = std::max(hung, p.hung_s);
		if (hung + 0.5 < seen)
			at_report = seen; // reset by the report
		seen = hung;
		std::this_thread::sleep_for(20ms);
	}
	wd_release = true;
	flush_workqueue(wq);
	std::string err = testing::internal::GetCapturedStderr();
	cmwq_param_set("workqueue.watchdog_thresh", "30");
	cmwq_param_set("workqueue.cpu_intensive_thresh_us", "10000");
	destroy_workqueue(wq);
	ASSERT_GE(at_report, 0) << "no report within 20 s\n" << err;
	EXPECT_NE(err.find("BUG: workqueue lockup"), std::string::npos) << err;
	EXPECT_GE(at_report, 2.9) << "reported before the 3 s threshold";
	EXPECT_LT(at_report, 5.9) << "reported too late (twice the threshold is 6 s)";
}

namespace {
struct timed_item {
	delayed_work dw;
	int delay_ms = 0;
	steady::time_point queued, ran;
};
std::mutex order_mu;
std::vector<timed_item *> fire_order;
void timed_fn(work_struct *w)
{
	auto *t = container_of(to_delayed_work(w), timed_item, dw);
	t->ran = steady::now();
	std::lock_guard lk(order_mu);
	fire_order.push_back(t);
}
} // namespace

// Bugs caught: the timer heap ordering its children wrongly (timers fire
// late and out of order), and delayed work running before its delay. 40
// timers armed in shuffled order on an ordered workqueue run in deadline
// order, none early.
TEST(delayed_work, many_timers_fire_in_deadline_order_and_never_early)
{
	{
		std::lock_guard lk(order_mu); // a fresh start under --gtest_repeat
		fire_order.clear();
	}
	workqueue_struct *wq = alloc_ordered_workqueue("t_timer_order", 0);
	ASSERT_NE(wq, nullptr);
	std::vector<timed_item> items(40);
	for (size_t i = 0; i < items.size(); i++) {
		items[i].delay_ms = 30 + 15 * static_cast<int>(i);
		INIT_DELAYED_WORK(&items[i].dw, timed_fn);
	}
	std::vector<size_t> arm(items.size());
	for (size_t i = 0; i < arm.size(); i++)
		arm[i] = i;
	std::shuffle(arm.begin(), arm.end(), std::mt19937(42));
	for (size_t i : arm) {
		items[i].queued = steady::now();
		ASSERT_TRUE(queue_delayed_work(wq, &items[i].dw, static_cast<unsigned long>(items[i].delay_ms)));
	}
	// (flush_delayed_work would run a pending item at once.)
	ASSERT_TRUE(wait_until([&] {
		std::lock_guard lk(order_mu);
		return fire_order.size() == items.size();
	}, 30000ms));
	flush_workqueue(wq);
	// Deadline order: each timer's deadline is its arming time plus its
	// delay (arming 40 can take longer than 15 ms on a loaded machine), to
	// within 5 ms (a jiffy and the clock reads around queue_delayed_work).
	for (size_t i = 1; i < fire_order.size(); i++) {
		auto deadline = [](const timed_item *t) { return t->queued + std::chrono::milliseconds(t->delay_ms); };
		EXPECT_LE(deadline(fire_order[i - 1]), deadline(fire_order[i]) + 5ms)
			<< "timers fired out of deadline order: " << fire_order[i - 1]->delay_ms << " ms before "
			<< fire_order[i]->delay_ms << " ms";
	}
	for (auto &it : items)
		EXPECT_GE(std::chrono::duration_cast<std::chrono::milliseconds>(it.ran - it.queued).count(), it.delay_ms)
			<< "delay " << it.delay_ms << " ms ran early";
	destroy_workqueue(wq);
}

// Bug caught: workqueue.cache_shard_size=0 accepted as 0 by the parameter
// layer. The kernel warns and uses 1.
TEST(params, cache_shard_size_zero_warns_and_becomes_one)
{
	char buf[32];
	testing::internal::CaptureStderr();
	EXPECT_EQ(cmwq_param_set("workqueue.cache_shard_size", "0"), 0);
	std::string err = testing::internal::GetCapturedStderr();
	ASSERT_EQ(cmwq_param_get("workqueue.cache_shard_size", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "1");
	EXPECT_NE(err.find("cache_shard_size must be > 0, setting to 1"), std::string::npos) << err;
	EXPECT_EQ(cmwq_param_set("workqueue.cache_shard_size", "8"), 0);
}

namespace {
workqueue_struct *chain_wq;
std::atomic<int> chain_runs{0};
std::atomic<int> outsider_runs{0};
work_struct chain_item;
void chain_fn(work_struct *w)
{
	std::this_thread::sleep_for(2ms);
	if (++chain_runs < 100)
		queue_work(chain_wq, w); // chained: allowed while draining
}
extern "C" void outsider_fn(work_struct *) { outsider_runs++; }
} // namespace

// Bugs caught: drain_workqueue returning after one flush while chained
// items are still queued, and accepting non-chained items while draining.
TEST(drain, waits_for_chained_items_and_refuses_others_meanwhile)
{
	chain_wq = alloc_workqueue("t_drain_chain", WQ_UNBOUND, 0);
	ASSERT_NE(chain_wq, nullptr);
	INIT_WORK(&chain_item, chain_fn);
	ASSERT_TRUE(queue_work(chain_wq, &chain_item));
	std::atomic<bool> drained{false};
	std::thread t([&] {
		drain_workqueue(chain_wq);
		drained = true;
	});
	// The chain runs for about 200 ms; queue from outside while it does.
	ASSERT_TRUE(wait_until([] { return chain_runs.load() >= 10; }));
	testing::internal::CaptureStderr();
	work_struct outsider;
	INIT_WORK(&outsider, outsider_fn);
	bool was_draining = !drained.load();
	queue_work(chain_wq, &outsider); // returns true as in the kernel, but is dropped
	t.join();
	std::string err = testing::internal::GetCapturedStderr();
	EXPECT_EQ(chain_runs.load(), 100) << "drain_workqueue returned with chained items still queued";
	ASSERT_TRUE(was_draining) << "the chain ended before the outside queue";
	EXPECT_NE(err.find("workqueue: cannot queue outsider_fn on wq t_drain_chain"), std::string::npos) << err;
	EXPECT_EQ(outsider_runs.load(), 0) << "a non-chained item was queued during the drain";
	EXPECT_FALSE(work_pending(&outsider));
	destroy_workqueue(chain_wq);
}

namespace {
std::atomic<int> lw_cpu{-1};
std::atomic<bool> lw_done{false};
void lw_fn(work_struct *)
{
	lw_cpu = sched_getcpu();
	lw_done = true;
}
} // namespace

// The local wake keeps a lone item's worker on the queueing CPU only when
// that CPU is in the pool's pod: queued from a CPU outside a strict
// workqueue's cpumask, every item still runs inside it.
TEST(unbound_local_wake, a_worker_is_never_kept_on_a_cpu_outside_the_workqueues_cpumask)
{
	std::vector<int> cpus = usable_cpus();
	if (cpus.size() < 2)
		GTEST_SKIP() << "needs two CPUs";
	int target = cpus[1], queuer = cpus[0];
	workqueue_struct *wq = alloc_workqueue("t_lw_mask", WQ_UNBOUND, 0);
	ASSERT_NE(wq, nullptr);
	workqueue_attrs *attrs = alloc_workqueue_attrs();
	cpumask_clear(attrs->cpumask);
	cpumask_set_cpu(static_cast<unsigned>(target), attrs->cpumask);
	attrs->affn_strict = true; // no repatriation to mend a worker sent outside
	ASSERT_EQ(apply_workqueue_attrs(wq, attrs), 0);
	free_workqueue_attrs(attrs);
	int outside = 0;
	std::thread t([&] {
		pin(queuer);
		work_struct w;
		INIT_WORK(&w, lw_fn);
		for (int i = 0; i < 50; i++) {
			lw_done = false;
			EXPECT_TRUE(queue_work(wq, &w));
			EXPECT_TRUE(wait_until([] { return lw_done.load(); }, 20000ms));
			flush_work(&w);
			outside += lw_cpu.load() != target;
			std::this_thread::sleep_for(2ms); // the worker goes idle: the next item is a lone one
		}
	});
	t.join();
	destroy_workqueue(wq);
	EXPECT_EQ(outside, 0) << outside << " of 50 items ran outside the workqueue's cpumask (CPU " << target << ")";
}
