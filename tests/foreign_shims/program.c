/*
 * A program with its own kernel shims, switched to cmwq's workqueue and
 * timer headers. CMWQ_FIRST picks the include order (cmwq's headers before
 * or after the program's own); OWN_TIMER is set when the program keeps its
 * own struct timer_list (own_timer/ comes first on the include path).
 * Exits 0 when every check passed; each failure prints one line.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#if CMWQ_FIRST
#include <linux/workqueue.h>
#include <linux/timer.h>
#endif
#include <linux/kernel.h>
#include <linux/list.h>
#include <linux/jiffies.h>
#include <linux/lockdep.h>
#include <linux/cpumask.h>
#include <urcu.h>
#if !CMWQ_FIRST
#include <linux/workqueue.h>
#include <linux/timer.h>
#endif
#include <cmwq/urcu.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* __atomic builtins: the same source builds as C11 and C++20. */
#define LOAD(v) __atomic_load_n(&(v), __ATOMIC_SEQ_CST)
#define STORE(v, x) __atomic_store_n(&(v), (x), __ATOMIC_SEQ_CST)
#define ADD(v, x) __atomic_fetch_add(&(v), (x), __ATOMIC_SEQ_CST)

static int failures;
#define CHECK(c)                                                              \
	do {                                                                  \
		if (!(c)) {                                                   \
			fprintf(stdout, "FAIL %s:%d: %s\n", __FILE__, __LINE__, #c); \
			failures++;                                           \
		}                                                             \
	} while (0)

/* The program's own per-thread state, as its kthread shim set it up. */
#define TASK_MAGIC 0x7a5c
struct task_struct {
	int magic;
	int kind;
	int rcu_registered;
};
static __thread struct task_struct *current;
static int hook_starts, hook_stops, timer_thread_started;

static void thread_start(enum cmwq_thread_kind kind, void *arg)
{
	struct task_struct *t = (struct task_struct *)calloc(1, sizeof(*t));
	(void)arg;
	t->magic = TASK_MAGIC;
	t->kind = (int)kind;
	rcu_register_thread();
	t->rcu_registered = 1;
	current = t;
	ADD(hook_starts, 1);
	if (kind == CMWQ_THREAD_TIMER)
		STORE(timer_thread_started, 1);
}

static void thread_stop(enum cmwq_thread_kind kind, void *arg)
{
	(void)kind;
	(void)arg;
	rcu_unregister_thread();
	free(current);
	current = NULL;
	ADD(hook_stops, 1);
}

/* What a work function of the program may rely on: its current, its RCU. */
static int thread_is_set_up(void)
{
	if (!current || current->magic != TASK_MAGIC || !current->rcu_registered)
		return 0;
	rcu_read_lock();
	rcu_read_unlock();
	return 1;
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Work items that sit on the program's own (liburcu) lists too. */
struct request {
	struct work_struct work;
	struct list_head node; /* the program's list_head: cds_list_head */
	int id;
};
static pthread_mutex_t done_lock = PTHREAD_MUTEX_INITIALIZER;
static LIST_HEAD(done_list);
static int set_up_ok, ran;

static void request_fn(struct work_struct *work)
{
	struct request *rq = container_of(work, struct request, work);
	if (thread_is_set_up())
		ADD(set_up_ok, 1);
	pthread_mutex_lock(&done_lock);
	list_add_tail(&rq->node, &done_list);
	pthread_mutex_unlock(&done_lock);
	ADD(ran, 1);
}

static unsigned long dwork_ran_at, dwork_ok;
static void dwork_fn(struct work_struct *work)
{
	(void)work;
	STORE(dwork_ok, (unsigned long)thread_is_set_up());
	STORE(dwork_ran_at, (unsigned long)now_ms());
}

static int rwork_ran;
static void rwork_fn(struct work_struct *work)
{
	(void)work;
	STORE(rwork_ran, thread_is_set_up() ? 1 : -1);
}

static struct timer_list program_timer;
static unsigned long timer_ran_at;
static int timer_ok;
static void timer_fn(struct timer_list *t)
{
	(void)t;
#ifndef OWN_TIMER
	STORE(timer_ok, thread_is_set_up() && cmwq_in_timer_callback());
#else
	STORE(timer_ok, 1); /* the program's own timer: its thread */
#endif
	STORE(timer_ran_at, (unsigned long)now_ms());
}

static int wait_for(unsigned long *v, int seconds)
{
	for (int i = 0; i < seconds * 1000 && !LOAD(*v); i++)
		usleep(1000);
	return LOAD(*v) != 0;
}

int main(void)
{
	struct cmwq_thread_hooks hooks = {thread_start, thread_stop, NULL};
	struct task_struct main_task = {TASK_MAGIC, -1, 1};
	rcu_register_thread();
	current = &main_task;
	CHECK(cmwq_set_thread_hooks(&hooks) == 0);
	cmwq_use_urcu();

	/* The program's own primitives are the ones in effect. */
	CHECK(num_online_cpus() == 1U);
	{
		int cpu, n = 0;
		for_each_online_cpu(cpu)
			n++;
		CHECK(n == 1);
	}
	CHECK(HZ == 1000);
	CHECK(msecs_to_jiffies(250) == 250);
	CHECK(lock_class_is_held(NULL) == 0);

	/* The 6.17 migration warnings stay off unless asked for: neither flag. */
	struct workqueue_struct *wq = alloc_workqueue("program_wq", 0, 0);
	struct workqueue_struct *uwq = alloc_workqueue("program_unbound", WQ_UNBOUND | WQ_MEM_RECLAIM, 4);
	CHECK(wq && uwq);
	if (!wq || !uwq)
		return 1;

	enum { N = 64 };
	static struct request rqs[N];
	static struct lock_class_key key;
	for (int i = 0; i < N; i++) {
		rqs[i].id = i;
		INIT_LIST_HEAD(&rqs[i].node);
		if (i % 2)
			INIT_WORK(&rqs[i].work, request_fn);
		else
			INIT_WORK_ONSTACK_KEY(&rqs[i].work, request_fn, &key);
		CHECK(queue_work(i % 3 ? wq : uwq, &rqs[i].work));
	}
	flush_workqueue(wq);
	flush_workqueue(uwq);
	CHECK(LOAD(ran) == N);
	CHECK(LOAD(set_up_ok) == N);
	{
		int n = 0;
		struct request *rq;
		list_for_each_entry(rq, &done_list, node)
			n++;
		CHECK(n == N);
		/* Off queue, a work item's node is the kernel's empty list. */
		for (int i = 0; i < N; i++)
			CHECK(list_empty(&rqs[i].work.entry));
	}

	/* A deprecated system workqueue: quiet too. */
	{
		static struct request one;
		INIT_WORK(&one.work, request_fn);
		CHECK(queue_work(system_unbound_wq, &one.work));
		flush_work(&one.work); /* true or false: it may have run already */
		CHECK(LOAD(ran) == N + 1);
	}

	/* Delayed work, on cmwq's timer thread in both configurations. */
	{
		static struct delayed_work dw;
		INIT_DELAYED_WORK(&dw, dwork_fn);
		uint64_t t0 = now_ms();
		CHECK(queue_delayed_work(uwq, &dw, msecs_to_jiffies(20)));
		CHECK(wait_for(&dwork_ran_at, 10));
		CHECK(LOAD(dwork_ran_at) >= t0 + 19);
		CHECK(LOAD(dwork_ok) == 1);
		CHECK(!cancel_delayed_work_sync(&dw));
	}

	/* Timers armed with the program's own jiffies. */
	{
		uint64_t t0 = now_ms();
		timer_setup(&program_timer, timer_fn, 0);
		CHECK(mod_timer(&program_timer, jiffies + msecs_to_jiffies(30)) == 0);
		CHECK(wait_for(&timer_ran_at, 10));
#ifndef OWN_TIMER
		/* The program's coarse clock may run up to a tick behind. */
		CHECK(LOAD(timer_ran_at) >= t0 + 20);
		CHECK(LOAD(timer_thread_started) == 1);
#else
		(void)t0;
#endif
		CHECK(LOAD(timer_ok) == 1);
		CHECK(del_timer_sync(&program_timer) == 0);
	}

	/* rcu_work after a liburcu grace period. */
	{
		static struct rcu_work rw;
		INIT_RCU_WORK(&rw, rwork_fn);
		CHECK(queue_rcu_work(uwq, &rw));
		flush_rcu_work(&rw); /* it may have run already */
		CHECK(LOAD(rwork_ran) == 1);
	}

	destroy_workqueue(wq);
	destroy_workqueue(uwq);
	CHECK(LOAD(hook_starts) > 0);
	printf("%s: %d checks failed; %d library threads started with the hooks\n",
	       failures ? "FAIL" : "ok", failures, LOAD(hook_starts));
	return failures ? 1 : 0;
}
