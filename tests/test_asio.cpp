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
#include <asio/strand.hpp>
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
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
namespace net = boost::asio;
#endif

#include <cmwq/params.h>

#include <array>
#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

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

// ---- Asio's executor requirements, as Asio's own unit tests check them ----

namespace {
// A handler's effects, and whether it ran before the call that posted it
// returned.
struct probe {
	std::atomic<bool> ran{false};
	std::atomic<bool> ran_inline{false};
};

// Set while this thread is inside the post call: a handler that sees it
// ran inline (another worker may run a queued one before post returns).
thread_local bool tl_posting = false;

template <class Post>
bool runs_inline_from_an_item(cmwq::workqueue &wq, Post post)
{
	auto t = cmwq::submit(wq, [&] {
		auto p = std::make_shared<probe>();
		tl_posting = true;
		post([p] {
			p->ran = true;
			p->ran_inline = tl_posting;
		});
		tl_posting = false;
		return p->ran_inline.load();
	});
	bool r = t.get();
	wq.flush();
	return r;
}
} // namespace

TEST(asio_executor, post_and_defer_never_run_inline_even_from_an_item_of_the_workqueue)
{
	cmwq::workqueue wq("asio_never", WQ_UNBOUND);
	cmwq::asio::executor ex(wq);
	std::allocator<void> a;
	EXPECT_FALSE(runs_inline_from_an_item(wq, [&](auto f) { net::post(ex, f); }));
	EXPECT_FALSE(runs_inline_from_an_item(wq, [&](auto f) { net::defer(ex, f); }));
	EXPECT_FALSE(runs_inline_from_an_item(wq, [&](auto f) { ex.post(f, a); }));
	EXPECT_FALSE(runs_inline_from_an_item(wq, [&](auto f) { ex.defer(f, a); }));
	EXPECT_FALSE(runs_inline_from_an_item(
		wq, [&](auto f) { net::execution::execute(net::require(ex, net::execution::blocking.never), f); }));
	// dispatch and a blocking.possibly execute do run inline there.
	EXPECT_TRUE(runs_inline_from_an_item(wq, [&](auto f) { net::dispatch(ex, f); }));
	EXPECT_TRUE(runs_inline_from_an_item(wq, [&](auto f) { net::execution::execute(ex, f); }));
	ex.join();
}

TEST(asio_executor, a_strand_serialises_and_never_runs_inline_in_post)
{
	cmwq::workqueue wq("asio_strand", WQ_UNBOUND);
	cmwq::asio::executor ex(wq);
	net::strand<cmwq::asio::executor> s(ex);
	// From an item of the workqueue too: post queues.
	EXPECT_FALSE(runs_inline_from_an_item(wq, [&](auto f) { net::post(s, f); }));
	std::atomic<int> in{0}, overlap{0}, runs{0};
	std::vector<int> order;
	std::mutex m;
	auto producer = [&](int base) {
		for (int i = 0; i < 500; i++)
			net::post(s, [&, v = base + i] {
				if (in.fetch_add(1) != 0)
					overlap++;
				{
					std::lock_guard lk(m);
					order.push_back(v);
				}
				runs++;
				in.fetch_sub(1);
			});
	};
	std::thread t1(producer, 0), t2(producer, 1000);
	t1.join();
	t2.join();
	ex.join();
	EXPECT_EQ(runs.load(), 1000);
	EXPECT_EQ(overlap.load(), 0) << "two handlers of one strand ran at once";
	// Each producer's handlers ran in the order it posted them.
	int last0 = -1, last1 = 999;
	for (int v : order) {
		int &last = v < 1000 ? last0 : last1;
		EXPECT_GT(v, last);
		last = v;
	}
}

TEST(asio_executor, properties_are_queried_and_required_as_for_thread_pool)
{
	cmwq::workqueue wq("asio_props", WQ_UNBOUND);
	cmwq::asio::executor ex(wq);
	using namespace net::execution;
	EXPECT_EQ(net::query(ex, blocking), blocking.possibly);
	EXPECT_EQ(net::query(net::require(ex, blocking.never), blocking), blocking.never);
	EXPECT_EQ(net::query(net::require(ex, blocking.always), blocking), blocking.always);
	EXPECT_EQ(net::query(ex, outstanding_work), outstanding_work.untracked);
	auto tracked = net::require(ex, outstanding_work.tracked);
	EXPECT_EQ(net::query(tracked, outstanding_work), outstanding_work.tracked);
	EXPECT_EQ(net::query(net::require(tracked, outstanding_work.untracked), outstanding_work),
		  outstanding_work.untracked);
	EXPECT_EQ(net::query(ex, relationship), relationship.fork);
	EXPECT_EQ(net::query(net::require(ex, relationship.continuation), relationship), relationship.continuation);
	EXPECT_EQ(net::query(ex, mapping), mapping.thread);
	EXPECT_EQ(net::query(ex, bulk_guarantee), bulk_guarantee.parallel);
	EXPECT_EQ(net::query(ex, occupancy), static_cast<size_t>(cmwq_num_online_cpus()));
	EXPECT_TRUE(net::query(ex, allocator) == std::allocator<void>());
	EXPECT_FALSE(ex == net::require(ex, blocking.never)) << "executors with other properties compare unequal";
	EXPECT_TRUE(ex == cmwq::asio::executor(ex));
}

namespace {
std::atomic<int> counted_allocs{0};
template <class T>
struct counting_allocator {
	using value_type = T;
	counting_allocator() = default;
	template <class U>
	counting_allocator(const counting_allocator<U> &) noexcept
	{
	}
	T *allocate(size_t n)
	{
		counted_allocs++;
		return std::allocator<T>().allocate(n);
	}
	void deallocate(T *p, size_t n) noexcept { std::allocator<T>().deallocate(p, n); }
	friend bool operator==(const counting_allocator &, const counting_allocator &) { return true; }
	friend bool operator!=(const counting_allocator &, const counting_allocator &) { return false; }
};
} // namespace

TEST(asio_executor, handlers_are_allocated_with_the_executors_allocator)
{
	cmwq::workqueue wq("asio_alloc", WQ_UNBOUND);
	cmwq::asio::executor ex(wq);
	auto ax = net::require(ex, net::execution::allocator(counting_allocator<void>()));
	int before = counted_allocs.load();
	std::atomic<int> runs{0};
	for (int i = 0; i < 10; i++)
		net::execution::execute(net::require(ax, net::execution::blocking.never), [&] { runs++; });
	ex.join();
	EXPECT_EQ(runs.load(), 10);
	EXPECT_EQ(counted_allocs.load() - before, 10);
}

TEST(asio_executor, blocking_always_returns_after_the_function_ran_and_rethrows)
{
	cmwq::workqueue wq("asio_always", WQ_UNBOUND);
	cmwq::asio::executor ex(wq);
	auto always = net::require(ex, net::execution::blocking.always);
	std::string seen;
	net::execution::execute(always, [&] { seen = where(); });
	EXPECT_EQ(seen, "asio_always");
	EXPECT_THROW(net::execution::execute(always, [] { throw std::runtime_error("x"); }), std::runtime_error);
}

TEST(asio_executor, tracked_work_keeps_join_waiting_until_it_is_gone)
{
	cmwq::workqueue wq("asio_tracked", WQ_UNBOUND);
	cmwq::asio::executor ex(wq);
	auto guard = std::make_unique<decltype(net::require(ex, net::execution::outstanding_work.tracked))>(
		net::require(ex, net::execution::outstanding_work.tracked));
	std::atomic<bool> joined{false};
	std::thread j([&] {
		ex.join();
		joined = true;
	});
	std::this_thread::sleep_for(std::chrono::milliseconds(100));
	EXPECT_FALSE(joined.load()) << "join() returned while a tracked executor was alive";
	guard.reset();
	j.join();
	EXPECT_TRUE(joined.load());
	// The Networking TS count does the same.
	ex.on_work_started();
	std::thread j2([&] { ex.join(); });
	std::this_thread::sleep_for(std::chrono::milliseconds(50));
	ex.on_work_finished();
	j2.join();
}

TEST(asio_executor, a_throwing_handler_is_rethrown_by_join_and_the_rest_run)
{
	cmwq::workqueue wq("asio_throw", WQ_UNBOUND);
	cmwq::asio::executor ex(wq);
	net::strand<cmwq::asio::executor> s(ex);
	std::atomic<int> after{0};
	testing::internal::CaptureStderr();
	net::post(s, [] { throw std::runtime_error("from a handler"); });
	for (int i = 0; i < 5; i++)
		net::post(s, [&] { after++; });
	EXPECT_THROW(ex.join(), std::runtime_error);
	ex.join(); // the rest: nothing more to rethrow
	std::string err = testing::internal::GetCapturedStderr();
	EXPECT_EQ(after.load(), 5) << "the strand stopped after the exception";
	EXPECT_NE(err.find("threw (from a handler); join() rethrows it"), std::string::npos) << err;
}

TEST(asio_executor, bulk_execute_runs_every_index_once)
{
	cmwq::workqueue wq("asio_bulk", WQ_UNBOUND);
	cmwq::asio::executor ex(wq);
	std::atomic<int> seen[16] = {};
	ex.bulk_execute([&](size_t i) { seen[i]++; }, 16);
	ex.join();
	for (auto &v : seen)
		EXPECT_EQ(v.load(), 1);
}

namespace {
struct destroy_counter {
	std::atomic<int> *n;
	explicit destroy_counter(std::atomic<int> *p) : n(p) {}
	destroy_counter(destroy_counter &&o) noexcept : n(std::exchange(o.n, nullptr)) {}
	~destroy_counter()
	{
		if (n)
			(*n)++;
	}
};
} // namespace

// A handler posted to a workqueue that is gone is destroyed, never run, and
// never thrown at the poster; join() still returns.
TEST(asio_executor, a_handler_for_a_destroyed_workqueue_is_destroyed_without_running)
{
	char prev[8] = {};
	ASSERT_EQ(cmwq_param_get("cmwq.debug_objects", prev, sizeof(prev)), 0);
	ASSERT_EQ(cmwq_param_set("cmwq.debug_objects", "1"), 0); // keeps the destroyed workqueue's memory
	workqueue_struct *raw = alloc_workqueue("asio_gone", WQ_UNBOUND, 0);
	ASSERT_NE(raw, nullptr);
	cmwq::asio::executor ex(raw);
	std::atomic<int> ran{0}, destroyed{0};
	net::post(ex, [&] { ran++; });
	ex.join();
	destroy_workqueue(raw);
	testing::internal::CaptureStderr();
	EXPECT_NO_THROW(net::post(ex, [&, d = destroy_counter(&destroyed)] { ran++; }));
	(void)testing::internal::GetCapturedStderr();
	ex.join();
	cmwq_param_set("cmwq.debug_objects", std::string(prev) == "Y" ? "1" : "0");
	EXPECT_EQ(ran.load(), 1);
	EXPECT_GE(destroyed.load(), 1);
}

// dispatch() runs inline only from an item of the executor's own
// workqueue: from an item of another one it queues.
TEST(asio_executor, dispatch_from_another_workqueues_item_queues)
{
	cmwq::workqueue wq("asio_mine", WQ_UNBOUND);
	cmwq::workqueue other("asio_other", WQ_UNBOUND);
	cmwq::asio::executor ex(wq);
	EXPECT_FALSE(runs_inline_from_an_item(other, [&](auto f) { net::dispatch(ex, f); }));
	EXPECT_FALSE(runs_inline_from_an_item(other, [&](auto f) { net::execution::execute(ex, f); }));
	auto t = cmwq::submit(other, [&] { return ex.running_in_this_thread(); });
	EXPECT_FALSE(t.get());
	ex.join();
}

// running_in_this_thread() reads the thread's chain first (no call into the
// library on the path of an inline completion): in a handler it is true
// for any executor of the same workqueue, another state included, and
// false for one of another workqueue, also when that one's handler is
// what runs here; a plain item of the workqueue still counts.
TEST(asio_executor, running_in_this_thread_names_the_workqueue_not_the_executor)
{
	cmwq::workqueue wq("asio_rt_mine", WQ_UNBOUND);
	cmwq::workqueue other("asio_rt_other", WQ_UNBOUND);
	cmwq::asio::executor ex(wq), twin(wq), away(other);
	std::promise<std::array<bool, 4>> in_ex, in_away;
	net::post(ex, [&] {
		in_ex.set_value({ex.running_in_this_thread(), twin.running_in_this_thread(),
				 away.running_in_this_thread(), net::require(twin, net::execution::blocking.never)
									.running_in_this_thread()});
	});
	net::post(away, [&] {
		in_away.set_value({ex.running_in_this_thread(), twin.running_in_this_thread(),
				   away.running_in_this_thread(), false});
	});
	EXPECT_EQ(in_ex.get_future().get(), (std::array<bool, 4>{true, true, false, true}));
	EXPECT_EQ(in_away.get_future().get(), (std::array<bool, 4>{false, false, true, false}));
	auto plain = cmwq::submit(wq, [&] { return twin.running_in_this_thread() && !away.running_in_this_thread(); });
	EXPECT_TRUE(plain.get());
	EXPECT_FALSE(ex.running_in_this_thread()); // the test's own thread
	ex.join();
	away.join();
}
