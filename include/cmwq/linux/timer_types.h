/*
 * cmwq/linux/timer_types.h - struct timer_list, the type delayed work
 * embeds, and the TIMER_* flags.
 *
 * cmwq's own type is struct cmwq_timer_list. Where cmwq provides the
 * kernel's timer API (<cmwq/linux/timer.h>) it is struct timer_list. When
 * the program keeps its own timers (its own <linux/timer.h> is on the
 * include path or was included first, or CMWQ_TIMER_LIST_EXTERNAL is
 * defined), struct timer_list is the program's and cmwq's delayed work
 * embeds a struct cmwq_timer_list of the same layout, run by cmwq's timer
 * thread; the program's timers stay the program's. See <cmwq/linux/shims.h>.
 */
#ifndef CMWQ_LINUX_TIMER_TYPES_H
#define CMWQ_LINUX_TIMER_TYPES_H

#include <stdint.h>

#include <cmwq/linux/shims.h>

#if CMWQ_PROBE_SHIMS && !defined(CMWQ_TIMER_LIST_EXTERNAL) && !defined(_LINUX_TIMER_H)
#if __has_include(<linux/timer.h>)
/* <cmwq/linux/timer.h> sets CMWQ_WRAPPED_LINUX_TIMER_H when it is what
 * <linux/timer.h> includes (a wrapper): then the timers are cmwq's. */
#define CMWQ_PROBING_LINUX_TIMER_H
#include <linux/timer.h>
#undef CMWQ_PROBING_LINUX_TIMER_H
#ifndef CMWQ_WRAPPED_LINUX_TIMER_H
#define CMWQ_TIMER_LIST_EXTERNAL 1
#endif
#endif
#endif
#if defined(_LINUX_TIMER_H) && !defined(CMWQ_DEFINES_TIMER_LIST) && !defined(CMWQ_TIMER_LIST_EXTERNAL)
#define CMWQ_TIMER_LIST_EXTERNAL 1
#endif

#ifndef CMWQ_TIMER_LIST_EXTERNAL
#define CMWQ_DEFINES_TIMER_LIST 1
/* cmwq's timer type is the kernel's struct timer_list. */
#define cmwq_timer_list timer_list
#endif

/*
 * A timer: the first three fields are the kernel's. Callbacks run on cmwq's
 * timer thread.
 */
struct cmwq_timer_list {
	unsigned long expires;   /* jiffies: what add_timer() arms it for */
	void (*function)(struct cmwq_timer_list *);
	unsigned int flags;      /* TIMER_* (accepted; all behave alike) */
	int heap_index;          /* T: timer lock; -1 when not armed */
	uint64_t expires_ns;     /* T: CLOCK_MONOTONIC deadline */
};

/* The kernel's timer flags: accepted and kept; deferrable, pinned and
 * irqsafe timers behave as normal timers here (one timer thread). */
#ifdef CMWQ_DEFINES_TIMER_LIST
#define TIMER_CPUMASK 0x0003FFFF
#define TIMER_MIGRATING 0x00040000
#define TIMER_BASEMASK (TIMER_CPUMASK | TIMER_MIGRATING)
#define TIMER_DEFERRABLE 0x00080000
#define TIMER_PINNED 0x00100000
#define TIMER_IRQSAFE 0x00200000
#define TIMER_INIT_FLAGS (TIMER_DEFERRABLE | TIMER_PINNED | TIMER_IRQSAFE)
#define __TIMER_INITIALIZER(_function, _flags) { 0, (_function), (_flags), -1, 0 }
#endif
#define CMWQ_TIMER_DEFERRABLE 0x00080000
#define CMWQ_TIMER_INITIALIZER(_function, _flags) { 0, (_function), (_flags), -1, 0 }

#endif /* CMWQ_LINUX_TIMER_TYPES_H */
