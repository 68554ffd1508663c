// cmwq/task.hpp - tasks with results and exceptions (submit, task<R>,
// co_await task), coroutines that continue on a workqueue (resume_on), and
// the fire-and-forget queueing the Asio executor uses.
//
// A task is one allocation: its state, the callable and its name together;
// get() sleeps on a futex word, and a coroutine awaiting a task is resumed
// by the worker that completes it, never by a thread of its own.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include <cmwq/work.hpp>

#include <cmwq/export.h>
CMWQ_BEGIN_PUBLIC

namespace cmwq {

// get() of a task cancelled before it started.
class task_cancelled : public std::runtime_error {
public:
	task_cancelled() : std::runtime_error("cmwq: task cancelled before it started") {}
};

// get() from a work item waiting for a task that can start only after that
// item ends (its own ordered workqueue, or max_active 1): the wait would
// never end. One warning names both; wait() returns without waiting.
class task_would_deadlock : public std::logic_error {
public:
	task_would_deadlock()
		: std::logic_error("cmwq: task::get() would wait for a task that can start only after the caller ends")
	{
	}
};

template <class R = void>
class task;

namespace detail {

enum : std::uint32_t {
	TASK_DONE = 1,      // result, exception or cancellation is set
	TASK_WAITER = 2,    // a thread sleeps on the futex
	TASK_CONT = 4,      // a coroutine waits in cont
	TASK_CANCELLED = 8, // removed before it started
};

// What every task shares: the work item that runs it (a submitted task) and
// the completion word. Two references: the task handle and the run.
struct task_base {
	struct node {
		work_struct ws;
		task_base *owner;
	};
	node n{};
	std::atomic<std::uint32_t> state{0};
	std::atomic<int> refs{2};
	std::coroutine_handle<> cont{};
	std::exception_ptr error{};
	void (*destroy)(task_base *) noexcept = nullptr;
	// The process that made it: in a fork child the run belongs to the
	// parent (the child drops the parent's items), so waiting there would
	// never end; the child's copy is cancelled instead (forked()).
	unsigned gen = cmwq_fork_generation();

	static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
	const std::uint32_t *word() const noexcept { return reinterpret_cast<const std::uint32_t *>(&state); }
	bool done() const noexcept { return state.load(std::memory_order_acquire) & TASK_DONE; }
	void release() noexcept
	{
		if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1)
			destroy(this);
	}
	// Publishes the outcome; returns the coroutine to resume, if one waits.
	std::coroutine_handle<> finish(std::uint32_t bits) noexcept
	{
		std::uint32_t old = state.fetch_or(TASK_DONE | bits, std::memory_order_acq_rel);
		if (old & TASK_WAITER)
			cmwq_futex_wake(word());
		return (old & TASK_CONT) ? cont : std::coroutine_handle<>{};
	}
	// Until done, with the blocking hint. false (after one warning) when the
	// calling work item would wait for itself.
	bool wait() noexcept
	{
		std::uint32_t s = state.load(std::memory_order_acquire);
		if (s & TASK_DONE)
			return true;
		if (forked())
			return true;
		if (n.ws.func && cmwq_wait_would_deadlock(&n.ws, "waits (cmwq::task) for"))
			return false;
		cmwq_blocking_begin();
		while (!((s = state.load(std::memory_order_acquire)) & TASK_DONE)) {
			if (!(s & TASK_WAITER) &&
			    !state.compare_exchange_weak(s, s | TASK_WAITER, std::memory_order_acq_rel))
				continue;
			cmwq_futex_wait(word(), s | TASK_WAITER);
		}
		cmwq_blocking_end();
		return true;
	}
	// Made in a parent process and not done at the fork: it never will be
	// here, so it is cancelled (get() throws task_cancelled). True then.
	bool forked() noexcept
	{
		if (gen == cmwq_fork_generation())
			return false;
		(void)finish(TASK_CANCELLED);
		return true;
	}
	// A coroutine suspends until done; false if done already (resume now).
	bool await(std::coroutine_handle<> h) noexcept
	{
		if (!done() && forked())
			return false; // resume now: get() throws task_cancelled
		cont = h;
		return !(state.fetch_or(TASK_CONT, std::memory_order_acq_rel) & TASK_DONE);
	}
};

template <class R>
struct task_result : task_base {
	static_assert(!std::is_reference_v<R>, "cmwq::task<R>: return a value (or a std::reference_wrapper)");
	std::optional<R> value;
	template <class F>
	void compute(F &f)
	{
		value.emplace(f());
	}
	R take() { return std::move(*value); }
};
template <>
struct task_result<void> : task_base {
	template <class F>
	void compute(F &f)
	{
		f();
	}
	void take() noexcept {}
};

// A submitted task: state, callable and name in one allocation.
template <class R, class D>
struct task_state final : task_result<R> {
	D fn;
	template <class F>
	explicit task_state(F &&f) : fn(std::forward<F>(f))
	{
	}
	static void invoke(work_struct *w) noexcept
	{
		auto *s = static_cast<task_state *>(container_of(w, task_base::node, ws)->owner);
		try {
			s->compute(s->fn);
		} catch (...) {
			s->error = std::current_exception();
		}
		if (auto c = s->finish(0))
			c.resume();
		s->release();
	}
};

template <class R>
struct promise_returns : task_result<R> {
	template <class V = R>
	void return_value(V &&v)
	{
		this->value.emplace(std::forward<V>(v));
	}
};
template <>
struct promise_returns<void> : task_result<void> {
	void return_void() noexcept {}
};

template <class F>
using result_of = std::invoke_result_t<std::decay_t<F> &>;

template <class R, class F>
task<R> submit_named(workqueue_struct *wq, const char *type_label, const std::string_view *name, F &&f);

} // namespace detail

// The result of a callable run on a workqueue (submit) or of a coroutine
// returning cmwq::task<R>. Move-only. get() waits (with the blocking hint)
// and returns the value or rethrows what the callable threw; it consumes
// the task. Dropping a task does not cancel it: it still runs.
//
// Memory ordering: what the caller stored before submit() is visible to the
// callable when it runs (submit queues a work item: queue_work's rule); what
// the callable stored, and its result, are visible to the thread whose
// get() or wait() returns, and to a coroutine resumed by co_await on the
// task. cancel() that returns true guarantees the callable never runs.
//
// As a coroutine type, a task<R> starts at once on the calling thread and
// runs until its first suspension (co_await resume_on(wq) moves it onto a
// workqueue); co_await on a task resumes the awaiting coroutine on the thread
// that finished the task (a worker of its workqueue).
template <class R>
class task {
public:
	using value_type = R;
	struct promise_type : detail::promise_returns<R> {
		task get_return_object() noexcept
		{
			this->destroy = [](detail::task_base *b) noexcept {
				std::coroutine_handle<promise_type>::from_promise(*static_cast<promise_type *>(b)).destroy();
			};
			return task(this);
		}
		std::suspend_never initial_suspend() noexcept { return {}; }
		auto final_suspend() noexcept
		{
			struct final_awaiter {
				bool await_ready() noexcept { return false; }
				std::coroutine_handle<> await_suspend(std::coroutine_handle<promise_type> h) noexcept
				{
					promise_type &p = h.promise();
					std::coroutine_handle<> c = p.finish(0);
					p.release(); // may destroy this frame: nothing touches it after
					return c ? c : std::noop_coroutine();
				}
				void await_resume() noexcept {}
			};
			return final_awaiter{};
		}
		void unhandled_exception() noexcept { this->error = std::current_exception(); }
	};

	task() noexcept = default;
	task(task &&o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
	task &operator=(task &&o) noexcept
	{
		if (this != &o) {
			if (s_)
				s_->release();
			s_ = std::exchange(o.s_, nullptr);
		}
		return *this;
	}
	task(const task &) = delete;
	task &operator=(const task &) = delete;
	~task()
	{
		if (s_)
			s_->release();
	}

	// false once moved from or consumed by get().
	[[nodiscard]] bool valid() const noexcept { return s_ != nullptr; }
	// Finished: a value, an exception or a cancellation is there.
	[[nodiscard]] bool ready() const noexcept { return s_ && s_->done(); }
	// Waits until ready(); returns at once when the wait would deadlock (one
	// warning; ready() stays false) and for an invalid task.
	void wait() const noexcept
	{
		if (s_)
			(void)s_->wait();
	}
	// The value, or rethrows the callable's exception; task_cancelled after
	// a successful cancel(); task_would_deadlock instead of waiting forever;
	// std::logic_error on an invalid task.
	R get()
	{
		if (!s_)
			throw std::logic_error("cmwq::task::get(): no state (moved from, or get() was called)");
		if (!s_->wait())
			throw task_would_deadlock();
		struct drop {
			detail::task_result<R> *s;
			~drop() { s->release(); }
		} d{std::exchange(s_, nullptr)};
		std::uint32_t st = d.s->state.load(std::memory_order_acquire);
		if (st & detail::TASK_CANCELLED)
			throw task_cancelled();
		// Moved out: the exception then lives only on this thread, whichever
		// side drops the state last.
		if (std::exception_ptr e = std::move(d.s->error))
			std::rethrow_exception(std::move(e));
		return d.s->take();
	}
	// true if it removed the task before it started (get() then throws
	// task_cancelled; a waiting coroutine resumes here); false once it
	// started or finished, and for coroutine tasks. Never blocks.
	bool cancel() noexcept
	{
		detail::task_result<R> *s = s_;
		if (!s || !s->n.ws.func || !cancel_work(&s->n.ws))
			return false;
		std::coroutine_handle<> c = s->finish(detail::TASK_CANCELLED);
		s->release(); // the run's reference (it will not run); ours keeps s
		if (c)
			c.resume(); // may consume this task (get() in the awaiter)
		return true;
	}

	// co_await task: suspends until ready, then get().
	auto operator co_await() && noexcept { return awaiter{this}; }
	auto operator co_await() & noexcept { return awaiter{this}; }

private:
	struct awaiter {
		task *t;
		bool await_ready() const noexcept { return !t->s_ || t->s_->done(); }
		bool await_suspend(std::coroutine_handle<> h) noexcept { return t->s_->await(h); }
		R await_resume() { return t->get(); }
	};
	explicit task(detail::task_result<R> *s) noexcept : s_(s) {}
	template <class R2, class F>
	friend task<R2> detail::submit_named(workqueue_struct *, const char *, const std::string_view *, F &&);
	detail::task_result<R> *s_ = nullptr;
};

namespace detail {

template <class R, class F>
task<R> submit_named(workqueue_struct *wq, const char *type_label, const std::string_view *name, F &&f)
{
	using D = std::decay_t<F>;
	using S = task_state<R, D>;
	constexpr std::align_val_t al{alignof(S)};
	std::size_t extra = name ? name->size() + 1 : 0;
	void *mem = ::operator new(sizeof(S) + extra, al);
	S *s;
	try {
		s = ::new (mem) S(std::forward<F>(f));
	} catch (...) {
		::operator delete(mem, al);
		throw;
	}
	const char *label = type_label;
	if (name) {
		char *p = static_cast<char *>(mem) + sizeof(S);
		std::memcpy(p, name->data(), name->size());
		p[name->size()] = '\0';
		label = p;
	}
	s->n.owner = s;
	s->destroy = [](task_base *b) noexcept {
		auto *p = static_cast<S *>(b);
		p->~S();
		::operator delete(static_cast<void *>(p), std::align_val_t{alignof(S)});
	};
	INIT_WORK(&s->n.ws, &S::invoke);
	cmwq_set_work_name(&s->n.ws, label);
	task<R> t(s);
	if (!queue_work(wq, &s->n.ws)) {
		s->release(); // the run's reference; t drops the other
		throw std::invalid_argument("cmwq::submit: the workqueue refused the task (NULL or being destroyed)");
	}
	return t;
}

} // namespace detail

// Runs f() once on wq; the task carries its result or exception. One
// allocation (state, callable and name together). Move-only callables are
// fine. Throws std::invalid_argument when wq refuses it (NULL, or being
// destroyed; the message printed names the call) and what copying f throws.
template <detail::work_callable F>
task<detail::result_of<F>> submit(workqueue_struct *wq, F &&f)
{
	return detail::submit_named<detail::result_of<F>>(
		wq, detail::type_name<std::decay_t<F>>::text.data(), nullptr, std::forward<F>(f));
}
// The same, named: the name shows in the state dump, reports and probes.
template <detail::work_callable F>
task<detail::result_of<F>> submit(workqueue_struct *wq, std::string_view name, F &&f)
{
	return detail::submit_named<detail::result_of<F>>(wq, nullptr, &name, std::forward<F>(f));
}
template <detail::work_callable F>
task<detail::result_of<F>> submit(workqueue &wq, F &&f)
{
	return submit(wq.native(), std::forward<F>(f));
}
template <detail::work_callable F>
task<detail::result_of<F>> submit(workqueue &wq, std::string_view name, F &&f)
{
	return submit(wq.native(), name, std::forward<F>(f));
}

namespace detail {

// Queues f() once on wq, fire and forget: one allocation (item and
// callable) freed after the call; an exception escaping f is reported and
// terminates, as for cmwq::work. false (nothing queued, f destroyed) when wq
// refuses it. What the Asio executor's execute() uses.
template <class F>
bool queue_once(workqueue_struct *wq, const char *name, F &&f)
{
	using D = std::decay_t<F>;
	struct item {
		struct node {
			work_struct ws;
			item *owner;
		} n;
		D fn;
		static void invoke(work_struct *w) noexcept
		{
			item *it = container_of(w, node, ws)->owner;
			try {
				it->fn();
			} catch (...) {
				detail::escaped(std::current_exception());
			}
			delete it;
		}
	};
	auto *it = new item{{}, D(std::forward<F>(f))};
	it->n.owner = it;
	INIT_WORK(&it->n.ws, &item::invoke);
	cmwq_set_work_name(&it->n.ws, name);
	if (!queue_work(wq, &it->n.ws)) {
		delete it;
		return false;
	}
	return true;
}

} // namespace detail

// co_await resume_on(wq): the coroutine continues as a work item on wq (no
// allocation: the item lives in the coroutine frame). The name, if given,
// shows for that item as for named work. Throws std::invalid_argument into
// the coroutine when wq refuses the item.
class resume_on {
public:
	explicit resume_on(workqueue_struct *wq, const char *name = "cmwq::resume_on") noexcept : wq_(wq), name_(name) {}
	explicit resume_on(workqueue &wq, const char *name = "cmwq::resume_on") noexcept
		: resume_on(wq.native(), name)
	{
	}
	bool await_ready() const noexcept { return false; }
	void await_suspend(std::coroutine_handle<> h)
	{
		n_.h = h;
		INIT_WORK(&n_.ws, &resume_on::invoke);
		cmwq_set_work_name(&n_.ws, name_);
		if (!queue_work(wq_, &n_.ws))
			throw std::invalid_argument("cmwq::resume_on: the workqueue refused the coroutine");
	}
	void await_resume() const noexcept {}

private:
	struct node {
		work_struct ws;
		std::coroutine_handle<> h;
	};
	static void invoke(work_struct *w) noexcept { container_of(w, node, ws)->h.resume(); }
	workqueue_struct *wq_;
	const char *name_;
	node n_{};
};

} // namespace cmwq

CMWQ_END_PUBLIC