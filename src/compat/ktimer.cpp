// ktimer.cpp - the kernel timer API of <cmwq/linux/timer.h> over the timer
// thread (timer.cpp), and execute_in_process_context.
#include "engine/engine.h"

#include <cmwq/linux/timer.h>

using namespace cmwq::detail;

namespace {

// An absolute expiry in jiffies (CLOCK_MONOTONIC ms) as a deadline in ns,
// compared as the kernel's time_after does (across a wrap): one in the past
// is now, one more than CMWQ_TIMER_MAX_DELTA ahead is capped there (the
// kernel's wheel reach), so no product overflows.
uint64_t jiffies_to_ns(unsigned long j)
{
	unsigned long now = cmwq_jiffies();
	long delta = static_cast<long>(j - now);
	if (delta <= 0)
		return now_ns();
	if (static_cast<unsigned long>(delta) > CMWQ_TIMER_MAX_DELTA)
		j = now + CMWQ_TIMER_MAX_DELTA;
	return static_cast<uint64_t>(j) * 1000000ull;
}

bool refused(const void *t, const char *call)
{
	if (t)
		return false;
	return null_arg(call, "timer");
}

} // namespace

extern "C" {

void cmwq_timer_setup(struct timer_list *timer, void (*callback)(struct timer_list *), unsigned int flags)
{
	if (refused(timer, "timer_setup"))
		return;
	timer->expires = 0;
	timer->function = callback;
	timer->flags = flags;
	timer->heap_index = -1;
	timer->expires_ns = 0;
}

void add_timer(struct timer_list *timer)
{
	if (refused(timer, "add_timer"))
		return;
	if (ktimer_modify(timer, timer->expires, jiffies_to_ns(timer->expires), KTIMER_MOD))
		warn_once_msg("add-timer-pending-" + func_name(reinterpret_cast<work_func_t>(
							     reinterpret_cast<void *>(timer->function))),
			      "cmwq: add_timer() on a pending timer (" +
				      func_name(reinterpret_cast<work_func_t>(reinterpret_cast<void *>(timer->function))) +
				      "); moved to the new time (use mod_timer)");
}

void add_timer_on(struct timer_list *timer, int cpu)
{
	(void)cpu;
	add_timer(timer);
}

int mod_timer(struct timer_list *timer, unsigned long expires)
{
	if (refused(timer, "mod_timer"))
		return 0;
	return ktimer_modify(timer, expires, jiffies_to_ns(expires), KTIMER_MOD);
}

int mod_timer_pending(struct timer_list *timer, unsigned long expires)
{
	if (refused(timer, "mod_timer_pending"))
		return 0;
	return ktimer_modify(timer, expires, jiffies_to_ns(expires), KTIMER_IF_PENDING);
}

int timer_reduce(struct timer_list *timer, unsigned long expires)
{
	if (refused(timer, "timer_reduce"))
		return 0;
	return ktimer_modify(timer, expires, jiffies_to_ns(expires), KTIMER_REDUCE);
}

int timer_pending(const struct timer_list *timer)
{
	return timer && ktimer_pending(timer);
}

int cmwq_timer_delete(struct timer_list *timer)
{
	return refused(timer, "timer_delete") ? 0 : ktimer_delete(timer, false, false);
}

int cmwq_timer_delete_sync(struct timer_list *timer)
{
	return refused(timer, "timer_delete_sync") ? 0 : ktimer_delete(timer, true, false);
}

int timer_shutdown(struct timer_list *timer)
{
	return refused(timer, "timer_shutdown") ? 0 : ktimer_delete(timer, false, true);
}

int timer_shutdown_sync(struct timer_list *timer)
{
	return refused(timer, "timer_shutdown_sync") ? 0 : ktimer_delete(timer, true, true);
}

bool cmwq_in_timer_callback(void) { return tl_in_timer; }

// The kernel runs fn at once unless in interrupt context; here the timer
// thread's callbacks are that context.
int execute_in_process_context(work_func_t fn, struct execute_work *ew)
{
	if (!fn || !ew) {
		null_arg("execute_in_process_context", !fn ? "fn" : "ew");
		return -EINVAL;
	}
	if (!tl_in_timer) {
		fn(&ew->work);
		return 0;
	}
	INIT_WORK(&ew->work, fn);
	(void)queue_work(system_percpu_wq, &ew->work);
	return 1;
}

} // extern "C"
