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
//   CPU's cache). At most 64 such run in one item; the rest are queued as
//   items. Not on an ordered workqueue, whose items run in queue order.
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

#ifdef CMWQ_ASIO_STANDALONE
#include <asio/detail/thread_context.hpp>
#include <asio/detail/thread_info_base.hpp>
#include <asio/execution.hpp>
#include <asio/execution_context.hpp>
#include <asio/is_executor.hpp>
#else
#include <boost/asio/detail/thread_context.hpp>
#include <boost/asio/detail/thread_info_base.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/execution_context.hpp>
#include <boost/asio/is_executor.hpp>
#endif

#include <atomic>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include <cmwq/workqueue.hpp>

namespace cmwq::asio {

#ifdef CMWQ_ASIO_STANDALONE
namespace net = ::asio;
using error_code = ::asio::error_code;
#else
namespace net = ::boost::asio;
using error_code = ::boost::system::error_code;
#endif

// The execution_context an Asio executor must name: one for all workqueues,
// never destroyed (handlers may run while the program exits).
inline net::execution_context &shared_context() noexcept
{
	static net::execution_context *ctx = new net::execution_context;
	return *ctx;
}

namespace detail {

enum : unsigned {
	BLOCKING_NEVER = 1,
	BLOCKING_ALWAYS = 2,
	TRACKED = 4,
	CONTINUATION = 8,
};

// What every copy of one executor shares: the workqueue, the handlers not
// yet done, the tracked copies, and exceptions waiting for join().
struct shared_state {
	workqueue_struct *wq;
	const char *name;
	bool chain; // continuations may run in the item that deferred them (not ordered)
	net::execution_context *ctx = &shared_context(); // what I/O objects on the executor use
	std::atomic<long> refs{1}; // state_ptr copies (executors), plus one while pending > 0
	std::atomic<long> pending{0}; // handlers queued or kept, not yet done
	std::atomic<long> tracked{0};
	std::atomic<std::uint32_t> seq{0}; // bumped (and woken) when either count reaches 0
	std::mutex lock;
	std::deque<std::exception_ptr> escaped; // lock

	shared_state(workqueue_struct *w, const char *n) noexcept
		: wq(w), name(n), chain(w && !(cmwq_workqueue_flags(w) & __WQ_ORDERED))
	{
	}
	const std::uint32_t *word() const noexcept { return reinterpret_cast<const std::uint32_t *>(&seq); }
	void bump() noexcept
	{
		seq.fetch_add(1, std::memory_order_release);
		cmwq_futex_wake(word());
	}
	// Handler items hold no reference of their own: the first pending one
	// takes one for all, the last one done drops it (two atomic operations
	// an item fewer on a strand's hop). The caller holds a reference.
	void pending_add() noexcept
	{
		if (pending.fetch_add(1, std::memory_order_relaxed) == 0)
			refs.fetch_add(1, std::memory_order_relaxed);
	}
	void done_one() noexcept
	{
		if (pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
			bump();
			unref();
		}
	}
	void unref() noexcept
	{
		if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
			delete this;
	}
	void untrack() noexcept
	{
		if (tracked.fetch_sub(1, std::memory_order_acq_rel) == 1)
			bump();
	}
	void keep(std::exception_ptr e) noexcept
	{
		const char *what = "a non-std exception";
		try {
			std::rethrow_exception(e);
		} catch (const std::exception &x) {
			what = x.what();
		} catch (...) {
		}
		std::fprintf(stderr, "cmwq::asio: a handler on workqueue %s threw (%s); join() rethrows it\n",
			     cmwq_current_workqueue_name() ? cmwq_current_workqueue_name() : "?", what);
		std::lock_guard lk(lock);
		escaped.push_back(e);
	}
	void join()
	{
		cmwq_blocking_begin();
		for (;;) {
			std::uint32_t s = seq.load(std::memory_order_acquire);
			{
				std::lock_guard lk(lock);
				if (!escaped.empty()) {
					std::exception_ptr e = escaped.front();
					escaped.pop_front();
					cmwq_blocking_end();
					std::rethrow_exception(e);
				}
			}
			if (pending.load(std::memory_order_acquire) == 0 && tracked.load(std::memory_order_acquire) == 0)
				break;
			cmwq_futex_wait(word(), s);
		}
		cmwq_blocking_end();
	}
};

// A counted reference to a shared_state (executors copy it on every
// require/prefer; a strand's hop makes several): one atomic add or
// subtract, without shared_ptr's control block and weak count.
class state_ptr {
public:
	state_ptr() noexcept = default;
	static state_ptr make(workqueue_struct *wq, const char *name) { return state_ptr(new shared_state(wq, name)); }
	state_ptr(const state_ptr &o) noexcept : p_(o.p_)
	{
		if (p_)
			p_->refs.fetch_add(1, std::memory_order_relaxed);
	}
	state_ptr(state_ptr &&o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
	state_ptr &operator=(const state_ptr &o) noexcept
	{
		state_ptr(o).swap(*this);
		return *this;
	}
	state_ptr &operator=(state_ptr &&o) noexcept
	{
		state_ptr(std::move(o)).swap(*this);
		return *this;
	}
	~state_ptr()
	{
		if (p_)
			p_->unref();
	}
	void swap(state_ptr &o) noexcept { std::swap(p_, o.p_); }
	shared_state *operator->() const noexcept { return p_; }
	shared_state &operator*() const noexcept { return *p_; }
	shared_state *get() const noexcept { return p_; }
	explicit operator bool() const noexcept { return p_ != nullptr; }

private:
	explicit state_ptr(shared_state *p) noexcept : p_(p) {}
	shared_state *p_ = nullptr;
};

// A handler's work item: what cmwq queues, and the link of a chain.
struct item_node {
	work_struct ws;
	void *owner;                     // the handler_item
	item_node *next;                 // the next link of a chain
	void (*discard)(item_node *);    // destroys the handler without running it
	bool counted;                    // in its state's pending (else covered by the chain's root)
};

// The continuations of the item this thread runs (see the top of the
// file): wq is the workqueue of an executor's item running here, else null.
// st: the state of the item that runs the chain (null in a reactor's
// runner); its pending count, held until the chain ends, covers the links
// of the same state, which then cost no atomic operation of their own.
struct chain {
	workqueue_struct *wq = nullptr;
	shared_state *st = nullptr;
	item_node *head = nullptr;
	item_node *tail = nullptr;
};
inline thread_local chain tl_chain;
constexpr int max_chain = 64;

// Asio recycles the memory of its operations (a strand's invoker, a
// composed operation's state) through the thread_info of the thread that
// runs them, which only its own pools' threads have: elsewhere each one is
// a malloc and a free. An item of the executor runs with one of its own,
// per thread, under a key no Asio scheduler uses (so none takes this
// thread for one of its own).
struct asio_thread_key : net::detail::thread_context {
	using stack = thread_call_stack; // protected in newer Asio
};
struct asio_thread {
	asio_thread_key key;
	net::detail::thread_info_base info;
};
inline thread_local asio_thread tl_asio;

// true: n was kept to run after the current handler (a continuation),
// counted in st's pending unless the chain's root covers it.
inline bool chain_push(shared_state &st, item_node *n) noexcept
{
	chain &c = tl_chain;
	if (!st.chain || c.wq != st.wq)
		return false;
	n->counted = c.st != &st;
	if (n->counted)
		st.pending_add();
	n->next = nullptr;
	if (c.tail)
		c.tail->next = n;
	else
		c.head = n;
	c.tail = n;
	return true;
}

// After the first handler of an item: runs up to max_chain continuations
// (each may add more), queues the rest as items, ends the chain.
inline void chain_run(chain &c) noexcept
{
	for (int i = 0; c.head && i < max_chain; i++) {
		item_node *n = c.head;
		c.head = n->next;
		if (!c.head)
			c.tail = nullptr;
		n->ws.func(&n->ws); // with c.wq set: runs the handler alone
	}
	workqueue_struct *wq = c.wq;
	shared_state *st = c.st;
	item_node *rest = c.head;
	c = chain{};
	while (rest) {
		item_node *n = rest;
		rest = n->next;
		if (!n->counted) {
			n->counted = true; // on its own now: counted before the root is done
			st->pending_add();
		}
		if (!cmwq_try_queue_work(wq, &n->ws))
			n->discard(n);
	}
}

// With the default allocator, handler items come from a small per-thread
// cache of freed blocks, as Asio's thread_pool recycles its operations: a
// hop frees one item and allocates the next on the same thread. One block
// of each size class (64 to 512 bytes) per thread; larger ones, and any
// other allocator, go to the allocator as they are.
struct block_cache {
	static constexpr std::size_t unit = 64, classes = 8;
	void *slot[classes] = {};
	~block_cache()
	{
		for (void *p : slot)
			::operator delete(p);
	}
	static std::size_t size_class(std::size_t n) noexcept { return (n + unit - 1) / unit; }
};
inline thread_local block_cache tl_blocks;

template <class T>
struct recycling_allocator {
	using value_type = T;
	recycling_allocator() noexcept = default;
	template <class U>
	recycling_allocator(const recycling_allocator<U> &) noexcept
	{
	}
	template <class U>
	recycling_allocator(const std::allocator<U> &) noexcept
	{
	}
	T *allocate(std::size_t n)
	{
		std::size_t c = block_cache::size_class(n * sizeof(T));
		if (c == 0 || c > block_cache::classes)
			return static_cast<T *>(::operator new(n * sizeof(T)));
		if (void *p = std::exchange(tl_blocks.slot[c - 1], nullptr))
			return static_cast<T *>(p);
		return static_cast<T *>(::operator new(c * block_cache::unit));
	}
	void deallocate(T *p, std::size_t n) noexcept
	{
		std::size_t c = block_cache::size_class(n * sizeof(T));
		if (c == 0 || c > block_cache::classes || tl_blocks.slot[c - 1]) {
			::operator delete(p);
			return;
		}
		tl_blocks.slot[c - 1] = p;
	}
	friend bool operator==(const recycling_allocator &, const recycling_allocator &) noexcept { return true; }
	friend bool operator!=(const recycling_allocator &, const recycling_allocator &) noexcept { return false; }
};

// The allocator a handler item T (holding a function aligned to align) is
// made with.
template <class Alloc, class T, std::size_t align>
struct item_allocator {
	using type = typename std::allocator_traits<Alloc>::template rebind_alloc<T>;
};
template <class U, class T, std::size_t align>
struct item_allocator<std::allocator<U>, T, align> {
	using type = std::conditional_t<align <= __STDCPP_DEFAULT_NEW_ALIGNMENT__, recycling_allocator<T>,
					std::allocator<T>>;
};

// One handler as one work item, allocated with the executor's allocator.
template <class F, class Alloc>
struct handler_item {
	using item_alloc = typename item_allocator<Alloc, handler_item, alignof(F)>::type;
	item_node n{};
	F fn;
	shared_state *st; // kept alive by pending (shared_state::pending_add)
	item_alloc alloc;

	template <class G>
	handler_item(G &&g, shared_state *s, const item_alloc &a) : fn(std::forward<G>(g)), st(s), alloc(a)
	{
	}
	// Destroys the item; returns its state when it was counted in pending.
	static shared_state *release(handler_item *it) noexcept
	{
		item_alloc a(it->alloc);
		shared_state *s = it->n.counted ? it->st : nullptr;
		std::allocator_traits<item_alloc>::destroy(a, it);
		std::allocator_traits<item_alloc>::deallocate(a, it, 1);
		return s;
	}
	static void destroy(handler_item *it) noexcept
	{
		if (shared_state *s = release(it))
			s->done_one();
	}
	static void discard(item_node *n) noexcept { destroy(static_cast<handler_item *>(n->owner)); }
	static void call(handler_item *it) noexcept
	{
		try {
			it->fn();
		} catch (...) {
			it->st->keep(std::current_exception());
		}
	}
	// As a work item: the handler, then the continuations it deferred (its
	// count held until they ran). As a link of a chain (another handler's
	// item runs it): the handler.
	static void invoke(work_struct *w) noexcept
	{
		handler_item *it = static_cast<handler_item *>(cmwq_container_of(w, item_node, ws)->owner);
		chain &c = tl_chain;
		if (c.wq) {
			call(it);
			destroy(it);
			return;
		}
		c.wq = it->st->wq;
		c.st = it->st;
		asio_thread_key::stack::context ctx(&tl_asio.key, tl_asio.info);
		call(it);
		shared_state *root = release(it); // queued as an item: counted
		chain_run(c);
		if (root)
			root->done_one();
	}
};

} // namespace detail

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
	basic_executor(const basic_executor &o) noexcept : s_(o.s_), alloc_(o.alloc_), bits_(o.bits_) { track(); }
	basic_executor(basic_executor &&o) noexcept
		: s_(std::move(o.s_)), alloc_(std::move(o.alloc_)), bits_(std::exchange(o.bits_, 0u))
	{
	}
	basic_executor &operator=(const basic_executor &o) noexcept
	{
		if (this != &o) {
			untrack();
			s_ = o.s_;
			alloc_ = o.alloc_;
			bits_ = o.bits_;
			track();
		}
		return *this;
	}
	basic_executor &operator=(basic_executor &&o) noexcept
	{
		if (this != &o) {
			untrack();
			s_ = std::move(o.s_);
			alloc_ = std::move(o.alloc_);
			bits_ = std::exchange(o.bits_, 0u);
		}
		return *this;
	}
	~basic_executor() { untrack(); }

	workqueue_struct *native() const noexcept { return s_ ? s_->wq : nullptr; }

	// Waits until every handler posted through this executor (any copy)
	// has run or been destroyed and no tracked copy remains; rethrows, one
	// per call, what a handler threw. Not from an item of the workqueue
	// with a tracked copy alive: it would wait for itself.
	void join() const
	{
		if (s_)
			s_->join();
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
		return basic_executor<Other>(s_, a.value(), bits_);
	}
	basic_executor<std::allocator<void>> require(net::execution::allocator_t<void>) const noexcept
	{
		return basic_executor<std::allocator<void>>(s_, std::allocator<void>(), bits_);
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

	// true inside a work item of this executor's workqueue.
	bool running_in_this_thread() const noexcept
	{
		return s_ && s_->wq && cmwq_current_workqueue() == s_->wq;
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

	basic_executor(detail::state_ptr s, const Allocator &a, unsigned bits) noexcept
		: s_(std::move(s)), alloc_(a), bits_(bits)
	{
		track();
	}
	basic_executor with(unsigned bits) const noexcept { return basic_executor(s_, alloc_, bits); }
	void track() const noexcept
	{
		if (s_ && (bits_ & detail::TRACKED))
			s_->tracked.fetch_add(1, std::memory_order_relaxed);
	}
	void untrack() noexcept
	{
		if (s_ && (bits_ & detail::TRACKED))
			s_->untrack();
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
		it->n.discard = &item::discard;
		INIT_WORK(&it->n.ws, &item::invoke);
		cmwq_set_work_name(&it->n.ws, s_->name);
		if (continuation && detail::chain_push(*s_, &it->n))
			return true;
		it->n.counted = true;
		s_->pending_add();
		if (!cmwq_try_queue_work(s_->wq, &it->n.ws)) {
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

	detail::state_ptr s_;
	Allocator alloc_;
	unsigned bits_ = 0;
};

using executor = basic_executor<>;

} // namespace cmwq::asio
