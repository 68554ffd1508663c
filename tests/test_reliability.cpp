// test_reliability.cpp - guarantees under change: work is never stranded
// when cancel, flush and attribute changes interleave, and the watchdog's
// stuck time counts from when the item could first run.
#include <gtest/gtest.h>

#include <cstdlib>

#include <cmwq/linux/workqueue.h>
#include <cmwq/introspect.hpp>
#include <cmwq/params.h>

#include "test_util.hpp"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>
#include <chrono>
#include <memory>
#include <thread>

using namespace std::chrono_literals;

namespace {

struct gate_item {
	work_struct work;
	std::atomic<bool> started{false};
	std::atomic<bool> release{false};
};

void gate_fn(work_struct *w)
{
	auto *g = container_of(w, gate_item, work);
	g->started = true;
	while (!g->release.load())
		std::this_thread::sleep_for(1ms);
}

void nop_fn(work_struct *) {}

workqueue_attrs *attrs_with_nice(int nice)
{
	workqueue_attrs *a = alloc_workqueue_attrs();
	a->nice = nice;
	a->affn_scope = WQ_AFFN_SYSTEM;
	return a;
}

} // namespace

namespace {

// The scene of the stranding race: item a runs on a pool of nice n1 and holds
// the workqueue's only active slot (max_active 1); an attribute change moves
// the workqueue to nice n2, a pool nothing has used (no worker yet); item b
// is queued there and waits inactive; a flusher waits on b, its barrier
// linked behind b. Then the test cancels b.
struct inactive_item_with_flusher {
	workqueue_struct *wq = nullptr;
	workqueue_attrs *a1 = nullptr, *a2 = nullptr;
	gate_item a;
	std::shared_ptr<work_struct> b = std::make_shared<work_struct>();
	std::shared_ptr<std::atomic<bool>> flushed = std::make_shared<std::atomic<bool>>(false);

	// before_flush runs once b is queued and before the flusher starts.
	template <class F>
	void set_up(const char *name, int n1, int n2, F before_flush)
	{
		wq = alloc_workqueue("%s", WQ_UNBOUND, 1, name);
		ASSERT_NE(wq, nullptr);
		a1 = attrs_with_nice(n1);
		a2 = attrs_with_nice(n2);
		ASSERT_EQ(apply_workqueue_attrs(wq, a1), 0);
		INIT_WORK(&a.work, gate_fn);
		ASSERT_TRUE(queue_work(wq, &a.work));
		ASSERT_TRUE(wait_until([&] { return a.started.load(); }));
		ASSERT_EQ(apply_workqueue_attrs(wq, a2), 0);
		INIT_WORK(b.get(), nop_fn);
		ASSERT_TRUE(queue_work(wq, b.get())); // inactive: max_active 1 is taken by a
		EXPECT_EQ(work_busy(b.get()), unsigned(WORK_BUSY_PENDING));
		before_flush();
		std::thread([b = b, flushed = flushed] {
			flush_work(b.get());
			flushed->store(true);
		}).detach();
		// The flusher's barrier is linked behind b once it is queued.
		ASSERT_TRUE(wait_until(
			[&] { return (__atomic_load_n(&b->data, __ATOMIC_ACQUIRE) & WORK_STRUCT_LINKED) != 0; }));
	}

	~inactive_item_with_flusher()
	{
		a.release = true;
		// A flusher that never returned still refers to b (shared) and the
		// workqueue: leave both rather than free them under it.
		if (wq && wait_until([&] { return flushed->load(); }, 20000ms)) {
			flush_workqueue(wq);
			destroy_workqueue(wq);
		}
		free_workqueue_attrs(a1);
		free_workqueue_attrs(a2);
	}
};

} // namespace

// The stranding race: a flush_work barrier linked behind an inactive item
// was moved to the worklist of the item's pool when the item was cancelled,
// but nothing woke that pool. After an attribute change the pool is new and
// has no worker, so the barrier (and the flusher) waited forever.
TEST(stranding, barrier_of_a_cancelled_inactive_item_runs_on_a_fresh_pool)
{
	inactive_item_with_flusher t;
	t.set_up("t_strand", 3, 6, [] {}); // no other test uses nice 6: a fresh pool
	if (HasFatalFailure())
		return;
	EXPECT_TRUE(cancel_work(t.b.get()));
	t.a.release = true;
	EXPECT_TRUE(wait_until([&] { return t.flushed->load(); }, 20000ms))
		<< "flush_work of a cancelled inactive item never returned";
}

// The watchdog's "stuck for" counts from when the pool's worklist last
// became non-empty or made progress, never from an unset stamp (which read
// as the machine's uptime). The barrier of a cancelled inactive item is put
// on a pool that cannot get a worker, so the watchdog must report it.
TEST(watchdog, stuck_time_counts_from_when_the_item_could_first_run)
{
	ASSERT_EQ(cmwq_param_set("workqueue.watchdog_thresh", "1"), 0);
	inactive_item_with_flusher t;
	t.set_up("t_stuck_time", 2, 8, [] { // nice 8: a fresh pool, never had a worker
		ASSERT_EQ(cmwq_param_set("cmwq.fail_worker_creation", "-1"), 0);
	});
	if (HasFatalFailure())
		return;
	testing::internal::CaptureStderr();
	auto t0 = std::chrono::steady_clock::now();
	EXPECT_TRUE(cancel_work(t.b.get()));
	std::this_thread::sleep_for(2500ms);
	auto elapsed_s = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - t0).count();
	std::string err = testing::internal::GetCapturedStderr();
	cmwq_param_set("cmwq.fail_worker_creation", "0");
	t.a.release = true;
	EXPECT_TRUE(wait_until([&] { return t.flushed->load(); }, 20000ms));
	cmwq_param_set("workqueue.watchdog_thresh", "30");

	size_t at = err.find("stuck for ");
	ASSERT_NE(at, std::string::npos) << "no lockup report:\n" << err;
	for (; at != std::string::npos; at = err.find("stuck for ", at + 1)) {
		long secs = std::stol(err.substr(at + 10));
		EXPECT_GE(secs, 1) << err;
		EXPECT_LE(secs, elapsed_s + 1) << "stuck time longer than the item existed:\n" << err;
	}
}

namespace {
std::atomic<int> handled_in_handler{0};
void usr2_handler(int) { handled_in_handler++; }
void sleep_a_bit(work_struct *) { std::this_thread::sleep_for(2ms); }
} // namespace

// Library threads block asynchronous signals, so a program that blocks a
// signal and takes it with sigwait() in a thread of its own receives every
// one, as if cmwq were not there. Without the block a process-directed
// signal goes to a library thread (the only ones not blocking it) and runs
// the handler there.
TEST(signals, sigwait_thread_receives_every_signal_with_library_threads_running)
{
	// Library threads of every kind: workers on each CPU, the timer, the
	// monitor (started with the library).
	std::vector<work_struct> works(static_cast<size_t>(cmwq_num_online_cpus()) * 2);
	for (size_t i = 0; i < works.size(); i++) {
		INIT_WORK(&works[i], sleep_a_bit);
		queue_work(system_dfl_wq, &works[i]);
	}
	static delayed_work dw;
	INIT_DELAYED_WORK(&dw, nop_fn);
	queue_delayed_work(system_percpu_wq, &dw, 1);
	for (auto &w : works)
		flush_work(&w);
	flush_delayed_work(&dw);

	struct sigaction sa = {};
	sa.sa_handler = usr2_handler;
	ASSERT_EQ(sigaction(SIGUSR2, &sa, nullptr), 0);
	sigset_t set, old;
	sigemptyset(&set);
	sigaddset(&set, SIGUSR2);
	ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &set, &old), 0);
	std::atomic<int> waited{0};
	std::atomic<bool> stop{false};
	std::thread waiter([&] { // inherits the blocked mask
		while (!stop.load()) {
			timespec ts{0, 50 * 1000 * 1000};
			if (sigtimedwait(&set, nullptr, &ts) == SIGUSR2)
				waited++;
		}
	});
	for (int i = 0; i < 50; i++) {
		int before = waited.load() + handled_in_handler.load();
		kill(getpid(), SIGUSR2);
		// One at a time: a pending signal is not queued twice.
		EXPECT_TRUE(wait_until([&] { return waited.load() + handled_in_handler.load() > before; }));
	}
	stop = true;
	waiter.join();
	pthread_sigmask(SIG_SETMASK, &old, nullptr);
	EXPECT_EQ(waited.load(), 50);
	EXPECT_EQ(handled_in_handler.load(), 0) << "signals were delivered to library threads";
}

// NULL workqueue, work and parameter pointers get a message naming the call
// and the failure value, never a crash; nothing queued is lost.
TEST(bad_input, null_pointers_are_refused_with_a_message)
{
	work_struct w;
	INIT_WORK(&w, nop_fn);
	char buf[16];
	testing::internal::CaptureStderr();
	EXPECT_FALSE(queue_work(nullptr, &w));
	EXPECT_FALSE(queue_work(system_dfl_wq, nullptr));
	EXPECT_FALSE(queue_delayed_work(system_dfl_wq, nullptr, 1));
	EXPECT_FALSE(flush_work(nullptr));
	EXPECT_FALSE(cancel_work(nullptr));
	EXPECT_FALSE(cancel_work_sync(nullptr));
	EXPECT_EQ(work_busy(nullptr), 0u);
	destroy_workqueue(nullptr);
	flush_workqueue(nullptr);
	drain_workqueue(nullptr);
	workqueue_set_max_active(nullptr, 4);
	workqueue_attrs *a = alloc_workqueue_attrs();
	EXPECT_EQ(apply_workqueue_attrs(nullptr, a), -EINVAL);
	free_workqueue_attrs(a);
	const char *no_name = nullptr;
	EXPECT_EQ(alloc_workqueue(no_name, WQ_UNBOUND, 0), nullptr);
	EXPECT_EQ(cmwq_param_set(nullptr, "1"), -EINVAL);
	EXPECT_EQ(cmwq_param_get(nullptr, buf, sizeof(buf)), -EINVAL);
	EXPECT_EQ(cmwq_param_get("workqueue.watchdog_thresh", nullptr, 16), -EINVAL);
	std::string err = testing::internal::GetCapturedStderr();
	EXPECT_NE(err.find("cmwq: queue_work_on(): wq is NULL"), std::string::npos) << err;
	EXPECT_NE(err.find("cmwq: queue_work_on(): work is NULL"), std::string::npos) << err;
	EXPECT_NE(err.find("cmwq: destroy_workqueue(): wq is NULL"), std::string::npos) << err;
	EXPECT_NE(err.find("cmwq: cmwq_param_get(): buf is NULL"), std::string::npos) << err;
	EXPECT_NE(err.find("cmwq: alloc_workqueue(): fmt is NULL"), std::string::npos) << err;
	// The engine still works. (flush_work returns false when the item had
	// already run, so the run itself is what is checked.)
	static std::atomic<bool> ran_after{false};
	INIT_WORK(&w, [](work_struct *) { ran_after = true; });
	EXPECT_TRUE(queue_work(system_dfl_wq, &w));
	flush_work(&w);
	EXPECT_TRUE(ran_after.load());
}

namespace {
long rss_kb()
{
	FILE *f = std::fopen("/proc/self/statm", "r");
	long pages = 0, rss = 0;
	if (f) {
		if (std::fscanf(f, "%ld %ld", &pages, &rss) != 2)
			rss = 0;
		std::fclose(f);
	}
	return rss * (sysconf(_SC_PAGESIZE) / 1024);
}
} // namespace

// A service that retunes a queue keeps its memory: the pwqs an attribute
// change retires are reused by the next change, and the two attribute
// sets map to the same two pools every time. 10,000 alternating applies
// (with items moving through the queue) may grow RSS by under 0.1 kB each.
TEST(memory, alternating_apply_workqueue_attrs_keeps_rss_bounded)
{
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
	GTEST_SKIP() << "sanitizer runtimes keep their own per-object memory; RSS says nothing here";
#endif
	if (getenv("CMWQ_UNDER_EMULATION"))
		GTEST_SKIP() << "under user-mode emulation the RSS is the emulator's (translated code cache)";
	workqueue_struct *wq = alloc_workqueue("t_retune", WQ_UNBOUND, 0);
	ASSERT_NE(wq, nullptr);
	workqueue_attrs *a[2] = {attrs_with_nice(1), attrs_with_nice(5)};
	work_struct w;
	INIT_WORK(&w, nop_fn);
	auto apply_n = [&](int n) {
		for (int i = 0; i < n; i++) {
			ASSERT_EQ(apply_workqueue_attrs(wq, a[i & 1]), 0);
			queue_work(wq, &w);
		}
		flush_workqueue(wq);
	};
	apply_n(2000); // warm up: allocator arenas, both pools' workers
	long before = rss_kb();
	apply_n(10000);
	long after = rss_kb();
	std::printf("memory: RSS %ld kB -> %ld kB over 10000 applies (%.3f kB each)\n", before, after,
		    static_cast<double>(after - before) / 10000);
	EXPECT_LT(after - before, 1000) << "RSS grew " << (after - before) << " kB over 10000 applies";
	destroy_workqueue(wq);
	free_workqueue_attrs(a[0]);
	free_workqueue_attrs(a[1]);
}

namespace {
std::atomic<int> napping{0}, napped{0};
void nap_fn(work_struct *)
{
	napping++;
	std::this_thread::sleep_for(50ms);
	napped++;
}
} // namespace

// A long-running service: a burst of blocking items grows an unbound pool
// to many workers, and once they have been idle for cmwq.idle_timeout_s the
// pool keeps two idle ones (the kernel's ratio) and the others' threads
// exit; the pool still serves items afterwards.
TEST(memory, idle_workers_are_culled_and_their_threads_exit)
{
	char old_timeout[32] = {};
	ASSERT_EQ(cmwq_param_get("cmwq.idle_timeout_s", old_timeout, sizeof old_timeout), 0);
	ASSERT_EQ(cmwq_param_set("cmwq.idle_timeout_s", "1"), 0);
	workqueue_struct *wq = alloc_workqueue("t_cull", WQ_UNBOUND, 0);
	ASSERT_NE(wq, nullptr);
	workqueue_attrs *a = attrs_with_nice(7); // a pool of its own
	ASSERT_EQ(apply_workqueue_attrs(wq, a), 0);
	free_workqueue_attrs(a);
	work_struct first;
	INIT_WORK(&first, nop_fn);
	queue_work(wq, &first);
	flush_work(&first);
	int threads_before = process_threads();
	int workers_before = pool_workers_of("t_cull");
	std::vector<work_struct> ws(16);
	for (auto &w : ws) {
		INIT_WORK(&w, nap_fn);
		queue_work(wq, &w);
	}
	flush_workqueue(wq);
	ASSERT_EQ(napped.load(), 16);
	int grown = pool_workers_of("t_cull");
	EXPECT_GE(grown, workers_before + 4) << "16 sleeping items on an unbound pool";
	EXPECT_TRUE(wait_until([] { return pool_workers_of("t_cull") <= 2; }, 20000ms))
		<< pool_workers_of("t_cull") << " workers left of " << grown;
	// Each culled worker's thread exits (it does not linger, spinning or
	// asleep); others of the library may come and go, hence the slack.
	EXPECT_TRUE(wait_until([&] { return process_threads() <= threads_before + 1; }, 20000ms))
		<< process_threads() << " threads, " << threads_before << " before the burst";
	napped = 0;
	for (auto &w : ws)
		queue_work(wq, &w);
	flush_workqueue(wq);
	EXPECT_EQ(napped.load(), 16);
	destroy_workqueue(wq);
	cmwq_param_set("cmwq.idle_timeout_s", old_timeout);
}

namespace {
std::atomic<int> dbg_runs{0};
} // namespace
// External and unmangled: messages name functions from the dynamic symbol table.
extern "C" void dbg_fn(work_struct *) { dbg_runs++; }
namespace {
std::atomic<bool> dbg_release{false};
void dbg_block_fn(work_struct *)
{
	while (!dbg_release.load())
		std::this_thread::sleep_for(1ms);
}
} // namespace

// Always on, no parameter needed: a zeroed (never initialised) item is
// refused at queue time, and a destroyed workqueue is refused by every call
// that takes one (destroy twice, flush after destroy) instead of crashing
// or hanging. The message names the call.
TEST(bad_input, zeroed_item_and_destroyed_workqueue_are_refused)
{
	work_struct zeroed{};
	testing::internal::CaptureStderr();
	EXPECT_FALSE(queue_work(system_dfl_wq, &zeroed));
	workqueue_struct *wq = alloc_workqueue("t_destroyed", WQ_UNBOUND, 0);
	ASSERT_NE(wq, nullptr);
	ASSERT_EQ(cmwq_param_set("cmwq.debug_objects", "1"), 0); // keeps its memory for the checks below
	destroy_workqueue(wq);
	work_struct w;
	INIT_WORK(&w, dbg_fn);
	EXPECT_FALSE(queue_work(wq, &w));
	flush_workqueue(wq);
	drain_workqueue(wq);
	destroy_workqueue(wq);
	workqueue_set_max_active(wq, 2);
	// Every other call that takes a workqueue.
	delayed_work dw;
	INIT_DELAYED_WORK(&dw, dbg_fn);
	rcu_work rw;
	INIT_RCU_WORK(&rw, dbg_fn);
	EXPECT_FALSE(queue_work_node(0, wq, &w));
	EXPECT_FALSE(queue_delayed_work_on(WORK_CPU_UNBOUND, wq, &dw, 1));
	EXPECT_FALSE(mod_delayed_work_on(WORK_CPU_UNBOUND, wq, &dw, 1));
	EXPECT_FALSE(queue_rcu_work(wq, &rw));
	EXPECT_FALSE(workqueue_congested(WORK_CPU_UNBOUND, wq));
	EXPECT_EQ(cmwq_workqueue_flags(wq), 0u);
	workqueue_set_min_active(wq, 1);
	workqueue_attrs *attrs = alloc_workqueue_attrs();
	EXPECT_NE(apply_workqueue_attrs(wq, attrs), 0);
	free_workqueue_attrs(attrs);
	show_one_workqueue(wq);
	EXPECT_NE(workqueue_sysfs_register(wq), 0);
	uint64_t stats[PWQ_NR_STATS];
	std::fill(std::begin(stats), std::end(stats), uint64_t{7});
	cmwq_workqueue_stats(wq, stats);
	EXPECT_EQ(stats[0], 0u);
	std::string err = testing::internal::GetCapturedStderr();
	for (const char *call : {"queue_work_node", "queue_delayed_work_on", "mod_delayed_work_on", "queue_rcu_work",
				 "workqueue_congested", "workqueue_set_min_active", "workqueue_set_max_active",
				 "apply_workqueue_attrs", "show_one_workqueue", "workqueue_sysfs_register",
				 "cmwq_workqueue_stats", "drain_workqueue", "cmwq_workqueue_flags"})
		EXPECT_NE(err.find(std::string("cmwq: ") + call + "(): workqueue "), std::string::npos) << call << "\n" << err;
	cmwq_param_set("cmwq.debug_objects", "0");
	EXPECT_NE(err.find("queue_work_on(): work item "), std::string::npos) << err;
	EXPECT_NE(err.find("has no function (never initialised with INIT_WORK?); not queued"), std::string::npos)
		<< err;
	EXPECT_NE(err.find("cmwq: flush_workqueue(): workqueue "), std::string::npos) << err;
	EXPECT_NE(err.find("(t_destroyed) was destroyed; nothing done"), std::string::npos) << err;
	EXPECT_NE(err.find("cmwq: destroy_workqueue(): workqueue "), std::string::npos) << err;
	EXPECT_NE(err.find("cmwq: queue_work_on(): workqueue "), std::string::npos) << err;
	EXPECT_EQ(dbg_runs.load(), 0);
}

// cmwq.debug_objects=1: garbage items are refused at queue time, and
// INIT_WORK on a queued item leaves it alone (it still runs once) with a
// message naming its function and workqueue.
TEST(debug_objects, uninitialised_item_refused_and_init_of_queued_item_kept)
{
	ASSERT_EQ(cmwq_param_set("cmwq.debug_objects", "1"), 0);
	char buf[16];
	ASSERT_EQ(cmwq_param_get("cmwq.debug_objects", buf, sizeof(buf)), 0);
	EXPECT_STREQ(buf, "Y");
	workqueue_struct *wq = alloc_workqueue("t_dbg", WQ_UNBOUND, 1);
	ASSERT_NE(wq, nullptr);
	testing::internal::CaptureStderr();
	// Garbage: a function, but links and state word that INIT_WORK never wrote.
	work_struct garbage;
	std::memset(&garbage, 0x5a, sizeof(garbage));
	garbage.data = 0x5a5a5a5a5a5a5a5aUL & ~WORK_STRUCT_PENDING;
	garbage.func = dbg_fn;
	EXPECT_FALSE(queue_work(wq, &garbage));
	// A queued item (behind a running one) initialised again.
	work_struct blocker, queued;
	INIT_WORK(&blocker, dbg_block_fn);
	INIT_WORK(&queued, dbg_fn);
	ASSERT_TRUE(queue_work(wq, &blocker));
	ASSERT_TRUE(queue_work(wq, &queued));
	INIT_WORK(&queued, nop_fn);
	dbg_release = true;
	flush_workqueue(wq);
	std::string err = testing::internal::GetCapturedStderr();
	EXPECT_EQ(dbg_runs.load(), 1) << "the queued item must run once, with its own function";
	EXPECT_NE(err.find("cmwq: queue_work_on(): work item dbg_fn at "), std::string::npos) << err;
	EXPECT_NE(err.find("was never initialised (INIT_WORK); not queued"), std::string::npos) << err;
	EXPECT_NE(err.find("cmwq: INIT_WORK on work item dbg_fn while it is queued on workqueue t_dbg; left as it is"),
		  std::string::npos)
		<< err;
	// Once run, it may be initialised and queued again.
	INIT_WORK(&queued, dbg_fn);
	EXPECT_TRUE(queue_work(wq, &queued));
	flush_work(&queued);
	EXPECT_EQ(dbg_runs.load(), 2);
	destroy_workqueue(wq);
	cmwq_param_set("cmwq.debug_objects", "0");
}

// A workqueue name format is not a write primitive: %n (any flags, width or
// length) is refused with one message and prints nothing, as the kernel's
// vsnprintf does, and the arguments after it still line up.
TEST(bad_input, percent_n_in_a_name_format_is_refused_and_writes_nothing)
{
	int target = 12345;
	signed char starget = 77;
	testing::internal::CaptureStderr();
	workqueue_struct *wq = alloc_workqueue("p6_%n%s_%hhn%d", WQ_UNBOUND, 0, &target, "x", &starget, 9);
	std::string err = testing::internal::GetCapturedStderr();
	ASSERT_NE(wq, nullptr);
	EXPECT_EQ(target, 12345) << "%n wrote through its argument";
	EXPECT_EQ(starget, 77);
	EXPECT_NE(err.find("alloc_workqueue(): %n in the format is refused"), std::string::npos) << err;
	// The rest of the name is formatted: "p6_" "" "x" "_" "" "9".
	static std::string seen;
	static work_struct w;
	INIT_WORK(&w, [](work_struct *) { seen = cmwq_current_workqueue_name(); });
	ASSERT_TRUE(queue_work(wq, &w));
	flush_work(&w);
	EXPECT_EQ(seen, "p6_x_9");
	destroy_workqueue(wq);
	// Every other conversion still formats as printf does, stars included.
	wq = alloc_workqueue("q%*d%%%lu%c%.2s%-3x|", WQ_UNBOUND, 0, 3, 7, 42UL, 'z', "abc", 0xa);
	ASSERT_NE(wq, nullptr);
	ASSERT_TRUE(queue_work(wq, &w));
	flush_work(&w);
	EXPECT_EQ(seen, "q  7%42zaba  |");
	destroy_workqueue(wq);
}

// Parameters refuse what their description refuses and read back what is
// in effect: cmwq.blocked_sample_us has a documented minimum of 50 (0
// disables), so 1..49 are -EINVAL and the value stays.
TEST(bad_input, parameters_refuse_values_below_their_documented_minimum)
{
	char was[32] = "";
	ASSERT_EQ(cmwq_param_get("cmwq.blocked_sample_us", was, sizeof(was)), 0);
	EXPECT_EQ(cmwq_param_set("cmwq.blocked_sample_us", "1"), -EINVAL);
	EXPECT_EQ(cmwq_param_set("cmwq.blocked_sample_us", "49"), -EINVAL);
	char now[32] = "";
	ASSERT_EQ(cmwq_param_get("cmwq.blocked_sample_us", now, sizeof(now)), 0);
	EXPECT_STREQ(now, was);
	EXPECT_EQ(cmwq_param_set("cmwq.blocked_sample_us", "50"), 0);
	EXPECT_EQ(cmwq_param_set("cmwq.blocked_sample_us", "0"), 0);
	EXPECT_EQ(cmwq_param_set("cmwq.blocked_sample_us", was), 0);
}

// cmwq.control=1 in CMWQ_PARAMS whose endpoint cannot start (its directory
// cannot be created) reads back 0: the parameter says what is in effect.
// The check runs in a fresh process (a death test re-executes this one),
// since the start-up path runs once per process.
TEST(bad_input, a_control_endpoint_that_failed_at_start_reads_back_0)
{
	if (getenv("CMWQ_UNDER_EMULATION"))
		GTEST_SKIP() << "re-executes itself: qemu-user cannot exec the target binary (no binfmt handler)";
	GTEST_FLAG_SET(death_test_style, "threadsafe");
	const char *old_params = getenv("CMWQ_PARAMS");
	std::string saved_params = old_params ? old_params : "";
	const char *old_xdg = getenv("XDG_RUNTIME_DIR");
	std::string saved_xdg = old_xdg ? old_xdg : "";
	setenv("CMWQ_PARAMS", (saved_params + " cmwq.control=1").c_str(), 1);
	setenv("XDG_RUNTIME_DIR", "/proc/cmwq-no-such-dir", 1);
	EXPECT_EXIT(
		{
			char v[8] = "";
			int rc = cmwq_param_get("cmwq.control", v, sizeof(v));
			std::_Exit(rc == 0 && strcmp(v, "0") == 0 ? 0 : 3);
		},
		testing::ExitedWithCode(0), "");
	if (old_params)
		setenv("CMWQ_PARAMS", saved_params.c_str(), 1);
	else
		unsetenv("CMWQ_PARAMS");
	if (old_xdg)
		setenv("XDG_RUNTIME_DIR", saved_xdg.c_str(), 1);
	else
		unsetenv("XDG_RUNTIME_DIR");
}

namespace {
std::atomic<bool> drain_release{false};
std::atomic<int> drain_b_runs{0};
} // namespace

// The kernel's queue_work returns true for an item it drops because the
// workqueue drains; cmwq_try_queue_work says false for it, and the item is
// idle (its owner may free it). Every true is one run.
TEST(bad_input, try_queue_work_says_false_for_an_item_a_draining_workqueue_drops)
{
	static int run; // the message is once per workqueue name: a name per run
	workqueue_struct *wq = alloc_workqueue("t_try_drain%d", WQ_UNBOUND, 0, ++run);
	ASSERT_NE(wq, nullptr);
	drain_release = false;
	drain_b_runs = 0;
	work_struct a;
	INIT_WORK(&a, [](work_struct *) {
		while (!drain_release.load())
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
	});
	ASSERT_TRUE(queue_work(wq, &a));
	std::thread drainer([&] { drain_workqueue(wq); });
	std::vector<std::unique_ptr<work_struct>> bs;
	int accepted = 0;
	bool refused = false;
	testing::internal::CaptureStderr();
	auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
	while (!refused && std::chrono::steady_clock::now() < end) {
		bs.push_back(std::make_unique<work_struct>());
		INIT_WORK(bs.back().get(), [](work_struct *) { drain_b_runs++; });
		if (cmwq_try_queue_work(wq, bs.back().get())) {
			accepted++;
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
		} else {
			refused = true;
			EXPECT_FALSE(work_pending(bs.back().get())) << "a refused item must be idle";
		}
	}
	std::string err = testing::internal::GetCapturedStderr();
	drain_release = true;
	drainer.join();
	flush_workqueue(wq);
	destroy_workqueue(wq);
	EXPECT_TRUE(refused) << "the draining workqueue never refused an item";
	EXPECT_EQ(drain_b_runs.load(), accepted) << "every accepted item runs once";
	EXPECT_NE(err.find("cannot queue"), std::string::npos) << err;
}

// A call with the pointer of a workqueue destroyed shortly before is refused
// without reading freed memory: the structs of the last destroyed
// workqueues are kept (no cmwq.debug_objects needed). The ASan stage runs
// this program, where a read of freed memory fails the test.
TEST(reliability, a_recently_destroyed_workqueue_is_refused_without_reading_freed_memory)
{
	static std::atomic<int> ran{0};
	std::vector<workqueue_struct *> dead;
	for (int i = 0; i < 8; i++) {
		workqueue_struct *wq = alloc_workqueue("dead_%d", i % 2 ? WQ_UNBOUND : 0, 0, i);
		ASSERT_NE(wq, nullptr);
		destroy_workqueue(wq);
		dead.push_back(wq);
	}
	work_struct w;
	INIT_WORK(&w, [](work_struct *) { ran++; });
	delayed_work dw;
	INIT_DELAYED_WORK(&dw, [](work_struct *) { ran++; });
	testing::internal::CaptureStderr();
	for (auto *wq : dead) {
		EXPECT_FALSE(queue_work(wq, &w));
		EXPECT_FALSE(queue_delayed_work(wq, &dw, 1));
		EXPECT_FALSE(mod_delayed_work(wq, &dw, 1));
		flush_workqueue(wq);
		drain_workqueue(wq);
		workqueue_set_max_active(wq, 4);
	}
	std::string err = testing::internal::GetCapturedStderr();
	EXPECT_NE(err.find("(dead_7) was destroyed"), std::string::npos) << err;
	EXPECT_FALSE(work_pending(&w));
	EXPECT_FALSE(delayed_work_pending(&dw));
	usleep(20000);
	EXPECT_EQ(ran.load(), 0);
}
