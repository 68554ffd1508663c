// cmwq/workqueue.hpp - the C++ API: RAII workqueues, work items that hold a
// callable, std::chrono delays.
//
// Every call is an inline forward to the kernel-compatible C API of
// <cmwq/linux/workqueue.h>, so both APIs drive one engine with the same
// guarantees (docs/design.md). Results that say whether something happened
// are [[nodiscard]]; cast to void to drop them on purpose.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include <cmwq/linux/workqueue.h>

#include <cmwq/export.h>
CMWQ_BEGIN_PUBLIC

namespace cmwq {

// Milliseconds (jiffies, HZ = 1000) for a std::chrono duration, rounded up so
// a non-zero delay never becomes "now".
template <class Rep, class Period>
constexpr unsigned long to_jiffies(std::chrono::duration<Rep, Period> d)
{
	auto us = std::chrono::ceil<std::chrono::microseconds>(d).count();
	if (us <= 0)
		return 0;
	return static_cast<unsigned long>((us + 999) / 1000);
}

// A work item that runs a callable. Not copyable or movable (the engine
// holds its address while queued). The destructor cancels a pending
// instance and waits for a running one (cancel_work_sync), except when it
// runs inside the item's own function, where freeing oneself is allowed.
class work {
public:
	explicit work(std::function<void()> fn) : fn_(std::move(fn))
	{
		INIT_WORK(&node_.ws, &work::trampoline);
		node_.owner = this;
	}
	work(const work &) = delete;
	work &operator=(const work &) = delete;
	~work()
	{
		if (current_work() != &ws_)
			(void)cancel_work_sync(&ws_);
	}

	work_struct *native() noexcept { return &ws_; }
	// Racy snapshot, as work_pending().
	[[nodiscard]] bool pending() const noexcept { return work_pending(&ws_); }
	// true if it waited for an instance (flush_work). May block.
	bool flush() noexcept { return flush_work(&ws_); }
	// true if a pending instance was removed. cancel() never blocks;
	// cancel_sync() also waits for a running instance.
	bool cancel() noexcept { return cancel_work(&ws_); }
	bool cancel_sync() noexcept { return cancel_work_sync(&ws_); }
	bool disable() noexcept { return disable_work(&ws_); }
	bool disable_sync() noexcept { return disable_work_sync(&ws_); }
	bool enable() noexcept { return enable_work(&ws_); }

private:
	struct node {
		work_struct ws;
		work *owner;
	};
	static void trampoline(work_struct *w) { container_of(w, node, ws)->owner->fn_(); }
	node node_;
	work_struct &ws_ = node_.ws;
	std::function<void()> fn_;
};

// A delayed work item that runs a callable; destructor as cmwq::work, with
// cancel_delayed_work_sync.
class delayed_work {
public:
	explicit delayed_work(std::function<void()> fn) : fn_(std::move(fn))
	{
		INIT_DELAYED_WORK(&node_.dw, &delayed_work::trampoline);
		node_.owner = this;
	}
	delayed_work(const delayed_work &) = delete;
	delayed_work &operator=(const delayed_work &) = delete;
	~delayed_work()
	{
		if (current_work() != &dw_.work)
			(void)cancel_delayed_work_sync(&dw_);
	}

	::delayed_work *native() noexcept { return &dw_; }
	[[nodiscard]] bool pending() const noexcept { return work_pending(&dw_.work); }
	bool flush() noexcept { return flush_delayed_work(&dw_); }
	bool cancel() noexcept { return cancel_delayed_work(&dw_); }
	bool cancel_sync() noexcept { return cancel_delayed_work_sync(&dw_); }
	bool disable() noexcept { return disable_delayed_work(&dw_); }
	bool disable_sync() noexcept { return disable_delayed_work_sync(&dw_); }
	bool enable() noexcept { return enable_delayed_work(&dw_); }

private:
	struct node {
		::delayed_work dw;
		delayed_work *owner;
	};
	static void trampoline(work_struct *w)
	{
		container_of(to_delayed_work(w), node, dw)->owner->fn_();
	}
	node node_;
	::delayed_work &dw_ = node_.dw;
	std::function<void()> fn_;
};

// Owns a workqueue; destroy_workqueue() on destruction (drains first). Movable.
class workqueue {
public:
	// Throws std::invalid_argument when alloc_workqueue refuses the flags
	// (the message printed to stderr names what is accepted).
	workqueue(const std::string &name, unsigned flags, int max_active = 0)
		: wq_(alloc_workqueue("%s", flags, max_active, name.c_str()))
	{
		if (!wq_)
			throw std::invalid_argument("cmwq: cannot create workqueue \"" + name + "\"");
	}
	static workqueue ordered(const std::string &name, unsigned flags = 0)
	{
		return workqueue(name, WQ_UNBOUND | __WQ_ORDERED | flags, 1);
	}
	// Adopt a workqueue made with alloc_workqueue().
	explicit workqueue(workqueue_struct *wq) noexcept : wq_(wq) {}
	workqueue(workqueue &&o) noexcept : wq_(std::exchange(o.wq_, nullptr)) {}
	workqueue &operator=(workqueue &&o) noexcept
	{
		if (this != &o) {
			reset();
			wq_ = std::exchange(o.wq_, nullptr);
		}
		return *this;
	}
	workqueue(const workqueue &) = delete;
	workqueue &operator=(const workqueue &) = delete;
	~workqueue() { reset(); }

	workqueue_struct *native() const noexcept { return wq_; }
	workqueue_struct *release() noexcept { return std::exchange(wq_, nullptr); }
	void reset() noexcept
	{
		if (wq_)
			destroy_workqueue(std::exchange(wq_, nullptr));
	}

	// true if queued, false if already pending or disabled. Never blocks.
	[[nodiscard]] bool queue(work &w) noexcept { return queue_work(wq_, w.native()); }
	[[nodiscard]] bool queue_on(int cpu, work &w) noexcept
	{
		return queue_work_on(cpu, wq_, w.native());
	}
	template <class Rep, class Period>
	[[nodiscard]] bool queue(delayed_work &w, std::chrono::duration<Rep, Period> d) noexcept
	{
		return queue_delayed_work(wq_, w.native(), to_jiffies(d));
	}
	// Inverted meaning, as mod_delayed_work: true if it was pending.
	template <class Rep, class Period>
	bool mod(delayed_work &w, std::chrono::duration<Rep, Period> d) noexcept
	{
		return mod_delayed_work(wq_, w.native(), to_jiffies(d));
	}
	// Waits for every item queued before the call. May block.
	void flush() noexcept { __flush_workqueue(wq_); }
	void drain() noexcept { drain_workqueue(wq_); }
	void set_max_active(int n) noexcept { workqueue_set_max_active(wq_, n); }
	void set_min_active(int n) noexcept { workqueue_set_min_active(wq_, n); }
	[[nodiscard]] bool congested(int cpu = WORK_CPU_UNBOUND) const noexcept
	{
		return workqueue_congested(cpu, wq_);
	}

private:
	workqueue_struct *wq_;
};

// Says "this worker is about to block" for its lifetime (the kernel's
// wq_worker_sleeping/running pair), so a per-CPU pool starts its next item.
// A no-op outside workers. Nests.
class blocking_scope {
public:
	blocking_scope() noexcept { cmwq_blocking_begin(); }
	~blocking_scope() { cmwq_blocking_end(); }
	blocking_scope(const blocking_scope &) = delete;
	blocking_scope &operator=(const blocking_scope &) = delete;
};

// Handle on a callable queued with run(): wait() blocks until it has run.
class task_handle {
public:
	task_handle() = default;
	// Blocks (with the blocking hint) until the task ran. Returns at once for
	// an empty handle.
	void wait() noexcept
	{
		if (state_)
			(void)flush_work(&state_->ws);
	}
	[[nodiscard]] bool done() const noexcept
	{
		return !state_ || __atomic_load_n(&state_->done, __ATOMIC_ACQUIRE);
	}

private:
	struct state;
	struct node {
		work_struct ws;
		state *owner;
	};
	struct state {
		node n;
		work_struct &ws = n.ws;
		std::function<void()> fn;
		bool done = false;
		std::shared_ptr<state> self; // keeps itself alive until it ran
	};
	template <class F> friend task_handle run(workqueue_struct *, F &&);
	explicit task_handle(std::shared_ptr<state> s) : state_(std::move(s)) {}
	static void trampoline(work_struct *w)
	{
		auto *s = container_of(w, node, ws)->owner;
		std::shared_ptr<state> keep = std::move(s->self);
		s->fn();
		__atomic_store_n(&s->done, true, __ATOMIC_RELEASE);
	}
	std::shared_ptr<state> state_;
};

// Run a callable on wq once; allocates. The returned handle may be dropped.
template <class F>
task_handle run(workqueue_struct *wq, F &&fn)
{
	auto s = std::make_shared<task_handle::state>();
	INIT_WORK(&s->ws, &task_handle::trampoline);
	s->n.owner = s.get();
	s->fn = std::forward<F>(fn);
	s->self = s;
	(void)queue_work(wq, &s->ws);
	return task_handle(std::move(s));
}
template <class F>
task_handle run(workqueue &wq, F &&fn)
{
	return run(wq.native(), std::forward<F>(fn));
}

} // namespace cmwq

CMWQ_END_PUBLIC