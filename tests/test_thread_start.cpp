// test_thread_start.cpp - internal threads that cannot be created: no
// abort, a one-line message naming the thread and the error, the work kept
// and started once creation succeeds; a WQ_MEM_RECLAIM workqueue whose
// rescuer cannot start is not created. Failures are injected through
// cmwq.fail_thread_creation (a process under RLIMIT_NPROC sees EAGAIN the
// same way, but root ignores that limit). Then the program's thread hooks,
// and the library threads' scheduling policies. Each test runs in its own
// process (ctest), so the timer thread is not running yet when the test
// starts.
#include <gtest/gtest.h>

#include <cmwq/linux/timer.h>
#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>
#include <cmwq/threads.h>

#include <dirent.h>
#include <errno.h>
#include <sched.h>

#include "test_util.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {
std::atomic<int> ran{0};
void count_fn(work_struct *) { ran++; }
} // namespace

TEST(thread_start, delayed_work_is_kept_when_the_timer_thread_cannot_start)
{
	// A process that has run work: its monitor runs (it starts with the
	// first worker) and retries the timer thread on its tick.
	static work_struct first;
	INIT_WORK(&first, count_fn);
	ASSERT_TRUE(queue_work(system_dfl_wq, &first));
	flush_work(&first);
	ran = 0;
	ASSERT_EQ(cmwq_param_set("cmwq.fail_thread_creation", "-1"), 0);
	static delayed_work dw;
	INIT_DELAYED_WORK(&dw, count_fn);
	testing::internal::CaptureStderr();
	EXPECT_TRUE(queue_delayed_work(system_dfl_wq, &dw, 5));
	std::this_thread::sleep_for(200ms);
	std::string err = testing::internal::GetCapturedStderr();
	EXPECT_NE(err.find("cmwq: cannot start the timer thread: "), std::string::npos) << err;
	EXPECT_EQ(ran.load(), 0);
	EXPECT_TRUE(delayed_work_pending(&dw));
	ASSERT_EQ(cmwq_param_set("cmwq.fail_thread_creation", "0"), 0);
	// Retried after the cooldown, by the monitor's tick or the next arming.
	EXPECT_TRUE(wait_until([] { return ran.load() == 1; }, 10000ms));
	flush_delayed_work(&dw);
}

TEST(thread_start, reclaim_workqueue_is_not_created_without_its_rescuer)
{
	// Each test runs in a process of its own: no timer thread yet. A
	// WQ_MEM_RECLAIM workqueue starts it first (its mayday timer runs
	// there), so the first injected failure is the timer thread's.
	ASSERT_EQ(cmwq_param_set("cmwq.fail_thread_creation", "1"), 0);
	testing::internal::CaptureStderr();
	workqueue_struct *wq = alloc_workqueue("t_notimer", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	std::string err = testing::internal::GetCapturedStderr();
	EXPECT_EQ(wq, nullptr);
	EXPECT_NE(err.find("cannot start the timer thread"), std::string::npos) << err;
	EXPECT_NE(err.find("t_notimer"), std::string::npos) << err;
	// The injection was used up: the next one is created and has a rescuer.
	wq = alloc_workqueue("t_rescuer", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	ASSERT_NE(wq, nullptr);
	// With the timer thread running, the next failure is the rescuer's.
	ASSERT_EQ(cmwq_param_set("cmwq.fail_thread_creation", "1"), 0);
	testing::internal::CaptureStderr();
	workqueue_struct *none = alloc_workqueue("t_norescuer", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	err = testing::internal::GetCapturedStderr();
	EXPECT_EQ(none, nullptr);
	EXPECT_NE(err.find("cannot start the rescuer thread"), std::string::npos) << err;
	EXPECT_NE(err.find("t_norescuer"), std::string::npos) << err;
	work_struct w;
	INIT_WORK(&w, count_fn);
	int before = ran.load();
	queue_work(wq, &w);
	flush_work(&w);
	EXPECT_EQ(ran.load(), before + 1);
	destroy_workqueue(wq);
}

// Forward progress at a cold start: no worker can ever be created, so every
// item of a per-CPU WQ_MEM_RECLAIM workqueue, on every CPU, runs through its
// rescuer, summoned by the mayday timer whose thread the workqueue started.
TEST(thread_start, reclaim_items_on_every_cpu_run_when_no_worker_can_start)
{
	ASSERT_EQ(cmwq_param_set("cmwq.fail_worker_creation", "-1"), 0);
	workqueue_struct *wq = alloc_workqueue("t_cold_reclaim", WQ_PERCPU | WQ_MEM_RECLAIM, 0);
	ASSERT_NE(wq, nullptr);
	std::vector<int> cpus;
	unsigned c;
	for_each_online_cpu(c)
		cpus.push_back(static_cast<int>(c));
	ASSERT_FALSE(cpus.empty());
	std::vector<work_struct> items(cpus.size() * 12);
	int before = ran.load();
	for (size_t i = 0; i < items.size(); i++) {
		INIT_WORK(&items[i], count_fn);
		EXPECT_TRUE(queue_work_on(cpus[i / 12], wq, &items[i]));
	}
	EXPECT_TRUE(wait_until([&] { return ran.load() == before + static_cast<int>(items.size()); }, 20000ms))
		<< ran.load() - before << " of " << items.size() << " ran";
	ASSERT_EQ(cmwq_param_set("cmwq.fail_worker_creation", "0"), 0);
	destroy_workqueue(wq);
}

TEST(thread_start, worker_creation_failure_keeps_the_work_queued)
{
	ASSERT_EQ(cmwq_param_set("cmwq.fail_worker_creation", "-1"), 0);
	workqueue_struct *wq = alloc_workqueue("t_noworker", WQ_UNBOUND, 0);
	ASSERT_NE(wq, nullptr);
	workqueue_attrs *a = alloc_workqueue_attrs();
	a->nice = 9; // a fresh pool with no worker yet
	ASSERT_EQ(apply_workqueue_attrs(wq, a), 0);
	free_workqueue_attrs(a);
	work_struct w;
	INIT_WORK(&w, count_fn);
	int before = ran.load();
	EXPECT_TRUE(queue_work(wq, &w));
	std::this_thread::sleep_for(100ms);
	EXPECT_EQ(ran.load(), before);
	EXPECT_TRUE(work_pending(&w));
	ASSERT_EQ(cmwq_param_set("cmwq.fail_worker_creation", "0"), 0);
	EXPECT_TRUE(wait_until([&] { return ran.load() == before + 1; }, 10000ms));
	destroy_workqueue(wq);
}

// A pool whose worker could not start waits CREATE_COOLDOWN_NS (1 s)
// before it tries again, however many items arrive meanwhile: no storm of
// failing thread creations (and their messages) while the limit holds.
TEST(thread_start, a_failed_worker_creation_is_not_retried_for_every_queued_item)
{
	ASSERT_EQ(cmwq_param_set("cmwq.fail_worker_creation", "100000"), 0);
	workqueue_struct *wq = alloc_workqueue("t_cooldown", WQ_UNBOUND, 0);
	ASSERT_NE(wq, nullptr);
	workqueue_attrs *a = alloc_workqueue_attrs();
	a->nice = 7; // a fresh pool with no worker yet
	ASSERT_EQ(apply_workqueue_attrs(wq, a), 0);
	free_workqueue_attrs(a);
	std::vector<work_struct> ws(300);
	int before = ran.load();
	testing::internal::CaptureStderr();
	for (auto &w : ws) {
		INIT_WORK(&w, count_fn);
		EXPECT_TRUE(queue_work(wq, &w));
		std::this_thread::sleep_for(1ms);
	}
	char left[32] = {};
	ASSERT_EQ(cmwq_param_get("cmwq.fail_worker_creation", left, sizeof(left)), 0);
	ASSERT_EQ(cmwq_param_set("cmwq.fail_worker_creation", "0"), 0);
	(void)testing::internal::GetCapturedStderr();
	long attempts = 100000 - std::atol(left);
	// 300 items over about 0.3 s (more under load): one attempt, another
	// for each second that passed.
	EXPECT_GE(attempts, 1);
	EXPECT_LE(attempts, 6) << attempts << " worker creations tried for 300 items";
	EXPECT_TRUE(wait_until([&] { return ran.load() == before + 300; }, 20000ms));
	destroy_workqueue(wq);
}

// ---- thread hooks (<cmwq/threads.h>) ----------------------------------------

namespace {
int nr_tasks()
{
	int n = 0;
	if (DIR *d = opendir("/proc/self/task")) {
		while (dirent *e = readdir(d))
			n += e->d_name[0] != '.';
		closedir(d);
	}
	return n;
}

thread_local int tl_hooked_kind = -1; // set by the start hook on its own thread
std::atomic<int> starts[5], stops[5];
std::atomic<bool> item_saw_hook{false}, timer_saw_hook{false};
void start_hook(cmwq_thread_kind kind, void *arg)
{
	EXPECT_EQ(arg, &starts);
	tl_hooked_kind = kind;
	starts[kind]++;
}
void stop_hook(cmwq_thread_kind kind, void *)
{
	EXPECT_EQ(tl_hooked_kind, int(kind)) << "stop runs on the thread start ran on";
	stops[kind]++;
}
void hooked_item(work_struct *) { item_saw_hook = tl_hooked_kind == CMWQ_THREAD_WORKER || tl_hooked_kind == CMWQ_THREAD_RESCUER; }
void hooked_timer(timer_list *) { timer_saw_hook = tl_hooked_kind == CMWQ_THREAD_TIMER; }
} // namespace

// Loading the library and creating workqueues starts no thread: a program's
// constructors run first, and a thread that exists before its hooks are
// installed would run without them.
TEST(thread_hooks, the_library_starts_no_thread_before_it_has_work)
{
	int before = nr_tasks();
	cmwq_init();
	workqueue_struct *wq = alloc_workqueue("hooks_lazy", WQ_UNBOUND, 0);
	ASSERT_NE(wq, nullptr);
	EXPECT_EQ(nr_tasks(), before) << "no worker, timer or monitor thread yet";
	static work_struct w;
	INIT_WORK(&w, hooked_item);
	ASSERT_TRUE(queue_work(wq, &w));
	flush_work(&w);
	EXPECT_GT(nr_tasks(), before);
	destroy_workqueue(wq);
}

TEST(thread_hooks, start_and_stop_run_on_every_library_thread_that_runs_program_code)
{
	cmwq_thread_hooks hooks{start_hook, stop_hook, &starts};
	ASSERT_EQ(cmwq_set_thread_hooks(&hooks), 0) << "no library thread runs yet";
	workqueue_struct *wq = alloc_workqueue("hooks_reclaim", WQ_PERCPU | WQ_MEM_RECLAIM, 0);
	ASSERT_NE(wq, nullptr);
	EXPECT_TRUE(wait_until([] { return starts[CMWQ_THREAD_RESCUER].load() == 1; }, 10000ms));
	static work_struct w;
	INIT_WORK(&w, hooked_item);
	ASSERT_TRUE(queue_work(wq, &w));
	flush_work(&w);
	EXPECT_TRUE(item_saw_hook.load()) << "a work item runs after its thread's start hook";
	EXPECT_GE(starts[CMWQ_THREAD_WORKER].load(), 1);
	static timer_list t;
	timer_setup(&t, hooked_timer, 0);
	mod_timer(&t, jiffies + 1);
	EXPECT_TRUE(wait_until([] { return timer_saw_hook.load(); }, 10000ms));
	EXPECT_EQ(starts[CMWQ_THREAD_TIMER].load(), 1);
	EXPECT_TRUE(wait_until([] { return starts[CMWQ_THREAD_MONITOR].load() == 1; }, 10000ms));
	// Installing hooks now: the running threads never ran these.
	cmwq_thread_hooks other{start_hook, stop_hook, &starts};
	EXPECT_EQ(cmwq_set_thread_hooks(&other), -EBUSY);
	// A thread that ends runs stop: the rescuer, with its workqueue.
	destroy_workqueue(wq);
	EXPECT_TRUE(wait_until([] { return stops[CMWQ_THREAD_RESCUER].load() == 1; }, 10000ms));
	EXPECT_EQ(cmwq_set_thread_hooks(nullptr), -EBUSY);
}

// ---- scheduling policies ----------------------------------------------------

namespace {
// The threads of this process by name: their scheduling policies.
std::multimap<std::string, int> policies()
{
	std::multimap<std::string, int> out;
	if (DIR *d = opendir("/proc/self/task")) {
		while (dirent *e = readdir(d)) {
			if (e->d_name[0] == '.')
				continue;
			std::string comm;
			std::getline(std::ifstream(std::string("/proc/self/task/") + e->d_name + "/comm"), comm);
			out.emplace(comm, sched_getscheduler(std::atoi(e->d_name)));
		}
		closedir(d);
	}
	return out;
}

bool has_thread(const char *name)
{
	return policies().count(name) > 0;
}

// Whether a thread of this process may make itself a batch thread (a
// sandbox may refuse sched_setscheduler; the monitor then stays as it is).
bool batch_allowed()
{
	bool ok = false;
	std::thread([&] {
		sched_param sp{};
		ok = sched_setscheduler(0, SCHED_BATCH, &sp) == 0;
	}).join();
	return ok;
}

// A per-CPU workqueue that has run an item: a worker, and so the monitor.
workqueue_struct *started_workqueue(const char *name)
{
	workqueue_struct *wq = alloc_workqueue("%s", WQ_PERCPU, 0, name);
	if (!wq)
		return nullptr;
	static work_struct w;
	INIT_WORK(&w, count_fn);
	queue_work(wq, &w);
	flush_work(&w);
	return wq;
}

void other_for_monitor(cmwq_thread_kind kind, void *)
{
	if (kind != CMWQ_THREAD_MONITOR)
		return;
	sched_param sp{};
	sched_setscheduler(0, SCHED_OTHER, &sp);
}
} // namespace

// The monitor's wakeups must not preempt the workers it watches
// (docs/design.md §3.3): it runs as SCHED_BATCH. Every other library
// thread keeps the program's policy (SCHED_OTHER here).
TEST(thread_policy, the_monitor_is_a_batch_thread_and_the_others_are_not)
{
	ASSERT_EQ(sched_getscheduler(0), SCHED_OTHER);
	if (!batch_allowed())
		GTEST_SKIP() << "this process may not use SCHED_BATCH";
	workqueue_struct *wq = started_workqueue("policy_percpu");
	ASSERT_NE(wq, nullptr);
	static timer_list t;
	static std::atomic<bool> fired{false};
	timer_setup(&t, [](timer_list *) { fired = true; }, 0);
	mod_timer(&t, jiffies + 1);
	ASSERT_TRUE(wait_until([] { return fired.load() && has_thread("cmwq/monitor"); }, 10000ms));
	int seen = 0;
	for (auto &[name, policy] : policies()) {
		if (name == "cmwq/monitor") {
			EXPECT_EQ(policy, SCHED_BATCH) << name;
			seen++;
		} else if (name.rfind("kworker/", 0) == 0 || name == "cmwq/timer") {
			EXPECT_EQ(policy, SCHED_OTHER) << name;
			seen++;
		}
	}
	EXPECT_GE(seen, 3) << "the monitor, the timer thread and a worker";
	destroy_workqueue(wq);
}

// The policy is set before the program's start hook runs, so the hook has
// the last word: here it puts the monitor back to SCHED_OTHER.
TEST(thread_policy, a_start_hook_may_choose_the_monitors_policy)
{
	cmwq_thread_hooks hooks{other_for_monitor, nullptr, nullptr};
	ASSERT_EQ(cmwq_set_thread_hooks(&hooks), 0) << "no library thread runs yet";
	workqueue_struct *wq = started_workqueue("policy_hook");
	ASSERT_NE(wq, nullptr);
	ASSERT_TRUE(wait_until([] { return has_thread("cmwq/monitor"); }, 10000ms));
	auto all = policies();
	auto m = all.find("cmwq/monitor");
	ASSERT_NE(m, all.end());
	EXPECT_EQ(m->second, SCHED_OTHER);
	destroy_workqueue(wq);
	EXPECT_EQ(cmwq_set_thread_hooks(nullptr), -EBUSY);
}
