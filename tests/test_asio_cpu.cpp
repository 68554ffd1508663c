// <cmwq/asio.hpp>: executors bound to a CPU (on_cpu), and the reference
// budget that executor copies made in a handler take their counts from.
// Part of test_asio (and test_asio_standalone).
#include <cmwq/asio.hpp>
#include <cmwq/workqueue.hpp>
#include <gtest/gtest.h>

#ifdef CMWQ_ASIO_STANDALONE
#include <asio/any_io_executor.hpp>
#include <asio/defer.hpp>
#include <asio/post.hpp>
#include <asio/strand.hpp>
namespace net = ::asio;
#else
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/defer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
namespace net = boost::asio;
#endif

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using tracked_executor = decltype(net::require(std::declval<cmwq::asio::executor>(),
					       net::execution::outstanding_work.tracked));

// The first two CPUs this process may run on, or fewer.
std::vector<int> two_cpus()
{
	std::vector<int> cpus;
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; c++)
			if (CPU_ISSET(c, &set))
				cpus.push_back(c);
	return cpus;
}

// Runs join() on a thread of its own; true if it returned within the wait.
bool joins_within(const cmwq::asio::executor &ex, std::chrono::milliseconds wait, std::thread &t)
{
	auto done = std::make_shared<std::promise<void>>();
	auto f = done->get_future();
	t = std::thread([ex, done] {
		ex.join();
		done->set_value();
	});
	return f.wait_for(wait) == std::future_status::ready;
}

} // namespace

TEST(asio_cpu, an_executor_on_a_cpu_runs_its_handlers_on_that_cpu)
{
	std::vector<int> cpus = two_cpus();
	cmwq::workqueue wq("asio_on_cpu", WQ_PERCPU);
	cmwq::asio::executor ex(wq);
	for (int cpu : cpus) {
		auto on = ex.on_cpu(cpu);
		EXPECT_EQ(on.cpu(), cpu);
		std::vector<int> seen(20, -1);
		for (auto &s : seen)
			net::post(on, [&s] { s = sched_getcpu(); });
		on.join();
		for (size_t i = 0; i < seen.size(); i++)
			EXPECT_EQ(seen[i], cpu) << "handler " << i << " of the executor on CPU " << cpu;
	}
}

// A continuation stays in the item that deferred it only when that item
// runs on the continuation's CPU; one bound to another CPU goes there.
TEST(asio_cpu, a_continuation_for_another_cpu_runs_there_and_one_for_this_cpu_runs_in_the_item)
{
	std::vector<int> cpus = two_cpus();
	if (cpus.size() < 2)
		GTEST_SKIP() << "needs two CPUs";
	cmwq::workqueue wq("asio_cpu_cont", WQ_PERCPU);
	cmwq::asio::executor ex(wq);
	auto here = ex.on_cpu(cpus[0]), there = ex.on_cpu(cpus[1]);
	std::thread::id item_thread, same_thread;
	int same_cpu = -1, other_cpu = -1;
	std::atomic<bool> item_returned{false}, same_after_return{false};
	net::post(here, [&] {
		item_thread = std::this_thread::get_id();
		net::defer(here, [&] {
			same_thread = std::this_thread::get_id();
			same_cpu = sched_getcpu();
			same_after_return = item_returned.load();
		});
		net::defer(there, [&] { other_cpu = sched_getcpu(); });
		item_returned = true;
	});
	ex.join();
	EXPECT_EQ(same_thread, item_thread) << "the continuation for this CPU ran in another item";
	EXPECT_TRUE(same_after_return.load()) << "a continuation ran before the handler that deferred it returned";
	EXPECT_EQ(same_cpu, cpus[0]);
	EXPECT_EQ(other_cpu, cpus[1]) << "the continuation for CPU " << cpus[1] << " ran elsewhere";
}

TEST(asio_cpu, on_cpu_copies_share_join_and_compare_by_cpu)
{
	cmwq::workqueue wq("asio_cpu_join", WQ_PERCPU);
	cmwq::asio::executor ex(wq);
	auto on = ex.on_cpu(two_cpus().at(0));
	EXPECT_NE(ex, on);
	EXPECT_EQ(ex, on.on_any_cpu());
	EXPECT_EQ(ex.cpu(), -1);
	EXPECT_EQ(on.on_any_cpu().cpu(), -1);
	EXPECT_EQ(ex.native(), on.native());
	std::atomic<int> ran{0};
	for (int i = 0; i < 50; i++)
		net::post(on, [&] {
			std::this_thread::sleep_for(std::chrono::microseconds(200));
			ran++;
		});
	ex.join(); // the copy's handlers count in the executor's join
	EXPECT_EQ(ran.load(), 50);
	// A strand over a bound copy keeps its handlers there and in order.
	net::strand<cmwq::asio::executor> s(on);
	std::vector<int> order;
	for (int i = 0; i < 100; i++)
		net::post(s, [&order, i] { order.push_back(i); });
	ex.join();
	ASSERT_EQ(order.size(), 100u);
	for (int i = 0; i < 100; i++)
		EXPECT_EQ(order[static_cast<size_t>(i)], i);
}

TEST(asio_cpu, on_cpu_refuses_a_cpu_out_of_range_by_name)
{
	cmwq::workqueue wq("asio_cpu_bad", WQ_PERCPU);
	cmwq::asio::executor ex(wq);
	for (int bad : {-1, -100, WORK_CPU_UNBOUND, WORK_CPU_UNBOUND + 5}) {
		try {
			(void)ex.on_cpu(bad);
			ADD_FAILURE() << "on_cpu(" << bad << ") was accepted";
		} catch (const std::out_of_range &e) {
			std::string what = e.what();
			EXPECT_NE(what.find("on_cpu"), std::string::npos) << what;
			EXPECT_NE(what.find(std::to_string(bad)), std::string::npos) << what;
		}
	}
	// Handlers queued before and after are not lost.
	std::atomic<int> ran{0};
	net::post(ex, [&] { ran++; });
	ex.join();
	EXPECT_EQ(ran.load(), 1);
}

// Tracked copies made and destroyed in a handler are counted in its
// thread's budget until the item ends: join() returns once it did, and a
// tracked copy the handler keeps still holds join() back.
TEST(asio_budget, tracked_copies_of_a_handler_count_until_they_are_gone)
{
	cmwq::workqueue wq("asio_budget", WQ_UNBOUND);
	cmwq::asio::executor ex(wq);
	std::unique_ptr<tracked_executor> kept;
	std::promise<void> ran;
	net::post(ex, [&] {
		for (int i = 0; i < 1000; i++) {
			auto t = net::require(ex, net::execution::outstanding_work.tracked);
			auto copy = t; // copies of copies
			(void)copy;
		}
		kept = std::make_unique<tracked_executor>(net::require(ex, net::execution::outstanding_work.tracked));
		ran.set_value();
	});
	ran.get_future().wait();
	std::thread j;
	EXPECT_FALSE(joins_within(ex, std::chrono::milliseconds(200), j))
		<< "join() returned while a tracked copy made in a handler was alive";
	kept.reset(); // from this thread: no budget here
	std::thread j2;
	EXPECT_TRUE(joins_within(ex, std::chrono::seconds(30), j2))
		<< "join() still waits: the handler's budget was not given back";
	j.join();
	j2.join();
}

// join() from another executor's item gives back that item's budget for
// the joined executor first: it does not wait for its own thread.
TEST(asio_budget, join_from_another_executors_item_does_not_wait_for_its_own_budget)
{
	cmwq::workqueue wq_a("asio_budget_a", WQ_UNBOUND), wq_b("asio_budget_b", WQ_UNBOUND);
	cmwq::asio::executor a(wq_a), b(wq_b);
	std::promise<bool> joined;
	auto f = joined.get_future();
	net::post(a, [&] {
		{
			auto t = net::require(b, net::execution::outstanding_work.tracked);
			(void)t;
		}
		b.join();
		joined.set_value(true);
	});
	ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready)
		<< "b.join() in a's handler waited for the budget of its own thread";
	a.join();
}

// Copies made in handlers outlive the handler, the executor they came
// from and the item; each copy holds the state (ASan: no use after free;
// LeakSanitizer: every state is freed once its copies are gone). More
// executors than a thread's budget has slots.
TEST(asio_budget, copies_made_in_handlers_hold_their_state_after_the_item)
{
	cmwq::workqueue wq("asio_budget_copies", WQ_UNBOUND);
	std::vector<std::unique_ptr<cmwq::asio::executor>> exs;
	for (int i = 0; i < 7; i++)
		exs.push_back(std::make_unique<cmwq::asio::executor>(wq));
	std::vector<cmwq::asio::executor> copies;
	std::vector<net::any_io_executor> erased;
	std::promise<void> made;
	net::post(*exs[0], [&] {
		for (int round = 0; round < 100; round++)
			for (auto &e : exs) {
				auto c = net::prefer(*e, net::execution::relationship.continuation);
				auto d = net::require(c, net::execution::outstanding_work.untracked);
				(void)d;
			}
		for (auto &e : exs) {
			copies.push_back(*e);
			erased.emplace_back(*e);
		}
		made.set_value();
	});
	made.get_future().wait();
	for (auto &e : exs)
		e->join();
	exs.clear(); // the originals go first
	std::atomic<int> ran{0};
	for (auto &c : copies)
		net::post(c, [&] { ran++; });
	for (auto &e : erased)
		net::post(e, [&] { ran++; });
	for (auto &c : copies)
		c.join();
	EXPECT_EQ(ran.load(), 14);
}

// Tracked copies of more executors' states than a thread's budget has
// slots, made and destroyed in one handler in turn: each look-up of a
// state not in the budget gives back the slot used longest ago, counts and
// all. Every count comes back: join() returns for the executors the
// handler kept nothing of, and waits for the two it kept a tracked copy
// of until those are gone (LeakSanitizer: every state is freed).
TEST(asio_budget, tracked_copies_of_more_states_than_budget_slots_all_come_back)
{
	cmwq::workqueue wq("asio_budget_slots", WQ_UNBOUND);
	std::vector<cmwq::asio::executor> exs;
	for (int i = 0; i < 7; i++)
		exs.emplace_back(wq);
	std::vector<tracked_executor> kept;
	std::promise<void> made;
	net::post(exs[0], [&] {
		std::vector<tracked_executor> live; // one copy of each at a time, then none
		for (int round = 0; round < 50; round++) {
			for (auto &e : exs)
				live.push_back(net::require(e, net::execution::outstanding_work.tracked));
			for (auto &t : live) {
				auto copy = t; // from the same slot, then back to it
				(void)copy;
			}
			live.clear();
		}
		kept.push_back(net::require(exs[3], net::execution::outstanding_work.tracked));
		kept.push_back(net::require(exs[6], net::execution::outstanding_work.tracked));
		made.set_value();
	});
	made.get_future().wait();
	for (int i : {0, 1, 2, 4, 5}) {
		std::thread j;
		EXPECT_TRUE(joins_within(exs[static_cast<size_t>(i)], std::chrono::seconds(30), j))
			<< "executor " << i << ": join() still waits for a count the handler gave back";
		j.join();
	}
	std::thread j3, j6;
	EXPECT_FALSE(joins_within(exs[3], std::chrono::milliseconds(200), j3))
		<< "join() returned while a tracked copy of executor 3 was alive";
	EXPECT_FALSE(joins_within(exs[6], std::chrono::milliseconds(200), j6))
		<< "join() returned while a tracked copy of executor 6 was alive";
	kept.clear(); // from this thread: no budget here
	j3.join();
	j6.join();
}

// A strand's hops over executors bound to CPUs, many at once, with copies
// made in every hop: each token makes every hop once and join() returns.
TEST(asio_budget, a_ring_of_strands_over_cpu_bound_executors_keeps_every_token)
{
	std::vector<int> cpus = two_cpus();
	cmwq::workqueue wq("asio_budget_ring", WQ_PERCPU);
	cmwq::asio::executor base(wq);
	constexpr int actors = 64, tokens = 16, hops = 2000;
	std::vector<net::strand<net::any_io_executor>> ring;
	for (int i = 0; i < actors; i++)
		ring.emplace_back(net::any_io_executor(base.on_cpu(cpus[static_cast<size_t>(i / 8) % cpus.size()])));
	std::vector<std::atomic<int>> hopped(tokens);
	struct hop {
		std::vector<net::strand<net::any_io_executor>> *ring;
		std::vector<std::atomic<int>> *hopped;
		int token, at, left;
		void operator()() const
		{
			(*hopped)[static_cast<size_t>(token)]++;
			if (left == 0)
				return;
			int next = (at + 1) % actors;
			net::defer((*ring)[static_cast<size_t>(next)], hop{ring, hopped, token, next, left - 1});
		}
	};
	for (int t = 0; t < tokens; t++)
		net::post(ring[static_cast<size_t>(t * actors / tokens)], hop{&ring, &hopped, t, t * actors / tokens, hops});
	base.join();
	for (int t = 0; t < tokens; t++)
		EXPECT_EQ(hopped[static_cast<size_t>(t)].load(), hops + 1) << "token " << t;
}

// fork() in a handler while its thread holds a budget. The child is not a
// worker (it must _exit or exec, docs/design.md §9: running_in_this_thread()
// is false there), but it may still copy
// and drop executors before it goes, which moves counts between its copy
// of the budget and its copy of the state. None of that reaches the
// parent: there, the handler's copies count until its item returns, then
// join() returns, and a tracked copy kept across the fork still holds it.
TEST(asio_budget, a_fork_in_a_handler_leaves_the_parents_counts_whole)
{
	cmwq::workqueue wq("asio_budget_fork", WQ_UNBOUND);
	cmwq::asio::executor ex(wq);
	std::unique_ptr<tracked_executor> kept;
	std::promise<int> child_status;
	net::post(ex, [&] {
		std::vector<tracked_executor> held;
		for (int i = 0; i < 40; i++) // more than a refill: the budget holds counts
			held.push_back(net::require(ex, net::execution::outstanding_work.tracked));
		kept = std::make_unique<tracked_executor>(held.front());
		pid_t pid = ::fork();
		if (pid == 0) {
			// The child: more copies than the budget holds, then none.
			std::vector<tracked_executor> mine(held.begin(), held.end());
			for (int i = 0; i < 100; i++)
				mine.push_back(net::require(ex, net::execution::outstanding_work.tracked));
			mine.clear();
			held.clear();
			_exit(ex.running_in_this_thread() ? 3 : 0); // not a worker there
		}
		int status = -1;
		if (pid > 0 && ::waitpid(pid, &status, 0) != pid)
			status = -1;
		child_status.set_value(pid < 0 ? -1 : status);
	});
	int status = child_status.get_future().get();
	ASSERT_GE(status, 0) << "fork or waitpid failed";
	ASSERT_TRUE(WIFEXITED(status)) << "the child died of signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	EXPECT_EQ(WEXITSTATUS(status), 0) << "the child counted itself in the parent's item (it is not a worker)";
	std::thread j;
	EXPECT_FALSE(joins_within(ex, std::chrono::milliseconds(200), j))
		<< "join() returned while a tracked copy made before the fork was alive";
	kept.reset();
	std::thread j2;
	EXPECT_TRUE(joins_within(ex, std::chrono::seconds(30), j2))
		<< "join() still waits after the fork: the handler's budget was not given back";
	j.join();
	j2.join();
}
