/*
 * cmwq/linux/workqueue.h - the kernel's workqueue API, for user space.
 *
 * Kernel-style code (struct work_struct, alloc_workqueue, queue_work, ...)
 * compiles unchanged as C11 or C++ against this header. Names, signatures,
 * flag values and return values follow include/linux/workqueue.h; where user
 * space forces a difference it is named in the comment of the declaration and
 * in docs/design.md ("Differences from the kernel").
 *
 * Context rules: "any context" below means any thread, including a work
 * function; nothing here is async-signal-safe. "May sleep" functions must not
 * be called with a lock held that a work item they wait for needs.
 */
#ifndef CMWQ_LINUX_WORKQUEUE_H
#define CMWQ_LINUX_WORKQUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <cmwq/linux/shims.h>
#include <cmwq/linux/list.h>
#include <cmwq/linux/jiffies.h>
#include <cmwq/linux/lockdep.h>
#include <cmwq/linux/cpumask.h>
#include <cmwq/linux/timer_types.h>

#include <cmwq/export.h>
CMWQ_BEGIN_PUBLIC

#ifdef __cplusplus
extern "C" {
#endif

/* ---- basic kernel helpers ------------------------------------------------ */

#ifndef __printf
#define __printf(a, b) __attribute__((format(printf, a, b)))
#endif

/*
 * A work item's list node is the program's struct list_head when it has
 * one (<cmwq/linux/list.h>): it must be the kernel's layout, two pointers,
 * next then prev.
 */
CMWQ_STATIC_ASSERT(sizeof(struct list_head) == 2 * sizeof(void *) &&
			   offsetof(struct list_head, next) == 0 &&
			   offsetof(struct list_head, prev) == sizeof(void *),
		   "cmwq: struct list_head must be two pointers, next then prev (the kernel's layout)");

/* ---- work items ---------------------------------------------------------- */

struct work_struct;
struct workqueue_struct;
typedef void (*work_func_t)(struct work_struct *work);

/*
 * The state word `data` holds PENDING and, while queued, the pool_workqueue
 * pointer; off queue it holds the last pool id and the disable depth (the
 * kernel's layout, see docs/design.md). Touch it only through this API.
 */
struct work_struct {
	unsigned long data;      /* A: atomic state word */
	struct list_head entry;  /* L: pool->lock of the pool it is queued on */
	work_func_t func;
	/*
	 * cmwq: an optional name shown instead of func's symbol in the state
	 * dump, hog and watchdog reports and the execute_start probe (the C++
	 * API names every item). NULL for none; see cmwq_set_work_name().
	 */
	const char *name;
};

/* The timer is a struct timer_list unless the program keeps its own timers
 * (<cmwq/linux/timer_types.h>); either way it has the same layout. */
struct delayed_work {
	struct work_struct work;
	struct cmwq_timer_list timer;
	struct workqueue_struct *wq; /* target remembered for the timer */
	int cpu;
};

enum {
	WORK_STRUCT_PENDING_BIT = 0,
	WORK_STRUCT_INACTIVE_BIT = 1,
	WORK_STRUCT_PWQ_BIT = 2,
	WORK_STRUCT_LINKED_BIT = 3,
	WORK_STRUCT_FLAG_BITS = 4,
	WORK_STRUCT_COLOR_SHIFT = WORK_STRUCT_FLAG_BITS,
	WORK_STRUCT_COLOR_BITS = 4,
	WORK_STRUCT_PWQ_SHIFT = WORK_STRUCT_COLOR_SHIFT + WORK_STRUCT_COLOR_BITS,
	WORK_NR_COLORS = 1 << WORK_STRUCT_COLOR_BITS,
	WORK_OFFQ_FLAG_SHIFT = WORK_STRUCT_FLAG_BITS,
	WORK_OFFQ_BH_BIT = WORK_OFFQ_FLAG_SHIFT,
	WORK_OFFQ_FLAG_END = WORK_OFFQ_BH_BIT + 1,
	WORK_OFFQ_FLAG_BITS = WORK_OFFQ_FLAG_END - WORK_OFFQ_FLAG_SHIFT,
	WORK_OFFQ_DISABLE_SHIFT = WORK_OFFQ_FLAG_SHIFT + 1,
	WORK_OFFQ_DISABLE_BITS = 16,
	WORK_OFFQ_POOL_SHIFT = WORK_OFFQ_DISABLE_SHIFT + WORK_OFFQ_DISABLE_BITS,
	WORK_OFFQ_POOL_BITS = 31,
	WORK_OFFQ_LEFT = 64 - WORK_OFFQ_POOL_SHIFT,
};

#define WORK_STRUCT_PENDING (1UL << WORK_STRUCT_PENDING_BIT)
#define WORK_STRUCT_INACTIVE (1UL << WORK_STRUCT_INACTIVE_BIT)
#define WORK_STRUCT_PWQ (1UL << WORK_STRUCT_PWQ_BIT)
#define WORK_STRUCT_LINKED (1UL << WORK_STRUCT_LINKED_BIT)
#define WORK_OFFQ_POOL_NONE ((1UL << WORK_OFFQ_POOL_BITS) - 1)
#define WORK_STRUCT_NO_POOL (WORK_OFFQ_POOL_NONE << WORK_OFFQ_POOL_SHIFT)
/* The kernel's STATIC bit exists only under CONFIG_DEBUG_OBJECTS_WORK; here
 * cmwq.debug_objects tracks items without a bit, so it is 0. */
#define WORK_STRUCT_STATIC 0UL
#define WORK_STRUCT_PWQ_MASK (~((1UL << WORK_STRUCT_PWQ_SHIFT) - 1))
#define WORK_STRUCT_WQ_DATA_MASK WORK_STRUCT_PWQ_MASK
#define WORK_OFFQ_BH (1UL << WORK_OFFQ_BH_BIT)
#define WORK_OFFQ_FLAG_MASK (((1UL << WORK_OFFQ_FLAG_BITS) - 1) << WORK_OFFQ_FLAG_SHIFT)
#define WORK_OFFQ_DISABLE_MASK (((1UL << WORK_OFFQ_DISABLE_BITS) - 1) << WORK_OFFQ_DISABLE_SHIFT)
/* The state word as the kernel's bit operations take it (read-only here:
 * changing bits behind the engine's back loses items). */
#define work_data_bits(work) ((unsigned long *)(&(work)->data))
#define WORK_DATA_INIT() (WORK_STRUCT_NO_POOL)
#define WORK_DATA_STATIC_INIT() (WORK_STRUCT_NO_POOL | WORK_STRUCT_STATIC)

#define WORK_BUSY_PENDING 1
#define WORK_BUSY_RUNNING 2

/* Any CPU: the queueing thread's current CPU (per-CPU wq) or its pod. */
#define WORK_CPU_UNBOUND CMWQ_NR_CPUS

#define __WORK_INITIALIZER(n, f) \
	{ WORK_STRUCT_NO_POOL, { &(n).entry, &(n).entry }, (f), NULL }
/* The timer function of every delayed work (the kernel exports it too). */
void delayed_work_timer_fn(struct cmwq_timer_list *t);

#define __DELAYED_WORK_INITIALIZER(n, f, tflags) \
	{ __WORK_INITIALIZER((n).work, (f)), CMWQ_TIMER_INITIALIZER(delayed_work_timer_fn, (tflags)), NULL, \
	  WORK_CPU_UNBOUND }

#define DECLARE_WORK(n, f) struct work_struct n = __WORK_INITIALIZER(n, f)
#define DECLARE_DELAYED_WORK(n, f) \
	struct delayed_work n = __DELAYED_WORK_INITIALIZER(n, f, 0)

/*
 * cmwq.debug_objects=1 (the kernel's CONFIG_DEBUG_OBJECTS_WORK): the library
 * tracks work items, and INIT_WORK asks it first. Non-zero while on.
 */
extern int cmwq_debug_objects;
/*
 * For INIT_WORK under cmwq.debug_objects: true (with a message naming the
 * item's function and its workqueue) if w is queued or its timer is armed,
 * and then INIT_WORK leaves it as it is, so the queued item is not lost.
 */
bool cmwq_debug_init_work(struct work_struct *w);

static inline void cmwq_init_work_fields(struct work_struct *w, work_func_t f)
{
	w->data = WORK_STRUCT_NO_POOL;
	w->entry.next = &w->entry;
	w->entry.prev = &w->entry;
	w->func = f;
	w->name = NULL;
}

static inline void cmwq_init_work(struct work_struct *w, work_func_t f)
{
	if (__atomic_load_n(&cmwq_debug_objects, __ATOMIC_RELAXED) && cmwq_debug_init_work(w))
		return;
	cmwq_init_work_fields(w, f);
}

static inline void cmwq_init_delayed_work_flags(struct delayed_work *dw, work_func_t f, unsigned int tflags)
{
	if (__atomic_load_n(&cmwq_debug_objects, __ATOMIC_RELAXED) && cmwq_debug_init_work(&dw->work))
		return;
	cmwq_init_work_fields(&dw->work, f);
	dw->timer.expires = 0;
	dw->timer.function = delayed_work_timer_fn;
	dw->timer.flags = tflags;
	dw->timer.heap_index = -1;
	dw->timer.expires_ns = 0;
	dw->wq = NULL;
	dw->cpu = WORK_CPU_UNBOUND;
}
#define cmwq_init_delayed_work(dw, f) cmwq_init_delayed_work_flags((dw), (f), 0)

#define INIT_WORK(w, f) cmwq_init_work((w), (f))
#define INIT_WORK_ONSTACK(w, f) cmwq_init_work((w), (f))
/* The kernel's lower-level forms: on-stack and lockdep keys change nothing. */
#define __INIT_WORK_KEY(w, f, onstack, key) ((void)(onstack), (void)(key), cmwq_init_work((w), (f)))
#define __INIT_WORK(w, f, onstack) __INIT_WORK_KEY((w), (f), (onstack), NULL)
#define INIT_WORK_ONSTACK_KEY(w, f, key) __INIT_WORK_KEY((w), (f), 1, (key))
#define __INIT_DELAYED_WORK(dw, f, tflags) cmwq_init_delayed_work_flags((dw), (f), (tflags))
#define __INIT_DELAYED_WORK_ONSTACK(dw, f, tflags) cmwq_init_delayed_work_flags((dw), (f), (tflags))
#define INIT_DELAYED_WORK(dw, f) __INIT_DELAYED_WORK((dw), (f), 0)
#define INIT_DELAYED_WORK_ONSTACK(dw, f) __INIT_DELAYED_WORK_ONSTACK((dw), (f), 0)
/* Deferrable timers behave as normal timers here (TIMER_DEFERRABLE is kept
 * in timer.flags; one timer thread, no idle CPUs to spare). */
#define INIT_DEFERRABLE_WORK(dw, f) __INIT_DELAYED_WORK((dw), (f), CMWQ_TIMER_DEFERRABLE)
#define INIT_DEFERRABLE_WORK_ONSTACK(dw, f) __INIT_DELAYED_WORK_ONSTACK((dw), (f), CMWQ_TIMER_DEFERRABLE)
#define DECLARE_DEFERRABLE_WORK(n, f) \
	struct delayed_work n = __DELAYED_WORK_INITIALIZER(n, f, CMWQ_TIMER_DEFERRABLE)
/* The work_struct (or delayed_work) containing a field, from the work
 * pointer a work function gets (the tasklet-to-BH conversions' helper). */
#define from_work(var, callback_work, work_fieldname) \
	cmwq_container_of(callback_work, __typeof__(*var), work_fieldname)
/* The kernel's length of a worker description (set_worker_desc). */
#define WORKER_DESC_LEN 32
static inline void destroy_work_on_stack(struct work_struct *w) { (void)w; }
static inline void destroy_delayed_work_on_stack(struct delayed_work *dw) { (void)dw; }

/* Racy snapshot of PENDING (kernel: test_bit). */
static inline bool work_pending(const struct work_struct *w)
{
	return __atomic_load_n(&w->data, __ATOMIC_ACQUIRE) & WORK_STRUCT_PENDING;
}
#define delayed_work_pending(dw) work_pending(&(dw)->work)

static inline struct delayed_work *to_delayed_work(struct work_struct *w)
{
	return cmwq_container_of(w, struct delayed_work, work);
}

/* ---- workqueues ---------------------------------------------------------- */

struct workqueue_struct;

enum wq_flags {
	WQ_BH = 1 << 0,
	WQ_UNBOUND = 1 << 1,
	WQ_FREEZABLE = 1 << 2,
	WQ_MEM_RECLAIM = 1 << 3,
	WQ_HIGHPRI = 1 << 4,
	WQ_CPU_INTENSIVE = 1 << 5,
	WQ_SYSFS = 1 << 6,
	WQ_POWER_EFFICIENT = 1 << 7,
	WQ_PERCPU = 1 << 8,
	__WQ_DESTROYING = 1 << 15,
	__WQ_DRAINING = 1 << 16,
	__WQ_ORDERED = 1 << 17,
	__WQ_LEGACY = 1 << 18,
	__WQ_DEPRECATED = 1 << 19,
	__WQ_BH_ALLOWS = WQ_BH | WQ_HIGHPRI | WQ_PERCPU,
};

enum wq_consts {
	WQ_MAX_ACTIVE = 2048,
	WQ_UNBOUND_MAX_ACTIVE = WQ_MAX_ACTIVE,
	WQ_DFL_ACTIVE = WQ_MAX_ACTIVE / 2,
	WQ_DFL_MIN_ACTIVE = 8,
};

#define WQ_NAME_LEN 32

enum wq_affn_scope {
	WQ_AFFN_DFL,
	WQ_AFFN_CPU,
	WQ_AFFN_SMT,
	WQ_AFFN_CACHE,
	WQ_AFFN_CACHE_SHARD,
	WQ_AFFN_NUMA,
	WQ_AFFN_SYSTEM,
	WQ_AFFN_NR_TYPES,
};

struct workqueue_attrs {
	int nice;                 /* [-20, 19] */
	struct cmwq_cpumask cpumask[1];       /* allowed CPUs (cpumask_var_t) */
	struct cmwq_cpumask __pod_cpumask[1]; /* internal */
	bool affn_strict;
	enum wq_affn_scope affn_scope;
	bool ordered;
};

/*
 * alloc_workqueue - create a workqueue. May sleep. Returns NULL on invalid
 * flags (WQ_BH with flags other than WQ_HIGHPRI/WQ_PERCPU or a non-zero
 * max_active) with a message naming the workqueue and what is accepted, or
 * when resources run out. max_active 0 means WQ_DFL_ACTIVE; other values are
 * clamped to [1, WQ_MAX_ACTIVE] with a warning naming the workqueue.
 */
struct workqueue_struct *alloc_workqueue(const char *fmt, unsigned int flags,
					 int max_active, ...) __printf(1, 4);
#define alloc_ordered_workqueue(fmt, flags, ...) \
	alloc_workqueue(fmt, WQ_UNBOUND | __WQ_ORDERED | (flags), 1, ##__VA_ARGS__)
/* The lockdep-map variants: the map is accepted and ignored (no lockdep). */
/* The memory-allocation-profiling names (the kernel's *_noprof). */
#define alloc_workqueue_noprof(fmt, flags, max_active, ...) \
	alloc_workqueue(fmt, (flags), (max_active), ##__VA_ARGS__)
#define alloc_workqueue_attrs_noprof() alloc_workqueue_attrs()
#define alloc_workqueue_lockdep_map(fmt, flags, max_active, lockdep_map, ...) \
	((void)(lockdep_map), alloc_workqueue(fmt, (flags), (max_active), ##__VA_ARGS__))
#define alloc_ordered_workqueue_lockdep_map(fmt, flags, lockdep_map, ...) \
	((void)(lockdep_map), alloc_ordered_workqueue(fmt, (flags), ##__VA_ARGS__))
#define create_workqueue(name) \
	alloc_workqueue("%s", __WQ_LEGACY | WQ_MEM_RECLAIM | WQ_PERCPU, 1, (name))
#define create_freezable_workqueue(name) \
	alloc_workqueue("%s", __WQ_LEGACY | WQ_FREEZABLE | WQ_UNBOUND | WQ_MEM_RECLAIM, 1, (name))
#define create_singlethread_workqueue(name) \
	alloc_ordered_workqueue("%s", __WQ_LEGACY | WQ_MEM_RECLAIM, (name))

/*
 * destroy_workqueue - drain and free. May sleep. Delayed works whose timers
 * are armed must be cancelled first (as in the kernel). If the workqueue is
 * still busy after draining (e.g. an item of another queue keeps feeding it
 * through a chain), a message and a dump are printed and the workqueue is
 * left allocated rather than freed under running work.
 */
void destroy_workqueue(struct workqueue_struct *wq);

/* The system workqueues (spec names), created on first use of the library. */
extern struct workqueue_struct *system_wq;
extern struct workqueue_struct *system_percpu_wq;
extern struct workqueue_struct *system_highpri_wq;
extern struct workqueue_struct *system_long_wq;
extern struct workqueue_struct *system_unbound_wq;
extern struct workqueue_struct *system_dfl_wq;
extern struct workqueue_struct *system_dfl_long_wq;
extern struct workqueue_struct *system_freezable_wq;
extern struct workqueue_struct *system_power_efficient_wq;
extern struct workqueue_struct *system_freezable_power_efficient_wq;
extern struct workqueue_struct *system_bh_wq;
extern struct workqueue_struct *system_bh_highpri_wq;

/*
 * The system workqueue pointers above are valid once the library has started.
 * Any cmwq call starts it; a program whose first call would be to read one of
 * these pointers calls cmwq_init() (idempotent, thread-safe) first.
 */
void cmwq_init(void);

/* ---- queueing (any context; never sleeps) --------------------------------- */

/*
 * true if queued; false if it was already pending or is disabled.
 *
 * Memory ordering (as the kernel's queue_work): when it returns true, every
 * store the caller made before the call is visible to the work function
 * when it runs. When it returns false because the item was pending, the
 * stores are visible to the pending instance: it has not started yet, or
 * it has, and then the item is queued again; an event is never lost. For
 * example, with x = 0 and work reading x into r1:
 *     x = 1; r0 = queue_work(wq, &work);
 * r0 == true && r1 == 0 cannot happen, in the instance that r0 queued or
 * in a later one. The same holds for queue_delayed_work_on (from the
 * call to the function's run, through the timer) and mod_delayed_work_on.
 */
bool queue_work_on(int cpu, struct workqueue_struct *wq, struct work_struct *work);
bool queue_work_node(int node, struct workqueue_struct *wq, struct work_struct *work);
/*
 * queue_work(), except for one case: where the kernel's queue_work returns
 * true for an item it then drops (the workqueue is draining or being
 * destroyed and the caller is not one of its own items), this returns false
 * and the item is idle, so the caller still owns it (what the C++ and Asio
 * layers need to free a handler that will never run). Also false when
 * already pending, disabled, or for a destroyed workqueue.
 */
bool cmwq_try_queue_work(struct workqueue_struct *wq, struct work_struct *work);
/* cmwq_try_queue_work() on CPU cpu, as queue_work_on() queues. */
bool cmwq_try_queue_work_on(int cpu, struct workqueue_struct *wq, struct work_struct *work);
static inline bool queue_work(struct workqueue_struct *wq, struct work_struct *work)
{
	return queue_work_on(WORK_CPU_UNBOUND, wq, work);
}
/* delay in jiffies (ms); 0 queues at once without a timer. */
bool queue_delayed_work_on(int cpu, struct workqueue_struct *wq,
			   struct delayed_work *dwork, unsigned long delay);
static inline bool queue_delayed_work(struct workqueue_struct *wq,
				      struct delayed_work *dwork, unsigned long delay)
{
	return queue_delayed_work_on(WORK_CPU_UNBOUND, wq, dwork, delay);
}
/* Inverted meaning: true if it was pending (and was modified), false if idle. */
bool mod_delayed_work_on(int cpu, struct workqueue_struct *wq,
			 struct delayed_work *dwork, unsigned long delay);
static inline bool mod_delayed_work(struct workqueue_struct *wq,
				    struct delayed_work *dwork, unsigned long delay)
{
	return mod_delayed_work_on(WORK_CPU_UNBOUND, wq, dwork, delay);
}

bool schedule_work_on(int cpu, struct work_struct *work);
bool schedule_work(struct work_struct *work);
bool schedule_delayed_work_on(int cpu, struct delayed_work *dwork, unsigned long delay);
bool schedule_delayed_work(struct delayed_work *dwork, unsigned long delay);
/* May sleep. 0 or -ENOMEM. */
int schedule_on_each_cpu(work_func_t func);
/* Runs fn(arg) on a worker of cpu's per-CPU pool and returns its value. May sleep. */
long work_on_cpu(int cpu, long (*fn)(void *), void *arg);
/* The kernel's variant for callers that do not hold the CPU hotplug lock;
 * user space has no hotplug, so it is work_on_cpu. Lockdep keys ignored. */
#define work_on_cpu_safe(cpu, fn, arg) work_on_cpu((cpu), (fn), (arg))
#define work_on_cpu_key(cpu, fn, arg, key) ((void)(key), work_on_cpu((cpu), (fn), (arg)))
#define work_on_cpu_safe_key(cpu, fn, arg, key) ((void)(key), work_on_cpu((cpu), (fn), (arg)))

/* ---- waiting and cancelling ---------------------------------------------- */

/*
 * May sleep. true if it waited for an instance, false if the item was idle.
 * Memory ordering: every store the instance it waited for made (and the
 * earlier instances') is visible to the caller once it returns. The same
 * for flush_delayed_work, flush_workqueue (every item queued before the
 * call) and drain_workqueue.
 */
bool flush_work(struct work_struct *work);
bool flush_delayed_work(struct delayed_work *dwork);
/* Legacy: flushes system_percpu_wq, where schedule_work() queues, after one
 * warning (the kernel warns against new users too: flush the items, or a
 * workqueue of one's own). */
void cmwq_flush_scheduled_work(void);
#define flush_scheduled_work() cmwq_flush_scheduled_work()
/* May sleep. Waits for every item queued before the call. */
void __flush_workqueue(struct workqueue_struct *wq);
#define flush_workqueue(wq) __flush_workqueue(wq)
void drain_workqueue(struct workqueue_struct *wq);

/* Never sleeps (may spin briefly then yield). true if a pending instance was removed. */
bool cancel_work(struct work_struct *work);
bool cancel_delayed_work(struct delayed_work *dwork);
/*
 * May sleep: also waits for a running instance. true if it was pending.
 * Memory ordering: once it returns, no instance runs (until the item is
 * queued again) and every store of an instance that ran is visible to the
 * caller; an instance removed before it started made none. The same for
 * cancel_delayed_work_sync and disable_work_sync.
 */
bool cancel_work_sync(struct work_struct *work);
bool cancel_delayed_work_sync(struct delayed_work *dwork);
bool disable_work(struct work_struct *work);
bool disable_work_sync(struct work_struct *work);
bool enable_work(struct work_struct *work);
bool disable_delayed_work(struct delayed_work *dwork);
bool disable_delayed_work_sync(struct delayed_work *dwork);
bool enable_delayed_work(struct delayed_work *dwork);
static inline bool enable_and_queue_work(struct workqueue_struct *wq, struct work_struct *work)
{
	if (enable_work(work)) {
		queue_work(wq, work);
		return true;
	}
	return false;
}

/* ---- rcu_work and execute_work ------------------------------------------ */

/*
 * A work item queued after an RCU grace period. The grace period comes from
 * the program's RCU: cmwq_set_rcu_synchronize() registers a function that
 * waits for one (liburcu's synchronize_rcu; <cmwq/urcu.h> does it with
 * cmwq_use_urcu()). Waits are batched: one grace period serves every item
 * queued while the previous one ran. Without a registered function there are
 * no readers cmwq knows of, so queue_rcu_work waits for none: it queues at
 * once and says so once. (The kernel's struct rcu_work also has a
 * struct rcu_head member; cmwq keeps its list elsewhere.)
 */
struct rcu_work {
	struct work_struct work;
	struct workqueue_struct *wq;
	struct rcu_work *cmwq_next; /* cmwq: the grace-period list */
};
#define INIT_RCU_WORK(_work, _func) INIT_WORK(&(_work)->work, (_func))
#define INIT_RCU_WORK_ONSTACK(_work, _func) INIT_WORK_ONSTACK(&(_work)->work, (_func))
static inline struct rcu_work *to_rcu_work(struct work_struct *work)
{
	return cmwq_container_of(work, struct rcu_work, work);
}
/* Registers the grace-period wait (NULL: none). May be called again to
 * change it; items already waiting use the new one. Returns 0. */
int cmwq_set_rcu_synchronize(void (*synchronize)(void));
/* false if already pending; else true, and rwork->work is queued on wq once
 * a grace period that started after this call has ended. */
bool queue_rcu_work(struct workqueue_struct *wq, struct rcu_work *rwork);
/* Waits for the grace period (when pending) and then for the work: true if
 * it waited. */
bool flush_rcu_work(struct rcu_work *rwork);

/* SCSI's helper: fn(&ew->work) at once, returning 0, unless called from a
 * timer callback (the kernel's interrupt context), where it queues fn on
 * system_percpu_wq and returns 1. */
struct execute_work {
	struct work_struct work;
};
int execute_in_process_context(work_func_t fn, struct execute_work *ew);

/* ---- introspection and tuning -------------------------------------------- */

unsigned int work_busy(struct work_struct *work);
struct work_struct *current_work(void);
bool current_is_workqueue_rescuer(void);
/* true in an item of a WQ_MEM_RECLAIM workqueue that is not a legacy one
 * (create_workqueue & co): where flushing a !WQ_MEM_RECLAIM one warns. */
bool current_is_workqueue_mem_reclaim(void);
bool workqueue_congested(int cpu, struct workqueue_struct *wq);
void workqueue_set_max_active(struct workqueue_struct *wq, int max_active);
void workqueue_set_min_active(struct workqueue_struct *wq, int min_active);
struct workqueue_attrs *alloc_workqueue_attrs(void);
void free_workqueue_attrs(struct workqueue_attrs *attrs);
/* Unbound only (else -EINVAL). Transactional: on error nothing changes. */
int apply_workqueue_attrs(struct workqueue_struct *wq, const struct workqueue_attrs *attrs);
__printf(1, 2) void set_worker_desc(const char *fmt, ...);
/* Prints the state dump (busy workqueues and pools) to stderr. */
void show_all_workqueues(void);
void show_one_workqueue(struct workqueue_struct *wq);
/* The state dump limited to WQ_FREEZABLE workqueues (the freezer's report). */
void show_freezable_workqueues(void);
/* Exposes an unbound, non-ordered workqueue's attributes as WQ_SYSFS does
 * (wqctl, the control endpoint): 0, -EEXIST if already exposed, -EINVAL for
 * an ordered one. */
int workqueue_sysfs_register(struct workqueue_struct *wq);

/*
 * Threads: struct cmwq_task is an opaque handle for a thread id
 * (cmwq_task_of(tid), cmwq_current_task()), where the kernel passes a
 * struct task_struct. It is cmwq's own type so that a program's own struct
 * task_struct (its `current`) does not type-check against it. wq_worker_comm writes the
 * thread's name, plus "+<description or workqueue>" while a worker runs an
 * item (the kernel's ps form). print_worker_info logs "<log_lvl>Workqueue:
 * <wq> <item> (<desc>)" for a worker running an item, else nothing.
 */
struct cmwq_task;
struct cmwq_task *cmwq_task_of(pid_t tid);
struct cmwq_task *cmwq_current_task(void);
void wq_worker_comm(char *buf, size_t size, struct cmwq_task *task);
void print_worker_info(const char *log_lvl, struct cmwq_task *task);
void wq_watchdog_touch(int cpu);

/*
 * cmwq extension: name a work item (set it before queueing; NULL clears).
 * The string must stay valid while the item is queued; when the item starts
 * its first CMWQ_WORK_NAME_LEN - 1 bytes are copied for reports made while
 * it runs, so the item may free it (and itself) then.
 */
#define CMWQ_WORK_NAME_LEN 64
static inline void cmwq_set_work_name(struct work_struct *w, const char *name)
{
	w->name = name;
}
/*
 * The workqueue name of the item the calling thread runs, or NULL outside a
 * work item. Valid until the item returns.
 */
const char *cmwq_current_workqueue_name(void);
/* The workqueue of the item the calling thread runs, or NULL. */
struct workqueue_struct *cmwq_current_workqueue(void);
/*
 * The flags wq was created with (WQ_UNBOUND, __WQ_ORDERED, WQ_PERCPU, ...,
 * as alloc_workqueue normalised them). 0, with one message, for NULL or a
 * destroyed workqueue. Any context; does not block.
 */
unsigned int cmwq_workqueue_flags(struct workqueue_struct *wq);
/*
 * Prints "cmwq: <what> in work item <name or function> on workqueue <wq>"
 * through the log handler (<cmwq/log.h>); the C++ API calls it for an
 * exception that escapes a work item, before std::terminate().
 */
void cmwq_report_work_failure(const char *what);
/*
 * For waits built on work items (the C++ API's task::get): true, with one
 * warning saying "<caller's item> on workqueue <wq> <verb> <work's name>",
 * if the calling work item waiting for work would wait for itself - work is
 * the caller's own item, or a queued item of the caller's workqueue that can
 * start only after the caller's item ends (ordered, or max_active 1). false
 * outside work items and when the wait can end.
 */
bool cmwq_wait_would_deadlock(struct work_struct *work, const char *verb);
/* A futex wait until *word != expected (may return spuriously) and a wake
 * of every waiter: what the C++ API's tasks wait with. */
void cmwq_futex_wait(const uint32_t *word, uint32_t expected);
void cmwq_futex_wake(const uint32_t *word);
/* How many fork()s lie between the first process and this one (0 in it): a
 * C++ task made in a parent can never finish in a child, whose copy of it
 * then reads as cancelled. */
unsigned cmwq_fork_generation(void);

/* ---- freezer (spec 4.8) --------------------------------------------------- */

/* Freezable workqueues stop activating new items; running ones finish. */
void freeze_workqueues_begin(void);
/* true while a freezable workqueue still has active items. */
bool freeze_workqueues_busy(void);
void thaw_workqueues(void);

/* ---- blocking hints (the scheduler hooks of the kernel) ------------------- */

/*
 * A work function about to block calls cmwq_blocking_begin() and, once it
 * runs again, cmwq_blocking_end(). On a per-CPU pool this lets the next item
 * start at once (kernel: wq_worker_sleeping / wq_worker_running). Outside a
 * worker both are no-ops. Calls nest.
 */
void cmwq_blocking_begin(void);
void cmwq_blocking_end(void);

#ifdef __cplusplus
}
#endif

CMWQ_END_PUBLIC

/* The timer API, as the kernel's workqueue.h brings it (nothing when the
 * program keeps its own timers). */
#include <cmwq/linux/timer.h>
#include <cmwq/threads.h>

#endif /* CMWQ_LINUX_WORKQUEUE_H */
