// cmwq/asio_detail.hpp - the inner parts of <cmwq/asio.hpp> (the executor's
// shared state, its handler items and their chains, the per-thread
// reference budget, the recycling allocator). Include <cmwq/asio.hpp>.
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

#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
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

void chain_forget_at_fork() noexcept; // below, with the chain

enum : unsigned {
	BLOCKING_NEVER = 1,
	BLOCKING_ALWAYS = 2,
	TRACKED = 4,
	CONTINUATION = 8,
	CPU_SHIFT = 8, // bits_ >> CPU_SHIFT: the target CPU + 1, 0 for none
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
		chain_forget_at_fork();
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
	void unref(long n = 1) noexcept
	{
		if (refs.fetch_sub(n, std::memory_order_acq_rel) == n)
			delete this;
	}
	void untrack(long n = 1) noexcept
	{
		if (tracked.fetch_sub(n, std::memory_order_acq_rel) == n)
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

// A handler's work item: what cmwq queues, and the link of a chain.
struct item_node {
	work_struct ws;
	void *owner;                     // the handler_item
	item_node *next;                 // the next link of a chain
	void (*discard)(item_node *);    // destroys the handler without running it
	bool counted;                    // in its state's pending (else covered by the chain's root)
	int cpu;                         // queue_work_on's CPU, or -1 (the caller's, as queue_work)
};

// Queues n as an item of wq (on its CPU, if it names one); false when the
// workqueue refuses it (destroyed, draining): n is still the caller's.
inline bool queue_node(workqueue_struct *wq, item_node *n) noexcept
{
	return n->cpu >= 0 ? cmwq_try_queue_work_on(n->cpu, wq, &n->ws) : cmwq_try_queue_work(wq, &n->ws);
}

// The continuations of the item this thread runs (see the top of the
// file): wq is the workqueue of an executor's item running here, else null.
// st: the state of the item that runs the chain (null in a reactor's
// runner); its pending count, held until the chain ends, covers the links
// of the same state, which then cost no atomic operation of their own.
// cpu: the CPU the item was queued to, or -1; a link bound to another CPU
// is queued there instead.
//
// budget: references (and tracked counts) this thread holds for executor
// copies made while it runs an executor's item. Asio copies an executor
// several times a hop (a strand prefers blocking.never, continuation and
// tracked; any_io_executor copies each result); each copy is a reference,
// an atomic add and subtract on a line every CPU running that executor's
// items shares. In an item a copy takes one from the thread's budget
// (refilled budget_batch at a time) and a copy destroyed here gives one
// back; the item returns what is left when its chain ends. Every budgeted
// reference is a real one, so a state is never freed while a budget or a
// copy still holds it; it is freed (and join() sees the tracked count
// reach 0) when the item that held the last ones returns, or earlier when
// its slot is given back to make room for a fifth state (chain::slot).
struct budget {
	shared_state *st = nullptr;
	long refs = 0;
	long tracked = 0;
};
constexpr int budget_slots = 4;
constexpr long budget_batch = 32;

struct chain {
	workqueue_struct *wq = nullptr;
	shared_state *st = nullptr;
	int cpu = -1;
	item_node *head = nullptr;
	item_node *tail = nullptr;
	budget held[budget_slots];

	// s's slot, moved to the front (where counts_take and counts_drop look
	// first: a handler's copies are all of its own executor's state); a
	// free slot, or the one used longest ago, given back first, when no
	// slot holds s yet. A chain whose continuations cross executors (a
	// ring over several) keeps its counts off the shared atomics.
	budget *slot(shared_state *s) noexcept
	{
		int i = 0;
		while (i < budget_slots && held[i].st != s)
			i++;
		if (i == budget_slots) {
			i = 0;
			while (i < budget_slots - 1 && held[i].st)
				i++;
			give_back(held[i]);
			held[i].st = s;
		}
		if (i > 0) {
			budget b = held[i];
			for (; i > 0; i--)
				held[i] = held[i - 1];
			held[0] = b;
		}
		return &held[0];
	}
	static void give_back(budget &b) noexcept
	{
		budget d = std::exchange(b, budget{});
		if (d.tracked)
			d.st->untrack(d.tracked);
		if (d.refs)
			d.st->unref(d.refs);
	}
	// Gives back what the budget holds (of s only, if not null); with
	// refs false, the tracked counts only (a reactor's runner keeps its
	// references, which only keep a state alive, until its item ends).
	void settle(shared_state *only = nullptr, bool refs = true) noexcept
	{
		for (budget &b : held) {
			if (!b.st || (only && b.st != only))
				continue;
			if (!refs) {
				if (long t = std::exchange(b.tracked, 0))
					b.st->untrack(t);
				continue;
			}
			give_back(b);
		}
	}
};
inline thread_local chain tl_chain;

// A child forked inside an item is no worker (docs/design.md §9): its copy
// of the forking thread's chain must not make it look like one (the
// executor's running_in_this_thread() reads the chain's workqueue first).
// Registered once, when the first executor state is made.
inline void chain_forget_at_fork() noexcept
{
	static const int registered = pthread_atfork(nullptr, nullptr, [] { tl_chain = chain{}; });
	(void)registered;
}
// An item runs continuations for about chain_share_us (the clock read
// every chain_clock_every links, so short chains never read it), at most
// max_chain of them; the rest are queued as items. Well under the CPU-hog
// threshold, and long enough that a token handed along a ring of strands
// stays in one worker's cache instead of becoming an item (a wakeup of
// an idle worker on an unbound pool) every few dozen hops.
constexpr int max_chain = 4096;
constexpr long chain_share_us = 1000;
constexpr int chain_clock_every = 16;

// The counts of a new copy of an executor of s (its reference and, when
// tracked, its tracked count), and back: in an executor's item they come
// from the thread's budget (refilled budget_batch at a time) and go back
// to it; outside one they are the shared atomics. The common case (the
// budget's first slot holds s and has the counts) is inline, a few
// instructions and no call; the rest is out of line, so a copy's
// constructor and destructor stay small.
[[gnu::noinline]] inline void counts_take_slow(shared_state *s, bool tracked) noexcept
{
	chain &c = tl_chain;
	budget *b = c.wq ? c.slot(s) : nullptr; // outside an item: the atomics
	if (!b) {
		s->refs.fetch_add(1, std::memory_order_relaxed);
		if (tracked)
			s->tracked.fetch_add(1, std::memory_order_relaxed);
		return;
	}
	if (b->refs == 0) {
		s->refs.fetch_add(budget_batch, std::memory_order_relaxed);
		b->refs = budget_batch;
	}
	b->refs--;
	if (tracked) {
		if (b->tracked == 0) {
			s->tracked.fetch_add(budget_batch, std::memory_order_relaxed);
			b->tracked = budget_batch;
		}
		b->tracked--;
	}
}
[[gnu::noinline]] inline void counts_drop_slow(shared_state *s, bool tracked) noexcept
{
	chain &c = tl_chain;
	budget *b = c.wq ? c.slot(s) : nullptr; // outside an item: the atomics
	if (!b) {
		if (tracked)
			s->untrack();
		s->unref(); // last: it may free s
		return;
	}
	b->refs++;
	if (tracked)
		b->tracked++;
}
inline void counts_take(shared_state *s, bool tracked) noexcept
{
	chain &c = tl_chain;
	budget &b = c.held[0];
	if (c.wq && b.st == s && b.refs > 0 && (!tracked || b.tracked > 0)) {
		b.refs--;
		b.tracked -= tracked;
		return;
	}
	counts_take_slow(s, tracked);
}
inline void counts_drop(shared_state *s, bool tracked) noexcept
{
	chain &c = tl_chain;
	budget &b = c.held[0];
	if (c.wq && b.st == s) {
		b.refs++;
		b.tracked += tracked;
		return;
	}
	counts_drop_slow(s, tracked);
}

// A counted reference to a shared_state, and with it a tracked count when
// the executor that holds it is tracked (outstanding_work.tracked); the
// tracked bit is the pointer's low bit. Executors copy it on every
// require/prefer, a strand's hop several times; in an executor's item the
// counts come from the thread's budget (chain::held). Without
// shared_ptr's control block and weak count; destroying an empty one (a
// moved-from executor, as Asio leaves several a hop) is a test and a
// return.
class state_ptr {
public:
	state_ptr() noexcept = default;
	static state_ptr make(workqueue_struct *wq, const char *name)
	{
		return state_ptr(new shared_state(wq, name), false);
	}
	state_ptr(const state_ptr &o) noexcept : v_(o.v_)
	{
		if (v_)
			counts_take(get(), tracked());
	}
	state_ptr(state_ptr &&o) noexcept : v_(std::exchange(o.v_, 0)) {}
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
		if (v_)
			counts_drop(get(), tracked());
	}
	// A copy that holds a tracked count, or not.
	state_ptr copy_for(bool tracked) const noexcept
	{
		if (!v_)
			return state_ptr();
		counts_take(get(), tracked);
		return state_ptr(get(), tracked);
	}
	void swap(state_ptr &o) noexcept { std::swap(v_, o.v_); }
	shared_state *get() const noexcept { return reinterpret_cast<shared_state *>(v_ & ~tracked_bit); }
	bool tracked() const noexcept { return v_ & tracked_bit; }
	shared_state *operator->() const noexcept { return get(); }
	shared_state &operator*() const noexcept { return *get(); }
	explicit operator bool() const noexcept { return v_ != 0; }

private:
	static constexpr std::uintptr_t tracked_bit = 1;
	state_ptr(shared_state *p, bool tracked) noexcept
		: v_(reinterpret_cast<std::uintptr_t>(p) | (tracked ? tracked_bit : 0))
	{
	}
	std::uintptr_t v_ = 0;
};


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
	if (!st.chain || c.wq != st.wq || (n->cpu >= 0 && n->cpu != c.cpu))
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

// After the first handler of an item: runs continuations (each may add
// more) for the item's share, queues the rest as items, ends the chain and
// gives back the thread's budget (its tracked counts only, with refs
// false).
inline void chain_run(chain &c, bool refs = true) noexcept
{
	using clock = std::chrono::steady_clock;
	clock::time_point deadline{};
	for (int i = 0; c.head && i < max_chain; i++) {
		if (i && i % chain_clock_every == 0) {
			clock::time_point now = clock::now();
			if (deadline == clock::time_point{})
				deadline = now + std::chrono::microseconds(chain_share_us);
			else if (now >= deadline)
				break;
		}
		item_node *n = c.head;
		c.head = n->next;
		if (!c.head)
			c.tail = nullptr;
		n->ws.func(&n->ws); // with c.wq set: runs the handler alone
	}
	workqueue_struct *wq = c.wq;
	shared_state *st = c.st;
	item_node *rest = c.head;
	c.wq = nullptr;
	c.st = nullptr;
	c.cpu = -1;
	c.head = c.tail = nullptr;
	c.settle(nullptr, refs);
	while (rest) {
		item_node *n = rest;
		rest = n->next;
		if (!n->counted) {
			n->counted = true; // on its own now: counted before the root is done
			st->pending_add();
		}
		if (!queue_node(wq, n))
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
		c.cpu = it->n.cpu;
		asio_thread_key::stack::context ctx(&tl_asio.key, tl_asio.info);
		call(it);
		shared_state *root = release(it); // queued as an item: counted
		chain_run(c);
		if (root)
			root->done_one();
	}
};

} // namespace detail

} // namespace cmwq::asio
