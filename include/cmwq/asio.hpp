// cmwq/asio.hpp - a workqueue as an Asio executor (header-only; the cmwq
// library does not depend on Boost).
//
//   cmwq::workqueue wq("net", WQ_UNBOUND);
//   cmwq::asio::executor ex(wq);
//   boost::asio::post(ex, [] { ... });                      // queued on wq
//   auto f = boost::asio::post(ex, boost::asio::use_future([] { return 42; }));
//   boost::asio::co_spawn(ex, session(), boost::asio::detached);
//
// The executor satisfies both executor models of Boost.Asio 1.74 (Debian
// 12's libboost-dev): the standard one (execute, query, require; so
// any_io_executor, co_spawn and use_awaitable accept it) and the Networking
// TS one (context, dispatch, post, defer, on_work_started/finished). Define
// CMWQ_ASIO_STANDALONE before including it to use standalone Asio
// (libasio-dev, namespace ::asio) instead.
//
// Every function handed to it runs as one work item on the workqueue (one
// allocation; named by the executor's name in the state dump and probes).
// As with an io_context's executor, blocking.possibly is the default:
// execute() (and dispatch()) runs the function inline when called from an
// item of the same workqueue, else queues it; post() and defer() ask for
// blocking.never and always queue. Nothing ever waits. Outstanding-work tracking is not needed
// (a workqueue has no run() that could return early) and is accepted as a
// no-op. An exception escaping a handler is reported and terminates, as for
// cmwq::work (an io_context would rethrow it from run(); there is no run()
// here to rethrow from).
#pragma once

#ifdef CMWQ_ASIO_STANDALONE
#include <asio/execution.hpp>
#include <asio/execution_context.hpp>
#include <asio/is_executor.hpp>
#else
#include <boost/asio/execution.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/is_executor.hpp>
#endif

#include <cstring>
#include <memory>
#include <utility>

#include <cmwq/workqueue.hpp>

namespace cmwq::asio {

#ifdef CMWQ_ASIO_STANDALONE
namespace net = ::asio;
#else
namespace net = ::boost::asio;
#endif

// The execution_context an Asio executor must name: one for all workqueues,
// never destroyed (handlers may run while the program exits).
inline net::execution_context &shared_context() noexcept
{
	static net::execution_context *ctx = new net::execution_context;
	return *ctx;
}

class executor {
public:
	// name: what the items show as (a string with static storage).
	explicit executor(workqueue_struct *wq, const char *name = "cmwq::asio") noexcept : wq_(wq), name_(name) {}
	explicit executor(cmwq::workqueue &wq, const char *name = "cmwq::asio") noexcept
		: executor(wq.native(), name)
	{
	}

	workqueue_struct *native() const noexcept { return wq_; }

	// Standard executor model.
	template <class F>
	void execute(F &&f) const
	{
		if (possibly_ && running_in_this_thread()) {
			std::decay_t<F> fn(std::forward<F>(f));
			fn();
			return;
		}
		if (!detail::queue_once(wq_, name_, std::forward<F>(f)))
			throw std::invalid_argument("cmwq::asio::executor: the workqueue refused the handler");
	}
	net::execution_context &query(net::execution::context_t) const noexcept { return shared_context(); }
	net::execution::blocking_t query(net::execution::blocking_t) const noexcept
	{
		return possibly_ ? net::execution::blocking_t(net::execution::blocking.possibly)
				 : net::execution::blocking_t(net::execution::blocking.never);
	}
	executor require(net::execution::blocking_t::never_t) const noexcept { return executor(wq_, name_, false); }
	// possibly (the default): execute() runs the function inline when
	// called from an item of this workqueue, else queues it.
	executor require(net::execution::blocking_t::possibly_t) const noexcept { return executor(wq_, name_, true); }
	static constexpr net::execution::outstanding_work_t query(net::execution::outstanding_work_t) noexcept
	{
		return net::execution::outstanding_work.untracked;
	}
	executor require(net::execution::outstanding_work_t::tracked_t) const noexcept { return *this; }
	executor require(net::execution::outstanding_work_t::untracked_t) const noexcept { return *this; }
	executor require(net::execution::relationship_t::fork_t) const noexcept { return *this; }
	executor require(net::execution::relationship_t::continuation_t) const noexcept { return *this; }

	// Networking TS model.
	net::execution_context &context() const noexcept { return shared_context(); }
	void on_work_started() const noexcept {}
	void on_work_finished() const noexcept {}
	template <class F, class A>
	void dispatch(F &&f, const A &) const
	{
		if (running_in_this_thread()) {
			std::decay_t<F> fn(std::forward<F>(f));
			fn();
			return;
		}
		execute(std::forward<F>(f));
	}
	template <class F, class A>
	void post(F &&f, const A &) const
	{
		execute(std::forward<F>(f));
	}
	template <class F, class A>
	void defer(F &&f, const A &) const
	{
		execute(std::forward<F>(f));
	}

	// true inside a work item of this executor's workqueue.
	bool running_in_this_thread() const noexcept
	{
		return wq_ && cmwq_current_workqueue() == wq_;
	}

	friend bool operator==(const executor &a, const executor &b) noexcept { return a.wq_ == b.wq_; }
	friend bool operator!=(const executor &a, const executor &b) noexcept { return a.wq_ != b.wq_; }

private:
	executor(workqueue_struct *wq, const char *name, bool possibly) noexcept
		: wq_(wq), name_(name), possibly_(possibly)
	{
	}
	workqueue_struct *wq_;
	const char *name_;
	bool possibly_ = true;
};

} // namespace cmwq::asio
