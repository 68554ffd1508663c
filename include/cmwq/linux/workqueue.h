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

#include <cmwq/linux/cpumask.h>

#include <cmwq/export.h>
CMWQ_BEGIN_PUBLIC

#ifdef __cplusplus
extern "C" {
#endif

/* ---- basic kernel helpers ------------------------------------------------ */

#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif

#ifndef __printf
#define __printf(a, b) __attribute__((format(printf, a, b)))
#endif

struct list_head {
	struct list_head *next, *prev;
};

/* Jiffies: HZ = 1000, counted on CLOCK_MONOTONIC from an arbitrary origin. */
#define HZ 1000
unsigned long cmwq_jiffies(void);
#define jiffies (cmwq_jiffies())
static inline unsigned long msecs_to_jiffies(unsigned int m) { return m; }
static inline unsigned long usecs_to_jiffies(unsigned int u) { return (u + 999u) / 1000u; }
static inline unsigned int jiffies_to_msecs(unsigned long j) { return (unsigned int)j; }
static inline unsigned int jiffies_to_usecs(unsigned long j) { return (unsigned int)(j * 1000u); }

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

/* Timer of a delayed work: CLOCK_MONOTONIC deadline in nanoseconds. */
struct timer_list {
	uint64_t expires_ns;     /* T: timer lock */
	int heap_index;          /* T: -1 when not armed */
	unsigned int flags;
	void (*function)(struct timer_list *);
};

struct delayed_work {
	struct work_struct work;
	struct timer_list timer;
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
	WORK_OFFQ_DISABLE_SHIFT = WORK_OFFQ_FLAG_SHIFT + 1,
	WORK_OFFQ_DISABLE_BITS = 16,
	WORK_OFFQ_POOL_SHIFT = WORK_OFFQ_DISABLE_SHIFT + WORK_OFFQ_DISABLE_BITS,
	WORK_OFFQ_POOL_BITS = 31,
};

#define WORK_STRUCT_PENDING (1UL << WORK_STRUCT_PENDING_BIT)
#define WORK_STRUCT_INACTIVE (1UL << WORK_STRUCT_INACTIVE_BIT)
#define WORK_STRUCT_PWQ (1UL << WORK_STRUCT_PWQ_BIT)
#define WORK_STRUCT_LINKED (1UL << WORK_STRUCT_LINKED_BIT)
#define WORK_OFFQ_POOL_NONE ((1UL << WORK_OFFQ_POOL_BITS) - 1)
#define WORK_STRUCT_NO_POOL (WORK_OFFQ_POOL_NONE << WORK_OFFQ_POOL_SHIFT)

#define WORK_BUSY_PENDING 1
#define WORK_BUSY_RUNNING 2

/* Any CPU: the queueing thread's current CPU (per-CPU wq) or its pod. */
#define WORK_CPU_UNBOUND NR_CPUS

#define __WORK_INITIALIZER(n, f) \
	{ WORK_STRUCT_NO_POOL, { &(n).entry, &(n).entry }, (f), NULL }
#define __DELAYED_WORK_INITIALIZER(n, f) \
	{ __WORK_INITIALIZER((n).work, (f)), { 0, -1, 0, NULL }, NULL, WORK_CPU_UNBOUND }

#define DECLARE_WORK(n, f) struct work_struct n = __WORK_INITIALIZER(n, f)
#define DECLARE_DELAYED_WORK(n, f) \
	struct delayed_work n = __DELAYED_WORK_INITIALIZER(n, f)

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

static inline void cmwq_init_delayed_work(struct delayed_work *dw, work_func_t f)
{
	if (__atomic_load_n(&cmwq_debug_objects, __ATOMIC_RELAXED) && cmwq_debug_init_work(&dw->work))
		return;
	cmwq_init_work_fields(&dw->work, f);
	dw->timer.expires_ns = 0;
	dw->timer.heap_index = -1;
	dw->timer.flags = 0;
	dw->timer.function = NULL;
	dw->wq = NULL;
	dw->cpu = WORK_CPU_UNBOUND;
}

#define INIT_WORK(w, f) cmwq_init_work((w), (f))
#define INIT_WORK_ONSTACK(w, f) cmwq_init_work((w), (f))
#define INIT_DELAYED_WORK(dw, f) cmwq_init_delayed_work((dw), (f))
#define INIT_DELAYED_WORK_ONSTACK(dw, f) cmwq_init_delayed_work((dw), (f))
#define INIT_DEFERRABLE_WORK(dw, f) cmwq_init_delayed_work((dw), (f))
/* Deferrable timers behave as normal timers here (no idle CPUs to spare). */
#define INIT_DEFERRABLE_WORK_ONSTACK(dw, f) cmwq_init_delayed_work((dw), (f))
#define DECLARE_DEFERRABLE_WORK(n, f) DECLARE_DELAYED_WORK(n, f)
/* The work_struct (or delayed_work) containing a field, from the work
 * pointer a work function gets (the tasklet-to-BH conversions' helper). */
#define from_work(var, callback_work, work_fieldname) \
	container_of(callback_work, __typeof__(*var), work_fieldname)
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
	return container_of(w, struct delayed_work, work);
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
	cpumask_var_t cpumask;    /* allowed CPUs */
	cpumask_var_t __pod_cpumask; /* internal */
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

/* true if queued; false if it was already pending or is disabled. */
bool queue_work_on(int cpu, struct workqueue_struct *wq, struct work_struct *work);
bool queue_work_node(int node, struct workqueue_struct *wq, struct work_struct *work);
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

/* May sleep. true if it waited for an instance, false if the item was idle. */
bool flush_work(struct work_struct *work);
bool flush_delayed_work(struct delayed_work *dwork);
/* Legacy: flushes system_wq (the kernel warns against new users; so do we:
 * prefer flushing the items or a workqueue of one's own). */
#define flush_scheduled_work() flush_workqueue(system_wq)
/* May sleep. Waits for every item queued before the call. */
void __flush_workqueue(struct workqueue_struct *wq);
#define flush_workqueue(wq) __flush_workqueue(wq)
void drain_workqueue(struct workqueue_struct *wq);

/* Never sleeps (may spin briefly then yield). true if a pending instance was removed. */
bool cancel_work(struct work_struct *work);
bool cancel_delayed_work(struct delayed_work *dwork);
/* May sleep: also waits for a running instance. true if it was pending. */
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

/* ---- introspection and tuning -------------------------------------------- */

unsigned int work_busy(struct work_struct *work);
struct work_struct *current_work(void);
bool current_is_workqueue_rescuer(void);
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

#endif /* CMWQ_LINUX_WORKQUEUE_H */
