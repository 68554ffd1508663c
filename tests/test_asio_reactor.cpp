// <cmwq/asio.hpp>: continuations (a defer from a handler runs after it in
// the same item, never inline, not on an ordered workqueue) and
// cmwq::asio::reactor (Asio's reactor run by the workqueue's workers: I/O
// completions run where epoll saw them). Part of test_asio and
// test_asio_standalone.
#include <cmwq/asio_reactor.hpp>
#include <cmwq/params.h>
#include <cmwq/stats.h>
#include <cmwq/workqueue.hpp>
#include <gtest/gtest.h>

#include "test_util.hpp"

#ifdef CMWQ_ASIO_STANDALONE
#include <asio/defer.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/read.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>
#include <asio/write.hpp>
namespace net = ::asio;
using net_error = ::asio::error_code;
#else
#include <boost/asio/defer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
namespace net = boost::asio;
using net_error = boost::system::error_code;
#endif

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using tcp = net::ip::tcp;

namespace {
pid_t tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

uint64_t items_started(cmwq::workqueue &wq)
{
	uint64_t st[PWQ_NR_STATS];
	cmwq_workqueue_stats(wq.native(), st);
	return st[PWQ_STAT_STARTED];
}
} // namespace

// A handler's defer runs after the handler returned (never inline), in the
// same worker, without a queued item; a chain of 1000 hops loses none.
TEST(asio_continuation, a_defer_from_a_handler_runs_after_it_on_the_same_worker)
{
	for (unsigned flags : {unsigned(WQ_UNBOUND), unsigned(WQ_PERCPU)}) {
		cmwq::workqueue wq("asio_cont", flags);
		cmwq::asio::executor ex(wq);
		std::promise<bool> same;
		std::atomic<bool> returned{false};
		net::post(ex, [&] {
			pid_t me = tid();
			net::defer(ex, [&, me] { same.set_value(returned.load() && tid() == me); });
			returned = true;
		});
		EXPECT_TRUE(same.get_future().get()) << "flags " << flags;
		ex.join();
		// A chain: each hop defers the next one.
		std::atomic<int> hops{0};
		std::promise<void> done;
		struct hop {
			cmwq::asio::executor ex;
			std::atomic<int> *hops;
			std::promise<void> *done;
			int left;
			void operator()() const
			{
				(*hops)++;
				if (left == 0)
					done->set_value();
				else
					net::defer(ex, hop{ex, hops, done, left - 1});
			}
		};
		uint64_t before = items_started(wq);
		net::post(ex, hop{ex, &hops, &done, 999});
		done.get_future().wait();
		ex.join();
		EXPECT_EQ(hops.load(), 1000);
		// Continuations run in the item for its share (about 1 ms; the
		// queued-past-the-share case is the next test's): the chain took
		// far fewer items than hops.
		uint64_t items = items_started(wq) - before;
		EXPECT_GE(items, 1u);
		EXPECT_LT(items, 200u) << "continuations were queued as items";
	}
}

// More continuations than one item runs (300 of 50 us: 15 ms, an item's
// share is about 1 ms): the rest are queued as items, each runs once.
TEST(asio_continuation, continuations_past_the_items_share_are_queued_and_each_runs_once)
{
	cmwq::workqueue wq("asio_cont_many", WQ_UNBOUND);
	cmwq::asio::executor ex(wq);
	std::vector<std::atomic<int>> runs(300);
	uint64_t before = items_started(wq);
	net::post(ex, [&] {
		for (auto &r : runs)
			net::defer(ex, [&r] {
				std::this_thread::sleep_for(std::chrono::microseconds(50));
				r++;
			});
	});
	ex.join();
	for (size_t i = 0; i < runs.size(); i++)
		EXPECT_EQ(runs[i].load(), 1) << "continuation " << i;
	uint64_t items = items_started(wq) - before;
	EXPECT_GT(items, 1u) << "one item ran 15 ms of continuations";
	EXPECT_LT(items, 300u) << "the continuations did not run in the item that deferred them";
}

// Short continuations: many run in the one item that deferred them. The
// item's share is wall-clock time, so a handler preempted for a millisecond
// on a loaded machine spends it and the rest of its links are queued as
// items (121 of 200 once, with two busy loops on a 2-vCPU VM): up to five
// tries, one of which must run most links in its item. Queued one by one,
// every try takes 201 items.
TEST(asio_continuation, short_continuations_run_in_the_deferring_item)
{
	cmwq::workqueue wq("asio_cont_short", WQ_UNBOUND);
	cmwq::asio::executor ex(wq);
	uint64_t fewest = UINT64_MAX;
	for (int t = 0; t < 5 && fewest >= 100; t++) {
		std::atomic<int> runs{0};
		uint64_t before = items_started(wq);
		net::post(ex, [&] {
			for (int i = 0; i < 200; i++)
				net::defer(ex, [&runs] { runs++; });
		});
		ex.join();
		EXPECT_EQ(runs.load(), 200);
		fewest = std::min(fewest, items_started(wq) - before);
	}
	EXPECT_LT(fewest, 100u) << "short continuations were queued one by one";
}

// The links of a chain of the item's own executor are covered by its count
// until they ran; those of another executor over the same workqueue count
// in that executor's: each join() waits for its own, past the item's share.
TEST(asio_continuation, each_executor_joins_its_own_continuations)
{
	cmwq::workqueue wq("asio_cont_two", WQ_UNBOUND);
	cmwq::asio::executor a(wq), b(wq);
	std::vector<std::atomic<int>> runs_a(150), runs_b(150);
	std::promise<void> deferred;
	net::post(a, [&] {
		for (size_t i = 0; i < runs_a.size(); i++) {
			net::defer(a, [&, i] {
				std::this_thread::sleep_for(std::chrono::microseconds(100));
				runs_a[i]++;
			});
			net::defer(b, [&, i] {
				std::this_thread::sleep_for(std::chrono::microseconds(100));
				runs_b[i]++;
			});
		}
		deferred.set_value(); // the links run after this handler returns
	});
	deferred.get_future().wait();
	b.join();
	for (size_t i = 0; i < runs_b.size(); i++)
		ASSERT_EQ(runs_b[i].load(), 1) << "b's continuation " << i << " when b.join() returned";
	a.join();
	for (size_t i = 0; i < runs_a.size(); i++)
		ASSERT_EQ(runs_a[i].load(), 1) << "a's continuation " << i << " when a.join() returned";
}

// On an ordered workqueue a defer is queued behind what was queued before
// it: items run in queue order, continuations too.
TEST(asio_continuation, an_ordered_workqueue_runs_a_continuation_in_queue_order)
{
	cmwq::workqueue wq("asio_cont_ordered", WQ_UNBOUND | __WQ_ORDERED, 1);
	cmwq::asio::executor ex(wq);
	std::mutex m;
	std::vector<char> order;
	auto note = [&](char c) {
		std::lock_guard lk(m);
		order.push_back(c);
	};
	std::promise<void> a_started, c_posted;
	auto c_posted_f = c_posted.get_future();
	net::post(ex, [&] {
		note('A');
		a_started.set_value();
		c_posted_f.wait(); // C is queued before A defers B
		net::defer(ex, [&] { note('B'); });
	});
	a_started.get_future().wait();
	net::post(ex, [&] { note('C'); });
	c_posted.set_value();
	ex.join();
	EXPECT_EQ(std::string(order.begin(), order.end()), "ACB");
}

// A strand over the executor still serialises with continuations: its
// hand-over is a continuation.
TEST(asio_continuation, a_strand_keeps_serialising_through_continuations)
{
	cmwq::workqueue wq("asio_cont_strand", WQ_UNBOUND);
	cmwq::asio::executor ex(wq);
	net::strand<cmwq::asio::executor> s(ex);
	std::atomic<int> in{0}, overlap{0}, runs{0};
	auto body = [&] {
		if (in.fetch_add(1) != 0)
			overlap++;
		runs++;
		in.fetch_sub(1);
	};
	std::vector<std::thread> ts;
	for (int t = 0; t < 3; t++)
		ts.emplace_back([&] {
			for (int i = 0; i < 300; i++) {
				net::post(s, body);
				net::defer(s, body);
			}
		});
	for (auto &t : ts)
		t.join();
	ex.join();
	EXPECT_EQ(runs.load(), 1800);
	EXPECT_EQ(overlap.load(), 0);
}

namespace {
// A loopback echo: a server on ex, one blocking client, `trips` round trips
// of 32 bytes. Returns the workqueues the completion handlers ran on.
struct echo_session : std::enable_shared_from_this<echo_session> {
	tcp::socket sock;
	char buf[32];
	std::atomic<int> *off_wq;
	workqueue_struct *wq;
	echo_session(tcp::socket s, std::atomic<int> *off, workqueue_struct *w) : sock(std::move(s)), off_wq(off), wq(w)
	{
	}
	void read()
	{
		auto self = shared_from_this();
		sock.async_read_some(net::buffer(buf), [self](net_error ec, std::size_t n) {
			if (cmwq_current_workqueue() != self->wq)
				(*self->off_wq)++;
			if (ec)
				return;
			net::async_write(self->sock, net::buffer(self->buf, n), [self](net_error ec2, std::size_t) {
				if (cmwq_current_workqueue() != self->wq)
					(*self->off_wq)++;
				if (!ec2)
					self->read();
			});
		});
	}
};

bool echo(const cmwq::asio::executor &ex, workqueue_struct *wq, int trips, std::atomic<int> *off_wq)
{
	tcp::acceptor acc(ex, tcp::endpoint(net::ip::address_v4::loopback(), 0));
	acc.async_accept([&](net_error ec, tcp::socket s) {
		if (!ec)
			std::make_shared<echo_session>(std::move(s), off_wq, wq)->read();
	});
	net::io_context client_ctx;
	tcp::socket c(client_ctx);
	c.connect(acc.local_endpoint());
	char out[32] = "ping", in[32];
	for (int i = 0; i < trips; i++) {
		net::write(c, net::buffer(out));
		net::read(c, net::buffer(in));
		if (std::string(in) != "ping")
			return false;
	}
	c.close();
	return true;
}
} // namespace

// The reactor's completions run on the workqueue, inline in the items that
// run the reactor: far fewer items than completions (each completion a
// hop through a queued item would start two per round trip).
TEST(asio_reactor, io_completions_run_inline_on_the_workqueues_workers)
{
	for (unsigned flags : {unsigned(WQ_UNBOUND), unsigned(WQ_PERCPU)}) {
		cmwq::workqueue wq("asio_reactor", flags);
		uint64_t before = items_started(wq);
		std::atomic<int> off_wq{0};
		{
			cmwq::asio::reactor rx(wq);
			auto ex = rx.get_executor();
			EXPECT_EQ(&net::query(ex, net::execution::context), static_cast<net::execution_context *>(&rx));
			EXPECT_TRUE(echo(ex, wq.native(), 300, &off_wq)) << "flags " << flags;
			rx.join();
		}
		EXPECT_EQ(off_wq.load(), 0) << "a completion ran off the workqueue";
		uint64_t items = items_started(wq) - before;
		EXPECT_LT(items, 300u) << "completions hopped through queued items (flags " << flags << ")";
		// The workqueue is whole after the reactor: items still run.
		auto t = cmwq::submit(wq, [] { return 7; });
		EXPECT_EQ(t.get(), 7);
	}
}

// Handlers posted through the reactor's executor are items as usual, and a
// flush of the workqueue returns while the reactor runs.
TEST(asio_reactor, posted_handlers_run_and_a_flush_returns_while_it_runs)
{
	cmwq::workqueue wq("asio_reactor_post", WQ_UNBOUND);
	cmwq::asio::reactor rx(wq, 2);
	auto ex = rx.get_executor();
	std::atomic<int> runs{0};
	for (int i = 0; i < 500; i++)
		net::post(ex, [&] { runs++; });
	rx.join();
	EXPECT_EQ(runs.load(), 500);
	auto t0 = std::chrono::steady_clock::now();
	wq.flush(); // the runners give their items back at least every 50 ms
	EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
}

namespace {
std::atomic<bool> behind_ran{false};
void behind_fn(work_struct *) { behind_ran = true; }

// Settings a test changes, put back as they were.
struct saved_param {
	const char *name;
	std::string value;
	explicit saved_param(const char *n) : name(n), value(param(n)) {}
	~saved_param() { cmwq_param_set(name, value.c_str()); }
};
} // namespace

// A runner kept busy gives its worker back every 2 ms or so (or 256
// handlers): an item queued behind it on its CPU runs while the reactor
// stays busy. With the block detector off and no item a CPU hog, nothing
// else would let that item run before the reactor went quiet.
TEST(asio_reactor, a_busy_runner_gives_its_worker_back_to_the_items_behind_it)
{
	saved_param detect("cmwq.block_detect"), hog("workqueue.cpu_intensive_thresh_us");
	ASSERT_EQ(cmwq_param_set("cmwq.block_detect", "off"), 0);
	ASSERT_EQ(cmwq_param_set("workqueue.cpu_intensive_thresh_us", "60000000"), 0);
	work_struct behind; // outlives the workqueue, which runs it if the test failed
	INIT_WORK(&behind, behind_fn);
	behind_ran = false;
	cmwq::workqueue wq("asio_reactor_busy", WQ_PERCPU);
	std::atomic<bool> stop{false};
	std::atomic<long> fired{0};
	cmwq::asio::reactor rx(wq, 1); // one runner, on CPU 0
	net::steady_timer timer(rx.get_executor());
	// A timer that has always expired, waited on again by its own handler:
	// the runner never waits in epoll for long.
	std::function<void()> arm = [&] {
		timer.expires_at(net::steady_timer::time_point{});
		timer.async_wait([&](net_error) {
			fired++;
			if (!stop.load())
				arm();
		});
	};
	// Ends the chain before arm and the timer go, on every way out.
	struct ender {
		std::atomic<bool> &stop;
		cmwq::asio::reactor &rx;
		~ender()
		{
			stop = true;
			rx.join();
		}
	} end{stop, rx};
	arm();
	ASSERT_TRUE(wait_until([&] { return fired.load() >= 1000; }, std::chrono::seconds(20))) << "the timer's handler hardly ran";
	ASSERT_TRUE(queue_work_on(0, wq.native(), &behind));
	EXPECT_TRUE(wait_until([] { return behind_ran.load(); }, std::chrono::seconds(20))) << "the item behind the busy runner never ran";
	long at = fired.load();
	EXPECT_TRUE(wait_until([&] { return fired.load() >= at + 1000; }, std::chrono::seconds(20))) << "the reactor went quiet";
}

// Destroying the reactor with a read pending destroys its handler without
// running it (as io_context does), and the workqueue lives on. The socket
// object is left alone (leaked): a live one must go before its context.
TEST(asio_reactor, destroying_it_with_a_read_pending_destroys_the_handler_unrun)
{
	cmwq::workqueue wq("asio_reactor_gone", WQ_PERCPU);
	auto token = std::make_shared<int>(1);
	std::atomic<int> ran{0};
	net::io_context client_ctx;
	tcp::socket c(client_ctx);
	int fd = -1;
	{
		cmwq::asio::reactor rx(wq);
		tcp::acceptor acc(rx.get_executor(), tcp::endpoint(net::ip::address_v4::loopback(), 0));
		c.connect(acc.local_endpoint());
		auto *s = new tcp::socket(rx.get_executor());
		acc.accept(*s);
		fd = s->native_handle();
		static char buf[8];
		s->async_read_some(net::buffer(buf), [&ran, token](net_error, std::size_t) { ran++; });
		EXPECT_GE(token.use_count(), 2);
	}
	EXPECT_EQ(ran.load(), 0);
	EXPECT_EQ(token.use_count(), 1) << "the pending handler was not destroyed";
	close(fd);
	auto t = cmwq::submit(wq, [] { return 1; });
	EXPECT_EQ(t.get(), 1);
}

TEST(asio_reactor, an_ordered_or_missing_workqueue_is_refused)
{
	cmwq::workqueue wq("asio_reactor_ordered", WQ_UNBOUND | __WQ_ORDERED, 1);
	EXPECT_THROW(cmwq::asio::reactor rx(wq), std::invalid_argument);
	EXPECT_THROW(cmwq::asio::reactor rx(static_cast<workqueue_struct *>(nullptr)), std::invalid_argument);
}
