/*
 * c_api.c - the kernel-style C API seen from C: the return values of
 * queue/cancel/flush/disable and the orderings they promise.
 *
 * Plain C11 with no test framework, so it also runs as an installed-package
 * consumer (built with pkg-config, tests/test_install.cmake). Each check that
 * needs an item to stay pending parks it behind a blocker on an ordered
 * workqueue rather than relying on timing. Prints "N passed, M failed";
 * exits non-zero on any failure.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>

#include <cmwq/linux/delay.h>
#include <cmwq/linux/workqueue.h>

#include "c_check.h"

/* ---- helpers ------------------------------------------------------------- */

/* A work item that counts its runs and remembers what current_work() said. */
struct counted {
	struct work_struct work;
	atomic_int runs;
	atomic_int saw_self; /* current_work() == &work inside the function */
};

static void counted_fn(struct work_struct *work)
{
	struct counted *c = container_of(work, struct counted, work);

	if (current_work() == work)
		atomic_store(&c->saw_self, 1);
	atomic_fetch_add(&c->runs, 1);
}

static void counted_init(struct counted *c)
{
	INIT_WORK(&c->work, counted_fn);
	atomic_store(&c->runs, 0);
	atomic_store(&c->saw_self, 0);
}

/* Occupies an ordered workqueue until released, so later items stay pending. */
struct blocker {
	struct work_struct work;
	atomic_int started;
	atomic_int release;
};

static void blocker_fn(struct work_struct *work)
{
	struct blocker *b = container_of(work, struct blocker, work);

	atomic_store(&b->started, 1);
	while (!atomic_load(&b->release))
		msleep(1);
}

static void blocker_start(struct blocker *b, struct workqueue_struct *ordered)
{
	INIT_WORK(&b->work, blocker_fn);
	atomic_store(&b->started, 0);
	atomic_store(&b->release, 0);
	CHECK(queue_work(ordered, &b->work));
	CHECK_SOON(atomic_load(&b->started));
}

/*
 * A work item that sleeps while running, to be caught mid-flight: the sleep
 * is the margin the waiter has to start waiting, long enough for a loaded
 * sanitizer build.
 */
struct sleeper {
	struct work_struct work;
	atomic_int started;
	atomic_int finished;
};

static void sleeper_fn(struct work_struct *work)
{
	struct sleeper *s = container_of(work, struct sleeper, work);

	atomic_store(&s->started, 1);
	msleep(200);
	atomic_store(&s->finished, 1);
}

/* ---- the checks ---------------------------------------------------------- */

static void idle_item_reports_nothing_to_do(void)
{
	struct counted c;

	counted_init(&c);
	CHECK(!work_pending(&c.work));
	CHECK(work_busy(&c.work) == 0);
	CHECK(!flush_work(&c.work));
	CHECK(!cancel_work(&c.work));
	CHECK(!cancel_work_sync(&c.work));
	CHECK(current_work() == NULL);
	CHECK(!current_is_workqueue_rescuer());
}

static void queue_returns_false_while_pending_and_cancel_removes_once(struct workqueue_struct *ordered)
{
	struct blocker b;
	struct counted c;

	counted_init(&c);
	blocker_start(&b, ordered);
	CHECK(work_busy(&b.work) & WORK_BUSY_RUNNING);

	CHECK(queue_work(ordered, &c.work));
	CHECK(!queue_work(ordered, &c.work));
	CHECK(work_pending(&c.work));
	CHECK(work_busy(&c.work) & WORK_BUSY_PENDING);
	CHECK(cancel_work(&c.work));
	CHECK(!cancel_work(&c.work));
	CHECK(!work_pending(&c.work));

	CHECK(queue_work(ordered, &c.work));
	atomic_store(&b.release, 1);
	flush_work(&c.work); /* true or false: c may finish before it looks */
	CHECK(atomic_load(&c.runs) == 1);
	CHECK(atomic_load(&c.saw_self) == 1);
	CHECK(!flush_work(&c.work));
	CHECK(!flush_work(&b.work)); /* finished before c started */
}

static void disabled_item_is_not_queued_until_enabled(struct workqueue_struct *ordered)
{
	struct blocker b;
	struct counted c;

	counted_init(&c);
	blocker_start(&b, ordered);

	CHECK(!disable_work(&c.work)); /* it was not pending */
	CHECK(!queue_work(ordered, &c.work));
	CHECK(disable_work(&c.work) == false); /* nests */
	CHECK(!enable_work(&c.work));          /* depth 2 -> 1: still disabled */
	CHECK(!queue_work(ordered, &c.work));
	CHECK(enable_work(&c.work));           /* depth 1 -> 0 */
	CHECK(queue_work(ordered, &c.work));
	CHECK(disable_work(&c.work));          /* cancelled the pending instance */
	CHECK(!work_pending(&c.work));
	CHECK(enable_work(&c.work));
	CHECK(queue_work(ordered, &c.work));

	atomic_store(&b.release, 1);
	flush_workqueue(ordered);
	CHECK(atomic_load(&c.runs) == 1);
}

static void cancel_sync_waits_for_running_instance(struct workqueue_struct *wq)
{
	struct sleeper s;

	INIT_WORK(&s.work, sleeper_fn);
	atomic_store(&s.started, 0);
	atomic_store(&s.finished, 0);
	CHECK(queue_work(wq, &s.work));
	CHECK_SOON(atomic_load(&s.started));
	CHECK(!cancel_work(&s.work)); /* running, not pending */
	CHECK(!cancel_work_sync(&s.work));
	CHECK(atomic_load(&s.finished) == 1);

	atomic_store(&s.started, 0);
	atomic_store(&s.finished, 0);
	CHECK(queue_work(wq, &s.work));
	CHECK_SOON(atomic_load(&s.started));
	CHECK(flush_work(&s.work)); /* waited for the running instance */
	CHECK(atomic_load(&s.finished) == 1);
}

/* Requeues itself once from inside: PENDING is clear while it runs. */
static atomic_int requeue_runs, requeue_result = -1;
static struct workqueue_struct *requeue_wq;

static void requeue_fn(struct work_struct *work)
{
	if (atomic_fetch_add(&requeue_runs, 1) == 0)
		atomic_store(&requeue_result, queue_work(requeue_wq, work));
}

static void running_item_can_requeue_itself(struct workqueue_struct *wq)
{
	struct work_struct w;

	INIT_WORK(&w, requeue_fn);
	requeue_wq = wq;
	CHECK(queue_work(wq, &w));
	CHECK_SOON(atomic_load(&requeue_runs) == 2);
	flush_work(&w);
	CHECK(atomic_load(&requeue_result) == 1);
}

struct timed {
	struct delayed_work dwork;
	atomic_int runs;
	atomic_ulong ran_at; /* jiffies */
};

static void timed_fn(struct work_struct *work)
{
	struct timed *t = container_of(to_delayed_work(work), struct timed, dwork);

	atomic_store(&t->ran_at, jiffies);
	atomic_fetch_add(&t->runs, 1);
}

static void delayed_work_return_values(struct workqueue_struct *wq)
{
	struct timed t;

	INIT_DELAYED_WORK(&t.dwork, timed_fn);
	atomic_store(&t.runs, 0);
	atomic_store(&t.ran_at, 0);

	CHECK(queue_delayed_work(wq, &t.dwork, 10000));
	CHECK(!queue_delayed_work(wq, &t.dwork, 10000));
	CHECK(delayed_work_pending(&t.dwork));
	CHECK(mod_delayed_work(wq, &t.dwork, 20000)); /* true: it was pending */
	CHECK(cancel_delayed_work(&t.dwork));
	CHECK(!cancel_delayed_work(&t.dwork));
	CHECK(!delayed_work_pending(&t.dwork));

	CHECK(!mod_delayed_work(wq, &t.dwork, 10000)); /* false: it was idle... */
	CHECK(delayed_work_pending(&t.dwork));         /* ...but it is queued now */
	CHECK(cancel_delayed_work_sync(&t.dwork));
	CHECK(!cancel_delayed_work_sync(&t.dwork));
	CHECK(atomic_load(&t.runs) == 0);

	/*
	 * flush_delayed_work fires an armed timer at once and waits. (Its
	 * result is racy, as in the kernel: the item may finish before
	 * flush_work looks at it.)
	 */
	CHECK(queue_delayed_work(wq, &t.dwork, 10000));
	flush_delayed_work(&t.dwork);
	CHECK(atomic_load(&t.runs) == 1);
	CHECK(!delayed_work_pending(&t.dwork));

	/* Delay 0 queues without a timer. */
	CHECK(queue_delayed_work(wq, &t.dwork, 0));
	flush_workqueue(wq);
	CHECK(atomic_load(&t.runs) == 2);

	/* A delay is a lower bound. */
	unsigned long j0 = jiffies;
	CHECK(queue_delayed_work(wq, &t.dwork, msecs_to_jiffies(20)));
	CHECK_SOON(atomic_load(&t.runs) == 3);
	CHECK(atomic_load(&t.ran_at) - j0 >= 20);
	flush_delayed_work(&t.dwork);
}

struct rearming {
	struct delayed_work dwork;
	struct workqueue_struct *wq;
	atomic_int ticks;
};

static void rearming_fn(struct work_struct *work)
{
	struct rearming *r = container_of(to_delayed_work(work), struct rearming, dwork);

	atomic_fetch_add(&r->ticks, 1);
	queue_delayed_work(r->wq, &r->dwork, 1);
}

static void cancel_delayed_sync_stops_self_rearming_work(struct workqueue_struct *wq)
{
	struct rearming r;

	INIT_DELAYED_WORK(&r.dwork, rearming_fn);
	r.wq = wq;
	atomic_store(&r.ticks, 0);
	CHECK(queue_delayed_work(wq, &r.dwork, 1));
	CHECK_SOON(atomic_load(&r.ticks) >= 3);
	cancel_delayed_work_sync(&r.dwork);
	int ticks = atomic_load(&r.ticks);
	CHECK(!delayed_work_pending(&r.dwork));
	msleep(20);
	CHECK(atomic_load(&r.ticks) == ticks);
}

#define NR_ORDERED 200
static atomic_int ordered_next;
static atomic_int ordered_misplaced;

struct seq_item {
	struct work_struct work;
	int seq;
};

static void seq_fn(struct work_struct *work)
{
	struct seq_item *s = container_of(work, struct seq_item, work);

	if (atomic_fetch_add(&ordered_next, 1) != s->seq)
		atomic_fetch_add(&ordered_misplaced, 1);
}

static void ordered_wq_runs_one_at_a_time_in_queue_order(struct workqueue_struct *ordered)
{
	static struct seq_item items[NR_ORDERED];

	for (int i = 0; i < NR_ORDERED; i++) {
		items[i].seq = i;
		INIT_WORK(&items[i].work, seq_fn);
		CHECK(queue_work(ordered, &items[i].work));
	}
	flush_workqueue(ordered);
	CHECK(atomic_load(&ordered_next) == NR_ORDERED);
	CHECK(atomic_load(&ordered_misplaced) == 0);
}

static void destroy_workqueue_drains_pending_items(void)
{
	struct counted c[16];
	struct workqueue_struct *wq = alloc_workqueue("c_api_drain", WQ_UNBOUND, 2);

	CHECK(wq != NULL);
	if (!wq)
		return;
	for (int i = 0; i < 16; i++) {
		counted_init(&c[i]);
		CHECK(queue_work(wq, &c[i].work));
	}
	destroy_workqueue(wq);
	for (int i = 0; i < 16; i++)
		CHECK(atomic_load(&c[i].runs) == 1);
}

/* Chain-queues itself `left` more times; drain_workqueue waits for all. */
static atomic_int chain_left, chain_runs;
static struct workqueue_struct *chain_wq;

static void chain_fn(struct work_struct *work)
{
	atomic_fetch_add(&chain_runs, 1);
	if (atomic_fetch_sub(&chain_left, 1) > 1)
		queue_work(chain_wq, work);
}

static void drain_waits_for_chained_work(struct workqueue_struct *wq)
{
	struct work_struct w;

	INIT_WORK(&w, chain_fn);
	chain_wq = wq;
	atomic_store(&chain_left, 8);
	CHECK(queue_work(wq, &w));
	drain_workqueue(wq);
	CHECK(atomic_load(&chain_runs) == 8);
	CHECK(!work_pending(&w));
	CHECK(queue_work(wq, &w)); /* drain ended: queueing works again */
	flush_work(&w);
}

static long twice(void *arg)
{
	return 2 * (long)(intptr_t)arg;
}

static atomic_int on_each_cpu_runs;

static void on_each_cpu_fn(struct work_struct *work)
{
	(void)work;
	atomic_fetch_add(&on_each_cpu_runs, 1);
}

static void per_cpu_helpers(void)
{
	int cpu = cpumask_first(cpu_online_mask);

	CHECK(cpu < NR_CPUS);
	CHECK(num_online_cpus() >= 1);
	CHECK(work_on_cpu(cpu, twice, (void *)(intptr_t)21) == 42);
	CHECK(schedule_on_each_cpu(on_each_cpu_fn) == 0);
	CHECK(atomic_load(&on_each_cpu_runs) == num_online_cpus());

	struct counted c;
	counted_init(&c);
	CHECK(schedule_work(&c.work));
	flush_work(&c.work);
	CHECK(atomic_load(&c.runs) == 1);
	CHECK(queue_work_on(cpu, system_percpu_wq, &c.work));
	flush_work(&c.work);
	CHECK(atomic_load(&c.runs) == 2);
}

static void freezable_wq_holds_new_items_until_thaw(void)
{
	struct workqueue_struct *wq = alloc_workqueue("c_api_freezable", WQ_FREEZABLE | WQ_UNBOUND, 0);
	struct counted c;

	CHECK(wq != NULL);
	if (!wq)
		return;
	counted_init(&c);
	freeze_workqueues_begin();
	CHECK(queue_work(wq, &c.work));
	msleep(20);
	CHECK(atomic_load(&c.runs) == 0);
	CHECK(work_pending(&c.work));
	thaw_workqueues();
	flush_work(&c.work);
	CHECK(atomic_load(&c.runs) == 1);
	destroy_workqueue(wq);
}

static void alloc_workqueue_rejects_bad_flags_and_clamps_max_active(void)
{
	struct workqueue_struct *wq;

	fprintf(stderr, "c_api: the next messages about \"c_api_bad\" and \"c_api_clamped\" are expected\n");
	CHECK(alloc_workqueue("c_api_bad", WQ_BH | WQ_UNBOUND, 0) == NULL);
	wq = alloc_workqueue("c_api_clamped", WQ_UNBOUND, WQ_MAX_ACTIVE + 100);
	CHECK(wq != NULL);
	if (wq)
		destroy_workqueue(wq);
}

int main(void)
{
	struct workqueue_struct *ordered, *unbound, *percpu;

	cmwq_init();
	CHECK(system_wq != NULL);
	CHECK(system_unbound_wq != NULL);

	ordered = alloc_ordered_workqueue("c_api_ordered", 0);
	unbound = alloc_workqueue("c_api_unbound", WQ_UNBOUND, 0);
	percpu = alloc_workqueue("c_api_%s", WQ_PERCPU, 0, "percpu");
	CHECK(ordered && unbound && percpu);
	if (!ordered || !unbound || !percpu) {
		fprintf(stderr, "%d passed, %d failed\n", nr_passed, nr_failed);
		return 1;
	}

	idle_item_reports_nothing_to_do();
	queue_returns_false_while_pending_and_cancel_removes_once(ordered);
	disabled_item_is_not_queued_until_enabled(ordered);
	cancel_sync_waits_for_running_instance(unbound);
	cancel_sync_waits_for_running_instance(percpu);
	running_item_can_requeue_itself(percpu);
	delayed_work_return_values(unbound);
	delayed_work_return_values(percpu);
	cancel_delayed_sync_stops_self_rearming_work(unbound);
	ordered_wq_runs_one_at_a_time_in_queue_order(ordered);
	destroy_workqueue_drains_pending_items();
	drain_waits_for_chained_work(unbound);
	per_cpu_helpers();
	freezable_wq_holds_new_items_until_thaw();
	alloc_workqueue_rejects_bad_flags_and_clamps_max_active();

	destroy_workqueue(percpu);
	destroy_workqueue(unbound);
	destroy_workqueue(ordered);

	printf("%d passed, %d failed\n", nr_passed, nr_failed);
	return nr_failed ? 1 : 0;
}
