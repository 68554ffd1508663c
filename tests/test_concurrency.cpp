// test_concurrency.cpp - concurrency management on per-CPU pools: the three
// example scenarios of workqueue.rst (asserted as event orders, which hold on
// a loaded machine, not as milliseconds), un-annotated blocking found by the
// monitor, CPU-hog reclassification, rescuers under failing worker creation,
// and the lockup watchdog.
#include <cmwq/log.h>
#include <gtest/gtest.h>

#include <cmwq/linux/delay.h>
#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>
#include <cmwq/stats.h>
#include <cmwq/introspect.hpp>
#include <cmwq/topology.hpp>

#include <time.h>
#include <unistd.h>

#include "test_util.hpp"

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {


int test_cpu() { return cmwq::current_topology().usable.back(); }

// Event log for the scenarios.
std::mutex log_mu;
std::vector<std::string> events;
void ev(const std::string &e)
{
	std::lock_guard lk(log_mu);
	events.push_back(e);
}
size_t at(const std::string &e)
{
	std::lock_guard lk(log_mu);
	for (size_t i = 0; i < events.size(); i++)
		if (events[i] == e)
			return i;
	return SIZE_MAX;
}

#if defined(__SANITIZE_THREAD__)
constexpr unsigned slow = 5;
#else
constexpr unsigned slow = 1;
#endif

struct scen_item {
	work_struct work;
	std::string name;
	bool second_burn;
};

void scen_fn(work_struct *w)
{
	auto *s = container_of(w, scen_item, work);
	// The rst's 5 ms / 10 ms timeline scaled by 4 for margin on a loaded
	// machine, and by 5 more under ThreadSanitizer's slowdown.
	ev(s->name + ".start");
	mdelay(20 * slow); // CPU
	ev(s->name + ".sleep");
	msleep(40 * slow); // blocks, with the hint
	if (s->second_burn)
		mdelay(20 * slow);
	ev(s->name + ".done");
}

void run_scenario_once(int max_active, bool w12_cpu_intensive)
{
	events.clear();
	auto *wq0 = alloc_workqueue("scen0", WQ_PERCPU, max_active);
	auto *wq12 = w12_cpu_intensive ? alloc_workqueue("scen12", WQ_PERCPU | WQ_CPU_INTENSIVE, max_active) : wq0;
	scen_item w0{{}, "w0", true}, w1{{}, "w1", false}, w2{{}, "w2", false};
	for (auto *s : {&w0, &w1, &w2})
		INIT_WORK(&s->work, scen_fn);
	int cpu = test_cpu();
	queue_work_on(cpu, wq0, &w0.work);
	queue_work_on(cpu, wq12, &w1.work);
	queue_work_on(cpu, wq12, &w2.work);
	flush_workqueue(wq0);
	if (wq12 != wq0) {
		flush_workqueue(wq12);
		destroy_workqueue(wq12);
	}
	destroy_workqueue(wq0);
}

// The first run also creates the pool's spare workers; the second is the
// one asserted, as on a system that has been running for a while.
void run_scenario(int max_active, bool w12_cpu_intensive)
{
	// 20 ms of CPU would be a hog at the default 10 ms threshold; the rst's
	// timeline has none, so the threshold is raised for the scenarios.
	cmwq_param_set("workqueue.cpu_intensive_thresh_us", "1000000");
	run_scenario_once(max_active, w12_cpu_intensive);
	run_scenario_once(max_active, w12_cpu_intensive);
	cmwq_param_set("workqueue.cpu_intensive_thresh_us", "10000");
}

} // namespace

TEST(scenarios, max_active_3_next_item_starts_when_the_running_one_sleeps)
{
	run_scenario(3, false);
	// w1 starts only after w0 blocks, w2 only after w1 blocks, and all three
	// are in flight together (the kernel's 25 ms timeline).
	EXPECT_LT(at("w0.sleep"), at("w1.start"));
	EXPECT_LT(at("w1.sleep"), at("w2.start"));
	EXPECT_LT(at("w2.start"), at("w0.done"));
}

TEST(scenarios, max_active_2_third_item_waits_for_a_free_slot)
{
	run_scenario(2, false);
	EXPECT_LT(at("w0.sleep"), at("w1.start"));
	EXPECT_LT(std::min(at("w0.done"), at("w1.done")), at("w2.start"));
}

TEST(scenarios, cpu_intensive_items_start_without_waiting_for_each_other)
{
	run_scenario(3, true);
	EXPECT_LT(at("w0.sleep"), at("w1.start"));
	// w2 is not held back by w1 burning CPU: both start once w0 sleeps.
	EXPECT_LT(at("w2.start"), at("w1.sleep"));
}

// ---- blocking without hints -----------------------------------------------------

namespace {
std::atomic<int> inside{0}, peak{0};
void enter()
{
	int in = ++inside;
	int m = peak.load();
	while (in > m && !peak.compare_exchange_weak(m, in)) {
	}
}
void raw_sleep_fn(work_struct *)
{
	enter();
	timespec ts{0, 100 * 1000 * 1000};
	nanosleep(&ts, nullptr); // no hint
	inside--;
}

int pipefd[2];
void pipe_reader(work_struct *)
{
	char c;
	(void)!read(pipefd[0], &c, 1); // blocks until the writer queued behind us runs
}
void pipe_writer(work_struct *) { (void)!write(pipefd[1], "x", 1); }

std::mutex contended;
void mutex_fn(work_struct *)
{
	enter();
	std::lock_guard lk(contended);
	inside--;
}
} // namespace

TEST(unannotated_blocking, nanosleeping_items_on_one_cpu_overlap)
{
	auto *wq = alloc_workqueue("raw_sleep", WQ_PERCPU, 0);
	uint64_t before[PWQ_NR_STATS], after[PWQ_NR_STATS];
	// The first round also grows the pool's spare workers (slowly under a
	// sanitizer); the second is asserted, with spares idle as in a running
	// system, so the wakeup of one is counted as CM_WAKEUP.
	for (int round = 0; round < 2; round++) {
		inside = peak = 0;
		cmwq_workqueue_stats(wq, before);
		std::vector<work_struct> ws(4);
		for (auto &w : ws) {
			INIT_WORK(&w, raw_sleep_fn);
			queue_work_on(test_cpu(), wq, &w);
		}
		flush_workqueue(wq);
		cmwq_workqueue_stats(wq, after);
	}
	EXPECT_GE(peak.load(), 2);
	EXPECT_GE(after[PWQ_STAT_CM_WAKEUP] - before[PWQ_STAT_CM_WAKEUP], 1u);
	destroy_workqueue(wq);
}

TEST(unannotated_blocking, pipe_reader_does_not_deadlock_with_writer_queued_behind_it)
{
	ASSERT_EQ(pipe(pipefd), 0);
	auto *wq = alloc_workqueue("pipe", WQ_PERCPU, 0);
	work_struct r, w;
	INIT_WORK(&r, pipe_reader);
	INIT_WORK(&w, pipe_writer);
	queue_work_on(test_cpu(), wq, &r);
	queue_work_on(test_cpu(), wq, &w);
	std::atomic<bool> done{false};
	std::thread t([&] {
		flush_workqueue(wq);
		done = true;
	});
	bool ok = wait_until([&] { return done.load(); }, 20000ms);
	if (!ok)
		(void)!write(pipefd[1], "x", 1); // unblock so the test can finish
	t.join();
	EXPECT_TRUE(ok);
	destroy_workqueue(wq);
	close(pipefd[0]);
	close(pipefd[1]);
}

TEST(unannotated_blocking, items_blocked_on_a_contended_mutex_let_others_run)
{
	inside = peak = 0;
	auto *wq = alloc_workqueue("mutex", WQ_PERCPU, 0);
	std::vector<work_struct> ws(3);
	{
		std::lock_guard lk(contended);
		for (auto &w : ws) {
			INIT_WORK(&w, mutex_fn);
			queue_work_on(test_cpu(), wq, &w);
		}
		EXPECT_TRUE(wait_until([] { return peak.load() >= 2; }));
	}
	flush_workqueue(wq);
	destroy_workqueue(wq);
}

// ---- CPU hogs --------------------------------------------------------------------

// A 300 ms burner that is reclassified as CPU-intensive so the item
// behind it runs: test_detect.cpp's hog_in_mode, in every detector mode.

// 8 ms of this thread's CPU time, however loaded the machine is.
void burn_8ms_cpu(work_struct *)
{
	timespec t0, t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	do
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 8000000L);
}

TEST(cpu_hog, report_line_on_the_power_of_two_schedule)
{
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_thresh_us", "2000"), 0);
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_warning_thresh", "2"), 0);
	auto *wq = alloc_workqueue("hog2", WQ_PERCPU, 0);
	static int run; // a name of this run's own: counts are kept per name
	std::string name = "hog_percpu_item_" + std::to_string(++run);
	testing::internal::CaptureStderr();
	for (int i = 0; i < 3; i++) {
		work_struct w;
		INIT_WORK(&w, burn_8ms_cpu);
		cmwq_set_work_name(&w, name.c_str());
		queue_work_on(test_cpu(), wq, &w);
		flush_work(&w);
	}
	std::string err = testing::internal::GetCapturedStderr();
	EXPECT_NE(err.find(name + " hogged CPU for >2000us 2 times, consider switching to WQ_UNBOUND"),
		  std::string::npos)
		<< err;
	EXPECT_NE(err.find(name + " hogged CPU for >2000us 3 times"), std::string::npos) << err;
	destroy_workqueue(wq);
	cmwq_param_set("workqueue.cpu_intensive_thresh_us", "10000");
	cmwq_param_set("workqueue.cpu_intensive_warning_thresh", "4");
}

// A static function is in no dynamic symbol table (whatever the link
// flags): the report names it from the program's ELF symbol table.
static void hog_named_by_symtab(work_struct *w) { burn_8ms_cpu(w); }

TEST(cpu_hog, a_function_the_dynamic_symbol_table_lacks_is_named_from_the_elf_symbol_table)
{
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_thresh_us", "2000"), 0);
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_warning_thresh", "1"), 0);
	auto *wq = alloc_workqueue("hog_symtab", WQ_PERCPU, 0);
	ASSERT_NE(wq, nullptr);
	// Reports come on a power-of-two schedule of a count kept for the
	// process's life: run the item until one comes (--gtest_repeat).
	static std::mutex mu;
	static std::string seen;
	{
		std::lock_guard lk(mu);
		seen.clear();
	}
	cmwq_set_log_handler(
		[](int, const char *msg, void *) {
			std::lock_guard lk(mu);
			if (strstr(msg, "hogged CPU"))
				seen += msg;
		},
		nullptr);
	for (int i = 0; i < 2000; i++) {
		work_struct w;
		INIT_WORK(&w, hog_named_by_symtab);
		queue_work_on(test_cpu(), wq, &w);
		flush_work(&w);
		std::lock_guard lk(mu);
		if (!seen.empty())
			break;
	}
	cmwq_set_log_handler(nullptr, nullptr);
	destroy_workqueue(wq);
	cmwq_param_set("workqueue.cpu_intensive_thresh_us", "10000");
	cmwq_param_set("workqueue.cpu_intensive_warning_thresh", "4");
	std::lock_guard lk(mu);
	EXPECT_NE(seen.find("cmwq: hog_named_by_symtab(work_struct*) hogged CPU"), std::string::npos) << seen;
}

// An item that already runs on WQ_UNBOUND (a managed unbound pool, where
// hogs are counted) is not told to switch to WQ_UNBOUND.
TEST(cpu_hog, an_unbound_item_is_given_advice_that_fits_it)
{
	ASSERT_EQ(cmwq_param_set("cmwq.unbound_concurrency", "managed"), 0);
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_thresh_us", "2000"), 0);
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_warning_thresh", "2"), 0);
	auto *wq = alloc_workqueue("hog_unbound", WQ_UNBOUND, 0);
	ASSERT_NE(wq, nullptr);
	// Hogs are counted per name for the process's life: a name of this
	// run's own starts from zero (other tests, --gtest_repeat).
	static int run;
	std::string name = "hog_unbound_item_" + std::to_string(++run);
	testing::internal::CaptureStderr();
	for (int i = 0; i < 3; i++) {
		work_struct w;
		INIT_WORK(&w, burn_8ms_cpu);
		cmwq_set_work_name(&w, name.c_str());
		queue_work(wq, &w);
		flush_work(&w);
	}
	std::string err = testing::internal::GetCapturedStderr();
	destroy_workqueue(wq);
	cmwq_param_set("workqueue.cpu_intensive_thresh_us", "10000");
	cmwq_param_set("workqueue.cpu_intensive_warning_thresh", "4");
	cmwq_param_set("cmwq.unbound_concurrency", "kernel");
	EXPECT_NE(err.find(name + " hogged CPU for >2000us 2 times, consider WQ_CPU_INTENSIVE or splitting the item"),
		  std::string::npos)
		<< err;
	EXPECT_EQ(err.find("switching to WQ_UNBOUND"), std::string::npos) << err;
}

std::atomic<int> quota_running{0}, quota_peak{0};
void quota_item(work_struct *)
{
	int r = ++quota_running;
	int p = quota_peak.load();
	while (r > p && !quota_peak.compare_exchange_weak(p, r)) {
	}
	timespec t0, t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
	do
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 3000000L);
	--quota_running;
}

// A managed unbound pool runs no more items at once than the process's
// CPU quota (cmwq.cpu_quota, read from the cgroup at start; set here): a
// container limited to one CPU gets one runnable worker, not a pod's worth
// throttled. Items of 3 ms CPU time each, under the hog threshold.
TEST(cpu_quota, a_managed_unbound_pool_runs_no_more_items_at_once_than_the_quota)
{
	char was[16] = "";
	ASSERT_EQ(cmwq_param_get("cmwq.cpu_quota", was, sizeof(was)), 0);
	ASSERT_EQ(cmwq_param_set("cmwq.unbound_concurrency", "managed"), 0);
	ASSERT_EQ(cmwq_param_set("cmwq.cpu_quota", "1"), 0);
	auto *wq = alloc_workqueue("t_quota", WQ_UNBOUND, 0);
	ASSERT_NE(wq, nullptr);
	quota_running = 0;
	quota_peak = 0;
	std::vector<work_struct> items(16);
	for (auto &w : items) {
		INIT_WORK(&w, quota_item);
		queue_work(wq, &w);
	}
	flush_workqueue(wq);
	destroy_workqueue(wq);
	EXPECT_EQ(cmwq_param_set("cmwq.cpu_quota", was), 0);
	EXPECT_EQ(cmwq_param_set("cmwq.unbound_concurrency", "kernel"), 0);
	EXPECT_EQ(quota_peak.load(), 1) << "items ran side by side under a one-CPU quota";
}

// ---- rescuer and failing worker creation ------------------------------------------

namespace {
std::atomic<bool> b_ran{false}, b_by_rescuer{false};
std::atomic<int> waiters_done{0}, started_waiters{0};
void waits_for_b(work_struct *)
{
	started_waiters++;
	auto end = std::chrono::steady_clock::now() + 30s;
	while (!b_ran && std::chrono::steady_clock::now() < end)
		msleep(1);
	waiters_done++;
}
void b_fn(work_struct *)
{
	b_by_rescuer = current_is_workqueue_rescuer();
	b_ran = true;
}

void run_starved(workqueue_struct *wq, const char *wq_name, bool expect_rescue)
{
	b_ran = b_by_rescuer = false;
	waiters_done = 0;
	started_waiters = 0;
	// Warm the pool so it has its workers, then fail every creation.
	work_struct warm;
	INIT_WORK(&warm, [](work_struct *) {});
	queue_work(wq, &warm);
	flush_work(&warm);
	ASSERT_EQ(cmwq_param_set("cmwq.fail_worker_creation", "-1"), 0);
	// Occupy every worker of the pool with an item that waits for b.
	// With creation failing the worker count is fixed: give every worker a
	// waiter, so b finds no worker and only the rescuer can run it.
	std::vector<work_struct> waiters(64);
	int nwait = 0;
	while (nwait < pool_workers_of(wq_name) && nwait < 64) {
		work_struct &w = waiters[static_cast<size_t>(nwait)];
		INIT_WORK(&w, waits_for_b);
		queue_work(wq, &w);
		nwait++;
		int started = nwait;
		ASSERT_TRUE(wait_until([&] { return started_waiters.load() >= started; }));
	}
	work_struct b;
	INIT_WORK(&b, b_fn);
	queue_work(wq, &b);
	if (expect_rescue) {
		EXPECT_TRUE(wait_until([] { return b_ran.load(); }, 20000ms));
		EXPECT_TRUE(b_by_rescuer.load());
	} else {
		std::this_thread::sleep_for(300ms);
	}
	ASSERT_EQ(cmwq_param_set("cmwq.fail_worker_creation", "0"), 0);
	flush_workqueue(wq);
	EXPECT_TRUE(b_ran.load());
	EXPECT_EQ(waiters_done.load(), nwait);
}
} // namespace

TEST(rescuer, reclaim_queue_progresses_while_worker_creation_fails)
{
	auto *wq = alloc_workqueue("reclaim", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	auto *attrs = alloc_workqueue_attrs();
	attrs->nice = 3; // a pool of its own
	ASSERT_EQ(apply_workqueue_attrs(wq, attrs), 0);
	free_workqueue_attrs(attrs);
	run_starved(wq, "reclaim", true);
	uint64_t st[PWQ_NR_STATS];
	cmwq_workqueue_stats(wq, st);
	EXPECT_GE(st[PWQ_STAT_MAYDAY], 1u);
	EXPECT_GE(st[PWQ_STAT_RESCUED], 1u);
	destroy_workqueue(wq);
}

// The mayday timer is armed once per starvation (a kick that finds no idle
// worker does not re-arm one that is pending) and disarms when it finds the
// pool served: a pool starved a second time, after it recovered, must get
// the timer, and so the rescuer, again.
TEST(rescuer, a_pool_starved_again_after_it_recovered_is_rescued_again)
{
	auto *wq = alloc_workqueue("reclaim2", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	auto *attrs = alloc_workqueue_attrs();
	attrs->nice = 5; // a pool of its own
	ASSERT_EQ(apply_workqueue_attrs(wq, attrs), 0);
	free_workqueue_attrs(attrs);
	run_starved(wq, "reclaim2", true);
	// Served again: the timer's next pass (every 100 ms while armed) finds
	// nothing waiting and disarms.
	std::this_thread::sleep_for(400ms);
	run_starved(wq, "reclaim2", true);
	uint64_t st[PWQ_NR_STATS];
	cmwq_workqueue_stats(wq, st);
	EXPECT_GE(st[PWQ_STAT_RESCUED], 2u);
	destroy_workqueue(wq);
}

TEST(rescuer, queue_without_rescuer_resumes_once_creation_succeeds)
{
	auto *wq = alloc_workqueue("norescue", WQ_UNBOUND, 0);
	auto *attrs = alloc_workqueue_attrs();
	attrs->nice = 4;
	ASSERT_EQ(apply_workqueue_attrs(wq, attrs), 0);
	free_workqueue_attrs(attrs);
	run_starved(wq, "norescue", false);
	destroy_workqueue(wq);
}

// ---- watchdog ----------------------------------------------------------------------

std::atomic<bool> release_stuck{false};
void stuck_fn(work_struct *)
{
	while (!release_stuck) {
	} // runnable the whole time: neither blocked nor (with hogs off) a hog
}
void behind_fn(work_struct *) {}

TEST(watchdog, stuck_pool_is_reported_with_the_function_name)
{
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_thresh_us", "0"), 0);
	ASSERT_EQ(cmwq_param_set("workqueue.watchdog_thresh", "1"), 0);
	auto *wq = alloc_workqueue("stuck", WQ_PERCPU, 0);
	work_struct s, b;
	INIT_WORK(&s, stuck_fn);
	INIT_WORK(&b, behind_fn);
	testing::internal::CaptureStderr();
	queue_work_on(test_cpu(), wq, &s);
	queue_work_on(test_cpu(), wq, &b);
	std::this_thread::sleep_for(3000ms);
	release_stuck = true;
	flush_workqueue(wq);
	std::string err = testing::internal::GetCapturedStderr();
	EXPECT_NE(err.find("BUG: workqueue lockup - pool cpus="), std::string::npos) << err;
	EXPECT_NE(err.find("stuck_fn"), std::string::npos) << err;
	destroy_workqueue(wq);
	cmwq_param_set("workqueue.watchdog_thresh", "30");
	cmwq_param_set("workqueue.cpu_intensive_thresh_us", "10000");
}

TEST(params, bad_values_are_refused_and_read_back_in_kernel_format)
{
	char buf[64];
	EXPECT_EQ(cmwq_param_set("workqueue.nope", "1"), -ENOENT);
	EXPECT_EQ(cmwq_param_set("workqueue.default_affinity_scope", "default"), -EINVAL);
	EXPECT_EQ(cmwq_param_set("workqueue.default_affinity_scope", "cach"), -EINVAL);
	EXPECT_EQ(cmwq_param_set("workqueue.watchdog_thresh", "-3"), -EINVAL);
	EXPECT_EQ(cmwq_param_set("workqueue.power_efficient", "1"), -EPERM);
	ASSERT_EQ(cmwq_param_get("workqueue.default_affinity_scope", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "cache_shard");
	ASSERT_EQ(cmwq_param_get("workqueue.cpu_intensive_thresh_us", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "10000");
	ASSERT_EQ(cmwq_param_get("workqueue.debug_force_rr_cpu", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "N");
	EXPECT_EQ(cmwq_param_get("workqueue.default_affinity_scope", buf, 3), -ERANGE);
	// Idle waits: unbound pools wait 20 us before sleeping, per-CPU ones
	// not at all; at most 1 ms.
	ASSERT_EQ(cmwq_param_get("cmwq.unbound_idle_spin_ns", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "20000");
	ASSERT_EQ(cmwq_param_get("cmwq.idle_spin_ns", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "0");
	EXPECT_EQ(cmwq_param_set("cmwq.unbound_idle_spin_ns", "1000001"), -EINVAL);
	EXPECT_EQ(cmwq_param_set("cmwq.unbound_idle_spin_ns", "-1"), -EINVAL);
	EXPECT_EQ(cmwq_param_set("cmwq.unbound_idle_spin_ns", "20 us"), -EINVAL);
	ASSERT_EQ(cmwq_param_get("cmwq.unbound_idle_spin_ns", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "20000") << "a refused value changed the parameter";
	ASSERT_EQ(cmwq_param_get("cmwq.unbound_returning_takes", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "Y");
	EXPECT_EQ(cmwq_param_set("cmwq.unbound_returning_takes", "maybe"), -EINVAL);
}

// ---- flush_workqueue under concurrent queuers and flushers ------------------

namespace {
struct batch_item {
	work_struct work;
	std::atomic<int> *done;
	unsigned delay_us;
};

void batch_fn(work_struct *w)
{
	auto *b = container_of(w, batch_item, work);
	if (b->delay_us)
		udelay(b->delay_us);
	b->done->fetch_add(1, std::memory_order_release);
}

// Threads on every CPU queue batches onto wq and flush: each flush must not
// return before every item its thread queued before the call has run,
// whatever the other threads queue and flush meanwhile (flush colors wrap
// around many times; the per-pwq color counts are summed by the flushers).
void flush_waits_for_own_batches(workqueue_struct *wq)
{
	constexpr int threads = 4, batch = 24;
#if defined(__SANITIZE_THREAD__)
	constexpr int rounds = 15;
#else
	constexpr int rounds = 60;
#endif
	auto cpus = cmwq::current_topology().usable;
	std::atomic<int> failures{0};
	std::vector<std::thread> ts;
	for (int t = 0; t < threads; t++) {
		ts.emplace_back([&, t] {
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET(cpus[static_cast<size_t>(t) % cpus.size()], &set);
			sched_setaffinity(0, sizeof(set), &set);
			for (int r = 0; r < rounds; r++) {
				std::atomic<int> done{0};
				std::vector<batch_item> items(batch);
				for (int i = 0; i < batch; i++) {
					items[static_cast<size_t>(i)].done = &done;
					items[static_cast<size_t>(i)].delay_us = static_cast<unsigned>((r + i) % 4 == 0 ? 50 : 0);
					INIT_WORK(&items[static_cast<size_t>(i)].work, batch_fn);
					if (i % 2)
						queue_work(wq, &items[static_cast<size_t>(i)].work);
					else
						queue_work_on(cpus[static_cast<size_t>(i) % cpus.size()], wq,
							      &items[static_cast<size_t>(i)].work);
				}
				flush_workqueue(wq);
				if (done.load(std::memory_order_acquire) != batch)
					failures++;
				// Items are on the stack: wait for the stragglers a broken
				// flush let through before the vector goes away.
				while (done.load(std::memory_order_acquire) != batch)
					std::this_thread::sleep_for(1ms);
			}
		});
	}
	for (auto &t : ts)
		t.join();
	EXPECT_EQ(failures.load(), 0);
}
} // namespace

TEST(flush, concurrent_flushers_each_wait_for_their_own_items_per_cpu)
{
	auto *wq = alloc_workqueue("flushes_percpu", WQ_PERCPU, 0);
	flush_waits_for_own_batches(wq);
	destroy_workqueue(wq);
}

TEST(flush, concurrent_flushers_each_wait_for_their_own_items_unbound)
{
	auto *wq = alloc_workqueue("flushes_unbound", WQ_UNBOUND, 0);
	flush_waits_for_own_batches(wq);
	destroy_workqueue(wq);
}
