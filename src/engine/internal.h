// internal.h - the engine's data model: worker_pool, pool_workqueue, worker,
// workqueue_struct, with the kernel's names and a locking tag on every field.
//
// Locking legend (docs/locking.md has the order and the orderings):
//   G: g().pool_mutex (wq_pool_mutex)  W: wq->mutex    L: pool->lock
//   N: nna->lock (nests inside L)      F: wq->flush_mutex
//   Y: wq->mayday_lock                 T: timer lock
//   D: the context-switch detector's registry lock (detect.cpp; no engine
//      lock is held when it is taken, and pool locks nest inside it)
//   I: immutable once published (a thread's own tid/thread: before its first L)
//   K: the owning worker's; when others read it, written under L and
//      read by them under L; the worker reads its own without a lock
//   M: monitor thread only
//   A: atomic (the ordering of each is argued in docs/locking.md)
// Fields tagged L of worker_pool and pool_workqueue are also GUARDED_BY,
// which clang checks (CMWQ_THREAD_SAFETY).
// Pools and pwqs are type-stable (the kernel protects them with RCU):
// lock-free readers of a CPU slot or a work item's state word may still hold
// their address, so their memory is never returned while the process runs.
// A released pwq is reused by its workqueue's next attribute change; a pool
// nobody uses stays in the pool hash for its attributes' next user.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include <pthread.h>

#include "arch.h"
#include "list.h"
#include "sync.h"
#if defined(CMWQ_HAVE_SDT)
#include <sys/sdt.h>
#endif

#include <cmwq/introspect.hpp>
#include <cmwq/linux/workqueue.h>
#include <cmwq/stats.h>
#include <cmwq/topology.hpp>

// The public C enum and the C++ one are the same list in the same order.
static_assert(static_cast<int>(WQ_AFFN_DFL) == static_cast<int>(cmwq::affinity_scope::dfl) &&
		      static_cast<int>(WQ_AFFN_CPU) == static_cast<int>(cmwq::affinity_scope::cpu) &&
		      static_cast<int>(WQ_AFFN_SMT) == static_cast<int>(cmwq::affinity_scope::smt) &&
		      static_cast<int>(WQ_AFFN_CACHE) == static_cast<int>(cmwq::affinity_scope::cache) &&
		      static_cast<int>(WQ_AFFN_CACHE_SHARD) == static_cast<int>(cmwq::affinity_scope::cache_shard) &&
		      static_cast<int>(WQ_AFFN_NUMA) == static_cast<int>(cmwq::affinity_scope::numa) &&
		      static_cast<int>(WQ_AFFN_SYSTEM) == static_cast<int>(cmwq::affinity_scope::system) &&
		      static_cast<int>(WQ_AFFN_NR_TYPES) == cmwq::nr_affinity_scopes,
	      "wq_affn_scope and cmwq::affinity_scope must list the scopes in the same order");

namespace cmwq::detail {

struct pool_workqueue;

// ---- the state word ------------------------------------------------------

inline unsigned long work_data(const work_struct *w)
{
	return __atomic_load_n(&w->data, __ATOMIC_ACQUIRE);
}
inline unsigned long offq_depth(unsigned long d)
{
	return (d >> WORK_OFFQ_DISABLE_SHIFT) & ((1UL << WORK_OFFQ_DISABLE_BITS) - 1);
}
inline unsigned long offq_pool(unsigned long d) { return d >> WORK_OFFQ_POOL_SHIFT; }
inline unsigned long make_offq(unsigned long pool_id, unsigned long depth, bool bh)
{
	return (pool_id << WORK_OFFQ_POOL_SHIFT) | (depth << WORK_OFFQ_DISABLE_SHIFT) |
	       (bh ? 1UL << WORK_OFFQ_BH_BIT : 0);
}
// The pwq of a queued item (WORK_STRUCT_PWQ set): the one decode.
inline pool_workqueue *data_pwq(unsigned long data)
{
	return reinterpret_cast<pool_workqueue *>(data & ~((1UL << WORK_STRUCT_PWQ_SHIFT) - 1));
}
inline int work_color(unsigned long d)
{
	return static_cast<int>((d >> WORK_STRUCT_COLOR_SHIFT) & (WORK_NR_COLORS - 1));
}

// ---- policy ---------------------------------------------------------------

enum worker_flags : unsigned {
	WORKER_DIE = 1 << 1,
	WORKER_IDLE = 1 << 2,
	WORKER_PREP = 1 << 3,
	WORKER_CPU_INTENSIVE = 1 << 6,
	WORKER_UNBOUND = 1 << 7,
	WORKER_NOT_RUNNING = WORKER_PREP | WORKER_CPU_INTENSIVE | WORKER_UNBOUND,
};

enum pool_flags : unsigned {
	POOL_BH = cmwq::pool_flag_bh,
	POOL_MANAGER_ACTIVE = cmwq::pool_flag_manager_active,
	POOL_DISASSOCIATED = cmwq::pool_flag_disassociated,
};

// The counters the predicates look at, so they are testable without threads.
struct pool_counts {
	bool worklist_empty;
	int nr_running;
	int nr_idle;
	int nr_workers;
	bool manager_active;
	int concurrency = 1; // runnable workers the pool lets run at once
};
inline bool need_more_worker(const pool_counts &c) { return !c.worklist_empty && c.nr_running < c.concurrency; }
inline bool may_start_working(const pool_counts &c) { return c.nr_idle > 0; }
inline bool keep_working(const pool_counts &c) { return !c.worklist_empty && c.nr_running <= c.concurrency; }
inline bool need_to_create_worker(const pool_counts &c)
{
	return need_more_worker(c) && !may_start_working(c);
}
// The kernel's constants (kernel/workqueue.c), in nanoseconds where timed.
inline constexpr int MAX_IDLE_WORKERS_RATIO = 4;         // 1/4 of busy can be idle
inline constexpr uint64_t CREATE_COOLDOWN_NS = 1000000000ull;      // after a failed creation
inline constexpr uint64_t MAYDAY_INITIAL_TIMEOUT_NS = 10000000ull; // 10 ms
inline constexpr uint64_t MAYDAY_INTERVAL_NS = 100000000ull;      // 100 ms
inline constexpr int RESCUER_BATCH = 16;                  // items per rescue turn
inline constexpr int BUSY_WORKER_HASH_ORDER = 6;          // 64 busy-hash buckets
inline constexpr int MAX_DEFERRED_WAKES = 4;              // wakes one locked section defers
inline constexpr int MAX_DEFERRED_RELEASES = 2;           // pwq releases one locked section defers
inline constexpr int MAX_DEFERRED_ACTIVATIONS = 2;        // node-slot hand-offs to other pools it defers
inline constexpr int WAKE_AFFINE_SCAN = 4;                // recently idle workers kick_pool looks at for this CPU
inline bool too_many_workers(const pool_counts &c)
{
	int idle = c.nr_idle + (c.manager_active ? 1 : 0);
	int busy = c.nr_workers - idle;
	return idle > 2 && (idle - 2) * MAX_IDLE_WORKERS_RATIO >= busy;
}

// ---- objects ---------------------------------------------------------------

struct worker_pool;
struct worker;
struct pool_workqueue;

// The workers watching their wake word before they sleep (idle_spin): one
// slot per pod CPU, held by the latest worker to go idle on that CPU. A
// newer watcher takes the slot, and the one it displaced stops at its next
// turn, so a watcher that its CPU's other threads keep from running does
// not hold the place of the one that just went idle there (the worker a
// kick from that CPU picks). Slots name workers only to compare them; no
// worker is reached through one.
class watch_slots {
public:
	using slot = std::atomic<const void *>;
	// cpus: sorted, as pool->pod_cpus. Called before anyone watches.
	void init(const std::vector<int> &cpus)
	{
		cpus_ = cpus;
		slots_ = std::vector<slot>(cpus.size()); // each empty (C++20)
	}
	// Takes cpu's slot for `who`; nullptr when cpu is not one of them.
	slot *claim(const void *who, int cpu)
	{
		auto it = std::lower_bound(cpus_.begin(), cpus_.end(), cpu);
		if (it == cpus_.end() || *it != cpu)
			return nullptr;
		slot *s = &slots_[static_cast<size_t>(it - cpus_.begin())];
		s->store(who, std::memory_order_relaxed);
		return s;
	}
	static bool held(const slot *s, const void *who) { return s->load(std::memory_order_relaxed) == who; }
	// Empties the slot unless a newer watcher took it.
	static void release(slot *s, const void *who)
	{
		s->compare_exchange_strong(who, nullptr, std::memory_order_relaxed);
	}
	int nr_held() const
	{
		int n = 0;
		for (size_t i = 0; i < cpus_.size(); i++)
			n += slots_[i].load(std::memory_order_relaxed) != nullptr;
		return n;
	}
	void clear()
	{
		for (size_t i = 0; i < cpus_.size(); i++)
			slots_[i].store(nullptr, std::memory_order_relaxed);
	}

private:
	std::vector<int> cpus_;
	std::vector<slot> slots_;
};


struct worker_pool {
	pool_mutex lock;
	// Workers of a kernel-mode unbound pool whose item has returned and
	// that have not yet retaken the lock for its completion. Each of them
	// looks at the worklist before it can go idle (keep_working), or starts
	// another item and kicks the pool then, so kick_pool need not wake an
	// idle worker while this is above zero. Raised by its worker without
	// the lock, lowered under it: read under L, a positive value is a
	// worker still on its way to the lock. Beside the lock word, whose
	// cache line the worker takes next anyway.
	std::atomic<int> nr_returning{0}; // A: raised by its worker, lowered under L
	watch_slots watchers;             // A: idle workers watching their wake word (idle_spin); set up at I
	int id = 0;                      // I
	int cpu = -1;                    // I: -1 for unbound
	int node = -1;                   // I
	unsigned flags GUARDED_BY(lock) = 0;              // L
	int nice = 0;                    // I
	bool highpri = false;            // I
	bool strict = true;              // I
	std::vector<int> cpus;           // I: allowed CPUs of workers
	// Where the workers run now: cpus, or for a per-CPU pool whose CPU is
	// offline (POOL_DISASSOCIATED) the unbound cpumask (hotplug.cpp).
	std::vector<int> run_cpus GUARDED_BY(lock);       // L
	std::vector<int> pod_cpus;       // I
	std::string key;                 // I: unbound pool identity
	int refcnt = 0;                  // G: unbound users
	list_head worklist GUARDED_BY(lock);              // L
	int nr_workers GUARDED_BY(lock) = 0;              // L
	int nr_idle GUARDED_BY(lock) = 0;                 // L
	// Workers of a bound pool that are runnable and carry no NOT_RUNNING
	// flag. Zero means the CPU would idle: the next item may start. A
	// blocking hint (or the monitor's detection) takes a worker out of this
	// count and puts it back when it runs again.
	int nr_running GUARDED_BY(lock) = 0;              // L
	list_head idle_list GUARDED_BY(lock);             // L: LIFO
	std::vector<worker *> workers GUARDED_BY(lock);   // L
	worker *busy_hash[1 << BUSY_WORKER_HASH_ORDER] GUARDED_BY(lock) = {}; // L
	uint64_t last_progress_ns GUARDED_BY(lock) = 0;   // L
	int next_worker_id GUARDED_BY(lock) = 0;          // L
	int max_workers = 0;             // I: 0 = unlimited (BH pools: 1)
	uint64_t create_fail_until_ns GUARDED_BY(lock) = 0; // L: cooldown after a failed creation
	bool creating GUARDED_BY(lock) = false;           // L
	timer_list idle_timer{};         // T
	timer_list mayday_timer{};       // T
	// The mayday timer is armed (or its callback runs and may re-arm it):
	// kicks that find no idle worker skip the timer lock and the clock.
	bool mayday_armed GUARDED_BY(lock) = false;       // L
	std::atomic<bool> watch{false};  // A: the monitor samples this pool
	// Concurrency management: a per-CPU pool lets one runnable worker run
	// (the kernel's rule); an unbound pool under
	// cmwq.unbound_concurrency=managed as many as its pod has CPUs. An
	// unmanaged (kernel-mode unbound, BH) pool's workers carry
	// WORKER_UNBOUND, so nr_running stays 0 and every item may start.
	bool managed GUARDED_BY(lock) = false;            // L: blocked workers are looked for
	int concurrency GUARDED_BY(lock) = 1;             // L
	pool_counts counts() const REQUIRES(lock)
	{
		return {list_empty(&worklist), nr_running, nr_idle, nr_workers,
			(flags & POOL_MANAGER_ACTIVE) != 0, concurrency};
	}
};

struct worker {
	list_head entry GUARDED_BY(pool->lock);                 // L: idle_list link
	worker *hnext GUARDED_BY(pool->lock) = nullptr;         // L: busy hash chain
	work_struct *current_work = nullptr; // K: written by the worker under L; it reads it without L, others under L
	work_func_t current_func = nullptr; // K
	pool_workqueue *current_pwq = nullptr; // K
	int current_color GUARDED_BY(pool->lock) = 0;           // L
	uint64_t current_start_ns = 0;   // K
	uint64_t current_at_cpu_ns GUARDED_BY(pool->lock) = 0;  // L: thread CPU time when the monitor first saw
	                                 //    the item, or at its last wake (hog timing)
	bool slept_in_item GUARDED_BY(pool->lock) = false;      // L: a hint or the monitor saw it sleep
	uint64_t cpu_clock_last = 0;     // K: thread CPU clock at its last read
	uint64_t cpu_charged = 0;        // K: wall time charged to short items since
	int nr_short = 0;                // K: short items since the last read
	uint64_t clock_ns = 0;           // K: CLOCK_MONOTONIC at the end of the previous item
	                                 //    (worker_clock_ns) or at its wake (a clock read)
	uint64_t anchor_ns = 0;          // K: the clock read worker_clock_ns derives from
	unsigned long long anchor_cycles = 0; // K: the cycle counter at that read
	bool sleeping GUARDED_BY(pool->lock) = false;           // L: counted out of nr_running (hint or monitor)
	std::atomic<int> hint_depth{0};  // A: nesting of cmwq_blocking_begin, written by its worker (the monitor
	                                 //    reads it under L; a stale read only delays a restore)
	list_head scheduled GUARDED_BY(pool->lock);             // L
	unsigned flags GUARDED_BY(pool->lock) = 0; // L
	worker_pool *pool = nullptr;     // I
	int id = 0;                      // I
	pid_t tid = 0;                   // I: set by the thread before its first L
	uint64_t last_active_ns GUARDED_BY(pool->lock) = 0;     // L
	bool kicked GUARDED_BY(pool->lock) = false;             // L: a wakeup is on its way
	std::atomic<int> wake_cpu{-1}; // unbound: the CPU its last kick keeps it on, or -1 (set under L, read by the kicker)
	std::atomic<int> narrowed{-1}; // unbound: the one CPU its affinity is narrowed to, -1 for the pool's CPUs;
				       // changed by the thread that kicked it, while it sleeps, or by the worker itself while
				       // it runs an item (widening at a backlog, repatriation); never both: a running worker
				       // is not picked. Its first pin precedes its tid, through which kickers narrow it
	bool rescuer = false;            // I
	int last_cpu GUARDED_BY(pool->lock) = -1;               // L: CPU seen when it went idle
	std::atomic<int> wake{0};        // A: 0 idle, 1 woken, 2 asleep in the futex
	std::atomic<int> pins{0};        // A: wakers between pick and wake
	char desc[WORKER_DESC_LEN] = {}; // L: set_worker_desc(); cleared when an item starts
	char current_name[CMWQ_WORK_NAME_LEN] = {}; // K: the item's name (work_struct::name) copied at start
	std::atomic<uint64_t> progress{0};    // A: bumped on every item start
	bool detected GUARDED_BY(pool->lock) = false;           // L: the monitor found it blocked
	// L: progress of the item during which a detected worker was counted
	// running again while items waited (0: none). Until that item ends the
	// monitor also reads its state, not only its switches: a switch record
	// that never comes must not strand the items behind it.
	uint64_t recheck_prog GUARDED_BY(pool->lock) = 0;
	uint64_t mon_prog = 0;           // M: monitor thread only
	uint64_t mon_since = 0;          // M: when it saw that count
	bool mon_out = false;            // M: switched out in its item, block not counted yet (the grace runs)
	uint64_t mon_out_at = 0;         // M: when the monitor saw that switch out
	uint64_t mon_out_prog = 0;       // M: the item whose time out mon_out_ns adds up
	uint64_t mon_out_ns = 0;         // M: time out in that item that was not counted as a block
	pthread_t thread{};              // I: set by the thread before its first L
	workqueue_struct *rescue_wq = nullptr; // I: rescuers only
	bool rescue_stop = false;        // Y: destroy_workqueue stops the rescuer
	// The block detector (detect.cpp): the worker's context-switch event,
	// opened on first need (an open event costs every context switch of
	// the thread, enabled or not), by the worker or by the monitor for a
	// running worker it holds a pin on; written under D, read without it.
	std::atomic<int> perf_fd{-1};    // A: closed at the worker's exit under D
	std::atomic<uint64_t> detect_token{0}; // A: its registry slot and generation, 0 without an event
	std::atomic<bool> perf_on{false}; // A: the event is enabled
	std::atomic<bool> perf_failed{false}; // A: its event could not be opened (sampled instead)
	bool detect_gone = false;        // D: detect_worker_exit ran; nothing opens an event for it any more
	int event_unneeded = 0;          // K: busy periods in a row that did not enable its event
	bool event_used = false;         // K: enabled in this busy period, and disabled at an item's start
	std::atomic<bool> in_item{false}; // A: running its item's function (the worker stores it)
	std::atomic<bool> marked{false};  // A: mirror of detected, for the monitor's look without L
};

// A worker nobody else can see yet (not on a pool, no thread) gets its first
// flags without a lock.
inline void worker_init_flags(worker *w, unsigned f) NO_THREAD_SAFETY_ANALYSIS
{
	w->flags = f;
}

struct wq_node_nr_active {
	pool_mutex lock;            // N (a leaf under L: the same short-hold lock)
	int max GUARDED_BY(lock) = WQ_DFL_MIN_ACTIVE;     // N
	int nr GUARDED_BY(lock) = 0;                      // N
	std::vector<pool_workqueue *> pending GUARDED_BY(lock); // N: FIFO of pwqs waiting for a slot
};

struct alignas(256) pool_workqueue {
	worker_pool *pool = nullptr;     // I while live; pwq_recycle moves it under the old
	                                 //    pool's lock; lock-free readers use pwq_pool()
	workqueue_struct *wq = nullptr;  // I
	int refcnt GUARDED_BY(pool->lock) = 1; // L: base ref + one per queued item
	int nr_in_flight GUARDED_BY(pool->lock) = 0; // L
	int nr_in_flight_color[WORK_NR_COLORS] GUARDED_BY(pool->lock) = {}; // L: items (and barriers) per flush color
	int nr_active GUARDED_BY(pool->lock) = 0; // L
	bool plugged GUARDED_BY(pool->lock) = false; // L
	bool on_pending = false;         // N
	bool released GUARDED_BY(pool->lock) = false; // L
	list_head inactive_works GUARDED_BY(pool->lock); // L
	list_head pwqs_node;             // W
	int slot_node = 0;               // I: index into wq->node_nr_active
	std::atomic<uint64_t> stats[PWQ_NR_STATS] = {}; // A: relaxed counters
	bool on_mayday = false;          // Y
};

// The pool of a pwq read without a lock (from a CPU slot or a state word,
// so the pwq may have been released and reused meanwhile): the caller locks
// it and checks pwq_pool(pwq) == pool again before trusting the pwq.
inline worker_pool *pwq_pool(const pool_workqueue *pwq)
{
	return __atomic_load_n(&pwq->pool, __ATOMIC_ACQUIRE);
}

} // namespace cmwq::detail

// workqueue_struct::magic while the workqueue exists, and after destroy.
inline constexpr uint32_t WQ_MAGIC_LIVE = 0x77716c76;  // "wqlv"
inline constexpr uint32_t WQ_MAGIC_DEAD = 0x77716464;  // "wqdd"

struct workqueue_struct {
	// First checked by every public call that takes a workqueue, so use
	// after destroy_workqueue is refused while the memory is still ours (and
	// always under cmwq.debug_objects, which keeps it). Not the first field:
	// the allocator writes there when the memory is freed.
	uint64_t guard_pad[2] = {};      // I
	std::atomic<uint32_t> magic{WQ_MAGIC_LIVE}; // A
	cmwq::detail::mutex mutex;       // W
	std::string name;                // I
	unsigned flags = 0;              // I: creation flags
	std::atomic<unsigned> aflags{0}; // A: flags plus __WQ_DRAINING/__WQ_DESTROYING
	int saved_max_active GUARDED_BY(mutex) = 0;        // W
	int saved_min_active GUARDED_BY(mutex) = 0;        // W
	std::atomic<int> max_active{0};  // A: effective (0 while frozen)
	int min_active GUARDED_BY(mutex) = 0;              // W
	int nr_drainers GUARDED_BY(mutex) = 0;             // W
	workqueue_attrs unbound_attrs GUARDED_BY(mutex){}; // W: the request
	std::vector<std::atomic<cmwq::detail::pool_workqueue *>> cpu_pwq; // A: by CPU number
	cmwq::detail::pool_workqueue *dfl_pwq GUARDED_BY(mutex) = nullptr; // W
	::list_head pwqs GUARDED_BY(mutex);    // W: oldest first
	// Released pwqs, reused by the next attribute change (their memory is
	// type-stable: lock-free readers may still hold the address), and the
	// counters they had.
	std::vector<cmwq::detail::pool_workqueue *> free_pwqs GUARDED_BY(mutex); // W
	uint64_t retired_stats[PWQ_NR_STATS] GUARDED_BY(mutex) = {};          // W
	std::vector<cmwq::detail::wq_node_nr_active *> node_nr_active; // I: nodes + 1
	// Flush colors: items carry the color current when queued, counted per
	// pwq (pwq->nr_in_flight_color); a flusher advances work_color and waits
	// until no pwq holds an item of an older color.
	cmwq::detail::mutex flush_mutex; // F
	cmwq::detail::cond_var flush_cv; // F
	std::atomic<int> work_color{0};  // A (written under F)
	int flush_color GUARDED_BY(flush_mutex) = 0;             // F: oldest color not yet drained
	std::atomic<int> nr_flushers{0}; // A
	uint64_t flush_gen GUARDED_BY(flush_mutex) = 0;          // F: bumped when a color may have drained
	uint64_t flush_moves GUARDED_BY(flush_mutex) = 0;        // F: times flush_color moved
	// Rescuer (WQ_MEM_RECLAIM)
	cmwq::detail::worker *rescuer = nullptr; // I
	cmwq::detail::mutex mayday_lock; // Y
	std::vector<cmwq::detail::pool_workqueue *> maydays GUARDED_BY(mayday_lock); // Y
	std::atomic<int> busy_refs{0};   // A: deferred actions still to touch it
	bool sysfs = false;              // G
};

namespace cmwq::detail {

// Global state; allocated once and never freed, so a program may return from
// main with workers alive.
struct globals {
	mutex pool_mutex;                      // G
	topology topo;                              // G (copied to readers)
	std::vector<int> usable;                    // I: topo.usable (never changes after start;
	                                            //    some may go offline: online)
	std::vector<int> cpu_index;                 // I: CPU number -> index in usable, -1
	std::vector<worker_pool *> cpu_pools[2];    // I: by CPU number, normal/highpri
	std::vector<worker_pool *> bh_pools[2];     // I
	std::vector<worker_pool *> pools;           // G: by id; reserved at start, never moves
	std::atomic<size_t> nr_pools{0};            // A: pools.size(), published after each push
	                                            //    (get_pool_by_id reads the table without G)
	std::vector<workqueue_struct *> workqueues; // G
	affinity_scope default_scope = affinity_scope::cache_shard; // G
	bool freezing = false;                      // G
	std::vector<int> real_cpus;                 // I: CPUs this process may pin to
	cpumask_t usable_mask{};                    // I
	std::vector<int> requested_unbound;         // G: global cpumask request
	std::vector<int> unbound_cpus;              // G: effective global unbound mask
	                                            //    (the request's online CPUs)
	std::vector<int> online;                    // G: usable CPUs online now (hotplug.cpp)
	std::vector<int> cpu_node;                  // I: node of each CPU number
	int nr_nodes = 1;                           // I
	// The pools' mayday timer function (rescuer.cpp), set at start-up so
	// that pool.cpp arms it without calling up a floor.
	void (*mayday_timeout)(timer_list *) = nullptr; // I
	// In a fork child, what starts with its first worker (the monitor, the
	// control endpoint): a child that only execs creates no thread.
	std::atomic<bool> child_first_use{false};    // A
	void (*child_start)() = nullptr;             // I: fork.cpp
	// The monitor thread sleeps on this until a pool asks to be sampled.
	struct {
		mutex lock;
		cond_var cv;
		bool armed = false;                 // lock
		int efd = -1;                       // lock: eventfd the monitor waits on with the
		                                    //    block detector's events (-1: it waits on cv)
	} monitor;
};

// What must happen after pool->lock is dropped: wakeups of picked workers,
// worker creation, releases, activations on other pools.
struct deferred {
	worker *wake[MAX_DEFERRED_WAKES];
	int nr_wake = 0;
	worker_pool *create = nullptr;
	pool_workqueue *release[MAX_DEFERRED_RELEASES];
	int nr_release = 0;
	pool_workqueue *activate[MAX_DEFERRED_ACTIVATIONS]; // pwqs of other pools that may take a freed slot
	wq_node_nr_active *activate_nna[MAX_DEFERRED_ACTIVATIONS]; // ... of this node
	int nr_activate = 0;
	// A worker of this pool is finishing an item and looks at the worklist
	// again before it sleeps: an item it activates needs no wakeup (the
	// kernel's rule; its next item's start kicks a helper if more wait).
	worker_pool *rechecks = nullptr;
	// Empty again after run(): the counts only (the arrays are read up
	// to them), without zeroing the whole struct per item.
	void reset()
	{
		nr_wake = nr_release = nr_activate = 0;
		create = nullptr;
		rechecks = nullptr;
	}
	// Issues what was collected; nothing to do is the common case.
	void run()
	{
		if (nr_wake | nr_release | nr_activate || create)
			run_collected();
	}
	void run_collected() __attribute__((visibility("hidden"))); // worker.cpp; not ABI
};

// Parameter values (params.cpp registers, parses and prints them).
struct params_t {
	std::atomic<unsigned> cache_shard_size{8};
	std::atomic<bool> power_efficient{false};
	std::atomic<unsigned long> cpu_intensive_thresh_us{10000};
	std::atomic<unsigned> cpu_intensive_warning_thresh{4};
	std::atomic<unsigned long> watchdog_thresh{30};
	std::atomic<unsigned long> timer_callback_warn_us{10000}; // a timer callback that runs longer is reported
	std::atomic<bool> debug_force_rr_cpu{false};
	std::atomic<bool> wake_under_lock{false};
	std::atomic<bool> unbound_local_wake{true}; // keep a ping-pong item's worker on the queueing CPU
	std::atomic<bool> unbound_returning_takes{true}; // a returning worker takes the next item: no wake
	std::atomic<long> fail_worker_creation{0};
	std::atomic<long> fail_thread_creation{0}; // timer, monitor, rescuer threads
	std::atomic<unsigned> idle_spin_ns{0};           // per-CPU and BH pools
	std::atomic<unsigned> unbound_idle_spin_ns{20000}; // unbound pools
	std::atomic<unsigned> blocked_sample_us{200};
	std::atomic<unsigned> block_event_idle_runs{64}; // busy periods without need before a worker closes its event (0: never)
	std::atomic<unsigned> blocked_window_us{500};
	std::atomic<unsigned> block_grace_us{0}; // perf: a switch out counts as a block after this long (0: at once)
	std::atomic<int> block_detect{0};       // requested: block_mode (auto, perf, sample, off)
	std::atomic<long> fail_perf_open{0};    // forces the block detector's fallback
	std::atomic<long> fail_switch_records{0}; // the monitor ignores blocked-switch records (tests)
	std::atomic<bool> unbound_managed{false}; // cmwq.unbound_concurrency=managed
	std::atomic<unsigned> idle_timeout_s{300};
	std::atomic<bool> control{false};
	std::atomic<bool> warn_migration{false}; // the 6.17+ WQ_PERCPU/WQ_UNBOUND and system-wq migration warnings
	std::atomic<bool> panic_on_warn{false};
	// The CPUs' worth of time the process's cgroup quota allows (cgroup v2
	// cpu.max, v1 cfs_quota_us/cfs_period_us, rounded up, the least along
	// the path to the root); 0: no quota. Read at start, writable.
	std::atomic<unsigned> cpu_quota{0};  // whole CPUs the cgroups allow (0: no quota)
	std::atomic<bool> cpu_quota_set{false}; // set by the program: the cgroups' is no longer followed
};

// A fault-injection switch (cmwq.fail_*): -1 fails every attempt, N > 0
// the next N (each call that fails takes one), 0 none.
inline bool fault_injected(std::atomic<long> &sw)
{
	long f = sw.load();
	return f == -1 || (f > 0 && sw.compare_exchange_strong(f, f - 1));
}

// Counter updates. CMWQ_STATS_OFF compiles them out, only to measure what
// they cost (docs/benchmarks-history.md, "What the always-on counters cost"); the counter tests fail in such a build.
// PWQ_STAT_ADD_LOCKED is for counters only ever written under the pwq's
// pool->lock: a relaxed load and store, no locked read-modify-write; readers
// (snapshot) still see whole values.
#if defined(CMWQ_STATS_OFF)
#define PWQ_STAT_ADD(pwq, stat, n) ((void)(pwq))
#define PWQ_STAT_ADD_LOCKED(pwq, stat, n) ((void)(pwq))
#else
#define PWQ_STAT_ADD(pwq, stat, n) (pwq)->stats[stat].fetch_add((n), std::memory_order_relaxed)
#define PWQ_STAT_ADD_LOCKED(pwq, stat, n)                                                          \
	(pwq)->stats[stat].store((pwq)->stats[stat].load(std::memory_order_relaxed) + (n),         \
				 std::memory_order_relaxed)
#endif

// USDT
#if defined(CMWQ_HAVE_SDT)
#define CMWQ_PROBE2(n, a, b) DTRACE_PROBE2(workqueue, n, a, b)
#define CMWQ_PROBE3(n, a, b, c) DTRACE_PROBE3(workqueue, n, a, b, c)
#define CMWQ_PROBE5(n, a, b, c, d, e) DTRACE_PROBE5(workqueue, n, a, b, c, d, e)
#else
#define CMWQ_PROBE2(n, a, b) do { } while (0)
#define CMWQ_PROBE3(n, a, b, c) do { } while (0)
#define CMWQ_PROBE5(n, a, b, c, d, e) do { } while (0)
#endif

} // namespace cmwq::detail
