/*
 * cmwq/linux/timer.h - the kernel's timer API on cmwq's timer thread.
 *
 * struct timer_list is the type struct delayed_work embeds
 * (<cmwq/linux/timer_types.h>). Times are jiffies (HZ = 1000,
 * CLOCK_MONOTONIC milliseconds: <cmwq/linux/jiffies.h>). Expiries more
 * than about 12 days ahead (the kernel's timer wheel's reach,
 * CMWQ_TIMER_MAX_DELTA jiffies) are capped there, as the kernel caps them.
 *
 * Callbacks run on one thread, "cmwq/timer": the kernel's softirq context.
 * A callback must not block; one that does delays every timer behind it,
 * delayed work included, and one that runs longer than
 * cmwq.timer_callback_warn_us (10000 by default) is reported once per
 * function. Queue a work item for anything longer.
 *
 * The TIMER_* flags are accepted and kept in timer->flags; deferrable,
 * pinned and irqsafe timers behave as normal timers. add_timer_on's CPU is
 * ignored (there is one timer thread).
 *
 * timer_delete and timer_delete_sync are macros: this header includes
 * <time.h> first, and a program that also needs POSIX timer_delete(timer_t)
 * calls it as (timer_delete)(id).
 *
 * A program that keeps its own timers (its own <linux/timer.h>, see
 * <cmwq/linux/timer_types.h>) gets none of these names from cmwq: its
 * delayed work still runs from cmwq's timer thread.
 */
#ifdef CMWQ_PROBING_LINUX_TIMER_H
/* Included through the program's <linux/timer.h> while cmwq looks for the
 * program's own timers: that header is a wrapper of this one. */
#define CMWQ_WRAPPED_LINUX_TIMER_H 1
#elif !defined(CMWQ_LINUX_TIMER_H)
#define CMWQ_LINUX_TIMER_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include <cmwq/linux/timer_types.h>
#include <cmwq/linux/jiffies.h>

#include <cmwq/export.h>
CMWQ_BEGIN_PUBLIC

#ifdef __cplusplus
extern "C" {
#endif

/* The farthest ahead a timer or delayed work is armed, in jiffies (the
 * kernel's wheel reaches about 12 days at HZ 1000): later expiries fire
 * then. */
#define CMWQ_TIMER_MAX_DELTA (1UL << 30)

/* true while the calling thread runs a timer callback (the kernel's
 * in_interrupt()/in_softirq() for code moved from the kernel). */
bool cmwq_in_timer_callback(void);

#ifdef CMWQ_DEFINES_TIMER_LIST
#define _LINUX_TIMER_H

/* Prepares a timer: callback, flags; not pending. */
void cmwq_timer_setup(struct timer_list *timer, void (*callback)(struct timer_list *), unsigned int flags);
#define timer_setup(timer, callback, flags) cmwq_timer_setup((timer), (callback), (flags))
#define timer_setup_on_stack(timer, callback, flags) cmwq_timer_setup((timer), (callback), (flags))
static inline void destroy_timer_on_stack(struct timer_list *timer) { (void)timer; }
#define DEFINE_TIMER(_name, _function) struct timer_list _name = __TIMER_INITIALIZER(_function, 0)

/* The structure containing a timer, from the pointer its callback gets. */
#define timer_container_of(var, callback_timer, timer_fieldname) \
	cmwq_container_of(callback_timer, __typeof__(*var), timer_fieldname)
#define from_timer(var, callback_timer, timer_fieldname) timer_container_of(var, callback_timer, timer_fieldname)

/* Arms the timer for timer->expires. It must not be pending (then one
 * warning, and it is moved to the new time). */
void add_timer(struct timer_list *timer);
void add_timer_on(struct timer_list *timer, int cpu);
/* Arms (or moves) the timer for expires: 1 if it was pending, 0 if not. A
 * timer shut down with timer_shutdown[_sync] is not armed (returns 0). */
int mod_timer(struct timer_list *timer, unsigned long expires);
/* mod_timer, but only a pending timer: returns 1 and moves it, or 0. */
int mod_timer_pending(struct timer_list *timer, unsigned long expires);
/* Moves a pending timer only to an earlier time; arms an idle one. */
int timer_reduce(struct timer_list *timer, unsigned long expires);
/* 1 if armed and its callback has not started. A snapshot. */
int timer_pending(const struct timer_list *timer);
/* Disarms: 1 if it was pending. Does not wait for a running callback. */
int cmwq_timer_delete(struct timer_list *timer);
/* Disarms and waits until a running callback returned (and disarms a
 * re-arm it made): after it the callback does not run. 1 if it was pending.
 * From a timer callback it cannot wait for the timer thread: one warning,
 * and it returns without waiting. */
int cmwq_timer_delete_sync(struct timer_list *timer);
/* As timer_delete[_sync], and later arming (a re-arming callback's too)
 * does nothing until timer_setup runs again: the teardown form. */
int timer_shutdown(struct timer_list *timer);
int timer_shutdown_sync(struct timer_list *timer);

#define timer_delete(t) cmwq_timer_delete(t)
#define timer_delete_sync(t) cmwq_timer_delete_sync(t)
#define del_timer(t) cmwq_timer_delete(t)
#define del_timer_sync(t) cmwq_timer_delete_sync(t)
#define try_to_del_timer_sync(t) cmwq_timer_delete(t)
#define timer_delete_sync_try(t) cmwq_timer_delete(t)
#define del_singleshot_timer_sync(t) cmwq_timer_delete_sync(t)
/* The kernel's placement variants (6.9+): one timer thread, all alike. */
#define add_timer_local(t) add_timer(t)
#define add_timer_global(t) add_timer(t)

/*
 * round_jiffies: an absolute expiry rounded to a whole second (HZ 1000),
 * down when within the first quarter of the second, else up, and never
 * into the past (then j itself), so that timers that need no precision
 * fire together. _up always rounds up; the _relative forms take and give a
 * delay.
 */
static inline unsigned long cmwq_round_jiffies(unsigned long j, bool force_up)
{
	unsigned long rem = j % 1000u, r = j - rem;
	if (force_up || rem >= 250u)
		r += 1000u;
	if (force_up && rem == 0)
		r = j;
	return r <= cmwq_jiffies() ? j : r;
}
#define round_jiffies(j) cmwq_round_jiffies((j), false)
#define round_jiffies_up(j) cmwq_round_jiffies((j), true)
#define __round_jiffies(j, cpu) ((void)(cpu), cmwq_round_jiffies((j), false))
#define __round_jiffies_up(j, cpu) ((void)(cpu), cmwq_round_jiffies((j), true))
static inline unsigned long round_jiffies_relative(unsigned long j)
{
	unsigned long now = cmwq_jiffies();
	return cmwq_round_jiffies(j + now, false) - now;
}
static inline unsigned long round_jiffies_up_relative(unsigned long j)
{
	unsigned long now = cmwq_jiffies();
	return cmwq_round_jiffies(j + now, true) - now;
}

#endif /* CMWQ_DEFINES_TIMER_LIST */

#ifdef __cplusplus
}
#endif

CMWQ_END_PUBLIC

#endif /* CMWQ_LINUX_TIMER_H */

