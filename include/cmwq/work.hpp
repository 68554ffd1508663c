// cmwq/work.hpp - RAII workqueues and named work items that hold any
// callable (move-only too), delayed work with std::chrono delays, and the
// blocking hint. Tasks with results and coroutines are <cmwq/task.hpp>;
// <cmwq/workqueue.hpp> includes both.
//
// Every call is an inline forward to the kernel-compatible C API of
// <cmwq/linux/workqueue.h>, so both APIs drive one engine with the same
// guarantees (docs/design.md). Results that say whether something happened
// are [[nodiscard]]; cast to void to drop them on purpose.
#pragma once

#include <array>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
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


namespace detail {

// The name of a type, from the compiler's function signature, as a static
// NUL-terminated string ("main()::<lambda()>", "my_functor"): what an
// unnamed C++ work item is shown as. Costs nothing at run time.
template <class T>
constexpr const char *signature_of() noexcept
{
	return __PRETTY_FUNCTION__;
}
template <class T>
constexpr std::string_view type_name_view() noexcept
{
	std::string_view s = signature_of<T>();
	auto b = s.find("T = ");
	if (b == s.npos)
		return "(C++ callable)";
	b += 4;
	auto e = s.find(';', b);
	if (e == s.npos)
		e = s.rfind(']');
	return s.substr(b, e - b);
}
template <class T>
struct type_name {
	static constexpr std::string_view view = type_name_view<T>();
	static constexpr std::array<char, view.size() + 1> text = [] {
		std::array<char, view.size() + 1> a{};
		for (std::size_t i = 0; i < view.size(); i++)
			a[i] = view[i];
		return a;
	}();
};

// An exception escaped a work item that has nowhere to carry it: one
// message naming the workqueue, the item and what(), then std::terminate
// (the std::thread rule).
[[noreturn]] inline void escaped(std::exception_ptr e) noexcept
{
	std::string what = "uncaught exception";
	try {
		std::rethrow_exception(e);
	} catch (const std::exception &x) {
		what += ": ";
		what += x.what();
	} catch (...) {
		what += " (not a std::exception)";
	}
	cmwq_report_work_failure(what.c_str());
	std::terminate();
}

// Where cmwq::work and cmwq::delayed_work keep their callable: in place when
// it is small (48 bytes) and nothrow-movable, else on the heap. Move-only
// callables are fine; the item is never copied or moved.
class callable_slot {
public:
	callable_slot() = default;
	callable_slot(const callable_slot &) = delete;
	callable_slot &operator=(const callable_slot &) = delete;
	~callable_slot()
	{
		if (destroy_)
			destroy_(obj_);
	}

	template <class F, class D = std::decay_t<F>>
	D *emplace(F &&f)
	{
		D *d;
		if constexpr (sizeof(D) <= sizeof(buf_) && alignof(D) <= alignof(std::max_align_t) &&
			      std::is_nothrow_move_constructible_v<D>) {
			d = ::new (static_cast<void *>(buf_)) D(std::forward<F>(f));
			destroy_ = [](void *p) { static_cast<D *>(p)->~D(); };
		} else {
			d = new D(std::forward<F>(f));
			destroy_ = [](void *p) { delete static_cast<D *>(p); };
		}
		obj_ = d;
		return d;
	}
	void *get() const noexcept { return obj_; }

private:
	alignas(std::max_align_t) unsigned char buf_[48];
	void *obj_ = nullptr;
	void (*destroy_)(void *) = nullptr;
};

template <class F>
concept work_callable = std::invocable<std::decay_t<F> &> && std::move_constructible<std::decay_t<F>>;

} // namespace detail

// A work item that runs a callable (any callable taking no arguments; its
// result is ignored - use submit() for results). Named by its first argument,
// or by the callable's type; the name shows in the state dump, hog and
// watchdog reports and the execute_start probe. Not copyable or movable (the
// engine holds its address while queued). The destructor cancels a pending
// instance and waits for a running one (cancel_work_sync), except when it
// runs inside the item's own function, where freeing oneself is allowed.
// An exception escaping the callable prints one message (workqueue, name,
// what()) and calls std::terminate.
class work {
public:
	template <detail::work_callable F>
	explicit work(F &&fn) : work(std::string_view(detail::type_name<std::decay_t<F>>::text.data()), std::forward<F>(fn))
	{
	}
	template <detail::work_callable F>
	work(std::string_view name, F &&fn) : name_(name)
	{
		using D = std::decay_t<F>;
		node_.obj = slot_.emplace(std::forward<F>(fn));
		INIT_WORK(&node_.ws, &work::invoke<D>);
		cmwq_set_work_name(&node_.ws, name_.c_str());
	}
	work(const work &) = delete;
	work &operator=(const work &) = delete;
	~work()
	{
		if (current_work() != &node_.ws)
			(void)cancel_work_sync(&node_.ws);
	}

	work_struct *native() noexcept { return &node_.ws; }
	const std::string &name() const noexcept { return name_; }
	// Racy snapshot, as work_pending().
	[[nodiscard]] bool pending() const noexcept { return work_pending(&node_.ws); }
	// true if it waited for an instance (flush_work). May block.
	bool flush() noexcept { return flush_work(&node_.ws); }
	// true if a pending instance was removed. cancel() never blocks;
	// cancel_sync() also waits for a running instance.
	bool cancel() noexcept { return cancel_work(&node_.ws); }
	bool cancel_sync() noexcept { return cancel_work_sync(&node_.ws); }
	bool disable() noexcept { return disable_work(&node_.ws); }
	bool disable_sync() noexcept { return disable_work_sync(&node_.ws); }
	bool enable() noexcept { return enable_work(&node_.ws); }

private:
	struct node {
		work_struct ws;
		void *obj;
	};
	template <class D>
	static void invoke(work_struct *w) noexcept
	{
		try {
			(*static_cast<D *>(container_of(w, node, ws)->obj))();
		} catch (...) {
			detail::escaped(std::current_exception());
		}
	}
	detail::callable_slot slot_;
	std::string name_;
	node node_{};
};

// A delayed work item that runs a callable; names, callables, exceptions and
// the destructor as cmwq::work, with cancel_delayed_work_sync.
class delayed_work {
public:
	template <detail::work_callable F>
	explicit delayed_work(F &&fn)
		: delayed_work(std::string_view(detail::type_name<std::decay_t<F>>::text.data()), std::forward<F>(fn))
	{
	}
	template <detail::work_callable F>
	delayed_work(std::string_view name, F &&fn) : name_(name)
	{
		using D = std::decay_t<F>;
		node_.obj = slot_.emplace(std::forward<F>(fn));
		INIT_DELAYED_WORK(&node_.dw, &delayed_work::invoke<D>);
		cmwq_set_work_name(&node_.dw.work, name_.c_str());
	}
	delayed_work(const delayed_work &) = delete;
	delayed_work &operator=(const delayed_work &) = delete;
	~delayed_work()
	{
		if (current_work() != &node_.dw.work)
			(void)cancel_delayed_work_sync(&node_.dw);
	}

	::delayed_work *native() noexcept { return &node_.dw; }
	const std::string &name() const noexcept { return name_; }
	[[nodiscard]] bool pending() const noexcept { return work_pending(&node_.dw.work); }
	bool flush() noexcept { return flush_delayed_work(&node_.dw); }
	bool cancel() noexcept { return cancel_delayed_work(&node_.dw); }
	bool cancel_sync() noexcept { return cancel_delayed_work_sync(&node_.dw); }
	bool disable() noexcept { return disable_delayed_work(&node_.dw); }
	bool disable_sync() noexcept { return disable_delayed_work_sync(&node_.dw); }
	bool enable() noexcept { return enable_delayed_work(&node_.dw); }

private:
	struct node {
		::delayed_work dw;
		void *obj;
	};
	template <class D>
	static void invoke(work_struct *w) noexcept
	{
		try {
			(*static_cast<D *>(container_of(to_delayed_work(w), node, dw)->obj))();
		} catch (...) {
			detail::escaped(std::current_exception());
		}
	}
	detail::callable_slot slot_;
	std::string name_;
	node node_{};
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

} // namespace cmwq

CMWQ_END_PUBLIC
