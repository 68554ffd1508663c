// test_stress.cpp - every operation at once, from 8 threads, with
// exactly-once accounting: each true returned by a queue call is matched by
// one run of the item or one true from a cancel. Operations: queue (any
// CPU, a given CPU, a node), delayed and mod_delayed, cancel and
// cancel_sync (plain and delayed), flush_work and flush_delayed_work,
// flush_workqueue, set_max_active, apply_workqueue_attrs (nice, cpumask,
// scope, strict), freeze and thaw, alloc/queue/drain/destroy of scratch
// workqueues, switching the unbound pools' mode (kernel and managed
// concurrency, the local wake on and off) and the block detector (perf,
// sample, off, auto), the kernel timer API (mod_timer, timer_delete,
// timer_delete_sync: every arming fires once or is deleted once), C++
// tasks (submit, cancel, dropped: every task runs once or is cancelled
// once) and rcu_work over a grace period that sleeps (queue_rcu_work and
// flush_rcu_work: every true from a queue call is one run). Runs for
// CMWQ_STRESS_SECONDS (default 4).
#include <gtest/gtest.h>

#include <cmwq/linux/timer.h>
#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>
#include <cmwq/task.hpp>

#include "test_util.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

struct item {
	delayed_work dw; // plain queue calls use dw.work
	std::atomic<long> runs{0};
	std::atomic<long> queued{0};
	std::atomic<long> cancelled{0};
};

void item_fn(work_struct *w)
{
	auto *it = container_of(to_delayed_work(w), item, dw);
	it->runs++;
}

// A kernel timer: armed counts mod_timer calls that armed it (returned 0),
// deleted the deletions that found it armed (returned 1).
struct ktimer {
	timer_list t;
	std::atomic<long> armed{0}, fired{0}, deleted{0};
};

void ktimer_fn(timer_list *t)
{
	container_of(t, ktimer, t)->fired++;
}

struct rcu_item {
	rcu_work rw;
	std::atomic<long> queued{0}, runs{0};
};

void rcu_item_fn(work_struct *w)
{
	container_of(to_rcu_work(w), rcu_item, rw)->runs++;
}

// A grace period: 100 us, enough for items to arrive while one runs.
void stress_grace_period()
{
	std::this_thread::sleep_for(100us);
}

double stress_seconds()
{
	const char *s = std::getenv("CMWQ_STRESS_SECONDS");
	double v = s ? std::atof(s) : 4.0;
	return v > 0 ? v : 4.0;
}

// Random unbound attributes: nice, a cpumask of one or all CPUs, any scope,
// strict or not.
void random_attrs(std::mt19937 &rng, workqueue_attrs *a)
{
	a->nice = static_cast<int>(rng() % 7) - 3;
	cpumask_clear(a->cpumask);
	int n = cmwq_num_online_cpus();
	const cpumask *usable = cmwq_usable_cpumask();
	if (rng() % 3 == 0) {
		// one usable CPU
		int want = static_cast<int>(rng() % static_cast<unsigned>(n));
		for (unsigned c = 0; c < NR_CPUS; c++)
			if (cpumask_test_cpu(c, usable) && want-- == 0)
				cpumask_set_cpu(c, a->cpumask);
	} else {
		cpumask_copy(a->cpumask, usable);
	}
	a->affn_scope = static_cast<wq_affn_scope>(rng() % WQ_AFFN_NR_TYPES);
	a->affn_strict = rng() % 2;
}

} // namespace

TEST(stress, every_operation_from_8_threads_runs_or_cancels_each_queued_item_once)
{
	constexpr int nitems = 48;
	std::vector<item> items(nitems);
	for (auto &it : items)
		INIT_DELAYED_WORK(&it.dw, item_fn);
	constexpr int nwq = 4;
	workqueue_struct *wqs[nwq] = {
		alloc_workqueue("st_pc", WQ_PERCPU, 4),
		alloc_workqueue("st_ub", WQ_UNBOUND, 3),
		alloc_workqueue("st_frz", WQ_UNBOUND | WQ_FREEZABLE, 0),
		alloc_ordered_workqueue("st_ord", 0),
	};
	for (auto *wq : wqs)
		ASSERT_NE(wq, nullptr);
	std::mutex freezer; // freeze/thaw pairs from one thread at a time
	std::atomic<long> ops{0}, scratch_runs{0}, scratch_queued{0};
	auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(stress_seconds());
	int ncpu = cmwq_num_online_cpus();
	constexpr int ntimers = 8;
	std::vector<ktimer> timers(ntimers);
	for (auto &kt : timers)
		timer_setup(&kt.t, ktimer_fn, 0);
	std::atomic<long> task_submitted{0}, task_runs{0}, task_cancelled{0};
	constexpr int nrcu = 8;
	std::vector<rcu_item> rcus(nrcu);
	for (auto &r : rcus)
		INIT_RCU_WORK(&r.rw, rcu_item_fn);
	ASSERT_EQ(cmwq_set_rcu_synchronize(stress_grace_period), 0);

	std::vector<std::thread> ts;
	for (int t = 0; t < 8; t++)
		ts.emplace_back([&, t] {
			std::mt19937 rng(static_cast<unsigned>(t) * 7919u + 17);
			workqueue_attrs *attrs = alloc_workqueue_attrs();
			while (std::chrono::steady_clock::now() < deadline) {
				ops++;
				int k = static_cast<int>(rng() % nitems);
				item &it = items[static_cast<size_t>(k)];
				workqueue_struct *wq = wqs[k % nwq]; // an item stays on one workqueue
				switch (rng() % 24) {
				case 0: case 1: case 2:
					if (queue_work(wq, &it.dw.work))
						it.queued++;
					break;
				case 3:
					if (queue_work_on(static_cast<int>(rng() % static_cast<unsigned>(ncpu)), wq, &it.dw.work))
						it.queued++;
					break;
				case 4:
					if (queue_work_node(0, wq, &it.dw.work))
						it.queued++;
					break;
				case 5:
					if (queue_delayed_work(wq, &it.dw, rng() % 3))
						it.queued++;
					break;
				case 6:
					// Removes a pending instance (true) and queues a new one,
					// unless the item is disabled: a concurrent cancel_*_sync
					// disables it for a moment and mod's result cannot tell.
					// So half the items on each workqueue take mod, half cancel_*_sync.
					if ((k / nwq) % 2 == 0) {
						if (mod_delayed_work(wq, &it.dw, rng() % 3))
							it.cancelled++;
						it.queued++;
					}
					break;
				case 7:
					if (cancel_work(&it.dw.work))
						it.cancelled++;
					break;
				case 8:
					if (cancel_delayed_work(&it.dw))
						it.cancelled++;
					break;
				case 9:
					if ((k / nwq) % 2 == 1 && cancel_work_sync(&it.dw.work))
						it.cancelled++;
					break;
				case 10:
					if ((k / nwq) % 2 == 1 && cancel_delayed_work_sync(&it.dw))
						it.cancelled++;
					break;
				case 11: flush_work(&it.dw.work); break;
				case 12: flush_delayed_work(&it.dw); break;
				case 13: flush_workqueue(wqs[rng() % nwq]); break;
				case 14: {
					workqueue_struct *w = wqs[rng() % 3]; // not the ordered one
					workqueue_set_max_active(w, 1 + static_cast<int>(rng() % 8));
					break;
				}
				case 15: case 16: {
					random_attrs(rng, attrs);
					EXPECT_EQ(apply_workqueue_attrs(wqs[1 + rng() % 3], attrs), 0);
					break;
				}
				case 17: {
					std::lock_guard lk(freezer);
					freeze_workqueues_begin();
					std::this_thread::sleep_for(std::chrono::microseconds(rng() % 500));
					thaw_workqueues();
					break;
				}
				case 18: {
					// A scratch workqueue of its own: queue, drain, destroy.
					workqueue_struct *s = alloc_workqueue("st_scratch%d", (rng() % 2) ? WQ_UNBOUND : WQ_PERCPU,
									      0, t);
					EXPECT_NE(s, nullptr);
					if (!s)
						break;
					std::vector<work_struct> ws(4);
					for (auto &w : ws) {
						INIT_WORK(&w, [](work_struct *) {});
						if (queue_work(s, &w))
							scratch_queued++;
					}
					drain_workqueue(s);
					for (auto &w : ws)
						if (!work_pending(&w))
							scratch_runs++;
					destroy_workqueue(s);
					break;
				}
				case 19:
					// The unbound pools change mode while items run: workers
					// gain or lose WORKER_UNBOUND, kicks narrow or not.
					// A returning worker's claim on the next item and the
					// idle workers' wait before sleeping (unbound and
					// per-CPU) come and go.
					switch (rng() % 8) {
					case 0: EXPECT_EQ(cmwq_param_set("cmwq.unbound_concurrency", "managed"), 0); break;
					case 1: EXPECT_EQ(cmwq_param_set("cmwq.unbound_concurrency", "kernel"), 0); break;
					case 2: EXPECT_EQ(cmwq_param_set("cmwq.unbound_local_wake", "0"), 0); break;
					case 3: EXPECT_EQ(cmwq_param_set("cmwq.unbound_returning_takes", "0"), 0); break;
					case 4: EXPECT_EQ(cmwq_param_set("cmwq.unbound_returning_takes", "1"), 0); break;
					case 5: EXPECT_EQ(cmwq_param_set("cmwq.idle_spin_ns", (rng() % 2) ? "20000" : "0"), 0); break;
					case 6: EXPECT_EQ(cmwq_param_set("cmwq.unbound_idle_spin_ns", "0"), 0); break;
					case 7: EXPECT_EQ(cmwq_param_set("cmwq.unbound_idle_spin_ns", "20000"), 0); break;
					default: EXPECT_EQ(cmwq_param_set("cmwq.unbound_local_wake", "1"), 0); break;
					}
					if (rng() % 4 == 0) {
						// The block detector changes mode while workers run
						// (events opened and closed, sampling on and off).
						static const char *const modes[] = {"perf", "sample", "off", "auto"};
						int rc = cmwq_param_set("cmwq.block_detect", modes[rng() % 4]);
						EXPECT_TRUE(rc == 0 || rc == -EOPNOTSUPP || rc == -ENODEV) << rc;
					}
					break;
				case 20: {
					ktimer &kt = timers[rng() % ntimers];
					switch (rng() % 3) {
					case 0:
						if (mod_timer(&kt.t, jiffies + rng() % 3) == 0)
							kt.armed++;
						break;
					case 1:
						if (timer_delete(&kt.t))
							kt.deleted++;
						break;
					default:
						if (timer_delete_sync(&kt.t))
							kt.deleted++;
						break;
					}
					break;
				}
				case 21: {
					task_submitted++;
					auto task = cmwq::submit(wq, [&task_runs] { task_runs++; });
					if (rng() % 2 && task.cancel())
						task_cancelled++;
					else if (rng() % 4 == 0)
						task.wait();
					break; // dropped: it still runs
				}
				case 22: {
					int r = static_cast<int>(rng() % nrcu);
					rcu_item &ri = rcus[static_cast<size_t>(r)];
					if (rng() % 3 == 0)
						flush_rcu_work(&ri.rw);
					else if (queue_rcu_work(wqs[r % nwq], &ri.rw))
						ri.queued++;
					break;
				}
				default:
					std::this_thread::yield();
					break;
				}
			}
			free_workqueue_attrs(attrs);
		});
	for (auto &t : ts)
		t.join();
	EXPECT_EQ(cmwq_param_set("cmwq.unbound_concurrency", "kernel"), 0);
	EXPECT_EQ(cmwq_param_set("cmwq.unbound_local_wake", "1"), 0);
	EXPECT_EQ(cmwq_param_set("cmwq.unbound_returning_takes", "1"), 0);
	EXPECT_EQ(cmwq_param_set("cmwq.unbound_idle_spin_ns", "20000"), 0);
	EXPECT_EQ(cmwq_param_set("cmwq.idle_spin_ns", "0"), 0);
	EXPECT_EQ(cmwq_param_set("cmwq.block_detect", "auto"), 0);
	for (auto &kt : timers) {
		if (timer_delete_sync(&kt.t))
			kt.deleted++;
		EXPECT_EQ(kt.armed.load(), kt.fired.load() + kt.deleted.load())
			<< "a timer: armed " << kt.armed << ", fired " << kt.fired << ", deleted " << kt.deleted;
	}
	for (auto &r : rcus) {
		flush_rcu_work(&r.rw);
		EXPECT_EQ(r.queued.load(), r.runs.load()) << "an rcu_work: queued " << r.queued << ", ran " << r.runs;
	}
	cmwq_set_rcu_synchronize(nullptr);
	for (auto &it : items)
		flush_delayed_work(&it.dw);
	for (auto *wq : wqs)
		flush_workqueue(wq);
	for (auto *wq : wqs)
		destroy_workqueue(wq);
	long total_q = 0, total_r = 0, total_c = 0;
	for (int k = 0; k < nitems; k++) {
		auto &it = items[static_cast<size_t>(k)];
		EXPECT_EQ(it.queued.load(), it.runs.load() + it.cancelled.load())
			<< "item " << k << ": queued " << it.queued << ", ran " << it.runs << ", cancelled "
			<< it.cancelled;
		total_q += it.queued;
		total_r += it.runs;
		total_c += it.cancelled;
	}
	EXPECT_EQ(scratch_runs.load(), scratch_queued.load()) << "drain left items of a scratch workqueue";
	EXPECT_EQ(task_submitted.load(), task_runs.load() + task_cancelled.load())
		<< "tasks: submitted " << task_submitted << ", ran " << task_runs << ", cancelled " << task_cancelled;
	EXPECT_GT(total_r, 0);
	RecordProperty("operations", static_cast<int>(ops.load()));
	std::printf("stress: %ld operations, %ld queued, %ld ran, %ld cancelled\n", ops.load(), total_q, total_r,
		    total_c);
}
