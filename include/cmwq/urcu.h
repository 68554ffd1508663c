/*
 * cmwq/urcu.h - grace periods for queue_rcu_work from liburcu.
 *
 * Include your liburcu flavour first (<urcu.h>, <urcu-qsbr.h>, ...), then
 * this header, and call cmwq_use_urcu() once before queueing rcu_work:
 *
 *   #include <urcu.h>
 *   #include <cmwq/urcu.h>
 *   cmwq_use_urcu();
 *
 * Link the flavour's library (-lurcu). cmwq waits with the flavour's
 * synchronize_rcu() on one of its own workers, which is never inside a
 * read-side critical section; readers register with liburcu as usual.
 * Header-only: libcmwq itself does not depend on liburcu.
 */
#ifndef CMWQ_URCU_H
#define CMWQ_URCU_H

#include <cmwq/linux/workqueue.h>

#ifndef synchronize_rcu
#error "<cmwq/urcu.h>: include a liburcu flavour (<urcu.h>, <urcu-qsbr.h>, ...) first"
#endif

static void cmwq_urcu_synchronize(void)
{
	synchronize_rcu();
}

static inline int cmwq_use_urcu(void)
{
	return cmwq_set_rcu_synchronize(cmwq_urcu_synchronize);
}

#endif /* CMWQ_URCU_H */
