// test_detect_window.cpp - the detector's timing guarantees: the sampling
// window is in microseconds, and a preempted worker is not blocked. Hogs
// are kept out of the way (a high cpu_intensive_thresh_us), so only the
// detector decides whether the item behind starts.
#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>
#include <cmwq/topology.hpp>
#include <gtest/gtest.h>

#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "test_util.hpp"

using namespace std::chrono_literals;

namespace {

using saved_params = saved_detector_params;

int test_cpu() { return cmwq::current_topology().usable.back(); }

} // namespace

// ---- the sampling window's unit, and preemption is not blocking -----------

namespace {
std::atomic<bool> w_b_started{false}, w_give_up{false};
std::atomic<long long> w_b_started_ms{0};
long long mono_ms()
{
	return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
		.count();
}
void w_a_fn(work_struct *)
{
	while (!w_b_started.load() && !w_give_up.load()) {
		timespec ts{0, 5000000}; // 5 ms sleeps: far from a hog's CPU time
		nanosleep(&ts, nullptr);
	}
}
void w_b_fn(work_struct *)
{
	w_b_started_ms = mono_ms();
	w_b_started = true;
}
} // namespace

// cmwq.blocked_window_us is in microseconds: with 2,000,000 (2 s) a worker
// blocked without a hint is found after about 2 s, not within 1.5 s (a
// window read as nanoseconds) and not after half an hour (read as ms).
TEST(block_detect, the_sampling_window_is_in_microseconds)
{
	saved_params saved;
	ASSERT_EQ(cmwq_param_set("cmwq.block_detect", "sample"), 0);
	ASSERT_EQ(cmwq_param_set("cmwq.blocked_sample_us", "1000"), 0);
	char window[32] = {};
	ASSERT_EQ(cmwq_param_get("cmwq.blocked_window_us", window, sizeof(window)), 0);
	ASSERT_EQ(cmwq_param_set("cmwq.blocked_window_us", "2000000"), 0);
	// A's wakeups add up to a hog's CPU time in a few seconds: hogs out
	// of the way, so only the window decides.
	char thresh[32] = {};
	ASSERT_EQ(cmwq_param_get("workqueue.cpu_intensive_thresh_us", thresh, sizeof(thresh)), 0);
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_thresh_us", "60000000"), 0);
	workqueue_struct *wq = alloc_workqueue("detect_window", WQ_PERCPU, 0);
	ASSERT_NE(wq, nullptr);
	w_b_started = w_give_up = false;
	work_struct a, b;
	INIT_WORK(&a, w_a_fn);
	INIT_WORK(&b, w_b_fn);
	long long t0 = mono_ms();
	queue_work_on(test_cpu(), wq, &a);
	queue_work_on(test_cpu(), wq, &b);
	bool found = wait_until([] { return w_b_started.load(); }, 20000ms);
	w_give_up = true;
	flush_workqueue(wq);
	destroy_workqueue(wq);
	cmwq_param_set("cmwq.blocked_window_us", window);
	cmwq_param_set("workqueue.cpu_intensive_thresh_us", thresh);
	ASSERT_TRUE(found) << "not found within 20 s: the window was not read as microseconds";
	EXPECT_GE(w_b_started_ms.load() - t0, 1500) << "found before the 2 s window had passed";
}

namespace {
std::atomic<bool> p_a_done{false}, p_b_started{false}, p_b_before_a{false};
void p_a_fn(work_struct *)
{
	auto end = std::chrono::steady_clock::now() + 400ms;
	while (std::chrono::steady_clock::now() < end)
		;
	p_a_done = true;
}
void p_b_fn(work_struct *)
{
	p_b_before_a = !p_a_done.load();
	p_b_started = true;
}
} // namespace

// A worker that is preempted (a runnable thread on its CPU takes turns
// with it) is not blocked: the item behind it waits until it ends, in
// every detector mode (hogs out of the way: a threshold of 30 s).
TEST(block_detect, a_preempted_worker_is_not_counted_blocked)
{
	saved_params saved;
	char thresh[32] = {};
	ASSERT_EQ(cmwq_param_get("workqueue.cpu_intensive_thresh_us", thresh, sizeof(thresh)), 0);
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_thresh_us", "30000000"), 0);
	for (const char *mode : {"perf", "sample"}) {
		if (cmwq_param_set("cmwq.block_detect", mode) != 0)
			continue; // perf unavailable here
		ASSERT_EQ(cmwq_param_set("cmwq.blocked_sample_us", "200"), 0);
		workqueue_struct *wq = alloc_workqueue("detect_preempt_%s", WQ_PERCPU | WQ_HIGHPRI, 0, mode);
		ASSERT_NE(wq, nullptr);
		int cpu = test_cpu();
		p_a_done = p_b_started = p_b_before_a = false;
		std::atomic<bool> stop{false};
		// A thread on the same CPU that never sleeps: the worker is
		// switched out as preempted, again and again.
		std::thread rival([&] {
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET(cpu, &set);
			pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
			while (!stop.load())
				;
		});
		work_struct a, b;
		INIT_WORK(&a, p_a_fn);
		INIT_WORK(&b, p_b_fn);
		queue_work_on(cpu, wq, &a);
		queue_work_on(cpu, wq, &b);
		EXPECT_TRUE(wait_until([] { return p_b_started.load(); }, 30000ms)) << mode;
		stop = true;
		rival.join();
		flush_workqueue(wq);
		destroy_workqueue(wq);
		EXPECT_FALSE(p_b_before_a.load()) << mode << ": the item behind a preempted worker started before it ended";
	}
	cmwq_param_set("workqueue.cpu_intensive_thresh_us", thresh);
}
