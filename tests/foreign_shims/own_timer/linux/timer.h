/* The program keeps its own timers: another layout, its own functions. */
#ifndef PROGRAM_LINUX_TIMER_H
#define PROGRAM_LINUX_TIMER_H

#include <stdbool.h>
#include <string.h>

struct timer_list {
	unsigned long expires;
	void (*function)(struct timer_list *timer);
	bool pending;
};

static inline void timer_setup(struct timer_list *timer, void (*fn)(struct timer_list *), unsigned int flags)
{
	(void)flags;
	memset(timer, 0, sizeof(*timer));
	timer->function = fn;
}

static inline int timer_pending(const struct timer_list *timer)
{
	return timer->pending;
}

/* Fires at once: enough for the program's own uses in this test. */
static inline int mod_timer(struct timer_list *timer, unsigned long expires)
{
	timer->expires = expires;
	timer->function(timer);
	return 0;
}

static inline int del_timer_sync(struct timer_list *timer)
{
	timer->pending = false;
	return 0;
}

#endif
