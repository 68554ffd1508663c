// test_fork.cpp - a child of fork() uses cmwq: existing and new workqueues
// run and flush there; the parent's running, queued and delayed items are
// not run in the child and can be queued again; the parent carries on.
// Each child runs under alarm() so a hang fails it instead of the suite.
// Under the sanitizers the children are not run: ThreadSanitizer refuses
// new threads after a multi-threaded fork, and AddressSanitizer (GCC 12)
// keeps its thread-registry lock across fork, so a child whose parent was
// creating a thread at that moment hangs in its first pthread_create (seen
// in a child's stack: __sanitizer::ThreadRegistry::Lock). The normal build
// runs them.
#include <gtest/gtest.h>

#include <cmwq/control.h>
#include <cmwq/introspect.hpp>
#include <cmwq/params.h>
#include <cmwq/task.hpp>
#include <cmwq/linux/workqueue.h>
#include <cmwq/topology.hpp>

#include "test_util.hpp"

#include <pthread.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

using namespace std::chrono_literals;

namespace {

std::atomic<bool> release_blocker{false};
std::atomic<int> blocker_runs{0}, behind_runs{0}, delayed_runs{0}, child_runs{0};

void blocker_fn(work_struct *)
{
	blocker_runs++;
	while (!release_blocker.load())
		std::this_thread::sleep_for(1ms);
}
void behind_fn(work_struct *) { behind_runs++; }
void delayed_fn(work_struct *) { delayed_runs++; }
void child_fn(work_struct *) { child_runs++; }

// Runs f in a child (exit status: its return value), with a 20 s alarm.
int in_child(int (*f)())
{
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
	(void)f;
	return 0; // see the file comment
#endif
	pid_t pid = ::fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		::alarm(20);
		_exit(f());
	}
	int status = 0;
	if (::waitpid(pid, &status, 0) != pid)
		return -1;
	if (WIFSIGNALED(status))
		return 1000 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

workqueue_struct *shared_wq;
work_struct blocker, behind;
delayed_work later;

int child_uses_cmwq()
{
	// The parent's items are not run here, and are free to be queued.
	if (work_pending(&behind) || delayed_work_pending(&later))
		return 2;
	if (behind_runs.load() != 0 || delayed_runs.load() != 0)
		return 3;
	// An existing workqueue, a system one and a new one all work.
	if (!queue_work(shared_wq, &behind))
		return 4;
	flush_work(&behind);
	if (behind_runs.load() != 1)
		return 5;
	work_struct w;
	INIT_WORK(&w, child_fn);
	queue_work(system_percpu_wq, &w);
	flush_work(&w);
	queue_work(system_dfl_wq, &w);
	flush_work(&w);
	workqueue_struct *mine = alloc_workqueue("t_fork_child", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	if (!mine)
		return 6;
	queue_work(mine, &w);
	flush_workqueue(mine);
	destroy_workqueue(mine);
	if (!queue_delayed_work(shared_wq, &later, 1))
		return 7;
	flush_delayed_work(&later);
	if (delayed_runs.load() != 1 || child_runs.load() != 3)
		return 8;
	flush_workqueue(shared_wq);
	return 0;
}

} // namespace

TEST(fork, child_runs_existing_and_new_workqueues_and_drops_the_parents_items)
{
	if (getenv("CMWQ_UNDER_EMULATION"))
		GTEST_SKIP() << "qemu user-mode emulation: a child forked while the parent's worker runs "
				"hangs now and then creating its timer thread, inside the emulator (as in "
				"forking_while_other_threads_use_the_engine); natively it is tested";
	shared_wq = alloc_workqueue("t_fork", WQ_UNBOUND, 1);
	ASSERT_NE(shared_wq, nullptr);
	INIT_WORK(&blocker, blocker_fn);
	INIT_WORK(&behind, behind_fn);
	INIT_DELAYED_WORK(&later, delayed_fn);
	// The parent has an item running, one waiting behind it (max_active 1)
	// and a delayed item armed far in the future.
	ASSERT_TRUE(queue_work(shared_wq, &blocker));
	ASSERT_TRUE(wait_until([] { return blocker_runs.load() == 1; }));
	ASSERT_TRUE(queue_work(shared_wq, &behind));
	ASSERT_TRUE(queue_delayed_work(shared_wq, &later, 60000));

	EXPECT_EQ(in_child(child_uses_cmwq), 0) << "(2-8: a step failed; 1014: it hung)";

	// The parent is untouched: its items run as before.
	EXPECT_TRUE(work_pending(&behind));
	release_blocker = true;
	flush_work(&behind);
	EXPECT_EQ(behind_runs.load(), 1);
	EXPECT_TRUE(cancel_delayed_work_sync(&later));
	destroy_workqueue(shared_wq);
}

namespace {
int child_forks_again()
{
	// A grandchild works too (the handlers are re-armed in the child).
	work_struct w;
	INIT_WORK(&w, child_fn);
	queue_work(system_dfl_wq, &w);
	flush_work(&w);
	return in_child([] {
		work_struct x;
		INIT_WORK(&x, child_fn);
		queue_work(system_percpu_wq, &x);
		flush_work(&x);
		return child_runs.load() == 2 ? 0 : 9;
	});
}
} // namespace

TEST(fork, grandchild_works_too)
{
	child_runs = 0;
	EXPECT_EQ(in_child(child_forks_again), 0);
}

namespace {
int child_has_its_own_endpoint()
{
	if (cmwq_control_path())
		return 12; // not before the child uses cmwq
	work_struct w;
	INIT_WORK(&w, child_fn);
	queue_work(system_dfl_wq, &w);
	flush_work(&w);
	const char *p = cmwq_control_path();
	if (!p)
		return 10;
	char want[32];
	std::snprintf(want, sizeof want, "/%d.sock", static_cast<int>(getpid()));
	if (std::string(p).find(want) == std::string::npos)
		return 11;
	cmwq_control_stop();
	return 0;
}
} // namespace

TEST(fork, control_endpoint_is_restarted_for_the_child)
{
	char tmpl[] = "/tmp/cmwq-fork-test-XXXXXX";
	ASSERT_NE(::mkdtemp(tmpl), nullptr);
	::setenv("XDG_RUNTIME_DIR", tmpl, 1);
	ASSERT_EQ(cmwq_control_start(), 0);
	std::string parent_path = cmwq_control_path();
	EXPECT_EQ(in_child(child_has_its_own_endpoint), 0);
	ASSERT_NE(cmwq_control_path(), nullptr);
	EXPECT_EQ(std::string(cmwq_control_path()), parent_path);
	cmwq_control_stop();
	std::string cmd = std::string("rm -rf ") + tmpl;
	EXPECT_EQ(std::system(cmd.c_str()), 0);
}

namespace {
int child_queues_and_flushes()
{
	work_struct w;
	INIT_WORK(&w, child_fn);
	for (int i = 0; i < 20; i++) {
		queue_work(i % 2 ? system_dfl_wq : system_percpu_wq, &w);
		flush_work(&w);
	}
	workqueue_struct *wq = alloc_workqueue("t_fork_busy_child", WQ_UNBOUND, 0);
	queue_work(wq, &w);
	flush_workqueue(wq);
	destroy_workqueue(wq);
	return 0;
}
void spin_fn(work_struct *) {}
} // namespace

// fork while other threads queue, flush, cancel and change attributes: the
// prepare handler waits for their locked sections, and each child works.
TEST(fork, forking_while_other_threads_use_the_engine)
{
	if (getenv("CMWQ_UNDER_EMULATION"))
		GTEST_SKIP() << "qemu user-mode emulation does not fork a process whose other threads are running "
				"reliably (the child can hang in the emulator's own locks)";
	workqueue_struct *wq = alloc_workqueue("t_fork_busy", WQ_UNBOUND, 2);
	ASSERT_NE(wq, nullptr);
	std::atomic<bool> stop{false};
	std::vector<std::thread> ts;
	std::vector<work_struct> ws(16);
	for (auto &w : ws)
		INIT_WORK(&w, spin_fn);
	for (int t = 0; t < 3; t++)
		ts.emplace_back([&, t] {
			workqueue_attrs *a = alloc_workqueue_attrs();
			for (unsigned i = 0; !stop.load(); i++) {
				work_struct &w = ws[(i + static_cast<unsigned>(t) * 5) % ws.size()];
				switch (i % 4) {
				case 0: queue_work(wq, &w); break;
				case 1: flush_work(&w); break;
				case 2: cancel_work(&w); break;
				case 3:
					a->nice = static_cast<int>(i % 3);
					apply_workqueue_attrs(wq, a);
					break;
				}
			}
			free_workqueue_attrs(a);
		});
	for (int i = 0; i < 20; i++)
		EXPECT_EQ(in_child(child_queues_and_flushes), 0) << "fork " << i;
	stop = true;
	for (auto &t : ts)
		t.join();
	flush_workqueue(wq);
	destroy_workqueue(wq);
}

namespace {
std::atomic<bool> release_starvers{false};
std::atomic<int> starvers_started{0};
std::atomic<bool> rescued_ran{false}, rescued_by_rescuer{false};
workqueue_struct *starved_reclaim_wq;

void starver_fn(work_struct *)
{
	starvers_started++;
	while (!release_starvers.load())
		std::this_thread::sleep_for(1ms);
}
void rescued_fn(work_struct *)
{
	rescued_by_rescuer = current_is_workqueue_rescuer();
	rescued_ran = true;
}


int child_starved_pool_is_rescued()
{
	// Worker creation still fails here (the parameter is inherited) and the
	// pool starts with no worker: only the rescuer can run the item, and it
	// is summoned only if the mayday timer is armed in this process.
	work_struct w;
	INIT_WORK(&w, rescued_fn);
	queue_work(starved_reclaim_wq, &w);
	auto end = std::chrono::steady_clock::now() + 10s;
	while (!rescued_ran.load() && std::chrono::steady_clock::now() < end)
		std::this_thread::sleep_for(1ms);
	if (!rescued_ran.load())
		return 13;
	return rescued_by_rescuer.load() ? 0 : 14;
}
} // namespace

// The parent forks while a pool is starved and its mayday timer is armed:
// the child has no timers of the parent's, so its pool must arm one anew
// when it starves, or a reclaim workqueue there is never rescued.
TEST(fork, a_child_whose_parent_was_starved_still_rescues)
{
	if (getenv("CMWQ_UNDER_EMULATION"))
		GTEST_SKIP() << "qemu user-mode emulation: forking while the parent's workers run can hang "
				"the child in the emulator (see child_runs_existing_and_new_workqueues...)";
	struct creation_restored {
		~creation_restored() { cmwq_param_set("cmwq.fail_worker_creation", "0"); }
	} restore;
	// Two workqueues on one pool of their own (same attributes): the plain
	// one's item keeps the pool starved in the parent, since the rescuer
	// takes only its own workqueue's items.
	auto *attrs = alloc_workqueue_attrs();
	attrs->nice = 6;
	starved_reclaim_wq = alloc_workqueue("t_fork_reclaim", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	auto *plain = alloc_workqueue("t_fork_plain", WQ_UNBOUND, 0);
	ASSERT_NE(starved_reclaim_wq, nullptr);
	ASSERT_NE(plain, nullptr);
	ASSERT_EQ(apply_workqueue_attrs(starved_reclaim_wq, attrs), 0);
	ASSERT_EQ(apply_workqueue_attrs(plain, attrs), 0);
	free_workqueue_attrs(attrs);
	work_struct warm;
	INIT_WORK(&warm, [](work_struct *) {});
	queue_work(plain, &warm);
	flush_work(&warm);
	ASSERT_EQ(cmwq_param_set("cmwq.fail_worker_creation", "-1"), 0);
	std::vector<work_struct> starvers(64);
	int n = 0;
	while (n < pool_workers_of("t_fork_plain") && n < 63) {
		INIT_WORK(&starvers[static_cast<size_t>(n)], starver_fn);
		queue_work(plain, &starvers[static_cast<size_t>(n)]);
		n++;
		int want = n;
		ASSERT_TRUE(wait_until([&] { return starvers_started.load() >= want; }));
	}
	ASSERT_GT(n, 0);
	INIT_WORK(&starvers[63], starver_fn);
	queue_work(plain, &starvers[63]); // waits: no idle worker, none created
	std::this_thread::sleep_for(50ms); // past the timer's first 10 ms: it re-arms while starved

	EXPECT_EQ(in_child(child_starved_pool_is_rescued), 0) << "(13: not rescued within 10 s; 14: not by the rescuer)";

	ASSERT_EQ(cmwq_param_set("cmwq.fail_worker_creation", "0"), 0);
	release_starvers = true;
	flush_workqueue(plain);
	EXPECT_EQ(starvers_started.load(), n + 1);
	destroy_workqueue(plain);
	destroy_workqueue(starved_reclaim_wq);
}

namespace {
std::atomic<int> child_timer_runs{0};

int child_arms_a_timer_and_flushes()
{
	delayed_work dw;
	INIT_DELAYED_WORK(&dw, [](work_struct *) { child_timer_runs++; });
	queue_delayed_work(system_dfl_wq, &dw, 1);
	flush_delayed_work(&dw);
	workqueue_struct *wq = alloc_workqueue("t_fork_timer_child", WQ_UNBOUND, 0);
	work_struct w;
	INIT_WORK(&w, child_fn);
	queue_work(wq, &w);
	flush_workqueue(wq);
	destroy_workqueue(wq);
	return child_timer_runs.load() == 1 ? 0 : 2;
}
} // namespace

// fork while other threads arm and cancel timers and flush workqueues, so
// that the parent's timer thread and flushers are often being woken at the
// moment of the fork: the child's first timer and its first flush must not
// wait for those threads, which do not exist there. (The engine's waits
// once used glibc condition variables, which record their waiters: a child
// forked just after the parent signalled the timer thread, before it woke,
// blocked forever in its first notify, under a pool lock.)
TEST(fork, a_child_forked_while_timers_and_flushes_wake_threads_can_use_both)
{
	if (getenv("CMWQ_UNDER_EMULATION"))
		GTEST_SKIP() << "qemu user-mode emulation does not fork a process whose other threads are running "
				"reliably (the child can hang in the emulator's own locks)";
	workqueue_struct *wq = alloc_workqueue("t_fork_timers", WQ_UNBOUND, 0);
	ASSERT_NE(wq, nullptr);
	std::atomic<bool> stop{false};
	std::vector<std::thread> ts;
	for (int t = 0; t < 3; t++)
		ts.emplace_back([&, t] {
			delayed_work dw;
			INIT_DELAYED_WORK(&dw, [](work_struct *) {});
			work_struct w;
			INIT_WORK(&w, [](work_struct *) {});
			for (unsigned i = 0; !stop.load(); i++) {
				if (t == 2) {
					queue_work(wq, &w);
					flush_workqueue(wq);
				} else if (i % 2) {
					mod_delayed_work(wq, &dw, i % 3);
				} else {
					cancel_delayed_work(&dw);
				}
			}
			cancel_delayed_work_sync(&dw);
		});
	for (int i = 0; i < 100; i++) {
		int rc = in_child(child_arms_a_timer_and_flushes);
		EXPECT_EQ(rc, 0) << "fork " << i << " (2: the timer's item did not run once; 1014: it hung)";
		if (rc)
			break;
	}
	stop = true;
	for (auto &t : ts)
		t.join();
	destroy_workqueue(wq);
}

// ---- items in transit at the fork, and the detector's descriptors ----------

namespace {

// A grace period of 2 ms under a lock that an atfork handler also takes
// (as liburcu-bp's does): the fork then comes just after a grace period
// ends, while the grace-period item queues what it served.
pthread_mutex_t gp_lock = PTHREAD_MUTEX_INITIALIZER;
std::atomic<bool> gp_atfork{false};
void gp_sync()
{
	pthread_mutex_lock(&gp_lock);
	timespec ts{0, 2000000};
	nanosleep(&ts, nullptr);
	pthread_mutex_unlock(&gp_lock);
}
void gp_before_fork()
{
	if (gp_atfork.load())
		pthread_mutex_lock(&gp_lock);
}
void gp_after_fork()
{
	if (gp_atfork.load())
		pthread_mutex_unlock(&gp_lock);
}

constexpr int N_TRANSIT = 8;
rcu_work transit_rcu[N_TRANSIT];
work_struct transit_work[N_TRANSIT];
delayed_work transit_dwork[N_TRANSIT];
workqueue_struct *transit_wq;
std::atomic<int> child_ran{0};

// In the child: every item the parent's threads were moving is idle, can be
// queued again, and runs; a new rcu_work is flushed.
int child_finds_every_item_idle()
{
	for (int i = 0; i < N_TRANSIT; i++) {
		if (work_pending(&transit_rcu[i].work))
			return 2;
		if (work_pending(&transit_work[i]))
			return 3;
		if (delayed_work_pending(&transit_dwork[i]))
			return 4;
	}
	INIT_RCU_WORK(&transit_rcu[0], [](work_struct *) { child_ran++; });
	INIT_WORK(&transit_work[0], [](work_struct *) { child_ran++; });
	INIT_DELAYED_WORK(&transit_dwork[0], [](work_struct *) { child_ran++; });
	if (!queue_rcu_work(transit_wq, &transit_rcu[0]) || !queue_work(transit_wq, &transit_work[0]) ||
	    !queue_delayed_work(transit_wq, &transit_dwork[0], 1))
		return 5;
	flush_rcu_work(&transit_rcu[0]);
	flush_work(&transit_work[0]);
	flush_delayed_work(&transit_dwork[0]);
	return child_ran.load() == 3 ? 0 : 6;
}

} // namespace

// fork while threads queue rcu_work (under a grace period an atfork handler
// waits for), plain and delayed work and cancel them: an item between its
// PENDING bit and a list, one the grace-period item took off its batch, one
// whose timer fired but that is not queued yet, one a canceller holds: in
// the child every such item is idle and can be queued again. (Without the
// transit slots 373 of 2400 rcu_works were still pending in children.)
TEST(fork, items_in_transit_at_the_fork_are_idle_and_queueable_in_the_child)
{
	if (getenv("CMWQ_UNDER_EMULATION"))
		GTEST_SKIP() << "qemu user-mode emulation does not fork a process whose other threads are running "
				"reliably (the child can hang in the emulator's own locks)";
	static bool once = [] { return pthread_atfork(gp_before_fork, gp_after_fork, gp_after_fork) == 0; }();
	ASSERT_TRUE(once);
	ASSERT_EQ(cmwq_set_rcu_synchronize(gp_sync), 0);
	gp_atfork = true;
	transit_wq = alloc_workqueue("t_fork_transit", WQ_UNBOUND, 0);
	ASSERT_NE(transit_wq, nullptr);
	for (int i = 0; i < N_TRANSIT; i++) {
		INIT_RCU_WORK(&transit_rcu[i], [](work_struct *) {});
		INIT_WORK(&transit_work[i], [](work_struct *) {});
		INIT_DELAYED_WORK(&transit_dwork[i], [](work_struct *) {});
	}
	std::atomic<bool> stop{false};
	std::vector<std::thread> ts;
	ts.emplace_back([&] {
		for (unsigned i = 0; !stop.load(); i++) {
			queue_rcu_work(transit_wq, &transit_rcu[i % N_TRANSIT]);
			std::this_thread::sleep_for(200us);
		}
	});
	ts.emplace_back([&] {
		for (unsigned i = 0; !stop.load(); i++) {
			queue_work(transit_wq, &transit_work[i % N_TRANSIT]);
			if (i % 4 == 0)
				cancel_work(&transit_work[(i + 3) % N_TRANSIT]);
		}
	});
	ts.emplace_back([&] {
		for (unsigned i = 0; !stop.load(); i++) {
			queue_delayed_work(transit_wq, &transit_dwork[i % N_TRANSIT], i % 2);
			if (i % 3 == 0)
				mod_delayed_work(transit_wq, &transit_dwork[(i + 5) % N_TRANSIT], 0);
		}
	});
	int failed = 0;
	for (int i = 0; i < 150 && !failed; i++) {
		std::this_thread::sleep_for(2ms);
		int rc = in_child(child_finds_every_item_idle);
		EXPECT_EQ(rc, 0) << "fork " << i
				 << " (2/3/4: a parent's rcu_work/work/delayed work pending in the child; 5: not "
				    "queueable; 6: did not run; 1014: hung)";
		failed = rc;
	}
	stop = true;
	for (auto &t : ts)
		t.join();
	for (int i = 0; i < N_TRANSIT; i++) {
		flush_rcu_work(&transit_rcu[i]);
		cancel_work_sync(&transit_work[i]);
		cancel_delayed_work_sync(&transit_dwork[i]);
	}
	gp_atfork = false;
	cmwq_set_rcu_synchronize(nullptr);
	destroy_workqueue(transit_wq);
}

namespace {
// The context-switch events, epoll sets and eventfds this process holds.
int detector_fds()
{
	int n = 0;
	for (int fd = 0; fd < 4096; fd++) {
		char path[64], buf[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t k = readlink(path, buf, sizeof(buf) - 1);
		if (k <= 0)
			continue;
		buf[k] = 0;
		std::string s(buf);
		n += s == "anon_inode:[perf_event]" || s == "anon_inode:[eventpoll]" || s == "anon_inode:[eventfd]";
	}
	return n;
}

std::atomic<bool> ev_b_started{false}, ev_give_up{false};

int child_holds_no_detector_fd() { return detector_fds() == 0 ? 0 : 2; }
} // namespace

// The parent's workers opened context-switch events (and the monitor its
// epoll set): a fork child closes its copies, which would otherwise count
// the parent's switches and hold its descriptors.
TEST(fork, the_child_closes_the_parents_context_switch_events)
{
	if (getenv("CMWQ_UNDER_EMULATION"))
		GTEST_SKIP() << "no context-switch events under an emulator";
	char prev[32] = {};
	ASSERT_EQ(cmwq_param_get("cmwq.block_detect", prev, sizeof(prev)), 0);
	if (cmwq_param_set("cmwq.block_detect", "perf") != 0)
		GTEST_SKIP() << "context-switch events are not available here";
	workqueue_struct *wq = alloc_workqueue("t_fork_events", WQ_PERCPU, 0);
	ASSERT_NE(wq, nullptr);
	// An item that blocks with another behind it: its worker opens an event.
	ev_b_started = ev_give_up = false;
	work_struct a, b;
	INIT_WORK(&a, [](work_struct *) {
		while (!ev_b_started.load() && !ev_give_up.load())
			std::this_thread::sleep_for(1ms);
	});
	INIT_WORK(&b, [](work_struct *) { ev_b_started = true; });
	int cpu = cmwq::current_topology().usable.back();
	queue_work_on(cpu, wq, &a);
	queue_work_on(cpu, wq, &b);
	bool found = wait_until([] { return ev_b_started.load(); }, 20000ms);
	ev_give_up = true;
	flush_workqueue(wq);
	ASSERT_TRUE(found) << "the blocked item was not found";
	ASSERT_GT(detector_fds(), 0) << "the parent holds no event: the check below could not fail";
	EXPECT_EQ(in_child(child_holds_no_detector_fd), 0) << "the child kept the parent's events";
	destroy_workqueue(wq);
	cmwq_param_set("cmwq.block_detect", std::string(prev) == "perf" ? "auto" : prev);
}

namespace {
std::atomic<bool> task_release{false};
cmwq::task<int> *parents_task;

int child_waits_for_the_parents_task()
{
	try {
		(void)parents_task->get();
		return 2; // it cannot have run here
	} catch (const cmwq::task_cancelled &) {
		return 0;
	}
}
} // namespace

// A task the parent submitted and that had not finished at the fork runs
// in the parent only: in the child, get() throws task_cancelled instead of
// waiting for ever.
TEST(fork, a_parents_unfinished_task_reads_as_cancelled_in_the_child)
{
	task_release = false;
	auto t = cmwq::submit(system_dfl_wq, [] {
		while (!task_release.load())
			std::this_thread::sleep_for(1ms);
		return 7;
	});
	parents_task = &t;
	EXPECT_EQ(in_child(child_waits_for_the_parents_task), 0) << "2: get() returned; 1014: it hung";
	task_release = true;
	EXPECT_EQ(t.get(), 7);
}
