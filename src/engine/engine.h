// engine.h - the seam between the engine's files: every function one engine
// file calls in another, each with the lock context it needs.
//
// The files form a strict downward layering (docs/design.md, "Where to
// change what"): a function may call only what is defined on its own floor
// or below. scripts/check_floors.py checks it (a test). Files are named
// without their wing (src/, engine/, compat/, admin/, control/; the table in
// docs/design.md); the names are unique across src/. The floors:
//   1  sys.cpp, timer.cpp, topology.cpp     platform: clocks, futex, wake, affinity, timers; topology (pure)
//   1  cpus.cpp                             the process's CPUs, topology and cgroup CPU quota
//   1  fds.cpp                              the library's descriptors: one spare, the program's last ones left
//   1  symbols.cpp                          names of code addresses from the objects' ELF symbol tables
//   1  transit.cpp                          each thread's item in transit, for a fork child
//   2  detect.cpp, debug.cpp                the workers' context-switch events; debug_objects
//   3  pool.cpp                             worker_pool: idle list, kick_pool, culling, pools
//   4  pwq.cpp                              pool_workqueue: state word, nr_active, release
//   5  worker.cpp                           workers, process_one_work, hints, deferred::run
//   6  work.cpp, rescuer.cpp, dump.cpp      queueing, flush, cancel; the rescuer; the state dump
//   7  monitor.cpp                          blocked-worker sampling, hog reclassification, watchdog
//   8  workqueue.cpp                        one workqueue: alloc/destroy, attrs, max_active
//   9  compat.cpp, ktimer.cpp, rcu_work.cpp    built on the core: the rest of the kernel API
//   9  introspect.cpp, sysfs.cpp, params.cpp   looking and tuning
//   9  hotplug.cpp                          CPUs going offline and coming back
//   10 startup.cpp, fork.cpp                the library's life: they call into every floor
//   10 control.cpp, control_proto.cpp       the control endpoint (a client of the public API) and
//   10 control_verbs.cpp, control_metrics.cpp   its protocol: framing, requests, counters as text
// Calls that go up, each named here:
//   up: worker.cpp -> monitor_start         the monitor starts with the first worker
//   up: timer.cpp -> monitor_start          a timer thread that cannot start is retried by the monitor
//   up: monitor.cpp -> hotplug_poll         the monitor's passes follow the online CPUs
//   up: monitor.cpp -> hotplug_retry_pending  and come sooner while a returning CPU is not ready
//   up: params.cpp -> cmwq_control_start    the cmwq.control parameter starts and stops the
//   up: params.cpp -> cmwq_control_stop     control endpoint (through its public calls)
// end of floors.
// One more goes up through a pointer set at start-up, as the kernel's
// timers do: the pools' mayday timer (globals::mayday_timeout, set to
// rescuer.cpp's pool_mayday_timeout). Public entry points on any floor may
// call ensure_started() (startup.cpp) first.
//
// "Context:" names what the caller holds. L is the pool->lock of the pool
// the arguments belong to; "no lock" means the caller holds no engine lock;
// "may sleep" means it may block. Clang checks the L rules (REQUIRES).
#pragma once

#include "internal.h"

#include <sys/types.h>
#include <syslog.h>

#include <cstdio>
#include <functional>
#include <cstdarg>
#include <string>
#include <vector>

// Engine internals are not part of the library's ABI: hidden, so calls
// between engine files are direct calls (not through the PLT of the shared
// library, which also kept them from being inlined with LTO).
#pragma GCC visibility push(hidden)

namespace cmwq::detail {

// ---- sys.cpp ----------------------------------------------------------------

// Context: any. The process-wide state, never freed.
globals &g();
// Context: any. The parameter values (atomics), never freed; named, parsed
// and set by params.cpp.
params_t &params();
// Context: any. CLOCK_MONOTONIC and the calling thread's CPU clock, in ns.
uint64_t now_ns();
uint64_t thread_cpu_ns();
// Context: the worker itself. CLOCK_MONOTONIC at the end of an item, derived
// from the cycle counter and the worker's last clock read while that read
// is under 200 us old and the counter's rate is known, else a clock read
// (which becomes the new anchor). Never less than the worker's previous
// value. A clock read costs 35-100 ns in a VM, a counter read about 10.
uint64_t worker_clock_ns(worker *w);
// Context: the worker itself. A clock read that also anchors worker_clock_ns.
uint64_t worker_clock_anchor(worker *w);
// Context: no lock. The wake word of a worker or rescuer: 0 idle, 1 woken,
// 2 asleep in the futex. worker_wait_word sleeps from 0 until woken (the
// caller stored 0 before its last look for work); worker_wake_word wakes.
void worker_wake_word(worker *w);
void worker_wait_word(worker *w);
// Context: no lock (after the pick; see kick_pool). Wakes a worker picked
// and pinned under its pool's lock, then drops the pin.
void wake_worker(worker *w);
// Context: any. Spin hint for the first rounds of a wait loop, then yield.
void spin_pause(int &n);
// Context: the calling thread. Affinity to cpus (those this process may use).
void pin_self(const std::vector<int> &cpus);
// Context: any. The same for thread tid of this process; false when refused.
bool pin_thread(pid_t tid, const std::vector<int> &cpus);
// Context: the calling thread. Applies nice, or the lowest allowed, with one message.
void apply_nice(int nice);
// Context: no lock. Starts a detached library thread running fn(arg) with
// every asynchronous signal blocked, between the program's thread hooks
// (<cmwq/threads.h>); 0 or the errno (never throws).
// cmwq.fail_thread_creation injects failures for tests.
int spawn_thread(cmwq_thread_kind kind, void *(*fn)(void *), void *arg);
// True on the monitor when the library made it a SCHED_BATCH thread (it
// would have run as SCHED_OTHER); the threads it starts then get
// SCHED_OTHER back instead of inheriting the batch policy.
extern constinit thread_local bool tl_made_batch;
// Context: the new thread itself, first and last thing. The program's
// start hook (mine: the hooks in effect, kept for stop) and its stop hook,
// for a library thread not started by spawn_thread.
void thread_hooks_start(cmwq_thread_kind kind, cmwq_thread_hooks &mine);
void thread_hooks_stop(cmwq_thread_kind kind, const cmwq_thread_hooks &mine);
// Context: any. fmt formatted with ap, each %n's argument consumed and
// nothing printed for it (one message naming call), as the kernel's
// vsnprintf refuses %n.
std::string vformat_without_n(const char *call, const char *fmt, va_list ap);
// Context: any. The one-line message for a thread that could not start.
void thread_start_failed(const char *what, int err, const char *then);
// Context: any. Reports (once per call and argument) a NULL argument of a
// public call, which then returns its failure value; always true, for
// `if (!p && null_arg("call", "p")) return ...;`.
bool null_arg(const char *call, const char *arg);
// Context: fork (fork.cpp). The one-time-message lock around fork.
void warn_fork_lock();
void warn_fork_unlock();
// Context: any. The function's name (the dynamic symbol table, else
// code_address_name), or its address.
std::string func_name(work_func_t f);
// Context: any; w must be live (queued, or its caller owns it). Its name
// (cmwq_set_work_name) or its function's.
std::string work_name(const work_struct *w);
// Context: the worker itself, or under w->pool->lock. The running item's
// name (copied when it started) or its function's.
std::string current_item_name(const worker *w);
// Context: any (the log lock is a leaf). The library's messages: one call
// per line to the handler of <cmwq/log.h>, or to stderr without one.
// Levels are syslog's. log_dump renders a dump (a FILE writer) the same way.
void log_text(int level, const std::string &text);
void log_printf(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void log_dump(int level, const std::function<void(FILE *)> &write);
bool logs_have_handler();
void log_fork_lock();
void log_fork_unlock();
// Context: any (takes an internal lock). Prints msg once per key.
void warn_once_msg(const std::string &key, const std::string &msg);

// ---- cpus.cpp ---------------------------------------------------------------

// Context: any. The CPUs this process may run on (sched_getaffinity).
std::vector<int> affinity_cpus();
// Context: any. The CPU quota of the process's cgroups in whole CPUs
// (rounded up; the least of v2 cpu.max and v1 cfs_quota_us/cfs_period_us
// along each path up to root), from proc_cgroup (/proc/self/cgroup) and
// the cgroup mount root (/sys/fs/cgroup); 0 when there is none.
unsigned read_cpu_quota(const std::string &proc_cgroup, const std::string &root);
// Context: G held, or start-up. The topology from /sys (or CMWQ_SYSFS_ROOT)
// at the given cache_shard size, restricted to the CPUs this process may use.
topology read_topology(unsigned shard);

// ---- fds.cpp ----------------------------------------------------------------

// Descriptors the library's long-lived opens always leave free below the
// soft RLIMIT_NOFILE.
inline constexpr long FD_LEFT_TO_PROGRAM = 64;
// Context: no engine lock. Takes the library's one spare descriptor if it
// has none (the monitor's start).
void fd_spare_take();
// Context: no engine lock, D, or the symbol table's lock. Opens in the spare's slot: closes the
// spare, runs open_fn (which returns a descriptor or -1), passes what it
// opened to use_fn and keeps it as the new spare (keep), or closes it and
// takes /dev/null in its slot. False if open_fn failed.
bool with_spare_fd(const std::function<int()> &open_fn, const std::function<void(int)> &use_fn,
		   bool keep = true);
// Context: any lock but the spare's (it nests inside all of them, as in
// fork_prepare). Runs fn with the spare's slot free and takes /dev/null in
// it again afterwards: for what opens a descriptor the library cannot route
// through the spare (a new thread's first malloc in glibc reads
// /sys/devices/system/cpu/online to size its arenas). fn must not return
// before that open is done and closed.
int with_spare_lent(const std::function<int()> &fn);
// Context: any. The soft RLIMIT_NOFILE now (a large number when unlimited).
long fd_limit();
// Context: no engine lock, or D. The process's open descriptors (the spare
// included), counted through the spare; -1 without /proc.
long open_fd_count();
// Context: no engine lock, or D. Whether `more` new long-lived descriptors
// still leave FD_LEFT_TO_PROGRAM free (true when it cannot be told).
bool fds_to_spare(long more);
// Context: any (the spare's lock is a leaf). The file's contents (at most
// 64 KiB), read in the spare's slot; "" when it cannot be read.
std::string read_small_file(const std::string &path);
// Context: fork (fork.cpp). The spare's lock, a leaf.
void fd_fork_lock();
void fd_fork_unlock();

// ---- symbols.cpp ------------------------------------------------------------

// Context: any (its table's lock and the spare's are leaves; the first name
// from an object reads that object's symbol table once). The function at
// addr from the ELF symbol table of the object it lives in ("name" or
// "name+0xOFF"), else "OBJECT+0xOFF" for addr2line; empty if addr is in no
// loaded object.
std::string code_address_name(const void *addr);
// Context: fork (fork.cpp). The symbol table's lock, a leaf (the spare's
// nests inside it).
void symbol_fork_lock();
void symbol_fork_unlock();

// ---- transit.cpp ------------------------------------------------------------

// What the calling thread is moving (transit.cpp's header says why): the
// item whose PENDING it owns outside every list, and (the timer thread) the
// engine timer whose callback it is about to run.
struct transit_slot {
	std::atomic<work_struct *> work{nullptr};
	std::atomic<timer_list *> timer{nullptr};
	bool registered = false;
};
extern constinit thread_local transit_slot tl_transit;
// Context: no lock. Adds this thread's slot to the registry (once).
void transit_register();
// Context: no lock; before the PENDING RMW that the store is ordered by.
// Names w as this thread's item in transit.
inline void transit_begin(work_struct *w)
{
	if (!tl_transit.registered) [[unlikely]]
		transit_register();
	tl_transit.work.store(w, std::memory_order_relaxed);
}
// Context: under the lock that hands w over (or with w still owned, when the
// call gives up). The slot no longer names w.
inline void transit_end(const work_struct *w)
{
	if (tl_transit.work.load(std::memory_order_relaxed) == w)
		tl_transit.work.store(nullptr, std::memory_order_relaxed);
}
// Context: fork (fork.cpp). The registry's lock, a leaf. In the child
// (work_fn non-null) every item and timer a slot names goes to work_fn and
// timer_fn; the parent passes NULL for both.
void transit_fork_lock();
void transit_fork_unlock(void (*work_fn)(work_struct *), void (*timer_fn)(timer_list *));

// ---- timer.cpp --------------------------------------------------------------

// Context: fork (fork.cpp). Take the timer lock; release it in the parent
// (dropped NULL) or in the child, where every armed timer is disarmed and
// passed to dropped and the thread is forgotten.
void timer_fork_lock();
void timer_fork_unlock(void (*dropped)(timer_list *));

// A private timer_list::flags bit (the kernel keeps its wheel index in
// these top bits): set by timer_add, the engine's arming call, and cleared
// by ktimer_modify, the program's. The slow-callback report skips the
// engine's timers.
inline constexpr unsigned TIMER_ENGINE_OWNED = 1u << 31;
// Context: any lock but the timer lock. Arms (or re-arms) t as an engine
// timer (TIMER_ENGINE_OWNED); handover: the item in transit (transit.cpp)
// that the armed timer now holds.
void timer_add(timer_list *t, uint64_t expires_ns, void (*fn)(timer_list *),
	       const work_struct *handover = nullptr);
// Context: as timer_add. Arms t unless it is armed already; whether it armed it.
bool timer_add_if_idle(timer_list *t, uint64_t expires_ns, void (*fn)(timer_list *));
// Context: no lock. Starts the timer thread if an earlier start failed.
void timer_retry_start();
// Context: no lock. Whether timers are armed with no thread to run them
// (the monitor keeps retrying then).
bool timer_retry_wanted();
// Context: no lock. Starts the timer thread now unless it runs (whatever
// an earlier failure's cooldown says): 0, or the error, with no message.
// A WQ_MEM_RECLAIM workqueue needs it: its pools' mayday timer runs there.
int timer_thread_start();
// Context: as timer_add. true if t was armed and is now removed.
bool timer_remove(timer_list *t);
// The kernel timer API (<cmwq/linux/timer.h>, ktimer.cpp). Context: any
// thread; takes T. Returns whether t was pending (how: mod_timer,
// mod_timer_pending, timer_reduce); when it arms t, t->expires becomes
// expires (jiffies) under T. Nothing happens to a timer without a
// function (shut down).
enum ktimer_how { KTIMER_MOD, KTIMER_IF_PENDING, KTIMER_REDUCE };
int ktimer_modify(timer_list *t, unsigned long expires, uint64_t expires_ns, ktimer_how how);
bool ktimer_pending(const timer_list *t);
// Removes t; sync: also waits for its running callback (and deletes a
// re-arm); shutdown: later arming does nothing. Whether it was pending.
int ktimer_delete(timer_list *t, bool sync, bool shutdown);
// true on the timer thread while it runs a callback (the kernel's softirq
// context, for execute_in_process_context).
extern constinit thread_local bool tl_in_timer;

// ---- topology.cpp -----------------------------------------------------------

// Declares nothing here: topology.h (pure; build_topology, pods, cpulists).

// ---- detect.cpp -------------------------------------------------------------

// D is the detector's lock: taken with no engine lock held; the monitor
// takes pool locks under it (detect_wait's callback).

enum block_mode : int { BLOCK_AUTO = 0, BLOCK_PERF, BLOCK_SAMPLE, BLOCK_OFF };
// Context: no lock. The detector in effect (BLOCK_PERF, _SAMPLE or _OFF),
// probed on first use from cmwq.block_detect (one message on a fallback).
int detect_mode();
// Context: no lock. Applies a cmwq.block_detect request: 0, or -EOPNOTSUPP
// (with a message) when perf is asked for and cannot be opened.
int detect_set_mode(int requested);
const char *block_mode_name(int m);
// Context: the worker's own thread, no lock. Its event: opened on first
// need (before an item that others wait behind; or by the monitor,
// detect_open_for), enabled then, disabled when it starts an item with
// nothing behind it or goes idle, closed after
// many busy periods that did not need it, and at exit.
void detect_worker_start(worker *w);
void detect_worker_exit(worker *w);
void detect_enable_self(worker *w);
// Context: the monitor, no lock, holding a pin on w (a running worker with
// items waiting behind it and no event yet): opens w's event on its
// thread. Its token (for detect_enable), or 0 if it has none (sampled).
uint64_t detect_open_for(worker *w, pid_t tid);
// Context: the worker's own thread, no lock (takes D when its event is on).
// Disables its event if it is on; returns whether it was.
bool detect_quiet_self(worker *w);
// Tests: called by a worker whose event is on, just before it turns it off.
extern std::atomic<void (*)(worker *)> detect_quiet_hook;
// Context: the worker going idle, no lock. Disables its event, or, after
// many busy periods in a row that did not need it, closes it (takes D).
void detect_disable_self(worker *w);
// Context: no lock (takes D). Enables another worker's event if token (read
// under its pool's lock) is still its registration: 1 enabled now, 0 it
// already was, -1 it has none.
int detect_enable(worker *w, uint64_t token);
// Context: no lock. The eventfd that wakes detect_wait, -1 without epoll.
int detect_notify_fd();
// Context: no lock; may sleep. Waits up to timeout_ns for switches; calls
// fn(w, blocked) under D for each worker whose last switch is new. -1 when
// there is no epoll set (the caller waits its own way).
int detect_wait(uint64_t timeout_ns, const std::function<void(worker *, bool)> &fn);
// Context: fork (fork.cpp): first taken, last released.
void detect_fork_lock();
void detect_fork_unlock(bool child);

// ---- debug.cpp --------------------------------------------------------------

// Context: any. Whether cmwq.debug_objects is on (a relaxed load).
inline bool debug_objects_on() { return __atomic_load_n(&cmwq_debug_objects, __ATOMIC_RELAXED) != 0; }
// Context: no lock; debug_objects on. Whether w may be queued: an item the
// library has seen, or one that looks initialised; else a message naming
// the call, and false.
bool debug_check_queue(work_struct *w, const char *call);
// Context: any lock but the registry's; debug_objects on. w was queued or
// its timer armed / its PENDING was released.
void debug_work_active(work_struct *w);
void debug_work_idle(work_struct *w);
// Context: any. Whether a public call must refuse wq: NULL, destroyed or not
// a workqueue (with a message naming the call). One load when it is fine.
bool wq_refused_slow(const workqueue_struct *wq, const char *call);
inline bool wq_refused(const workqueue_struct *wq, const char *call)
{
	if (wq && wq->magic.load(std::memory_order_acquire) == WQ_MAGIC_LIVE) [[likely]]
		return false;
	return wq_refused_slow(wq, call);
}

// ---- pool.cpp ---------------------------------------------------------------

extern constinit thread_local worker *tl_worker; // constinit: no TLS init wrapper
// Context: any. The pool with that id, or NULL (pools are never freed).
worker_pool *get_pool_by_id(unsigned long id);
// Context: L. The worker of pool running work (same function), or NULL.
worker *find_worker_executing_work(worker_pool *pool, work_struct *work) REQUIRES(pool->lock);
// Context: L. Enter and leave the busy hash, keyed by w->current_work.
void hash_add(worker_pool *pool, worker *w) REQUIRES(pool->lock);
void hash_del(worker_pool *pool, worker *w) REQUIRES(pool->lock);
// Context: L. Set/clear worker flags, keeping nr_running for NOT_RUNNING.
void worker_set_flags(worker *w, unsigned f) REQUIRES(w->pool->lock);
void worker_clr_flags(worker *w, unsigned f) REQUIRES(w->pool->lock);
// Context: L. A worker counted as sleeping runs again: back into nr_running.
void worker_set_running(worker *w) REQUIRES(w->pool->lock);
// Context: L. Onto and off the idle list (arms the idle timer when too many).
void worker_enter_idle(worker *w) REQUIRES(w->pool->lock);
void worker_leave_idle(worker *w) REQUIRES(w->pool->lock);
// Context: L. Picks and pins an idle worker if the pool needs one, asking d
// to wake it after unlock (or asks d to create one, or arms the mayday
// timer). Returns whether a worker is on its way.
bool kick_pool(worker_pool *pool, deferred &d) REQUIRES(pool->lock);
// Context: L. Makes an unbound pool concurrency-managed (its pod's CPUs
// worth of runnable workers) or not (the kernel's unbound pools); a no-op
// for per-CPU and BH pools.
void pool_set_managed(worker_pool *pool, bool managed) REQUIRES(pool->lock);
// Context: no lock. cmwq.unbound_concurrency: every unbound pool, now and
// later, managed or not.
int set_unbound_concurrency(bool managed);
// Context: L. Arms the pool's mayday timer unless armed.
void mayday_arm(worker_pool *pool) REQUIRES(pool->lock);
// Context: any (usually L). A per-CPU pool holds items back behind running
// workers: wake the monitor to sample it.
void monitor_watch(worker_pool *pool);
// Context: no lock but H. Wakes the monitor for one pass (it is not armed).
void monitor_poke();
// Context: start-up, G held.
void init_percpu_pools(globals &gl) REQUIRES(gl.pool_mutex);
// Context: G held. The pool for these attributes (refcnt + 1), NULL if out of ids.
worker_pool *get_unbound_pool(int nice, bool strict, const std::vector<int> &pod,
			      const std::vector<int> &mask) REQUIRES(g().pool_mutex);
// Context: no lock. Drops a user; the last one culls its idle workers.
void put_unbound_pool(worker_pool *pool) EXCLUDES(g().pool_mutex);

// ---- pwq.cpp ----------------------------------------------------------------

// Context: any (lock-free read). The pool the item is queued on or last ran on.
worker_pool *get_work_pool(work_struct *work);
// Context: any. The node slot counter of an unbound pwq, NULL for per-CPU.
wq_node_nr_active *pwq_nna(pool_workqueue *pwq);
// Context: L. Takes an active slot for one item of pwq; fill: ignore the node FIFO.
bool pwq_tryinc_nr_active(pool_workqueue *pwq, bool fill) REQUIRES(pwq->pool->lock);
// Context: L (pool: the pool whose lists hold work and head). Moves work
// and the barriers linked behind it to head.
void move_linked_works(worker_pool *pool, work_struct *work, list_head *head) REQUIRES(pool->lock);
// Context: L. Activates the first inactive item if a slot is free and kicks
// the pool for it (the wake goes to d); whether it activated one.
bool pwq_activate_first_inactive(pool_workqueue *pwq, bool fill, deferred &d) REQUIRES(pwq->pool->lock);
// Context: pwq's pool lock when pwq is not NULL, no lock with pwq NULL (the
// analysis cannot say "held if not NULL": exempt, docs/locking.md). Gives a
// freed slot of nna to the first waiting pwq; one of another pool is
// activated by d.
void node_activate_pending(pool_workqueue *pwq, wq_node_nr_active *nna, deferred &d);
// Context: N held. Joins the node's FIFO of pwqs waiting for a slot, once.
void nna_add_pending(wq_node_nr_active *nna, pool_workqueue *pwq) REQUIRES(nna->lock);
// Context: no lock. A slot of nna handed over by d.activate: activate one
// item of pwq (if it is still a live pwq of that node); whether one was
// (else the caller offers the slot on).
bool node_activate_handoff(pool_workqueue *pwq, wq_node_nr_active *nna, deferred &d);
// Context: L. An item (data: its state word) left pwq: slots, colors, reference.
void pwq_dec_nr_in_flight(pool_workqueue *pwq, unsigned long data, deferred &d) REQUIRES(pwq->pool->lock);
// Context: L. Publishes pwq|PENDING|PWQ|extra and links work at head.
void insert_work(pool_workqueue *pwq, work_struct *work, list_head *head, unsigned long extra)
	REQUIRES(pwq->pool->lock);
// Context: any, PENDING owned. State-word transitions off queue.
void clear_pending_keep_offq(work_struct *work);
bool clear_pending_if_disabled(work_struct *work);
bool test_and_set_pending(work_struct *work);
// Context: G and W held. A new pwq of wq on pool, holding its base reference.
pool_workqueue *new_pwq(workqueue_struct *wq, worker_pool *pool) REQUIRES(wq->mutex);
// Context: no lock. The last reference is gone: unlink, unplug an ordered
// successor, drop the pool; wakeups it needs are left in d.
void pwq_release(pool_workqueue *pwq, deferred &d);
// Context: no lock. Drops a base reference; the pwq if it must be released.
pool_workqueue *put_base_ref(pool_workqueue *pwq);

// ---- worker.cpp -------------------------------------------------------------

// Context: L. Moves work (and linked barriers) to w, or to the worker that
// already runs it (non-reentrancy); whether w got it.
bool assign_work(work_struct *work, worker *w) REQUIRES(w->pool->lock);
// Context: L held on entry and exit (dropped while each item runs).
void process_scheduled_works(worker *w, deferred &d) REQUIRES(w->pool->lock);
// Context: no lock. Creates a worker for pool if it still needs one.
void deferred_create(worker_pool *pool);
// Context: no lock, the worker's own thread (or the monitor for it). The
// kernel's wq_worker_sleeping / wq_worker_running.
void worker_sleeping(worker *w);
void worker_running(worker *w);
// Context: no lock. Counts fn once more as a CPU hog and reports on the
// kernel's power-of-two schedule.
void hog_report(const worker *w);

// Context: fork (fork.cpp). The hog table's lock around fork.
void hog_fork_lock();
void hog_fork_unlock();

// ---- work.cpp ---------------------------------------------------------------

// Context: any; the caller owns work's PENDING bit. Queues it on wq (the
// kernel's __queue_work); what queue_work does after taking PENDING.
// false when wq is draining or being destroyed and this is not chained work:
// then the item is dropped (idle again, with one message), as the kernel's.
bool do_queue_work(int req_cpu, workqueue_struct *wq, work_struct *work);
// Context: any. The calling thread's CPU if usable, else a usable one.
int current_cpu();
// Context: no lock. Warns if the running work item's wait on target could
// deadlock; true when it would (the item flushes its own workqueue).
bool check_flush_dependency(workqueue_struct *target, work_struct *target_work);

// Context: a fork child, every engine lock held. A dropped timer: if it was
// a delayed work's, the item is idle again (not pending).
void forget_delayed_work_timer(timer_list *t);
// Context: a fork child. An item whose PENDING the parent owned (off any
// queue) becomes idle, keeping its pool id and disable depth.
void forget_pending(work_struct *w);

// ---- rescuer.cpp ------------------------------------------------------------

// Context: the pool's mayday timer (timer thread, no lock).
void pool_mayday_timeout(timer_list *t);
// Context: W not held; creation and destruction of wq.
// false (with a message) if its thread cannot start.
bool rescuer_start(workqueue_struct *wq);
void rescuer_stop(workqueue_struct *wq);
// Context: a fork child, no lock. A new thread for wq's rescuer.
void rescuer_fork_child(workqueue_struct *wq);

// ---- dump.cpp ---------------------------------------------------------------

// Context: no lock (takes G, W and L in order).
void dump_all(FILE *f);
// Context: W held (the monitor's stall report). One workqueue's lines.
void show_wq(FILE *f, workqueue_struct *wq, uint64_t now) REQUIRES(wq->mutex);

// ---- monitor.cpp ------------------------------------------------------------

// Context: no lock. Starts the monitor thread unless it runs (or a failed
// start is cooling down); create_worker calls it for each new worker.
void monitor_start();
// Context: fork (fork.cpp). The monitor's locks; in the child its thread is
// forgotten (monitor_start starts a new one).
void monitor_fork_lock();
void monitor_fork_unlock(bool child);
// Context: any.
void watchdog_touch(int cpu);
// Context: any. How many passes the monitor thread has made (each a wakeup).
uint64_t monitor_wakeups();

// ---- workqueue.cpp ----------------------------------------------------------

// Context: no lock. Parameter and sysfs setters that re-pod unbound workqueues.
int set_default_scope(affinity_scope s);
int set_cache_shard_size(unsigned size);
// The global unbound cpumask: 0, or -EINVAL if it leaves no usable CPU.
int set_unbound_cpumask(const std::vector<int> &requested);
// Context: G. unbound_cpus from the request and the online CPUs: the
// request's online CPUs, or all of the request's when none is online.
void update_unbound_cpus(globals &gl) REQUIRES(gl.pool_mutex);
// Context: no lock. Every unbound workqueue's pwqs planned again (pods,
// node shares) from the current unbound cpumask.
void repod_unbound();

// ---- compat.cpp -------------------------------------------------------------

// Declares nothing here: built on the public calls (<cmwq/linux/delay.h>,
// work_on_cpu, schedule_*), with now_ns, warn_once_msg and watchdog_touch.

// ---- ktimer.cpp -------------------------------------------------------------

// Declares nothing here: the kernel timer API (<cmwq/linux/timer.h>) on
// ktimer_modify, ktimer_pending and ktimer_delete (timer.cpp).

// ---- rcu_work.cpp -----------------------------------------------------------

// Context: fork (fork.cpp). The list lock around fork; the child forgets
// the parent's waiting items (idle again) and grace-period state.
void rcu_fork_lock();
void rcu_fork_unlock(bool child);

// ---- hotplug.cpp ------------------------------------------------------------

// Context: no lock (start-up). Where the online CPUs are read, and their text now.
void hotplug_init();
// Context: no lock. The usable CPUs online now are `online` (others
// ignored): the pools of CPUs that left are disassociated, those of CPUs
// that returned bound again, unbound pods recomputed. 0, or -EINVAL when
// no usable CPU is in it (nothing changes).
int cpus_online_changed(const std::vector<int> &online);
// Context: no lock (the monitor). Reads the online file when a second has
// passed since the last read (always with force) and acts when its text
// changed: 0, or -EINVAL for text that is no CPU list.
int hotplug_poll(bool force);
// Context: no lock. Another online file (tests); its text now is the last seen.
void hotplug_set_path(const std::string &path);
// Context: any. How many changes of the online CPUs were acted on.
uint64_t hotplug_changes();
// Context: no lock. Whether a CPU listed online could not take its workers
// yet (pinning failed): the monitor then passes every HOTPLUG_RETRY_NS.
bool hotplug_retry_pending();
constexpr uint64_t HOTPLUG_RETRY_NS = 50000000ull;
// Tests: replaces pinning a worker to its returning CPU (false: refused).
extern std::atomic<bool (*)(pid_t, const std::vector<int> &)> hotplug_pin_hook;

// ---- introspect.cpp ---------------------------------------------------------

// Declares nothing here: <cmwq/introspect.hpp> and <cmwq/stats.h>.

// ---- sysfs.cpp --------------------------------------------------------------

// Context: W held. The attribute values the snapshot reports.
std::string scope_attr(const workqueue_struct *wq) REQUIRES(wq->mutex);
std::vector<int> attrs_cpus(const workqueue_attrs &a);
// Context: no lock. A WQ_SYSFS attribute of wq, 0 or -ENOENT.
int wq_sysfs_get(workqueue_struct *wq, const std::string &attr, std::string &out);

// ---- params.cpp -------------------------------------------------------------

// Context: start-up. Applies CMWQ_PARAMS.
void params_load_env();
// Context: any. The accepted values of a parameter, for messages; NULL if unknown.
const char *param_accepted(const char *name);

// ---- startup.cpp ------------------------------------------------------------

// Context: any. Starts the library once (topology, pools, system workqueues).
// The one call any floor may make upward: public entry points make sure the
// library has started before they touch it.
void ensure_started();

// ---- fork.cpp ---------------------------------------------------------------

// Context: start-up. The pthread_atfork handlers that let a child use cmwq.
void fork_handlers_install();

// ---- control.cpp ------------------------------------------------------------

// Declares nothing here: <cmwq/control.h>; a client of the public API.

// ---- control_proto.cpp ------------------------------------------------------

// Declares nothing here: control_proto.h (the protocol's framing, no engine state).

// ---- control_verbs.cpp ------------------------------------------------------

// Declares nothing here: control_proto.h (parse_request, handle_request).

// ---- control_metrics.cpp ----------------------------------------------------

// Declares nothing here: control_proto.h (render_metrics, render_stats).

} // namespace cmwq::detail

#pragma GCC visibility pop
