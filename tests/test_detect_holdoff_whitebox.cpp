// test_detect_holdoff_whitebox.cpp - the block detector's monitor under a
// storm of switch records that change nothing. An item that others wait
// behind keeps yielding its CPU to a busy thread there: every yield is a
// switch out that leaves it runnable (a preemption, not a block), so each
// record wakes the monitor for nothing. After 8 such wakeups in a row the
// monitor holds off 50 us, doubling with each further one up to 200 us
// (docs/design.md §3.3, "Records that change nothing"), so it wakes at
// most 5,000 times a second however fast the records come (about 3,100 on
// the 2-vCPU VM, with about 47,000 yields a second). The test counts its
// wakeups over such a storm: at least some (the records came), and fewer
// than 5,500 a second. A fixed 50 us hold-off woke it about 7,800 times a
// second there, and none about 30,000: both fail. Only an upper bound is
// timed, so a loaded machine (fewer yields, a slower monitor) cannot fail
// it; there the mutants may pass.
#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>
#include <cmwq/topology.hpp>
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "test_util.hpp"

using namespace std::chrono_literals;
namespace d = cmwq::detail;

namespace {

std::atomic<bool> stop_yielding{false}, yielder_started{false}, behind_ran{false};
std::atomic<long> yields{0};

bool pin_to(int cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// The item others wait behind: yields its CPU until told to stop.
void yielder_fn(work_struct *)
{
	yielder_started = true;
	while (!stop_yielding.load(std::memory_order_relaxed)) {
		sched_yield();
		yields.fetch_add(1, std::memory_order_relaxed);
	}
}

void behind_fn(work_struct *) { behind_ran = true; }

} // namespace

TEST(detect_holdoff, useless_switch_records_wake_the_monitor_a_bounded_number_of_times)
{
	saved_detector_params saved;
	std::string thresh = param("workqueue.cpu_intensive_thresh_us");
	if (cmwq_param_set("cmwq.block_detect", "perf") != 0)
		GTEST_SKIP() << "context-switch events are not available here";
	// Sampling off (its own passes would wake the monitor too), and the
	// yielding item never counted as a CPU hog (which would start the item
	// behind it and end the wait that keeps its event on).
	ASSERT_EQ(cmwq_param_set("cmwq.blocked_sample_us", "0"), 0);
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_thresh_us", "60000000"), 0);
	int cpu = cmwq::current_topology().usable.back();

	workqueue_struct *wq = alloc_workqueue("t_holdoff", WQ_PERCPU, 0);
	ASSERT_NE(wq, nullptr);
	// A busy thread on the item's CPU, so that each sched_yield switches.
	std::atomic<bool> busy_stop{false};
	std::thread busy([&] {
		if (!pin_to(cpu))
			return;
		while (!busy_stop.load(std::memory_order_relaxed))
			sched_yield();
	});
	work_struct yielder, behind;
	INIT_WORK(&yielder, yielder_fn);
	INIT_WORK(&behind, behind_fn);
	queue_work_on(cpu, wq, &yielder);
	queue_work_on(cpu, wq, &behind); // waits behind it: its event goes on
	ASSERT_TRUE(wait_until([] { return yielder_started.load(); }));
	std::this_thread::sleep_for(200ms); // the event enabled, the storm under way

	long yields_before = yields.load();
	uint64_t before = d::monitor_wakeups();
	auto t0 = std::chrono::steady_clock::now();
	std::this_thread::sleep_for(1000ms);
	uint64_t woke = d::monitor_wakeups() - before;
	double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
	long yielded = yields.load() - yields_before;

	stop_yielding = true;
	busy_stop = true;
	busy.join();
	flush_workqueue(wq);
	destroy_workqueue(wq);
	cmwq_param_set("workqueue.cpu_intensive_thresh_us", thresh.c_str());

	EXPECT_TRUE(behind_ran.load());
	double per_sec = static_cast<double>(woke) / secs;
	RecordProperty("monitor_wakeups_per_sec", std::to_string(static_cast<long>(per_sec)));
	RecordProperty("yields", std::to_string(yielded));
	// The records came: a monitor that saw none sleeps until the watchdog
	// (about once a second while the engine is busy).
	EXPECT_GE(woke, 20u) << "the monitor woke " << woke << " times: no switch records reached it ("
			     << yielded << " yields)";
	// At most 5,000 a second with the doubling (200 us after the 10th).
	EXPECT_LT(per_sec, 5500.0) << "the monitor woke " << woke << " times in " << secs << " s for " << yielded
				    << " yields: the hold-off did not hold";
}
