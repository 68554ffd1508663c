/*
 * kernel_timers.c - the rest of the kernel API from C: <cmwq/linux/timer.h>
 * (a driver-style timer + work teardown among the checks),
 * execute_in_process_context, rcu_work without a grace-period function, the
 * lower-level initialisers and constants, the *_noprof names,
 * show_freezable_workqueues, workqueue_sysfs_register, wq_worker_comm and
 * print_worker_info.
 *
 * Plain C11, -Wall -Wextra -Werror, no framework: it also runs as an
 * installed-package consumer built with pkg-config (test_install.cmake).
 * Prints "N passed, M failed"; exits non-zero on any failure.
 */
#include <errno.h>
#include <stdatomic.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <cmwq/linux/delay.h>
#include <cmwq/linux/timer.h>
#include <cmwq/linux/workqueue.h>

#include "c_check.h"

/* ---- a driver: a timer that re-arms itself and kicks a work item ---------- */

struct mydev {
	struct timer_list poll_timer;
	struct work_struct reset_work;
	struct workqueue_struct *wq;
	atomic_int timer_runs, work_runs;
	atomic_int in_timer_seen;
};

static void mydev_reset(struct work_struct *work)
{
	struct mydev *d = container_of(work, struct mydev, reset_work);

	atomic_fetch_add(&d->work_runs, 1);
}

static void mydev_poll(struct timer_list *t)
{
	struct mydev *d = from_timer(d, t, poll_timer);

	if (cmwq_in_timer_callback())
		atomic_store(&d->in_timer_seen, 1);
	atomic_fetch_add(&d->timer_runs, 1);
	queue_work(d->wq, &d->reset_work);
	mod_timer(&d->poll_timer, jiffies + msecs_to_jiffies(2)); /* re-arms */
}

static void driver_timer_and_work_teardown(void)
{
	struct mydev d;

	memset(&d, 0, sizeof(d));
	d.wq = alloc_workqueue("mydev", WQ_UNBOUND, 0);
	CHECK(d.wq != NULL);
	INIT_WORK(&d.reset_work, mydev_reset);
	timer_setup(&d.poll_timer, mydev_poll, 0);
	CHECK(!timer_pending(&d.poll_timer));
	/* Armed far out first, so that pending is certain when checked (a
	 * 2 ms timer may already be running its callback, when it is not
	 * pending, by the time a loaded machine gets to the check); then
	 * brought in to 2 ms: mod_timer of a pending timer returns 1. */
	d.poll_timer.expires = jiffies + msecs_to_jiffies(60000);
	add_timer(&d.poll_timer);
	CHECK(timer_pending(&d.poll_timer));
	CHECK(mod_timer(&d.poll_timer, jiffies + msecs_to_jiffies(2)) == 1);
	CHECK_SOON(atomic_load(&d.timer_runs) >= 5 && atomic_load(&d.work_runs) >= 1);
	CHECK(atomic_load(&d.in_timer_seen) == 1);
	/* Teardown, in the kernel's order: stop the timer for good (its
	 * callback re-arms, so shutdown, not delete), then the work. */
	timer_shutdown_sync(&d.poll_timer);
	int runs = atomic_load(&d.timer_runs);
	CHECK(!timer_pending(&d.poll_timer));
	CHECK(mod_timer(&d.poll_timer, jiffies + 1) == 0); /* shut down: not armed */
	CHECK(!timer_pending(&d.poll_timer));
	cancel_work_sync(&d.reset_work);
	int works = atomic_load(&d.work_runs);
	msleep(20);
	CHECK(atomic_load(&d.timer_runs) == runs);
	CHECK(atomic_load(&d.work_runs) == works);
	destroy_workqueue(d.wq);
}

/* ---- mod_timer / del_timer return values ----------------------------------- */

static atomic_int plain_runs;
static void plain_timer(struct timer_list *t)
{
	(void)t;
	atomic_fetch_add(&plain_runs, 1);
}

static DEFINE_TIMER(static_timer, plain_timer);

static void timer_return_values(void)
{
	struct timer_list t;

	timer_setup(&t, plain_timer, TIMER_DEFERRABLE);
	CHECK(t.flags == TIMER_DEFERRABLE);
	CHECK(t.function == plain_timer);
	CHECK(mod_timer(&t, jiffies + 10000) == 0); /* was idle */
	CHECK(timer_pending(&t));
	CHECK(mod_timer(&t, jiffies + 20000) == 1); /* was pending */
	CHECK(t.expires > jiffies + 10000);
	CHECK(mod_timer_pending(&t, jiffies + 30000) == 1);
	CHECK(timer_reduce(&t, jiffies + 50000) == 1); /* later: unchanged */
	CHECK(del_timer(&t) == 1);
	CHECK(del_timer(&t) == 0);
	CHECK(mod_timer_pending(&t, jiffies + 1) == 0); /* idle: not armed */
	CHECK(!timer_pending(&t));
	CHECK(timer_delete_sync(&t) == 0);
	/* Fires once at its time. */
	int before = atomic_load(&plain_runs);
	CHECK(mod_timer(&t, jiffies + 1) == 0);
	CHECK_SOON(atomic_load(&plain_runs) == before + 1);
	CHECK(!timer_pending(&t));
	CHECK(timer_delete(&t) == 0);
	/* A statically defined timer. */
	static_timer.expires = jiffies + 1;
	add_timer(&static_timer);
	CHECK_SOON(atomic_load(&plain_runs) == before + 2);
	/* NULL is refused with a message, not a crash. */
	CHECK(mod_timer(NULL, 0) == 0);
	CHECK(timer_pending(NULL) == 0);
}

/* del_timer_sync waits for a running callback. */
static atomic_int slow_started, slow_done;
static void slow_timer(struct timer_list *t)
{
	(void)t;
	atomic_store(&slow_started, 1);
	msleep(50);
	atomic_store(&slow_done, 1);
}

static void del_timer_sync_waits(void)
{
	struct timer_list t;

	timer_setup(&t, slow_timer, 0);
	mod_timer(&t, jiffies + 1);
	CHECK_SOON(atomic_load(&slow_started) == 1);
	CHECK(del_timer_sync(&t) == 0); /* running, not pending */
	CHECK(atomic_load(&slow_done) == 1);
}

/* ---- execute_in_process_context --------------------------------------------- */

static atomic_int ew_runs, ew_in_worker;
static struct execute_work ew_thread, ew_timer;
static atomic_int ew_timer_ret = -1;

static void ew_fn(struct work_struct *work)
{
	(void)work;
	if (current_work() != NULL)
		atomic_store(&ew_in_worker, 1);
	atomic_fetch_add(&ew_runs, 1);
}

static void ew_from_timer(struct timer_list *t)
{
	(void)t;
	atomic_store(&ew_timer_ret, execute_in_process_context(ew_fn, &ew_timer));
}

static void execute_in_process_context_from_a_thread_and_a_timer(void)
{
	/* From a thread: runs at once, here. */
	CHECK(execute_in_process_context(ew_fn, &ew_thread) == 0);
	CHECK(atomic_load(&ew_runs) == 1 && atomic_load(&ew_in_worker) == 0);
	/* From a timer callback (interrupt context): queued on system_percpu_wq. */
	struct timer_list t;
	timer_setup(&t, ew_from_timer, 0);
	mod_timer(&t, jiffies + 1);
	CHECK_SOON(atomic_load(&ew_timer_ret) == 1);
	CHECK_SOON(atomic_load(&ew_runs) == 2);
	CHECK(atomic_load(&ew_in_worker) == 1);
	flush_work(&ew_timer.work);
	timer_delete_sync(&t);
}

/* ---- rcu_work without a grace-period function --------------------------------- */

static atomic_int rcu_runs;
static void rcu_fn(struct work_struct *work)
{
	struct rcu_work *rw = to_rcu_work(work);

	(void)rw;
	atomic_fetch_add(&rcu_runs, 1);
}

static void rcu_work_without_rcu(void)
{
	struct rcu_work rw;

	INIT_RCU_WORK(&rw, rcu_fn);
	CHECK(queue_rcu_work(system_dfl_wq, &rw)); /* queued at once, with one message */
	CHECK(flush_rcu_work(&rw) || atomic_load(&rcu_runs) == 1);
	CHECK(atomic_load(&rcu_runs) == 1);
	CHECK(!queue_rcu_work(system_dfl_wq, NULL));
}

/* ---- initialisers, constants and names ------------------------------------------ */

static void nop_fn(struct work_struct *work) { (void)work; }
static atomic_int deferrable_runs;
static void deferrable_fn(struct work_struct *work)
{
	(void)work;
	atomic_fetch_add(&deferrable_runs, 1);
}
static DECLARE_DELAYED_WORK(static_dw, nop_fn);
static DECLARE_DEFERRABLE_WORK(static_deferrable, nop_fn);
static struct delayed_work three_arg = __DELAYED_WORK_INITIALIZER(three_arg, nop_fn, TIMER_IRQSAFE);

static void initialisers_and_constants(void)
{
	struct work_struct a, b, c;
	struct delayed_work d, e;
	static struct lock_class_key key;

	__INIT_WORK(&a, nop_fn, 0);
	__INIT_WORK_KEY(&b, nop_fn, 1, &key);
	INIT_WORK_ONSTACK_KEY(&c, nop_fn, &key);
	__INIT_DELAYED_WORK(&d, deferrable_fn, TIMER_DEFERRABLE);
	__INIT_DELAYED_WORK_ONSTACK(&e, nop_fn, 0);
	CHECK(a.func == nop_fn && b.func == nop_fn && c.func == nop_fn && d.work.func == deferrable_fn);
	CHECK(*work_data_bits(&a) == WORK_DATA_INIT());
	CHECK(WORK_DATA_STATIC_INIT() == (WORK_STRUCT_NO_POOL | WORK_STRUCT_STATIC));
	CHECK(d.timer.flags == TIMER_DEFERRABLE && e.timer.flags == 0);
	CHECK(d.timer.function == delayed_work_timer_fn);
	CHECK(static_dw.timer.function == delayed_work_timer_fn);
	CHECK(static_deferrable.timer.flags == TIMER_DEFERRABLE);
	CHECK(three_arg.timer.flags == TIMER_IRQSAFE);
	CHECK((WORK_OFFQ_BH & WORK_OFFQ_FLAG_MASK) == WORK_OFFQ_BH);
	CHECK((WORK_OFFQ_DISABLE_MASK & WORK_STRUCT_NO_POOL) == 0);
	CHECK((WORK_STRUCT_PWQ_MASK & WORK_STRUCT_PENDING) == 0);
	CHECK(WORK_OFFQ_LEFT > 0 && WORK_OFFQ_FLAG_BITS == 1);
	/* Queue the deferrable one: it behaves as a normal timer, and flushing
	 * runs it now (its return says whether it still had to wait). */
	CHECK(queue_delayed_work(system_dfl_wq, &d, 10000));
	(void)flush_delayed_work(&d);
	CHECK(atomic_load(&deferrable_runs) == 1);
	destroy_delayed_work_on_stack(&e);
	destroy_work_on_stack(&c);

	struct workqueue_attrs *attrs = alloc_workqueue_attrs_noprof();
	CHECK(attrs != NULL);
	free_workqueue_attrs(attrs);
	struct workqueue_struct *wq = alloc_workqueue_noprof("noprof_%d", WQ_UNBOUND, 0, 1);
	CHECK(wq != NULL);
	CHECK(workqueue_sysfs_register(wq) == 0);
	CHECK(workqueue_sysfs_register(wq) == -EEXIST);
	destroy_workqueue(wq);
	struct workqueue_struct *ord = alloc_ordered_workqueue("ordered_nosysfs", 0);
	CHECK(workqueue_sysfs_register(ord) == -EINVAL);
	destroy_workqueue(ord);
	struct workqueue_struct *frz = alloc_workqueue("freezable_one", WQ_FREEZABLE | WQ_UNBOUND, 0);
	show_freezable_workqueues();
	destroy_workqueue(frz);
}

/* ---- wq_worker_comm and print_worker_info ----------------------------------------- */

static char comm_in_item[64];
static atomic_int reclaim_seen = -1, plain_seen = -1;
static void reclaim_fn(struct work_struct *work)
{
	(void)work;
	atomic_store(&reclaim_seen, current_is_workqueue_mem_reclaim());
}
static void plain_reclaim_fn(struct work_struct *work)
{
	(void)work;
	atomic_store(&plain_seen, current_is_workqueue_mem_reclaim());
}
static void describe_fn(struct work_struct *work)
{
	(void)work;
	set_worker_desc("disk%d", 7);
	wq_worker_comm(comm_in_item, sizeof(comm_in_item), cmwq_current_task());
	print_worker_info("", cmwq_current_task());
}

static void worker_comm(void)
{
	struct work_struct w;
	char main_comm[64];

	INIT_WORK(&w, describe_fn);
	queue_work(system_dfl_wq, &w);
	flush_work(&w);
	CHECK(strstr(comm_in_item, "+disk7") != NULL);
	wq_worker_comm(main_comm, sizeof(main_comm), cmwq_current_task());
	CHECK(strchr(main_comm, '+') == NULL); /* not a worker */

	struct workqueue_struct *rwq = alloc_workqueue("reclaimer", WQ_MEM_RECLAIM | WQ_UNBOUND, 0);
	struct work_struct r, p;
	INIT_WORK(&r, reclaim_fn);
	INIT_WORK(&p, plain_reclaim_fn);
	queue_work(rwq, &r);
	queue_work(system_dfl_wq, &p);
	flush_work(&r);
	flush_work(&p);
	CHECK(atomic_load(&reclaim_seen) == 1 && atomic_load(&plain_seen) == 0);
	CHECK(!current_is_workqueue_mem_reclaim());
	destroy_workqueue(rwq);
}

/* Timers never set up (zeroed, or filled by hand) are not armed, whatever
 * their heap slot says; expiries "never" in the future do not wrap; the
 * 2026 timer.h names are there. */
static atomic_int far_runs;
static void far_timer_fn(struct timer_list *t)
{
	(void)t;
	atomic_fetch_add(&far_runs, 1);
}
static void far_work_fn(struct work_struct *w)
{
	(void)w;
	atomic_fetch_add(&far_runs, 1);
}

static void timers_not_set_up_and_far_expiries(void)
{
	static struct timer_list zeroed; /* static: all zero, never set up */
	struct timer_list armed;
	int before = atomic_load(&plain_runs);

	CHECK(timer_pending(&zeroed) == 0);
	CHECK(del_timer(&zeroed) == 0); /* no timer armed at all */
	timer_setup(&armed, plain_timer, 0);
	CHECK(mod_timer(&armed, jiffies + 20) == 0);
	CHECK(timer_pending(&zeroed) == 0);
	CHECK(del_timer(&zeroed) == 0); /* and the armed one stays armed */
	CHECK(timer_pending(&armed));
	CHECK_SOON(atomic_load(&plain_runs) == before + 1);

	/* The kernel's MAX_JIFFY_OFFSET: "never". Capped, not wrapped. */
	struct timer_list far;
	timer_setup(&far, far_timer_fn, 0);
	CHECK(mod_timer(&far, jiffies + (((unsigned long)LONG_MAX >> 1) - 1)) == 0);
	struct delayed_work fdw;
	INIT_DELAYED_WORK(&fdw, far_work_fn);
	CHECK(queue_delayed_work(system_dfl_wq, &fdw, ((unsigned long)LONG_MAX >> 1) - 1));
	msleep(300);
	CHECK(atomic_load(&far_runs) == 0);
	CHECK(timer_pending(&far));
	CHECK(delayed_work_pending(&fdw));
	CHECK(del_timer_sync(&far) == 1);
	CHECK(cancel_delayed_work_sync(&fdw));
	/* An expiry in the past (as time_after sees it) fires at once. */
	CHECK(mod_timer(&far, jiffies - 5) == 0);
	CHECK_SOON(atomic_load(&far_runs) == 1);

	/* The 6.9+ and 6.16+ names. */
	struct timer_list t;
	timer_setup(&t, plain_timer, 0);
	t.expires = jiffies + 60000;
	add_timer_local(&t);
	CHECK(timer_delete_sync_try(&t) == 1);
	t.expires = jiffies + 60000;
	add_timer_global(&t);
	CHECK(del_singleshot_timer_sync(&t) == 1);
	unsigned long now = jiffies;
	unsigned long r = round_jiffies(now + 5300);
	CHECK(r % 1000 == 0 && r >= now + 5000 && r <= now + 6300);
	r = round_jiffies_up(now + 5001);
	CHECK(r % 1000 == 0 && r >= now + 5001);
	unsigned long rel = round_jiffies_relative(5300);
	CHECK(rel >= 4700 && rel <= 6400);
}

/* ---- timer_reduce, shutdown, and a sync delete of a re-arming timer ---------- */

static atomic_int reduce_runs;
static void reduce_timer(struct timer_list *t)
{
	(void)t;
	atomic_fetch_add(&reduce_runs, 1);
}

/* timer_reduce moves a pending timer earlier, never later; on an idle
 * timer it arms it (returning 0, as mod_timer). */
static void timer_reduce_only_moves_earlier(void)
{
	struct timer_list t;

	timer_setup(&t, reduce_timer, 0);
	CHECK(mod_timer(&t, jiffies + 60000) == 0);
	unsigned long armed_at = t.expires;
	CHECK(timer_reduce(&t, jiffies + 120000) == 1); /* later: unchanged */
	CHECK(t.expires == armed_at);
	CHECK(timer_reduce(&t, jiffies + 1) == 1); /* earlier: moved, fires soon */
	CHECK(t.expires < armed_at);
	CHECK_SOON(atomic_load(&reduce_runs) == 1);
	CHECK(!timer_pending(&t));
	CHECK(timer_reduce(&t, jiffies + 60000) == 0); /* idle: armed */
	CHECK(timer_pending(&t));
	CHECK(timer_delete_sync(&t) == 1);
}

/* After timer_shutdown nothing arms the timer again: mod_timer returns 0
 * and it never fires. */
static void a_shut_down_timer_is_never_armed_again(void)
{
	struct timer_list t;

	timer_setup(&t, reduce_timer, 0);
	CHECK(mod_timer(&t, jiffies + 60000) == 0);
	CHECK(timer_shutdown_sync(&t) == 1);
	int before = atomic_load(&reduce_runs);
	CHECK(mod_timer(&t, jiffies + 1) == 0);
	CHECK(!timer_pending(&t));
	msleep(30);
	CHECK(atomic_load(&reduce_runs) == before);
}

/* A callback that re-arms its timer: timer_delete_sync, called while it
 * runs, waits for it and leaves the timer disarmed (the kernel's promise:
 * on return the timer is not queued and its callback is not running). */
static struct timer_list rearm_t;
static atomic_int rearm_runs, rearm_inside;
static void rearm_timer(struct timer_list *t)
{
	atomic_store(&rearm_inside, 1);
	atomic_fetch_add(&rearm_runs, 1);
	msleep(5);
	mod_timer(t, jiffies + 1);
	atomic_store(&rearm_inside, 0);
}

static void timer_delete_sync_disarms_a_rearming_timer(void)
{
	timer_setup(&rearm_t, rearm_timer, 0);
	mod_timer(&rearm_t, jiffies + 1);
	CHECK_SOON(atomic_load(&rearm_runs) >= 3);
	/* Delete while a callback is running, so its re-arm comes after the
	 * removal from the heap: the sync delete must remove that one too. */
	while (!atomic_load(&rearm_inside))
		;
	timer_delete_sync(&rearm_t);
	CHECK(!timer_pending(&rearm_t));
	CHECK(atomic_load(&rearm_inside) == 0);
	int after = atomic_load(&rearm_runs);
	msleep(30);
	CHECK(atomic_load(&rearm_runs) == after);
}

int main(void)
{
	driver_timer_and_work_teardown();
	timer_return_values();
	timers_not_set_up_and_far_expiries();
	del_timer_sync_waits();
	timer_reduce_only_moves_earlier();
	a_shut_down_timer_is_never_armed_again();
	timer_delete_sync_disarms_a_rearming_timer();
	execute_in_process_context_from_a_thread_and_a_timer();
	rcu_work_without_rcu();
	initialisers_and_constants();
	worker_comm();
	printf("kernel_timers: %d passed, %d failed\n", nr_passed, nr_failed);
	return nr_failed ? 1 : 0;
}
