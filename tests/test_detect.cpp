// Block detection: a worker that blocks without a hint (nanosleep, read on
// a pipe, a contended pthread mutex, poll) lets the item queued behind it
// start, on a per-CPU queue and on a managed unbound queue of one-CPU pods,
// with context-switch events alone (sampling off) and with the sampling
// fallback; the parameters; managed unbound fan-out; hogs in every mode.
#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>
#include <cmwq/stats.h>
#include <cmwq/topology.hpp>
#include <gtest/gtest.h>

#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"

using namespace std::chrono_literals;

namespace {

// Restores the parameters a test changes.
struct saved_params {
	std::string detect = param("cmwq.block_detect");
	std::string sample = param("cmwq.blocked_sample_us");
	std::string unbound = param("cmwq.unbound_concurrency");
	~saved_params()
	{
		cmwq_param_set("cmwq.fail_perf_open", "0");
		cmwq_param_set("cmwq.fail_switch_records", "0");
		cmwq_param_set("cmwq.block_detect", detect == "perf" ? "auto" : detect.c_str());
		cmwq_param_set("cmwq.blocked_sample_us", sample.c_str());
		cmwq_param_set("cmwq.unbound_concurrency", unbound.c_str());
	}
};

bool perf_available()
{
	saved_params s;
	return cmwq_param_set("cmwq.block_detect", "perf") == 0;
}

int test_cpu() { return cmwq::current_topology().usable.back(); }

enum class how { nanosleep, pipe_read, mutex, poll };
const char *how_name(how h)
{
	switch (h) {
	case how::nanosleep: return "nanosleep";
	case how::pipe_read: return "pipe_read";
	case how::mutex: return "mutex";
	default: return "poll";
	}
}

// Item A blocks (without a hint) until item B, queued behind it on the same
// pool, has started. Without detection B never starts while A blocks.
struct scenario {
	how h;
	int pipefd[2] = {-1, -1};
	pthread_mutex_t mtx = PTHREAD_MUTEX_INITIALIZER;
	std::atomic<bool> b_started{false};
	std::atomic<bool> a_done{false};
	std::atomic<bool> give_up{false};
	long sleep_ns = 1000000; // A's nanosleep (how::nanosleep)
	work_struct a, b;
};
scenario *cur;

void a_fn(work_struct *)
{
	scenario &s = *cur;
	switch (s.h) {
	case how::nanosleep:
		while (!s.b_started.load() && !s.give_up.load()) {
			timespec ts{0, s.sleep_ns};
			nanosleep(&ts, nullptr);
		}
		break;
	case how::pipe_read: {
		char c;
		(void)!read(s.pipefd[0], &c, 1);
		break;
	}
	case how::mutex:
		pthread_mutex_lock(&s.mtx); // the test thread holds it until B starts
		pthread_mutex_unlock(&s.mtx);
		break;
	case how::poll: {
		pollfd p{s.pipefd[0], POLLIN, 0};
		(void)poll(&p, 1, 60000);
		break;
	}
	}
	s.a_done = true;
}

void b_fn(work_struct *)
{
	scenario &s = *cur;
	s.b_started = true;
	if (s.h == how::pipe_read || s.h == how::poll)
		(void)!write(s.pipefd[1], "x", 1);
}

// Runs the scenario on wq (on test_cpu()); whether B started while A blocked.
bool b_starts_while_a_blocks(workqueue_struct *wq, how h)
{
	scenario s;
	s.h = h;
	cur = &s;
	EXPECT_EQ(pipe(s.pipefd), 0);
	if (h == how::mutex)
		pthread_mutex_lock(&s.mtx);
	INIT_WORK(&s.a, a_fn);
	INIT_WORK(&s.b, b_fn);
	queue_work_on(test_cpu(), wq, &s.a);
	queue_work_on(test_cpu(), wq, &s.b);
	bool ok = wait_until([&] { return s.b_started.load(); }, 20000ms);
	// Release A whatever happened, so the queue drains.
	s.give_up = true;
	if (h == how::mutex)
		pthread_mutex_unlock(&s.mtx);
	else
		(void)!write(s.pipefd[1], "x", 1);
	flush_workqueue(wq);
	close(s.pipefd[0]);
	close(s.pipefd[1]);
	cur = nullptr;
	return ok; // A ends only after B started: B started while A blocked
}

workqueue_struct *managed_unbound_wq(const char *name)
{
	// One-CPU pods: a managed pool lets one worker run, as a per-CPU pool.
	workqueue_struct *wq = alloc_workqueue("%s", WQ_UNBOUND, 0, name);
	workqueue_attrs *attrs = alloc_workqueue_attrs();
	attrs->affn_scope = WQ_AFFN_CPU;
	EXPECT_EQ(apply_workqueue_attrs(wq, attrs), 0);
	free_workqueue_attrs(attrs);
	return wq;
}

struct detect_case {
	how h;
	bool unbound;
	const char *detector; // perf (sampling off) or sample
};

std::string case_name(const testing::TestParamInfo<detect_case> &i)
{
	return std::string(how_name(i.param.h)) + (i.param.unbound ? "_managed_unbound_" : "_percpu_") +
	       i.param.detector;
}

class unannounced_block : public testing::TestWithParam<detect_case> {};

} // namespace

TEST_P(unannounced_block, item_behind_a_blocked_worker_starts)
{
	const detect_case &c = GetParam();
	saved_params saved;
	if (std::string(c.detector) == "perf") {
		if (!perf_available())
			GTEST_SKIP() << "context-switch events are not available here";
		ASSERT_EQ(cmwq_param_set("cmwq.block_detect", "perf"), 0);
		// Only the events can find the block.
		ASSERT_EQ(cmwq_param_set("cmwq.blocked_sample_us", "0"), 0);
	} else {
		ASSERT_EQ(cmwq_param_set("cmwq.fail_perf_open", "-1"), 0);
		ASSERT_EQ(cmwq_param_set("cmwq.block_detect", "auto"), 0);
		ASSERT_EQ(param("cmwq.block_detect"), "sample");
	}
	if (c.unbound) {
		ASSERT_EQ(cmwq_param_set("cmwq.unbound_concurrency", "managed"), 0);
	}
	workqueue_struct *wq = c.unbound ? managed_unbound_wq("detect_u") : alloc_workqueue("detect_p", WQ_PERCPU, 0);
	ASSERT_NE(wq, nullptr);
	// Twice: the first round also creates the pool's second worker.
	EXPECT_TRUE(b_starts_while_a_blocks(wq, c.h)) << "first round";
	EXPECT_TRUE(b_starts_while_a_blocks(wq, c.h)) << "second round";
	destroy_workqueue(wq);
}

INSTANTIATE_TEST_SUITE_P(kinds, unannounced_block,
			 testing::Values(detect_case{how::nanosleep, false, "perf"},
					 detect_case{how::pipe_read, false, "perf"},
					 detect_case{how::mutex, false, "perf"},
					 detect_case{how::poll, false, "perf"},
					 detect_case{how::nanosleep, true, "perf"},
					 detect_case{how::pipe_read, true, "perf"},
					 detect_case{how::mutex, true, "perf"},
					 detect_case{how::poll, true, "perf"},
					 detect_case{how::nanosleep, false, "sample"},
					 detect_case{how::pipe_read, false, "sample"},
					 detect_case{how::mutex, true, "sample"},
					 detect_case{how::poll, true, "sample"}),
			 case_name);

// Control: with no detector the scenario really needs one (else the tests
// above could pass for another reason). A gives up after a while.
TEST(block_detect, without_a_detector_the_item_behind_waits)
{
	saved_params saved;
	ASSERT_EQ(cmwq_param_set("cmwq.block_detect", "off"), 0);
	EXPECT_EQ(param("cmwq.block_detect"), "off");
	workqueue_struct *wq = alloc_workqueue("detect_off", WQ_PERCPU, 0);
	// Settle the pool first: while its first workers are being created, a
	// new worker may find nr_running still 0 and start B legitimately (the
	// kernel's pools do the same), which is not what this test is about.
	for (int i = 0; i < 3; i++) {
		work_struct warm;
		INIT_WORK(&warm, [](work_struct *) {});
		queue_work_on(test_cpu(), wq, &warm);
		flush_work(&warm);
	}
	std::this_thread::sleep_for(200ms);
	// A sleeps 5 ms at a time here: with no detector nobody sees A sleep, so
	// its CPU time adds up across sleeps, and on a loaded VM 300 wakeups
	// from 1 ms sleeps came to the 10 ms hog threshold, which (rightly)
	// let B start. B must be seen held back at least once in three tries; a
	// scenario that never holds B back would make the tests above prove
	// nothing.
	bool held = false;
	for (int attempt = 0; attempt < 3 && !held; attempt++) {
		scenario s;
		s.h = how::nanosleep;
		s.sleep_ns = 5000000;
		cur = &s;
		INIT_WORK(&s.a, a_fn);
		INIT_WORK(&s.b, b_fn);
		queue_work_on(test_cpu(), wq, &s.a);
		queue_work_on(test_cpu(), wq, &s.b);
		std::this_thread::sleep_for(300ms);
		held = !s.b_started.load();
		s.give_up = true;
		flush_workqueue(wq);
		EXPECT_TRUE(s.b_started.load());
	}
	EXPECT_TRUE(held) << "without a detector B always started while A blocked";
	cur = nullptr;
	destroy_workqueue(wq);
}

namespace {

// The state letter of thread tid of this process ('S', 'R', ...; 0 if gone).
char thread_state(pid_t tid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", static_cast<int>(tid));
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	char buf[512] = {};
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

struct lost_record {
	int p1[2] = {-1, -1}, p2[2] = {-1, -1};
	std::atomic<pid_t> a_tid{0};
	std::atomic<bool> a_between{false}; // A is past its first block
	std::atomic<bool> b2_started{false};
	work_struct a, b1, b2;
};
lost_record *lost;

} // namespace

// A worker found blocked, counted running again when its switch-in record
// came, then blocked again with that block's record lost: the monitor reads
// its state while items wait behind it, so they still start. Every
// blocked-switch record is dropped (cmwq.fail_switch_records) and CPU-hog
// detection is off, so nothing else can find the second block: with
// sampling off or on, a worker whose event is on is otherwise judged by its
// records alone.
class lost_switch_record : public testing::TestWithParam<const char *> {};

TEST_P(lost_switch_record, a_block_after_the_worker_ran_again_is_still_found)
{
	saved_params saved;
	if (!perf_available())
		GTEST_SKIP() << "context-switch events are not available here";
	ASSERT_EQ(cmwq_param_set("cmwq.block_detect", "perf"), 0);
	ASSERT_EQ(cmwq_param_set("cmwq.blocked_sample_us", GetParam()), 0);
	// A's 50 ms of running must not make it a CPU hog (which would let
	// the items behind it start for that reason).
	char hog[32] = {};
	ASSERT_EQ(cmwq_param_get("workqueue.cpu_intensive_thresh_us", hog, sizeof(hog)), 0);
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_thresh_us", "0"), 0);
	ASSERT_EQ(cmwq_param_set("cmwq.fail_switch_records", "-1"), 0);
	EXPECT_EQ(cmwq_param_set("cmwq.fail_switch_records", "-2"), -EINVAL);
	workqueue_struct *wq = alloc_workqueue("detect_lost", WQ_PERCPU, 0);
	ASSERT_NE(wq, nullptr);
	lost_record s;
	lost = &s;
	ASSERT_EQ(pipe(s.p1), 0);
	ASSERT_EQ(pipe(s.p2), 0);
	INIT_WORK(&s.a, [](work_struct *) {
		char c;
		lost->a_tid = static_cast<pid_t>(syscall(SYS_gettid));
		(void)!read(lost->p1[0], &c, 1); // first block: found by its state
		// Running (not blocked) long enough for the monitor to take the
		// switch-in record, which counts this worker running again.
		auto until = std::chrono::steady_clock::now() + 50ms;
		while (std::chrono::steady_clock::now() < until) {
		}
		lost->a_between = true;
		(void)!read(lost->p2[0], &c, 1); // second block: its record is lost
	});
	INIT_WORK(&s.b1, [](work_struct *) { (void)!write(lost->p1[1], "x", 1); });
	INIT_WORK(&s.b2, [](work_struct *) {
		lost->b2_started = true;
		(void)!write(lost->p2[1], "x", 1);
	});
	queue_work_on(test_cpu(), wq, &s.a);
	ASSERT_TRUE(wait_until([&] { return s.a_tid.load() && thread_state(s.a_tid) == 'S'; }));
	// B1 waits behind A until the monitor finds A blocked; it then wakes A.
	queue_work_on(test_cpu(), wq, &s.b1);
	ASSERT_TRUE(wait_until([&] { return s.a_between.load() && thread_state(s.a_tid) == 'S'; }, 20000ms));
	ASSERT_TRUE(flush_work(&s.b1) || !work_pending(&s.b1));
	queue_work_on(test_cpu(), wq, &s.b2);
	bool started = wait_until([&] { return s.b2_started.load(); }, 20000ms);
	EXPECT_TRUE(started) << "the item behind a worker whose block record was lost never started";
	if (!started)
		(void)!write(s.p2[1], "x", 1);
	cmwq_param_set("cmwq.fail_switch_records", "0");
	cmwq_param_set("workqueue.cpu_intensive_thresh_us", hog);
	flush_workqueue(wq);
	destroy_workqueue(wq);
	for (int fd : {s.p1[0], s.p1[1], s.p2[0], s.p2[1]})
		close(fd);
	lost = nullptr;
}

INSTANTIATE_TEST_SUITE_P(sampling, lost_switch_record, testing::Values("0", "200"),
			 [](const testing::TestParamInfo<const char *> &i) {
				 return std::string(i.param[0] == '0' ? "off" : "every_200us");
			 });

namespace {

// Context-switch events this process holds (the library's, one per worker
// that has needed one).
int perf_event_fds()
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	while (dirent *e = readdir(d)) {
		char path[300], buf[64];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t k = readlink(path, buf, sizeof(buf) - 1);
		if (k > 0) {
			buf[k] = 0;
			n += std::string(buf) == "anon_inode:[perf_event]";
		}
	}
	closedir(d);
	return n;
}

std::atomic<bool> rt_done;
void rt_fn(work_struct *) { rt_done = true; }

// Queue-and-wait round trips on cpu, each queued only once the previous
// one's worker has let go of it: no item ever waits behind a running one.
void round_trips(workqueue_struct *wq, int cpu, int n)
{
	work_struct w;
	INIT_WORK(&w, rt_fn);
	for (int i = 0; i < n; i++) {
		rt_done = false;
		ASSERT_TRUE(queue_work_on(cpu, wq, &w));
		ASSERT_TRUE(wait_until([] { return rt_done.load(); }, 20000ms));
		ASSERT_TRUE(wait_until([&] { return work_busy(&w) == 0; }, 20000ms));
	}
}

std::atomic<bool> a_started, b_started, give_up;
void lone_a_fn(work_struct *)
{
	a_started = true;
	while (!b_started.load() && !give_up.load()) {
		timespec ts{0, 1000000};
		nanosleep(&ts, nullptr);
	}
}
void lone_b_fn(work_struct *) { b_started = true; }

} // namespace

// An open event costs its thread on every context switch, enabled or not,
// so a worker opens one only once an item waits behind it.
TEST(block_detect, workers_whose_items_never_wait_hold_no_event)
{
	saved_params saved;
	if (!perf_available())
		GTEST_SKIP() << "context-switch events are not available here";
	ASSERT_EQ(cmwq_param_set("cmwq.block_detect", "perf"), 0);
	// High priority: a pool of its own, whose workers no other test of
	// this program has given an event.
	workqueue_struct *pc = alloc_workqueue("detect_rt_p", WQ_PERCPU | WQ_HIGHPRI, 0);
	workqueue_struct *ub = alloc_workqueue("detect_rt_u", WQ_UNBOUND, 0);
	ASSERT_NE(pc, nullptr);
	ASSERT_NE(ub, nullptr);
	int before = perf_event_fds();
	ASSERT_GE(before, 0);
	round_trips(pc, test_cpu(), 200);
	round_trips(ub, test_cpu(), 200);
	EXPECT_EQ(perf_event_fds(), before) << "a round trip opened a context-switch event";
	// Control: an item blocked with another behind it does open one (so
	// the count above could have moved).
	EXPECT_TRUE(b_starts_while_a_blocks(pc, how::nanosleep));
	EXPECT_GT(perf_event_fds(), before);
	destroy_workqueue(ub);
	destroy_workqueue(pc);
}

// The worker started its item alone, so it has no event; an item queued
// behind it later has the monitor open the worker's event on its thread,
// which then finds the block (sampling off: nothing else could).
TEST(block_detect, an_item_queued_behind_a_lone_running_item_opens_its_workers_event)
{
	saved_params saved;
	if (!perf_available())
		GTEST_SKIP() << "context-switch events are not available here";
	ASSERT_EQ(cmwq_param_set("cmwq.block_detect", "perf"), 0);
	ASSERT_EQ(cmwq_param_set("cmwq.blocked_sample_us", "0"), 0);
	workqueue_struct *wq = alloc_workqueue("detect_lone", WQ_PERCPU, 0);
	ASSERT_NE(wq, nullptr);
	// Settle the pool (its first workers; see the test above), without
	// ever letting an item wait behind a running one.
	round_trips(wq, test_cpu(), 3);
	std::this_thread::sleep_for(200ms);
	for (int round = 0; round < 2; round++) {
		a_started = b_started = give_up = false;
		work_struct a, b;
		INIT_WORK(&a, lone_a_fn);
		INIT_WORK(&b, lone_b_fn);
		ASSERT_TRUE(queue_work_on(test_cpu(), wq, &a));
		ASSERT_TRUE(wait_until([] { return a_started.load(); }, 20000ms));
		ASSERT_TRUE(queue_work_on(test_cpu(), wq, &b));
		EXPECT_TRUE(wait_until([] { return b_started.load(); }, 20000ms)) << "round " << round;
		give_up = true;
		flush_workqueue(wq);
	}
	destroy_workqueue(wq);
}

namespace {

pid_t gettid_() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// The scenario of the tests above, recording which worker ran A.
std::atomic<bool> c_b_started, c_give_up;
std::atomic<pid_t> c_a_tid;
void close_a_fn(work_struct *)
{
	c_a_tid = gettid_();
	while (!c_b_started.load() && !c_give_up.load()) {
		timespec ts{0, 1000000};
		nanosleep(&ts, nullptr);
	}
}
void close_b_fn(work_struct *) { c_b_started = true; }

// Items that sleep under the blocking hint until released, each on a worker
// of its own (the hint counts its worker out, so the next item is given
// another at once and never waits behind it).
struct holder {
	work_struct w;
	std::atomic<pid_t> tid{0};
};
std::atomic<bool> h_release;
void holder_fn(work_struct *w)
{
	auto *h = reinterpret_cast<holder *>(w);
	cmwq_blocking_begin();
	h->tid = gettid_();
	while (!h_release.load()) {
		timespec ts{0, 200000};
		nanosleep(&ts, nullptr);
	}
	cmwq_blocking_end();
}

} // namespace

// An event that stopped being needed is closed again (it would cost every
// context switch of its worker): after cmwq.block_event_idle_runs busy
// periods in a row that did not enable it.
TEST(block_detect, a_worker_closes_an_event_it_no_longer_needs)
{
	saved_params saved;
	if (!perf_available())
		GTEST_SKIP() << "context-switch events are not available here";
	std::string runs = param("cmwq.block_event_idle_runs");
	EXPECT_EQ(runs, "64");
	ASSERT_EQ(cmwq_param_set("cmwq.block_detect", "perf"), 0);
	ASSERT_EQ(cmwq_param_set("cmwq.unbound_concurrency", "managed"), 0);
	// A pool no other test uses (nice 7, one-CPU pods), so its workers
	// start without events.
	workqueue_struct *wq = alloc_workqueue("detect_close", WQ_UNBOUND, 0);
	ASSERT_NE(wq, nullptr);
	workqueue_attrs *attrs = alloc_workqueue_attrs();
	attrs->affn_scope = WQ_AFFN_CPU;
	attrs->nice = 7;
	ASSERT_EQ(apply_workqueue_attrs(wq, attrs), 0);
	free_workqueue_attrs(attrs);
	int before = perf_event_fds();
	c_b_started = c_give_up = false;
	work_struct a, b;
	INIT_WORK(&a, close_a_fn);
	INIT_WORK(&b, close_b_fn);
	ASSERT_TRUE(queue_work_on(test_cpu(), wq, &a));
	ASSERT_TRUE(queue_work_on(test_cpu(), wq, &b));
	EXPECT_TRUE(wait_until([] { return c_b_started.load(); }, 20000ms)) << "B never started while A blocked";
	c_give_up = true;
	flush_workqueue(wq);
	ASSERT_GT(perf_event_fds(), before) << "the blocked worker opened no event";
	ASSERT_EQ(cmwq_param_set("cmwq.block_event_idle_runs", "1000001"), -EINVAL);
	ASSERT_EQ(cmwq_param_set("cmwq.block_event_idle_runs", "-1"), -EINVAL);
	ASSERT_EQ(cmwq_param_set("cmwq.block_event_idle_runs", "1"), 0);
	// One busy period without need on A's worker: take idle workers with
	// holders, one at a time, until one lands on it.
	h_release = false;
	std::vector<std::unique_ptr<holder>> hs;
	bool hit = false;
	for (int i = 0; i < 16 && !hit; i++) {
		hs.push_back(std::make_unique<holder>());
		holder *h = hs.back().get();
		INIT_WORK(&h->w, holder_fn);
		ASSERT_TRUE(queue_work_on(test_cpu(), wq, &h->w));
		ASSERT_TRUE(wait_until([h] { return h->tid.load() != 0; }, 20000ms));
		hit = h->tid.load() == c_a_tid.load();
	}
	h_release = true;
	flush_workqueue(wq);
	EXPECT_TRUE(hit) << "A's worker never took a holder";
	EXPECT_TRUE(wait_until([&] { return perf_event_fds() == before; }, 20000ms))
		<< "the event is still open: " << perf_event_fds() << " against " << before;
	ASSERT_EQ(cmwq_param_set("cmwq.block_event_idle_runs", runs.c_str()), 0);
	destroy_workqueue(wq);
}

TEST(block_detect, parameter_reads_the_detector_in_effect_and_refuses_unknown_values)
{
	saved_params saved;
	std::string before = param("cmwq.block_detect");
	EXPECT_TRUE(before == "perf" || before == "sample" || before == "off") << before;
	EXPECT_EQ(cmwq_param_set("cmwq.block_detect", "events"), -EINVAL);
	EXPECT_EQ(cmwq_param_set("cmwq.block_detect", ""), -EINVAL);
	EXPECT_EQ(param("cmwq.block_detect"), before);

	ASSERT_EQ(cmwq_param_set("cmwq.block_detect", "sample"), 0);
	EXPECT_EQ(param("cmwq.block_detect"), "sample");
	ASSERT_EQ(cmwq_param_set("cmwq.block_detect", "off"), 0);
	EXPECT_EQ(param("cmwq.block_detect"), "off");
}

TEST(block_detect, forced_fallback_refuses_perf_and_auto_falls_back_to_sampling)
{
	saved_params saved;
	std::string before = param("cmwq.block_detect");
	ASSERT_EQ(cmwq_param_set("cmwq.fail_perf_open", "-1"), 0);
	testing::internal::CaptureStderr();
	EXPECT_EQ(cmwq_param_set("cmwq.block_detect", "perf"), -EOPNOTSUPP);
	std::string err = testing::internal::GetCapturedStderr();
	EXPECT_NE(err.find("cmwq.block_detect=perf"), std::string::npos) << err;
	EXPECT_NE(err.find("perf_event_open"), std::string::npos) << err;
	EXPECT_EQ(param("cmwq.block_detect"), before) << "a refused value changes nothing";
	ASSERT_EQ(cmwq_param_set("cmwq.block_detect", "auto"), 0);
	EXPECT_EQ(param("cmwq.block_detect"), "sample");
}

TEST(unbound_concurrency, parameter_accepts_kernel_and_managed_only)
{
	saved_params saved;
	EXPECT_EQ(cmwq_param_set("cmwq.unbound_concurrency", "most"), -EINVAL);
	EXPECT_EQ(param("cmwq.unbound_concurrency"), saved.unbound);
	ASSERT_EQ(cmwq_param_set("cmwq.unbound_concurrency", "managed"), 0);
	EXPECT_EQ(param("cmwq.unbound_concurrency"), "managed");
	ASSERT_EQ(cmwq_param_set("cmwq.unbound_concurrency", "kernel"), 0);
	EXPECT_EQ(param("cmwq.unbound_concurrency"), "kernel");
}

namespace {
std::atomic<long> tiny_ran{0};
void tiny_fn(work_struct *) { tiny_ran.fetch_add(1, std::memory_order_relaxed); }
} // namespace

TEST(unbound_concurrency, managed_fan_out_adds_few_threads)
{
	saved_params saved;
	ASSERT_EQ(cmwq_param_set("cmwq.unbound_concurrency", "managed"), 0);
	workqueue_struct *wq = alloc_workqueue("fan_managed", WQ_UNBOUND, 0);
	std::vector<work_struct> ws(200000);
	for (auto &w : ws)
		INIT_WORK(&w, tiny_fn);
	// Settle what the library starts on first use (monitor, timer).
	work_struct warm;
	INIT_WORK(&warm, tiny_fn);
	queue_work(wq, &warm);
	flush_workqueue(wq);
	int before = process_threads();
	tiny_ran = 0;
	for (auto &w : ws)
		queue_work(wq, &w);
	flush_workqueue(wq);
	int added = process_threads() - before;
	EXPECT_EQ(tiny_ran.load(), 200000);
	int cpus = static_cast<int>(cmwq::current_topology().usable.size());
	EXPECT_LE(added, 2 * cpus + 2) << "threads added by a 200,000-item fan-out";
	destroy_workqueue(wq);
}

TEST(unbound_concurrency, switching_while_items_run_loses_nothing)
{
	saved_params saved;
	workqueue_struct *wq = alloc_workqueue("switch_managed", WQ_UNBOUND, 0);
	std::vector<work_struct> ws(20000);
	tiny_ran = 0;
	for (size_t i = 0; i < ws.size(); i++) {
		INIT_WORK(&ws[i], tiny_fn);
		queue_work(wq, &ws[i]);
		if (i % 1000 == 0) {
			ASSERT_EQ(cmwq_param_set("cmwq.unbound_concurrency", (i / 1000) % 2 ? "kernel" : "managed"), 0);
		}
	}
	flush_workqueue(wq);
	EXPECT_EQ(tiny_ran.load(), 20000);
	destroy_workqueue(wq);
}

namespace {
std::atomic<bool> burner_done{false};
std::atomic<bool> small_ran_during_burn{false};
void burner_fn(work_struct *)
{
	// Spins until the item behind it ran (it can only once the burner is
	// reclassified, or taken for blocked) and the burner has used 50 ms of
	// CPU, five hog thresholds, so a worker first taken for blocked (under
	// qemu-user a spinning thread can be seen sleeping on the emulator's
	// locks) is still found to be a hog once seen running again. At most
	// 10 s: on a loaded machine 50 ms of CPU can take far longer.
	auto end = std::chrono::steady_clock::now() + 10s;
	auto cpu_ns = [] {
		timespec ts;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
		return ts.tv_sec * 1000000000ll + ts.tv_nsec;
	};
	long long cpu0 = cpu_ns();
	while ((!small_ran_during_burn || cpu_ns() - cpu0 < 50000000ll) && std::chrono::steady_clock::now() < end) {
	}
	burner_done = true;
}
void small_fn(work_struct *)
{
	if (!burner_done)
		small_ran_during_burn = true;
}
class hog_in_mode : public testing::TestWithParam<const char *> {};
} // namespace

TEST_P(hog_in_mode, burner_is_reclassified_so_the_item_behind_it_runs)
{
	saved_params saved;
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_thresh_us", "10000"), 0);
	std::string mode = GetParam();
	if (mode == "perf" && !perf_available())
		GTEST_SKIP() << "context-switch events are not available here";
	ASSERT_EQ(cmwq_param_set("cmwq.block_detect", mode.c_str()), 0);
	burner_done = false;
	small_ran_during_burn = false;
	auto *wq = alloc_workqueue("hog_mode", WQ_PERCPU, 0);
	work_struct b, s;
	INIT_WORK(&b, burner_fn);
	INIT_WORK(&s, small_fn);
	testing::internal::CaptureStderr();
	queue_work_on(test_cpu(), wq, &b);
	queue_work_on(test_cpu(), wq, &s);
	flush_workqueue(wq);
	testing::internal::GetCapturedStderr();
	EXPECT_TRUE(small_ran_during_burn.load());
	uint64_t st[PWQ_NR_STATS];
	cmwq_workqueue_stats(wq, st);
	EXPECT_GE(st[PWQ_STAT_CPU_INTENSIVE], 1u);
	destroy_workqueue(wq);
}

INSTANTIATE_TEST_SUITE_P(modes, hog_in_mode, testing::Values("auto", "perf", "sample", "off"));
