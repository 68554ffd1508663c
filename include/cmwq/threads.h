/*
 * cmwq/threads.h - the program's code at the start and end of every thread
 * the library starts.
 *
 * Programs that run kernel code in user space keep per-thread state (their
 * `current`) and register threads with their RCU (liburcu's
 * rcu_register_thread). cmwq's workers, rescuers, timer thread, monitor and
 * control server are started by the library, so it calls the program's
 * hooks on each of them: start first thing on the new thread, before it
 * runs anything of the program's (a work item, a timer callback); stop last
 * thing before the thread ends, after all of that. A hook runs on the
 * thread it is for, with every asynchronous signal blocked; it may call
 * anything but a cmwq wait (flush, cancel_*_sync, destroy), which could
 * wait for the thread it runs on.
 */
#ifndef CMWQ_THREADS_H
#define CMWQ_THREADS_H

#include <cmwq/export.h>
CMWQ_BEGIN_PUBLIC

#ifdef __cplusplus
extern "C" {
#endif

enum cmwq_thread_kind {
	CMWQ_THREAD_WORKER,   /* a worker of a pool: runs work items */
	CMWQ_THREAD_RESCUER,  /* a WQ_MEM_RECLAIM workqueue's rescuer: runs its items */
	CMWQ_THREAD_TIMER,    /* the timer thread: runs timer callbacks */
	CMWQ_THREAD_MONITOR,  /* the monitor: runs nothing of the program's */
	CMWQ_THREAD_CONTROL,  /* the control endpoint's server */
};

struct cmwq_thread_hooks {
	/* On the new thread, before anything else. May be NULL. */
	void (*start)(enum cmwq_thread_kind kind, void *arg);
	/* On the thread, just before it ends. May be NULL. */
	void (*stop)(enum cmwq_thread_kind kind, void *arg);
	void *arg;
};

/*
 * Installs the hooks (copied; NULL removes them) for every library thread
 * started from now on. Call it before the first cmwq call that starts the
 * library (a constructor of the program's is a good place): threads already
 * running never ran start. Returns 0, or -EBUSY when library threads were
 * already running (the hooks are installed all the same, for later threads).
 * A thread that started with hooks runs the stop hook it started with.
 */
int cmwq_set_thread_hooks(const struct cmwq_thread_hooks *hooks);

#ifdef __cplusplus
}
#endif

CMWQ_END_PUBLIC

#endif /* CMWQ_THREADS_H */
