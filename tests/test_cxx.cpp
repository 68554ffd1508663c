// The C++ API of <cmwq/workqueue.hpp>: tasks with results, exceptions and
// cancellation; move-only callables; coroutines; names in the dump and in
// reports; the deadlock check of task::get; an exception escaping a work
// item.
#include <cmwq/linux/workqueue.h>
#include <cmwq/log.h>
#include <cmwq/params.h>
#include <cmwq/workqueue.hpp>
#include <gtest/gtest.h>

#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"

using namespace std::chrono_literals;

namespace {

struct captured {
	std::mutex lock;
	std::string text;
	static void handler(int, const char *msg, void *arg)
	{
		auto *c = static_cast<captured *>(arg);
		std::lock_guard lk(c->lock);
		c->text += msg;
		c->text += '\n';
	}
	std::string get()
	{
		std::lock_guard lk(lock);
		return text;
	}
};

// Installs a log handler for its lifetime.
struct log_capture {
	captured c;
	log_capture() { cmwq_set_log_handler(&captured::handler, &c); }
	~log_capture() { cmwq_set_log_handler(nullptr, nullptr); }
	std::string text() { return c.get(); }
};

// A gate an item waits on (with the blocking hint) until opened.
struct gate {
	std::atomic<bool> open{false};
	std::atomic<int> waiting{0};
	void pass()
	{
		waiting++;
		cmwq::blocking_scope b;
		while (!open.load())
			std::this_thread::sleep_for(1ms);
	}
};

uint64_t thread_cpu_ns()
{
	timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

} // namespace

TEST(cxx_task, get_returns_the_value_once)
{
	cmwq::workqueue wq("cxx_value", WQ_UNBOUND);
	auto t = cmwq::submit(wq, [] { return 42; });
	static_assert(std::is_same_v<decltype(t), cmwq::task<int>>);
	EXPECT_TRUE(t.valid());
	EXPECT_EQ(t.get(), 42);
	EXPECT_FALSE(t.valid());
	EXPECT_THROW(t.get(), std::logic_error);
	auto s = cmwq::submit(wq.native(), "cxx_string", [] { return std::string(100, 'x'); });
	s.wait();
	EXPECT_TRUE(s.ready());
	EXPECT_EQ(s.get(), std::string(100, 'x'));
	auto v = cmwq::submit(wq, [] {});
	static_assert(std::is_same_v<decltype(v), cmwq::task<void>>);
	v.get();
}

TEST(cxx_task, an_exception_reaches_get)
{
	cmwq::workqueue wq("cxx_throw", WQ_PERCPU);
	auto t = cmwq::submit(wq, "failing_shard", []() -> int { throw std::out_of_range("shard 3 missing"); });
	try {
		(void)t.get();
		FAIL() << "get() returned";
	} catch (const std::out_of_range &e) {
		EXPECT_STREQ(e.what(), "shard 3 missing");
	}
	// Not a std::exception: carried as it is.
	auto u = cmwq::submit(wq, [] { throw 7; });
	EXPECT_THROW(u.get(), int);
}

TEST(cxx_task, dropped_tasks_still_run_and_free_themselves)
{
	std::atomic<int> n{0};
	{
		cmwq::workqueue wq("cxx_drop", WQ_UNBOUND, 2);
		for (int i = 0; i < 1000; i++)
			(void)cmwq::submit(wq, [&n, p = std::make_shared<int>(i)] { n += 1 + 0 * *p; });
	} // destroy_workqueue drains
	EXPECT_EQ(n.load(), 1000);
}

TEST(cxx_task, move_only_callables_everywhere)
{
	cmwq::workqueue wq("cxx_moveonly", WQ_UNBOUND);
	auto p = std::make_unique<int>(5);
	auto t = cmwq::submit(wq, [p = std::move(p)] { return *p * 2; });
	EXPECT_EQ(t.get(), 10);

	std::atomic<int> seen{0};
	cmwq::work w([q = std::make_unique<int>(7), &seen] { seen += *q; });
	ASSERT_TRUE(wq.queue(w));
	(void)w.flush();
	EXPECT_EQ(seen.load(), 7);

	// Too big for the item's buffer: kept on the heap, still move-only.
	struct big {
		std::unique_ptr<int> q;
		char pad[200];
	};
	cmwq::delayed_work dw([b = big{std::make_unique<int>(11), {}}, &seen] { seen += *b.q; });
	ASSERT_TRUE(wq.queue(dw, 1ms));
	ASSERT_TRUE(wait_until([&] { return seen.load() == 18; }));
	(void)dw.flush();
}

TEST(cxx_task, cancel_before_start_and_not_after)
{
	cmwq::workqueue wq("cxx_cancel", WQ_UNBOUND, 1);
	gate g;
	auto blocker = cmwq::submit(wq, "blocker", [&] { g.pass(); });
	ASSERT_TRUE(wait_until([&] { return g.waiting.load() == 1; }));
	std::atomic<bool> ran{false};
	auto later = cmwq::submit(wq, "later", [&] {
		ran = true;
		return 1;
	});
	EXPECT_FALSE(blocker.cancel()) << "running: cannot be cancelled";
	EXPECT_TRUE(later.cancel());
	EXPECT_FALSE(later.cancel()) << "cancelled once";
	EXPECT_TRUE(later.ready());
	EXPECT_THROW(later.get(), cmwq::task_cancelled);
	g.open = true;
	blocker.get();
	wq.flush();
	EXPECT_FALSE(ran.load());
	auto done = cmwq::submit(wq, [] { return 3; });
	done.wait();
	EXPECT_FALSE(done.cancel()) << "finished: nothing to cancel";
	EXPECT_EQ(done.get(), 3);
}

TEST(cxx_task, get_from_an_ordered_item_on_its_own_queue_warns_instead_of_hanging)
{
	// A new name each run: the warning is printed once per workqueue and pair.
	static int run = 0;
	std::string name = "cxx_ordered_self" + std::to_string(run++);
	auto wq = cmwq::workqueue::ordered(name);
	log_capture cap;
	auto outer = cmwq::submit(wq, "outer_job", [&] {
		auto inner = cmwq::submit(wq, "inner_job", [] { return 1; });
		try {
			(void)inner.get();
			return std::string("returned");
		} catch (const cmwq::task_would_deadlock &) {
			inner.wait(); // also returns at once
			return std::string(inner.ready() ? "ready" : "refused");
		}
	});
	EXPECT_EQ(outer.get(), "refused");
	wq.flush(); // inner runs after outer
	std::string log = cap.text();
	EXPECT_NE(log.find("outer_job on workqueue " + name +
			   " waits (cmwq::task) for inner_job, which can start only after it ends"),
		  std::string::npos)
		<< log;
}

namespace {

cmwq::task<int> coro_on(cmwq::workqueue &wq, std::string *where)
{
	co_await cmwq::resume_on(wq, "coro_step");
	const char *n = cmwq_current_workqueue_name();
	*where = n ? n : "(not a worker)";
	co_return 5;
}

cmwq::task<int> coro_chain(cmwq::workqueue &a, cmwq::workqueue &b)
{
	co_await cmwq::resume_on(a);
	int x = co_await cmwq::submit(b, [] { return 20; });
	std::string where;
	int y = co_await coro_on(b, &where);
	if (where != "cxx_coro_b")
		co_return -1;
	try {
		co_await cmwq::submit(a, []() -> int { throw std::runtime_error("inner failed"); });
	} catch (const std::runtime_error &e) {
		if (std::string(e.what()) != "inner failed")
			co_return -2;
		x += 100;
	}
	co_return x + y;
}

cmwq::task<void> coro_throws(cmwq::workqueue &wq)
{
	co_await cmwq::resume_on(wq);
	throw std::runtime_error("coroutine failed");
}

cmwq::task<std::string> coro_awaits_cancelled(cmwq::task<int> &t)
{
	try {
		co_await t;
	} catch (const cmwq::task_cancelled &) {
		co_return "cancelled";
	}
	co_return "ran";
}

} // namespace

TEST(cxx_coro, resume_on_and_await_tasks)
{
	cmwq::workqueue a("cxx_coro_a", WQ_UNBOUND), b("cxx_coro_b", WQ_PERCPU);
	std::string where;
	auto t = coro_on(a, &where);
	EXPECT_EQ(t.get(), 5);
	EXPECT_EQ(where, "cxx_coro_a");
	EXPECT_EQ(coro_chain(a, b).get(), 125);
	auto f = coro_throws(b);
	EXPECT_THROW(f.get(), std::runtime_error);
	// Many coroutines at once: each frame is freed when both sides are done.
	std::vector<cmwq::task<int>> many;
	for (int i = 0; i < 200; i++)
		many.push_back(coro_chain(a, b));
	for (auto &m : many)
		EXPECT_EQ(m.get(), 125);
}

TEST(cxx_coro, a_cancelled_task_resumes_its_awaiter_with_task_cancelled)
{
	cmwq::workqueue wq("cxx_coro_cancel", WQ_UNBOUND, 1);
	gate g;
	auto blocker = cmwq::submit(wq, [&] { g.pass(); });
	ASSERT_TRUE(wait_until([&] { return g.waiting.load() == 1; }));
	auto victim = cmwq::submit(wq, [] { return 1; });
	auto awaiting = coro_awaits_cancelled(victim);
	EXPECT_FALSE(awaiting.ready());
	EXPECT_TRUE(victim.cancel());
	EXPECT_EQ(awaiting.get(), "cancelled");
	g.open = true;
	blocker.get();
}

TEST(cxx_names, names_and_descriptions_in_the_dump)
{
	cmwq::workqueue wq("cxx_names", WQ_UNBOUND, 1);
	gate g;
	cmwq::work running("flush_journal", [&] {
		set_worker_desc("journal %d", 3);
		g.pass();
	});
	cmwq::work unnamed([] {});
	ASSERT_TRUE(wq.queue(running));
	ASSERT_TRUE(wait_until([&] { return g.waiting.load() == 1; }));
	ASSERT_TRUE(wq.queue(unnamed));
	auto queued = cmwq::submit(wq, "compact_segment", [] { return 0; });
	std::string dump;
	{
		log_capture cap;
		show_one_workqueue(wq.native());
		dump = cap.text();
	}
	g.open = true;
	EXPECT_EQ(queued.get(), 0);
	(void)unnamed.flush();
	EXPECT_NE(dump.find(":flush_journal (journal 3) for "), std::string::npos) << dump;
	EXPECT_NE(dump.find("compact_segment"), std::string::npos) << dump;
	// An unnamed C++ item is shown as its callable's type, not a trampoline.
	EXPECT_NE(dump.find("lambda"), std::string::npos) << dump;
	EXPECT_EQ(dump.find("invoke"), std::string::npos) << dump;
	EXPECT_EQ(std::string(running.name()), "flush_journal");
}

// extern "C" and outside any namespace: dladdr finds it by name.
extern "C" void c_style_fn(work_struct *) {}

TEST(cxx_names, c_items_keep_their_function_and_may_be_named)
{
	workqueue_struct *wq = alloc_workqueue("cxx_cnames", WQ_UNBOUND, 1);
	ASSERT_NE(wq, nullptr);
	gate g;
	auto blocker = cmwq::submit(wq, "blocker", [&] { g.pass(); });
	ASSERT_TRUE(wait_until([&] { return g.waiting.load() == 1; }));
	work_struct a, b;
	INIT_WORK(&a, c_style_fn);
	INIT_WORK(&b, c_style_fn);
	cmwq_set_work_name(&b, "named_c_item");
	ASSERT_TRUE(queue_work(wq, &a));
	ASSERT_TRUE(queue_work(wq, &b));
	std::string dump;
	{
		log_capture cap;
		show_one_workqueue(wq);
		dump = cap.text();
	}
	g.open = true;
	blocker.get();
	destroy_workqueue(wq);
	EXPECT_NE(dump.find("c_style_fn"), std::string::npos) << dump;
	EXPECT_NE(dump.find("named_c_item"), std::string::npos) << dump;
}

TEST(cxx_names, a_hog_report_names_the_item)
{
	char thresh[32], warn[32];
	ASSERT_EQ(cmwq_param_get("workqueue.cpu_intensive_thresh_us", thresh, sizeof(thresh)), 0);
	ASSERT_EQ(cmwq_param_get("workqueue.cpu_intensive_warning_thresh", warn, sizeof(warn)), 0);
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_thresh_us", "5000"), 0);
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_warning_thresh", "1"), 0);
	// Reports come at the 1st, 2nd, 4th... hog of a name: a new name each run.
	static int run = 0;
	std::string name = "checksum_pass" + std::to_string(run++);
	std::string log;
	{
		cmwq::workqueue wq("cxx_hog", WQ_PERCPU);
		log_capture cap;
		auto t = cmwq::submit(wq, name, [] {
			uint64_t t0 = thread_cpu_ns();
			while (thread_cpu_ns() - t0 < 30000000ull) {
			}
		});
		t.get();
		ASSERT_TRUE(wait_until([&] { return cap.text().find("hogged CPU") != std::string::npos; }));
		log = cap.text();
	}
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_warning_thresh", warn), 0);
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_thresh_us", thresh), 0);
	EXPECT_NE(log.find("cmwq: " + name + " hogged CPU"), std::string::npos) << log;
}

TEST(cxx_work_death, an_exception_escaping_a_work_item_is_reported_then_terminates)
{
	// threadsafe re-executes the test program, which user-mode qemu cannot
	// (no binfmt handler there): under emulation the child is a plain fork,
	// which cmwq's fork handlers make safe too.
	GTEST_FLAG_SET(death_test_style, std::getenv("CMWQ_UNDER_EMULATION") ? "fast" : "threadsafe");
	EXPECT_DEATH(
		{
			cmwq::workqueue wq("cxx_escape", WQ_UNBOUND);
			cmwq::work w("rebuild_index", [] { throw std::runtime_error("disk full"); });
			(void)wq.queue(w);
			(void)w.flush();
		},
		"cmwq: uncaught exception: disk full in work item rebuild_index on workqueue cxx_escape");
}

TEST(cxx_names, the_execute_start_probe_carries_the_name)
{
	// workqueue_execute_start(work, function, name): the third argument is
	// the item's name (NULL for unnamed C items). Read from this program's
	// own stapsdt notes (the static library's probes are linked in).
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
	ASSERT_GT(len, 0);
	self[len] = '\0';
	FILE *p = popen(("readelf -n '" + std::string(self) + "' 2>/dev/null").c_str(), "r");
	if (!p)
		GTEST_SKIP() << "cannot run readelf";
	std::string out;
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
		out.append(buf, n);
	pclose(p);
	auto at = out.find("Name: workqueue_execute_start");
	if (at == std::string::npos)
		GTEST_SKIP() << "no USDT probes in this build (readelf missing or <sys/sdt.h> absent)";
	auto args = out.find("Arguments:", at);
	ASSERT_NE(args, std::string::npos);
	std::string line = out.substr(args, out.find('\n', args) - args);
	int count = 0;
	for (size_t i = line.find('@'); i != std::string::npos; i = line.find('@', i + 1))
		count++;
	EXPECT_EQ(count, 3) << line;
}
