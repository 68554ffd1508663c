// <cmwq/asio.hpp>: a workqueue as a Boost.Asio executor - post, dispatch,
// defer, use_future, any_io_executor, co_spawn with use_awaitable - and
// the handlers run as items of that workqueue. Built twice: against
// Boost.Asio and, with CMWQ_ASIO_STANDALONE, against standalone Asio.
#include <cmwq/asio.hpp>
#include <cmwq/workqueue.hpp>
#include <gtest/gtest.h>

#ifdef CMWQ_ASIO_STANDALONE
#include <asio/any_io_executor.hpp>
#include <asio/co_spawn.hpp>
#include <asio/defer.hpp>
#include <asio/detached.hpp>
#include <asio/dispatch.hpp>
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/use_future.hpp>
namespace net = ::asio;
#else
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
namespace net = boost::asio;
#endif

#include <atomic>
#include <future>
#include <memory>
#include <string>

static_assert(net::execution::is_executor<cmwq::asio::executor>::value, "standard executor model");
static_assert(net::is_executor<cmwq::asio::executor>::value, "Networking TS executor model");

namespace {
std::string where()
{
	const char *n = cmwq_current_workqueue_name();
	return n ? n : "(not a worker)";
}
} // namespace

TEST(asio_executor, post_dispatch_defer_run_on_the_workqueue)
{
	cmwq::workqueue wq("asio_wq", WQ_UNBOUND);
	cmwq::asio::executor ex(wq, "asio_handler");
	std::promise<std::string> a, b, c;
	net::post(ex, [&] { a.set_value(where()); });
	net::dispatch(ex, [&] { b.set_value(where()); });
	net::defer(ex, [&] { c.set_value(where()); });
	EXPECT_EQ(a.get_future().get(), "asio_wq");
	EXPECT_EQ(b.get_future().get(), "asio_wq");
	EXPECT_EQ(c.get_future().get(), "asio_wq");
	// Move-only handler.
	std::promise<int> d;
	net::post(ex, [&d, p = std::make_unique<int>(9)] { d.set_value(*p); });
	EXPECT_EQ(d.get_future().get(), 9);
	EXPECT_TRUE(ex == cmwq::asio::executor(wq.native()));
	EXPECT_FALSE(ex.running_in_this_thread());
}

TEST(asio_executor, use_future_carries_values_and_exceptions)
{
	cmwq::workqueue wq("asio_future", WQ_PERCPU);
	cmwq::asio::executor ex(wq);
	std::future<int> f = net::post(ex, net::use_future([] { return 42; }));
	EXPECT_EQ(f.get(), 42);
	std::future<int> g = net::post(ex, net::use_future([]() -> int { throw std::runtime_error("bad"); }));
	EXPECT_THROW(g.get(), std::runtime_error);
}

TEST(asio_executor, dispatch_from_its_own_item_runs_inline)
{
	cmwq::workqueue wq("asio_inline", WQ_UNBOUND);
	cmwq::asio::executor ex(wq);
	auto t = cmwq::submit(wq, [&] {
		bool inline_ran = false;
		net::dispatch(ex, [&] { inline_ran = true; });
		return inline_ran && ex.running_in_this_thread();
	});
	EXPECT_TRUE(t.get());
}

namespace {
net::awaitable<int> session(cmwq::asio::executor ex, std::string *seen)
{
	// Hop through the executor twice, then a timer (any_io_executor-based).
	co_await net::post(ex, net::use_awaitable);
	if (seen)
		*seen = where();
	int sum = 0;
	for (int i = 0; i < 10; i++) {
		co_await net::post(ex, net::use_awaitable);
		sum += i;
	}
	co_return sum;
}
} // namespace

TEST(asio_executor, co_spawn_runs_an_awaitable_on_the_workqueue)
{
	cmwq::workqueue wq("asio_coro", WQ_UNBOUND);
	cmwq::asio::executor ex(wq);
	net::any_io_executor any = ex; // the type awaitable<> uses by default
	EXPECT_TRUE(any.target<cmwq::asio::executor>() != nullptr);
	std::string seen;
	std::future<int> r = net::co_spawn(ex, session(ex, &seen), net::use_future);
	EXPECT_EQ(r.get(), 45);
	EXPECT_EQ(seen, "asio_coro");
	std::atomic<int> done{0};
	for (int i = 0; i < 50; i++)
		net::co_spawn(ex, session(ex, nullptr), [&](std::exception_ptr e, int v) {
			if (!e && v == 45)
				done++;
		});
	wq.flush();
	for (int i = 0; i < 1000 && done.load() < 50; i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(2));
	EXPECT_EQ(done.load(), 50);
}
