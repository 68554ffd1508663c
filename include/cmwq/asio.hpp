// cmwq/asio.hpp - a workqueue as an Asio executor (header-only; the cmwq
// library does not depend on Boost).
//
//   cmwq::workqueue wq("net", WQ_UNBOUND);
//   cmwq::asio::executor ex(wq);
//   boost::asio::post(ex, [] { ... });                      // queued on wq
//   auto f = boost::asio::post(ex, boost::asio::use_future([] { return 42; }));
//   boost::asio::co_spawn(ex, session(), boost::asio::detached);
//   ex.join();                       // every handler posted through ex ran
//
// The executor satisfies both executor models of Boost.Asio 1.74 (Debian
// 12's libboost-dev): the standard one (execute, query, require, prefer;
// so any_io_executor, strands, co_spawn and use_awaitable accept it) and
// the Networking TS one (context, dispatch, post, defer,
// on_work_started/finished). Define CMWQ_ASIO_STANDALONE before including
// it to use standalone Asio (libasio-dev, namespace ::asio) instead.
//
// Semantics, as Asio's thread_pool executor defines them:
// - Every function handed to it runs as one work item on the workqueue (one
//   allocation, through the executor's allocator property; named by the
//   executor's name in the state dump and probes).
// - blocking.possibly (the default): execute() and dispatch() run the
//   function inline when called from an item of the same workqueue, else
//   queue it. blocking.never (what post() and defer() ask for, free
//   functions and members alike): always queued, never inline, from inside
//   an item too. blocking.always: execute() returns once the function ran
//   (inline from an item of the workqueue), rethrowing what it threw.
// - outstanding_work.tracked: while a tracked copy exists (or
//   on_work_started() is not yet matched), join() waits, as io_context::run
//   does for a work guard. join() returns once every handler posted through
//   this executor (any copy) has run or been destroyed and no tracked copy
//   remains.
// - Continuations: a function deferred (defer(), or execute() with
//   relationship.continuation, as a strand hands over) from a handler of
//   the same workqueue is not queued: the item that ran the handler runs it
//   after the handler returns, as Asio's thread_pool keeps continuations in
//   a thread-private queue (no lock, no wakeup, the data still in this
//   CPU's cache). They run for about 1 ms of one item (at most 4096);
//   the rest are queued as items. Not on an ordered workqueue, whose items run in queue order.
// - on_cpu(cpu): a copy whose items are queued on that CPU (queue_work_on);
//   a continuation for another CPU is queued there, not chained. One per
//   CPU of a per-CPU workqueue is the counterpart of a thread_pool(1) per
//   thread.
// - Copies: each holds the shared state; those made in an item of the
//   executor are counted in a per-thread budget settled when the item
//   returns (no atomic on a shared line for each of a strand's copies).
// - A handler that throws: the exception is kept (with one message) and
//   the next join() rethrows it, as io_context::run() does; the other
//   handlers, a strand's included, carry on.
// - relationship, allocator, occupancy (the usable CPUs), mapping (thread)
//   and bulk_guarantee (parallel) are queried as for thread_pool;
//   bulk_execute(f, n) runs f(0) .. f(n-1) as n items.
// - Lifetime: the workqueue must outlive every use of the executor.
//   Destroying it drains what is queued first (those handlers run); a
//   handler posted while it drains or after, which the workqueue refuses,
//   is destroyed without being run (as io_context destroys the handlers it
//   never ran) and counts as done for join(). The safe order is: stop
//   posting, join(), then destroy the workqueue.
#pragma once

#include <cmwq/asio_detail.hpp>

#include <exception>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace cmwq::asio {

class reactor; // <cmwq/asio_reactor.hpp>

template <class Allocator = std::allocator<void>>
class basic_executor {
public:
	// name: what the items show as (a string with static storage).
	explicit basic_executor(workqueue_struct *wq, const char *name = "cmwq::asio")
		: s_(detail::state_ptr::make(wq, name)), alloc_()
	{
	}
	explicit basic_executor(cmwq::workqueue &wq, const char *name = "cmwq::asio")
		: basic_executor(wq.native(), name)
	{
	}
	// Copies and moves carry the counts (state_ptr: a reference, and a
	// tracked count when tracked).
	basic_executor(const basic_executor &o) noexcept = default;
	basic_executor(basic_executor &&o) noexcept
		: s_(std::move(o.s_)), alloc_(std::move(o.alloc_)), bits_(std::exchange(o.bits_, 0u))
	{
	}
	basic_executor &operator=(const basic_executor &o) noexcept = default;
	basic_executor &operator=(basic_executor &&o) noexcept
	{
		if (this != &o) {
			s_ = std::move(o.s_);
			alloc_ = std::move(o.alloc_);
			bits_ = std::exchange(o.bits_, 0u);
		}
		return *this;
	}
	~basic_executor() = default;

	workqueue_struct *native() const noexcept { return s_ ? s_->wq : nullptr; }

	// A copy whose items go to CPU cpu (queue_work_on: that CPU's pool of
	// a per-CPU workqueue, that CPU's pod of an unbound one); it shares
	// this executor's handlers and join(). One executor per CPU, each
	// with its own strands, is the counterpart of Asio's thread_pool(1)
	// per thread: a strand's handlers stay on one CPU, and a continuation
	// runs in the item that deferred it when that item runs on the CPU.
	// A CPU not online or outside the process's mask: the library says
	// so once and uses the caller's CPU.
	basic_executor on_cpu(int cpu) const
	{
		if (cpu < 0 || cpu >= WORK_CPU_UNBOUND)
			throw std::out_of_range("cmwq::asio::executor::on_cpu: CPU " + std::to_string(cpu) +
						" is out of range (0 to " + std::to_string(WORK_CPU_UNBOUND - 1) + ")");
		return with((bits_ & flag_bits) | (static_cast<unsigned>(cpu + 1) << detail::CPU_SHIFT));
	}
	// A copy that queues on the caller's CPU again (queue_work).
	basic_executor on_any_cpu() const noexcept { return with(bits_ & flag_bits); }
	// The CPU on_cpu() bound this executor to, or -1.
	int cpu() const noexcept { return static_cast<int>(bits_ >> detail::CPU_SHIFT) - 1; }

	// Waits until every handler posted through this executor (any copy)
	// has run or been destroyed and no tracked copy remains; rethrows, one
	// per call, what a handler threw. Not from an item of the workqueue
	// with a tracked copy alive: it would wait for itself.
	void join() const
	{
		if (s_) {
			detail::tl_chain.settle(s_.get()); // from another executor's item
			s_->join();
		}
	}

	// ---- the standard executor model ----

	template <class F>
	void execute(F &&f) const
	{
		if (bits_ & detail::BLOCKING_ALWAYS) {
			run_and_wait(std::forward<F>(f));
			return;
		}
		if (!(bits_ & detail::BLOCKING_NEVER) && running_in_this_thread()) {
			std::decay_t<F> fn(std::forward<F>(f));
			fn();
			return;
		}
		queue(std::forward<F>(f), (bits_ & detail::CONTINUATION) != 0);
	}
	// execute(f(i)) for i in [0, n): n items, each with its own copy of f.
	template <class F>
	void bulk_execute(const F &f, std::size_t n) const
	{
		for (std::size_t i = 0; i < n; i++)
			execute([f, i]() mutable { f(i); });
	}

	net::execution_context &query(net::execution::context_t) const noexcept
	{
		return s_ ? *s_->ctx : shared_context();
	}
	net::execution::blocking_t query(net::execution::blocking_t) const noexcept
	{
		if (bits_ & detail::BLOCKING_NEVER)
			return net::execution::blocking.never;
		if (bits_ & detail::BLOCKING_ALWAYS)
			return net::execution::blocking.always;
		return net::execution::blocking.possibly;
	}
	net::execution::outstanding_work_t query(net::execution::outstanding_work_t) const noexcept
	{
		if (bits_ & detail::TRACKED)
			return net::execution::outstanding_work.tracked;
		return net::execution::outstanding_work.untracked;
	}
	net::execution::relationship_t query(net::execution::relationship_t) const noexcept
	{
		if (bits_ & detail::CONTINUATION)
			return net::execution::relationship.continuation;
		return net::execution::relationship.fork;
	}
	static constexpr net::execution::mapping_t query(net::execution::mapping_t) noexcept
	{
		return net::execution::mapping.thread;
	}
	static constexpr net::execution::bulk_guarantee_t query(net::execution::bulk_guarantee_t) noexcept
	{
		return net::execution::bulk_guarantee.parallel;
	}
	std::size_t query(net::execution::occupancy_t) const noexcept
	{
		int n = cmwq_num_online_cpus();
		return n > 0 ? static_cast<std::size_t>(n) : 1u;
	}
	template <class Other>
	Allocator query(net::execution::allocator_t<Other>) const noexcept
	{
		return alloc_;
	}
	Allocator query(net::execution::allocator_t<void>) const noexcept { return alloc_; }

	basic_executor require(net::execution::blocking_t::never_t) const noexcept
	{
		return with((bits_ & ~detail::BLOCKING_ALWAYS) | detail::BLOCKING_NEVER);
	}
	basic_executor require(net::execution::blocking_t::possibly_t) const noexcept
	{
		return with(bits_ & ~(detail::BLOCKING_NEVER | detail::BLOCKING_ALWAYS));
	}
	basic_executor require(net::execution::blocking_t::always_t) const noexcept
	{
		return with((bits_ & ~detail::BLOCKING_NEVER) | detail::BLOCKING_ALWAYS);
	}
	basic_executor require(net::execution::outstanding_work_t::tracked_t) const noexcept
	{
		return with(bits_ | detail::TRACKED);
	}
	basic_executor require(net::execution::outstanding_work_t::untracked_t) const noexcept
	{
		return with(bits_ & ~detail::TRACKED);
	}
	basic_executor require(net::execution::relationship_t::fork_t) const noexcept
	{
		return with(bits_ & ~detail::CONTINUATION);
	}
	basic_executor require(net::execution::relationship_t::continuation_t) const noexcept
	{
		return with(bits_ | detail::CONTINUATION);
	}
	template <class Other>
	basic_executor<Other> require(net::execution::allocator_t<Other> a) const noexcept
	{
		return basic_executor<Other>(s_.copy_for(bits_ & detail::TRACKED), a.value(), bits_);
	}
	basic_executor<std::allocator<void>> require(net::execution::allocator_t<void>) const noexcept
	{
		return basic_executor<std::allocator<void>>(s_.copy_for(bits_ & detail::TRACKED), std::allocator<void>(),
							    bits_);
	}

	// ---- the Networking TS model ----

	net::execution_context &context() const noexcept { return s_ ? *s_->ctx : shared_context(); }
	// A work guard's count: join() waits while one is not finished.
	void on_work_started() const noexcept
	{
		if (s_)
			s_->tracked.fetch_add(1, std::memory_order_relaxed);
	}
	void on_work_finished() const noexcept
	{
		if (s_)
			s_->untrack();
	}
	template <class F, class A>
	void dispatch(F &&f, const A &) const
	{
		if (running_in_this_thread()) {
			std::decay_t<F> fn(std::forward<F>(f));
			fn();
			return;
		}
		queue(std::forward<F>(f));
	}
	template <class F, class A>
	void post(F &&f, const A &) const
	{
		queue(std::forward<F>(f));
	}
	template <class F, class A>
	void defer(F &&f, const A &) const
	{
		queue(std::forward<F>(f), true);
	}

	// true inside a work item of this executor's workqueue. In an item of
	// an executor (or a reactor's runner) the thread's chain names the
	// workqueue, which spares the call into the library on the path of
	// every completion that runs inline.
	bool running_in_this_thread() const noexcept
	{
		if (!s_ || !s_->wq)
			return false;
		return detail::tl_chain.wq == s_->wq || cmwq_current_workqueue() == s_->wq;
	}

	friend bool operator==(const basic_executor &a, const basic_executor &b) noexcept
	{
		return a.native() == b.native() && &a.context() == &b.context() && a.bits_ == b.bits_ &&
		       a.alloc_ == b.alloc_;
	}
	friend bool operator!=(const basic_executor &a, const basic_executor &b) noexcept { return !(a == b); }

private:
	template <class A>
	friend class basic_executor;
	friend class reactor;

	// s holds the new copy's counts already (state_ptr::copy_for).
	basic_executor(detail::state_ptr s, const Allocator &a, unsigned bits) noexcept
		: s_(std::move(s)), alloc_(a), bits_(bits)
	{
	}
	basic_executor with(unsigned bits) const noexcept
	{
		return basic_executor(s_.copy_for(bits & detail::TRACKED), alloc_, bits);
	}

	// Queues f as one item, never inline; a continuation from a handler of
	// the workqueue joins the running item's chain instead. A workqueue
	// that refuses it (destroyed, draining): f is destroyed without running.
	template <class F>
	bool queue(F &&f, bool continuation = false) const
	{
		using item = detail::handler_item<std::decay_t<F>, Allocator>;
		if (!s_)
			return false;
		typename item::item_alloc a(alloc_);
		item *it = std::allocator_traits<typename item::item_alloc>::allocate(a, 1);
		try {
			std::allocator_traits<typename item::item_alloc>::construct(a, it, std::forward<F>(f), s_.get(), a);
		} catch (...) {
			std::allocator_traits<typename item::item_alloc>::deallocate(a, it, 1);
			throw;
		}
		it->n.owner = it;
		it->n.cpu = cpu();
		it->n.discard = &item::discard;
		INIT_WORK(&it->n.ws, &item::invoke);
		cmwq_set_work_name(&it->n.ws, s_->name);
		if (continuation && detail::chain_push(*s_, &it->n))
			return true;
		it->n.counted = true;
		s_->pending_add();
		if (!detail::queue_node(s_->wq, &it->n)) {
			item::destroy(it);
			return false;
		}
		return true;
	}

	// blocking.always: runs f (inline from an item of the workqueue) and
	// returns once it ran, with what it threw.
	template <class F>
	void run_and_wait(F &&f) const
	{
		if (running_in_this_thread()) {
			std::decay_t<F> fn(std::forward<F>(f));
			fn();
			return;
		}
		struct waiter {
			std::atomic<std::uint32_t> done{0};
			std::exception_ptr error;
		} w;
		bool queued = queue([&w, fn = std::decay_t<F>(std::forward<F>(f))]() mutable {
			try {
				fn();
			} catch (...) {
				w.error = std::current_exception();
			}
			w.done.store(1, std::memory_order_release);
			cmwq_futex_wake(reinterpret_cast<const std::uint32_t *>(&w.done));
		});
		if (!queued)
			throw std::invalid_argument("cmwq::asio::executor: the workqueue refused the function (destroyed or draining)");
		cmwq_blocking_begin();
		while (!w.done.load(std::memory_order_acquire))
			cmwq_futex_wait(reinterpret_cast<const std::uint32_t *>(&w.done), 0);
		cmwq_blocking_end();
		if (w.error)
			std::rethrow_exception(w.error);
	}

	static constexpr unsigned flag_bits = (1u << detail::CPU_SHIFT) - 1;

	detail::state_ptr s_;
	Allocator alloc_;
	unsigned bits_ = 0; // BLOCKING_*, TRACKED, CONTINUATION; the CPU above CPU_SHIFT
};

using executor = basic_executor<>;

} // namespace cmwq::asio
