// timer.cpp - one timer thread serving delayed work and the pools' idle and
// mayday timers: a binary heap ordered by CLOCK_MONOTONIC deadline, each
// timer_list remembering its heap index so deletion is O(log n).
// One thread rather than a timerfd per timer: arming and deleting stay a
// few hundred nanoseconds under one lock and cost no file descriptors.
#include "engine.h"

#include <pthread.h>

#include <chrono>
#include <thread>

namespace cmwq::detail {

constinit thread_local bool tl_in_timer = false;

namespace {

struct timer_base {
	mutex lock;
	cond_var cv;
	std::vector<timer_list *> heap; // T
	timer_list *running = nullptr;  // T: whose callback the thread runs now
	cond_var done; // T: running changed (for del_timer_sync)
	bool started = false;   // lock
	uint64_t retry_ns = 0;  // lock: no start attempt before this
};

timer_base &tb()
{
	static timer_base *b = new timer_base; // never freed: outlives main
	return *b;
}

bool earlier(const timer_list *a, const timer_list *b) { return a->expires_ns < b->expires_ns; }

void sift_up(std::vector<timer_list *> &h, int i)
{
	while (i > 0) {
		int p = (i - 1) / 2;
		if (!earlier(h[i], h[p]))
			break;
		std::swap(h[i], h[p]);
		h[i]->heap_index = i;
		h[p]->heap_index = p;
		i = p;
	}
}

void sift_down(std::vector<timer_list *> &h, int i)
{
	int n = static_cast<int>(h.size());
	for (;;) {
		int l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && earlier(h[l], h[m]))
			m = l;
		if (r < n && earlier(h[r], h[m]))
			m = r;
		if (m == i)
			break;
		std::swap(h[i], h[m]);
		h[i]->heap_index = i;
		h[m]->heap_index = m;
		i = m;
	}
}

void heap_remove(std::vector<timer_list *> &h, int i)
{
	timer_list *last = h.back();
	h.pop_back();
	if (i < static_cast<int>(h.size())) {
		h[i] = last;
		last->heap_index = i;
		sift_up(h, i);
		sift_down(h, last->heap_index);
	}
}

// The timer thread runs every callback, delayed work's included: one that
// takes long delays all of them. Reported once per function.
// The engine's own timers (TIMER_ENGINE_OWNED: a pool's idle and mayday
// timers, a delayed item's queueing) are not reported: the advice is for
// users' timers, and the engine's take long only when the machine is
// overloaded (a mayday timer creating a worker while many runnable workers
// share the CPUs).
void report_slow_callback(void (*fn)(timer_list *), bool engine_owned, uint64_t ns)
{
	unsigned long limit = params().timer_callback_warn_us.load();
	if (!limit || ns < limit * 1000ull || engine_owned)
		return;
	std::string name = func_name(reinterpret_cast<work_func_t>(reinterpret_cast<void *>(fn)));
	warn_once_msg("slow-timer-" + name,
		      "cmwq: timer callback " + name + " ran for " + std::to_string(ns / 1000) +
			      " us (cmwq.timer_callback_warn_us=" + std::to_string(limit) +
			      "); callbacks run on the timer thread and delay every timer and delayed work "
			      "behind them: queue a work item for anything that blocks or takes long");
}

void *timer_thread(void *)
{
	pthread_setname_np(pthread_self(), "cmwq/timer");
	auto &b = tb();
	unique_lock lk(b.lock);
	for (;;) {
		if (b.heap.empty()) {
			b.cv.wait(lk);
			continue;
		}
		timer_list *t = b.heap.front();
		uint64_t now = now_ns();
		if (t->expires_ns > now) {
			b.cv.wait_for(lk, std::chrono::nanoseconds(t->expires_ns - now));
			continue;
		}
		heap_remove(b.heap, 0);
		t->heap_index = -1;
		auto fn = t->function;
		bool engine_owned = t->flags & TIMER_ENGINE_OWNED;
		b.running = t;
		// Off the heap and not yet run: a fork child finds an engine timer
		// (a delayed work's) in this thread's transit slot. A program's
		// timer is not named: its callback may free it.
		if (engine_owned) {
			if (!tl_transit.registered)
				transit_register();
			tl_transit.timer.store(t, std::memory_order_relaxed);
		}
		lk.unlock();
		uint64_t t0 = now_ns();
		tl_in_timer = true;
		fn(t);
		tl_in_timer = false;
		report_slow_callback(fn, engine_owned, now_ns() - t0);
		lk.lock();
		tl_transit.timer.store(nullptr, std::memory_order_relaxed);
		b.running = nullptr;
		b.done.notify_all();
	}
}

// Starts the timer thread unless it runs or the last failure is recent
// (T held). On first use; if the thread cannot start, armed timers stay
// armed and queueing does not block or fail: the next arming after the
// cooldown, or the monitor's tick (timer_retry_start; the monitor is
// started here if it is not running), tries again.
// Starts the thread (T held): 0, or the error with the cooldown set.
int spawn_locked(timer_base &b) REQUIRES(b.lock)
{
	if (int err = spawn_thread(CMWQ_THREAD_TIMER, timer_thread, nullptr)) {
		b.retry_ns = now_ns() + CREATE_COOLDOWN_NS;
		return err;
	}
	b.started = true;
	b.cv.notify_one();
	return 0;
}

void start_thread_locked(timer_base &b) REQUIRES(b.lock)
{
	if (b.started || now_ns() < b.retry_ns)
		return;
	if (int err = spawn_locked(b)) {
		thread_start_failed("timer", err, "timers stay armed and are retried after 1 s");
		monitor_start(); // its tick retries (T before the monitor's lock, as fork takes them)
	}
}

// Whether t is armed: by identity, not by trusting its index, since a timer
// the program zeroed or filled by hand (never set up) has heap_index 0.
bool armed(const timer_base &b, const timer_list *t) REQUIRES(b.lock)
{
	int i = t->heap_index;
	return i >= 0 && static_cast<size_t>(i) < b.heap.size() && b.heap[static_cast<size_t>(i)] == t;
}

// Puts t at expires_ns in the heap (moving it if armed) and wakes the
// thread if t is now first.
void heap_place(timer_base &b, timer_list *t, uint64_t expires_ns) REQUIRES(b.lock)
{
	t->expires_ns = expires_ns;
	if (armed(b, t)) {
		sift_up(b.heap, t->heap_index);
		sift_down(b.heap, t->heap_index);
	} else {
		t->heap_index = static_cast<int>(b.heap.size());
		b.heap.push_back(t);
		sift_up(b.heap, t->heap_index);
	}
	if (b.heap.front() == t)
		b.cv.notify_one();
}

} // namespace

void timer_add(timer_list *t, uint64_t expires_ns, void (*fn)(timer_list *), const work_struct *handover)
{
	auto &b = tb();
	lock_guard lk(b.lock);
	start_thread_locked(b);
	t->function = fn;
	t->flags |= TIMER_ENGINE_OWNED;
	heap_place(b, t, expires_ns);
	if (handover)
		transit_end(handover); // armed: a fork child finds it in the heap
}

bool timer_add_if_idle(timer_list *t, uint64_t expires_ns, void (*fn)(timer_list *))
{
	{
		lock_guard lk(tb().lock);
		if (armed(tb(), t))
			return false;
	}
	timer_add(t, expires_ns, fn); // only its owner arms it; a race adds nothing twice
	return true;
}

int timer_thread_start()
{
	auto &b = tb();
	lock_guard lk(b.lock);
	return b.started ? 0 : spawn_locked(b);
}

bool timer_retry_wanted()
{
	auto &b = tb();
	lock_guard lk(b.lock);
	return !b.started && !b.heap.empty();
}

void timer_retry_start()
{
	auto &b = tb();
	lock_guard lk(b.lock);
	if (!b.heap.empty())
		start_thread_locked(b);
}

void timer_fork_lock() NO_THREAD_SAFETY_ANALYSIS { tb().lock.lock(); }

void timer_fork_unlock(void (*dropped)(timer_list *)) NO_THREAD_SAFETY_ANALYSIS
{
	auto &b = tb();
	if (dropped) {
		// In a fork child: the armed timers and the thread are the
		// parent's. Each timer is disarmed and handed to `dropped`.
		for (timer_list *t : b.heap) {
			t->heap_index = -1;
			dropped(t);
		}
		b.heap.clear();
		b.running = nullptr; // the parent's thread: none here
		b.started = false;
		b.retry_ns = 0;
	}
	b.lock.unlock();
}

int ktimer_modify(timer_list *t, unsigned long expires, uint64_t expires_ns, ktimer_how how)
{
	auto &b = tb();
	lock_guard lk(b.lock);
	bool was = armed(b, t);
	if (!t->function) // shut down (or never set up): arming does nothing
		return 0;
	if (how == KTIMER_IF_PENDING && !was)
		return 0;
	if (how == KTIMER_REDUCE && was && t->expires_ns <= expires_ns)
		return 1;
	start_thread_locked(b);
	// Under T, as the kernel writes it under the base lock: two threads may
	// modify one timer at once.
	t->expires = expires;
	t->flags &= ~TIMER_ENGINE_OWNED;
	heap_place(b, t, expires_ns);
	return was;
}

bool ktimer_pending(const timer_list *t)
{
	lock_guard lk(tb().lock);
	return armed(tb(), t);
}

int ktimer_delete(timer_list *t, bool sync, bool shutdown)
{
	auto &b = tb();
	unique_lock lk(b.lock);
	int was = 0;
	if (shutdown)
		t->function = nullptr; // later arming (a re-arming callback too) does nothing
	for (;;) {
		if (armed(b, t)) {
			heap_remove(b.heap, t->heap_index);
			t->heap_index = -1;
			was = 1;
		}
		if (!sync || b.running != t)
			return was;
		if (tl_in_timer) {
			// Its own callback, or another timer's on the timer thread:
			// waiting would wait for ourselves.
			lk.unlock();
			warn_once_msg("timer-sync-self", "cmwq: del_timer_sync() from a timer callback waits for the "
							 "timer thread itself; returning without waiting");
			return was;
		}
		// The callback may re-arm the timer: delete again once it returned.
		b.done.wait(lk);
	}
}

bool timer_remove(timer_list *t)
{
	auto &b = tb();
	lock_guard lk(b.lock);
	if (!armed(b, t))
		return false;
	heap_remove(b.heap, t->heap_index);
	t->heap_index = -1;
	return true;
}

} // namespace cmwq::detail
