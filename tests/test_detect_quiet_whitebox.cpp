// test_detect_quiet_whitebox.cpp - a worker's context-switch event is on
// only while items wait behind it (docs/design.md §3.3). An event left on
// writes a record at every switch of its worker, and every record wakes the
// monitor; a worker that never goes idle (its item queues itself again, as
// cmwq::asio::reactor's runners do) would keep it on for good. So a worker
// that starts an item with nothing waiting behind it turns its event off,
// and an item queued behind it later has the monitor turn it on again; one
// queued while the event goes off has the worker turn it on again itself
// (a hook in the engine holds the worker in that window).
#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>
#include <cmwq/topology.hpp>
#include <gtest/gtest.h>

#include <time.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "engine/engine.h"
#include "test_util.hpp"

using namespace std::chrono_literals;
namespace d = cmwq::detail;

namespace {

std::atomic<int> q_cpu{0};

void sleep_us(long us)
{
	timespec ts{0, us * 1000};
	nanosleep(&ts, nullptr); // no hint: a block only the detector sees
}

// An item that sleeps 10 times 100 us (20 switches) and queues itself
// again on its CPU, until told to stop.
std::atomic<bool> s_stop{false};
std::atomic<long> s_runs{0};
void sleeper_fn(work_struct *w)
{
	for (int i = 0; i < 10; i++)
		sleep_us(100);
	s_runs.fetch_add(1, std::memory_order_relaxed);
	if (!s_stop.load())
		queue_work_on(q_cpu.load(), system_percpu_wq, w);
}

std::atomic<bool> q_ran{false};
void behind_fn(work_struct *) { q_ran = true; }

// Settings the tests change, put back as they were.
struct settings {
	saved_detector_params det;
	std::string thresh = param("workqueue.cpu_intensive_thresh_us");
	~settings() { cmwq_param_set("workqueue.cpu_intensive_thresh_us", thresh.c_str()); }
	// Events only (sampling off: its passes would wake the monitor too,
	// and would find blocks the events missed), no item a CPU hog.
	bool events_only()
	{
		return cmwq_param_set("cmwq.block_detect", "perf") == 0 &&
		       cmwq_param_set("cmwq.blocked_sample_us", "0") == 0 &&
		       cmwq_param_set("workqueue.cpu_intensive_thresh_us", "60000000") == 0;
	}
};

// The tests' fixture: events only, and the CPU their items run on (q_cpu).
class detect_quiet : public ::testing::Test {
protected:
	void SetUp() override
	{
		if (!saved_.events_only())
			GTEST_SKIP() << "context-switch events are not available here";
		q_cpu = cmwq::current_topology().usable.back();
	}
	settings saved_;
};

} // namespace

// The sleeper starts with an item waiting behind it, so its worker's event
// goes on and its first block lets that item start; from then on nothing
// waits behind it. Each of its runs switches 20 times: with the event left
// on, about that many monitor wakeups a run; with it off, about one (its
// queueing behind itself arms the monitor once).
TEST_F(detect_quiet, a_worker_with_nothing_behind_it_wakes_the_monitor_at_most_once_an_item)
{
	work_struct s, q;
	INIT_WORK(&s, sleeper_fn);
	INIT_WORK(&q, behind_fn);
	ASSERT_TRUE(queue_work_on(q_cpu, system_percpu_wq, &s));
	ASSERT_TRUE(queue_work_on(q_cpu, system_percpu_wq, &q));
	ASSERT_TRUE(wait_until([] { return q_ran.load(); }, 20000ms)) << "the item behind the sleeper never started";
	std::this_thread::sleep_for(100ms);

	long runs0 = s_runs.load();
	uint64_t woke0 = d::monitor_wakeups();
	std::this_thread::sleep_for(500ms);
	uint64_t woke = d::monitor_wakeups() - woke0;
	long runs = s_runs.load() - runs0;
	s_stop = true;
	flush_work(&s);
	flush_work(&s); // the last run may have queued it once more

	RecordProperty("sleeper_runs", std::to_string(runs));
	RecordProperty("monitor_wakeups", std::to_string(woke));
	ASSERT_GE(runs, 10) << "the sleeper hardly ran";
	// 3 a run, and the watchdog's and the arming's odd ones: the event
	// left on gives about 20 a run (about 12 on a loaded 2-vCPU VM).
	EXPECT_LE(woke, 3u * static_cast<uint64_t>(runs) + 20u)
		<< "the monitor woke " << woke << " times for " << runs << " runs of an item with nothing behind it";
}

namespace {

// The scenario of the two tests below. P blocks (its event on: R waited
// behind it at its start) until released, then spins for 5 ms, so that the
// monitor has counted it running again (no idle worker is woken for A),
// and queues A behind itself: A starts on P's worker with nothing behind
// it, and the event goes off. A blocks until B starts.
std::atomic<bool> a_started{false}, b_started{false}, give_up{false}, p_released{false};
work_struct a_work, b_work;
void a_fn(work_struct *)
{
	a_started = true;
	while (!b_started.load() && !give_up.load())
		sleep_us(1000);
}
void b_fn(work_struct *) { b_started = true; }
void p_fn(work_struct *)
{
	while (!p_released.load() && !give_up.load())
		sleep_us(1000);
	auto end = std::chrono::steady_clock::now() + 5ms;
	while (std::chrono::steady_clock::now() < end) {
	}
	queue_work_on(q_cpu.load(), system_percpu_wq, &a_work);
}
void nothing_fn(work_struct *) {}

struct scenario {
	work_struct p, r;
	// Queues P with R behind it and releases P once R ran: A is on its
	// way. Then after(), and give_up() at the end.
	void start()
	{
		a_started = b_started = give_up = p_released = false;
		INIT_WORK(&p, p_fn);
		INIT_WORK(&r, nothing_fn);
		INIT_WORK(&a_work, a_fn);
		INIT_WORK(&b_work, b_fn);
		ASSERT_TRUE(queue_work_on(q_cpu, system_percpu_wq, &p));
		ASSERT_TRUE(queue_work_on(q_cpu, system_percpu_wq, &r)); // behind P: its event goes on
		ASSERT_TRUE(wait_until([&] { return work_busy(&r) == 0; }, 20000ms)) << "R waited behind a blocked P";
		std::this_thread::sleep_for(20ms);
		p_released = true;
	}
	void end()
	{
		give_up = true;
		flush_work(&p);
		flush_work(&a_work);
		flush_work(&b_work);
	}
};

} // namespace

// After its event went off at the start of a lone item, a worker that
// blocks in it is still found once an item is queued behind it: the
// monitor turns the event on again (sampling off: nothing else would find
// it). An event marked on but left disabled would strand B.
TEST_F(detect_quiet, an_item_queued_behind_a_worker_whose_event_went_off_is_not_stranded)
{
	for (int n = 0; n < 3; n++) {
		scenario rd;
		ASSERT_NO_FATAL_FAILURE(rd.start());
		ASSERT_TRUE(wait_until([] { return a_started.load(); }, 20000ms)) << "round " << n;
		std::this_thread::sleep_for(20ms); // A asleep, its event off
		ASSERT_TRUE(queue_work_on(q_cpu, system_percpu_wq, &b_work));
		EXPECT_TRUE(wait_until([] { return b_started.load(); }, 20000ms))
			<< "round " << n << ": B waited behind a blocked A";
		rd.end();
		if (!b_started.load())
			break;
	}
}

namespace {

// The window between A's start (nothing behind it, under L) and its
// worker's disable (after L): the hook holds the worker there while the
// test queues B behind A and the monitor looks at the pool.
std::atomic<bool> w_armed{false}, w_entered{false}, w_go{false};
void hold_in_window(d::worker *w)
{
	if (w->current_work != &a_work || !w_armed.exchange(false))
		return;
	w_entered = true;
	for (int i = 0; i < 5000 && !w_go.load(); i++)
		sleep_us(1000);
}

} // namespace

// B is queued behind A after A's worker decided to turn its event off and
// before it did: the monitor's look finds the event still on and does
// nothing, so the worker must look at the worklist again after its disable
// and turn the event back on, or A's block strands B (sampling off). A
// round where A went to another worker (the hook never ran) tells nothing
// and is tried again.
TEST_F(detect_quiet, an_item_queued_while_the_event_goes_off_is_not_stranded)
{
	d::detect_quiet_hook.store(hold_in_window);
	int conclusive = 0;
	bool stranded = false;
	for (int n = 0; n < 10 && conclusive < 2 && !stranded; n++) {
		w_entered = w_go = false;
		w_armed = true;
		scenario rd;
		ASSERT_NO_FATAL_FAILURE(rd.start());
		ASSERT_TRUE(wait_until([] { return w_entered.load() || a_started.load(); }, 20000ms));
		if (w_entered.load()) {
			conclusive++;
			uint64_t woke = d::monitor_wakeups();
			ASSERT_TRUE(queue_work_on(q_cpu, system_percpu_wq, &b_work));
			// The monitor's look at the pool B's queueing asked for.
			wait_until([&] { return d::monitor_wakeups() != woke; }, 2000ms);
			std::this_thread::sleep_for(20ms);
			w_go = true;
			EXPECT_TRUE(wait_until([] { return b_started.load(); }, 20000ms))
				<< "round " << n << ": B waited behind a blocked A";
			stranded = !b_started.load();
		}
		w_go = true;
		rd.end();
	}
	d::detect_quiet_hook.store(nullptr);
	EXPECT_GE(conclusive, 1) << "A never started on P's worker";
}
