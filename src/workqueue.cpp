// workqueue.cpp - the engine: pools, workers, pool_workqueues, queueing,
// flushing, cancelling, max_active accounting.
//
// It follows kernel/workqueue.c's algorithms with user-space mechanisms:
// pool->lock is a mutex, workers sleep on a futex word, and wakeups are
// issued after the pool lock is dropped (picked and pinned under the lock).
// The scheduler's sleep hooks become blocking hints plus the monitor's
// detection (monitor.cpp); RCU becomes "never free what a lock-free reader
// may still hold" (pools, retired pwqs).
#include "internal.h"

#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <set>
#include <thread>

namespace cmwq::detail {

// ---- small helpers ---------------------------------------------------------

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

static void futex_wait(std::atomic<int> *a, int val)
{
	syscall(SYS_futex, reinterpret_cast<int *>(a), FUTEX_WAIT_PRIVATE, val, nullptr, nullptr, 0);
}
static void futex_wake(std::atomic<int> *a, int n)
{
	syscall(SYS_futex, reinterpret_cast<int *>(a), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}

std::string func_name(work_func_t f)
{
	Dl_info info;
	char buf[64];
	if (f && dladdr(reinterpret_cast<void *>(f), &info) && info.dli_sname)
		return info.dli_sname;
	snprintf(buf, sizeof(buf), "%p", reinterpret_cast<void *>(f));
	return buf;
}

void warn_once_msg(const std::string &key, const std::string &msg)
{
	static std::mutex *m = new std::mutex;
	static std::set<std::string> *seen = new std::set<std::string>;
	std::lock_guard lk(*m);
	if (seen->insert(key).second)
		fprintf(stderr, "%s\n", msg.c_str());
}

static void spin_pause(int &n)
{
	if (++n < 64)
		__builtin_ia32_pause();
	else
		sched_yield();
}

thread_local worker *tl_worker = nullptr;

// ---- deferred actions: what must happen after pool->lock is dropped ---------



static void wake_worker(worker *w)
{
	if (w->wake.exchange(1, std::memory_order_acq_rel) == 2)
		futex_wake(&w->wake, 1);
	w->pins.fetch_sub(1, std::memory_order_release);
}

// ---- pools ----------------------------------------------------------------

static worker_pool *get_pool_by_id(unsigned long id)
{
	auto &gl = g();
	// pools only grow; the vector is reserved up front so readers never see a
	// reallocation (see ensure_started).
	if (id >= gl.pools.size())
		return nullptr;
	return gl.pools[id];
}

static unsigned hash_work(const work_struct *w)
{
	return static_cast<unsigned>((reinterpret_cast<uintptr_t>(w) >> 4) * 0x9E3779B1u) >> 26;
}

static worker *find_worker_executing_work(worker_pool *pool, work_struct *work)
{
	for (worker *w = pool->busy_hash[hash_work(work)]; w; w = w->hnext)
		if (w->current_work == work && w->current_func == work->func)
			return w;
	return nullptr;
}

static void hash_add(worker_pool *pool, worker *w)
{
	unsigned h = hash_work(w->current_work);
	w->hnext = pool->busy_hash[h];
	pool->busy_hash[h] = w;
}

static void hash_del(worker_pool *pool, worker *w)
{
	worker **pp = &pool->busy_hash[hash_work(w->current_work)];
	while (*pp != w)
		pp = &(*pp)->hnext;
	*pp = w->hnext;
	w->hnext = nullptr;
}

static void worker_set_flags(worker *w, unsigned f)
{
	if ((f & WORKER_NOT_RUNNING) && !(w->flags & WORKER_NOT_RUNNING))
		w->pool->nr_running--;
	w->flags |= f;
}

static void worker_clr_flags(worker *w, unsigned f)
{
	unsigned old = w->flags;
	w->flags &= ~f;
	if ((f & WORKER_NOT_RUNNING) && (old & WORKER_NOT_RUNNING) && !(w->flags & WORKER_NOT_RUNNING))
		w->pool->nr_running++;
}

static void idle_timer_fn(timer_list *t);

static void worker_enter_idle(worker *w)
{
	worker_pool *pool = w->pool;
	w->flags |= WORKER_IDLE;
	pool->nr_idle++;
	// A worker going idle read the clock when its last item ended.
	w->last_active_ns = w->clock_ns ? w->clock_ns : now_ns();
	list_add(&w->entry, &pool->idle_list);
	if (too_many_workers(pool->counts()))
		timer_add_if_idle(&pool->idle_timer,
				  w->last_active_ns + params().idle_timeout_s.load() * 1000000000ull, idle_timer_fn);
}

static void worker_leave_idle(worker *w)
{
	worker_pool *pool = w->pool;
	w->flags &= ~WORKER_IDLE;
	pool->nr_idle--;
	list_del_init(&w->entry);
	w->kicked = false;
}

// Pick an idle worker to run the pool's items; the wakeup itself is issued
// by deferred::run() after the lock is dropped (or here, under the lock,
// when cmwq.wake_under_lock=1 asks for the old order). Returns whether a
// worker is on its way.
static bool kick_pool(worker_pool *pool, deferred &d)
{
	if (!need_more_worker(pool->counts()))
		return false;
	if (list_empty(&pool->idle_list)) {
		if (pool->nr_workers == 0 && !pool->creating && now_ns() >= pool->create_fail_until_ns)
			d.create = pool;
		else if (!pool->max_workers || pool->nr_workers < pool->max_workers)
			mayday_arm(pool);
		return false;
	}
	worker *w = container_of(pool->idle_list.next, worker, entry);
	if (w->kicked)
		return true;
	if (pool->cpu < 0) {
		// Unbound pools: among the few most recently idle workers, prefer
		// one that last ran on this CPU; waking it is a same-CPU wakeup,
		// far cheaper than an IPI to another CPU (the scheduler's
		// wake-affine choice, which user space has to make itself).
		int cpu = sched_getcpu();
		int n = 0;
		for (list_head *e = pool->idle_list.next; e != &pool->idle_list && n < 4; e = e->next, n++) {
			worker *c = container_of(e, worker, entry);
			if (c->last_cpu == cpu && !c->kicked) {
				w = c;
				break;
			}
		}
	}
	w->kicked = true;
	if (!pool->strict && w->last_cpu >= 0 &&
	    !std::binary_search(pool->pod_cpus.begin(), pool->pod_cpus.end(), w->last_cpu)) {
		// Repatriation: the worker moves itself into the pod when it starts
		// the item (worker_repatriate); counted on the first item's pwq.
		work_struct *first = entry_work(pool->worklist.next);
		unsigned long data = work_data(first);
		if (data & WORK_STRUCT_PWQ)
			PWQ_STAT_ADD(reinterpret_cast<pool_workqueue *>(data & ~((1UL << WORK_STRUCT_PWQ_SHIFT) - 1)),
				     PWQ_STAT_REPATRIATED, 1);
	}
	w->pins.fetch_add(1, std::memory_order_relaxed);
	if (params().wake_under_lock.load(std::memory_order_relaxed) || d.nr_wake == 4)
		wake_worker(w);
	else
		d.wake[d.nr_wake++] = w;
	return true;
}

// ---- pool_workqueue accounting --------------------------------------------

static pool_workqueue *data_pwq(unsigned long data)
{
	return reinterpret_cast<pool_workqueue *>(data & ~((1UL << WORK_STRUCT_PWQ_SHIFT) - 1));
}

static worker_pool *get_work_pool(work_struct *work)
{
	unsigned long data = work_data(work);
	if (data & WORK_STRUCT_PWQ)
		return data_pwq(data)->pool;
	unsigned long id = offq_pool(data);
	if (id == WORK_OFFQ_POOL_NONE)
		return nullptr;
	return get_pool_by_id(id);
}

static void get_pwq(pool_workqueue *pwq) { pwq->refcnt++; }

static void put_pwq(pool_workqueue *pwq, deferred &d)
{
	if (--pwq->refcnt)
		return;
	pwq->released = true;
	// destroy_workqueue waits for busy_refs, so it cannot free the pwq or
	// the workqueue before this release has run.
	pwq->wq->busy_refs.fetch_add(1, std::memory_order_acq_rel);
	if (d.nr_release < 2) {
		d.release[d.nr_release++] = pwq;
	} else {
		pwq_release(pwq); // cannot happen today: one release per locked section
	}
}

static bool wq_unbound(const workqueue_struct *wq) { return wq->flags & WQ_UNBOUND; }

static wq_node_nr_active *pwq_nna(pool_workqueue *pwq)
{
	if (!wq_unbound(pwq->wq))
		return nullptr;
	return pwq->wq->node_nr_active[pwq->slot_node];
}

static bool nna_full(wq_node_nr_active *nna)
{
	std::lock_guard lk(nna->lock);
	return nna->nr >= nna->max;
}

static void nna_remove_pending(wq_node_nr_active *nna, pool_workqueue *pwq)
{
	if (!pwq->on_pending)
		return;
	auto it = std::find(nna->pending.begin(), nna->pending.end(), pwq);
	if (it != nna->pending.end())
		nna->pending.erase(it);
	pwq->on_pending = false;
}

// Try to take an active slot for one item of pwq (kernel pwq_tryinc_nr_active).
static bool pwq_tryinc_nr_active(pool_workqueue *pwq, bool fill)
{
	workqueue_struct *wq = pwq->wq;
	if (pwq->plugged)
		return false;
	wq_node_nr_active *nna = pwq_nna(pwq);
	if (!nna) {
		if (pwq->nr_active < wq->max_active.load(std::memory_order_relaxed)) {
			pwq->nr_active++;
			return true;
		}
		return false;
	}
	std::lock_guard lk(nna->lock);
	if (pwq->on_pending && !fill && nna->pending.front() != pwq)
		return false;
	if (nna->nr < nna->max) {
		nna->nr++;
		nna_remove_pending(nna, pwq);
		pwq->nr_active++;
		return true;
	}
	if (!pwq->on_pending) {
		nna->pending.push_back(pwq);
		pwq->on_pending = true;
	}
	return false;
}

static void move_linked_works(work_struct *work, list_head *head)
{
	list_head *e = &work->entry;
	for (;;) {
		list_head *next = e->next;
		bool linked = work_data(entry_work(e)) & WORK_STRUCT_LINKED;
		list_move_tail(e, head);
		if (!linked)
			break;
		e = next;
	}
}

static void pwq_activate_work(pool_workqueue *pwq, work_struct *work)
{
	worker_pool *pool = pwq->pool;
	if (list_empty(&pool->worklist))
		pool->last_progress_ns = now_ns();
	move_linked_works(work, &pool->worklist);
	__atomic_fetch_and(&work->data, ~WORK_STRUCT_INACTIVE, __ATOMIC_RELEASE);
	CMWQ_PROBE2(workqueue_activate_work, work, work->func);
}

// Activate the first inactive item if a slot is free. Called under pool->lock.
static bool pwq_activate_first_inactive(pool_workqueue *pwq, bool fill)
{
	if (list_empty(&pwq->inactive_works))
		return false;
	if (!pwq_tryinc_nr_active(pwq, fill))
		return false;
	pwq_activate_work(pwq, entry_work(pwq->inactive_works.next));
	return true;
}

static void node_activate_pending(pool_workqueue *pwq, wq_node_nr_active *nna, deferred &d);

static void pwq_dec_nr_active(pool_workqueue *pwq, deferred &d)
{
	pwq->nr_active--;
	wq_node_nr_active *nna = pwq_nna(pwq);
	if (!nna) {
		if (pwq_activate_first_inactive(pwq, true))
			kick_pool(pwq->pool, d);
		return;
	}
	{
		std::lock_guard lk(nna->lock);
		nna->nr--;
	}
	node_activate_pending(pwq, nna, d);
}

// A slot of nna is free: give it to the first waiting pwq that has an
// inactive item (kernel node_activate_pending_pwq). pwqs of our own pool are
// handled here; the first of another pool is handed to deferred::run, which
// calls node_activate_pending_unlocked() if it had nothing after all.
static void node_activate_pending(pool_workqueue *pwq, wq_node_nr_active *nna, deferred &d)
{
	for (;;) {
	pool_workqueue *next = nullptr;
	{
		std::lock_guard lk(nna->lock);
		if (nna->nr < nna->max && !nna->pending.empty()) {
			next = nna->pending.front();
			// Rotate: round robin across waiting pwqs.
			nna->pending.erase(nna->pending.begin());
			next->on_pending = false;
		}
	}
	if (!next) {
		// Nobody else waits on this node: our own backlog takes the slot
		// (also how an unplugged ordered pwq keeps going).
		if (pwq && pwq_activate_first_inactive(pwq, false))
			kick_pool(pwq->pool, d);
		return;
	}
	if (pwq && next->pool == pwq->pool) {
		bool activated = pwq_activate_first_inactive(next, true);
		if (activated)
			kick_pool(next->pool, d);
		if (!list_empty(&next->inactive_works)) {
			std::lock_guard lk(nna->lock);
			if (!next->on_pending) {
				nna->pending.push_back(next);
				next->on_pending = true;
			}
		}
		if (activated || nna_full(nna))
			return;
		continue; // it had nothing (cancelled): try the next waiter
	} else if (d.nr_activate < 2) {
		// Activated after our lock is dropped; busy_refs keeps the
		// workqueue (and so the pwq) from being freed meanwhile.
		next->wq->busy_refs.fetch_add(1, std::memory_order_acq_rel);
		d.activate[d.nr_activate++] = next;
	} else {
		std::lock_guard lk(nna->lock);
		nna->pending.insert(nna->pending.begin(), next);
		next->on_pending = true;
	}
	return;
	}
}

static void flush_color_done(workqueue_struct *wq);


static void pwq_dec_nr_in_flight(pool_workqueue *pwq, unsigned long data, deferred &d)
{
	if (!(data & WORK_STRUCT_INACTIVE))
		pwq_dec_nr_active(pwq, d);
	workqueue_struct *wq = pwq->wq;
	int color = work_color(data);
	// Flushers are told under pool->lock (flush_mutex nests inside it), so
	// once destroy_workqueue has taken this pool's lock no worker still
	// touches the workqueue. A flusher that scanned this pwq before this
	// completion had raised nr_flushers before its scan took this lock.
	if (--pwq->nr_in_flight_color[color] == 0 && wq->nr_flushers.load(std::memory_order_seq_cst) > 0)
		flush_color_done(wq);
	pwq->nr_in_flight--;
	put_pwq(pwq, d);
}

// ---- workers -----------------------------------------------------------------

static bool create_worker(worker_pool *pool);
static void process_scheduled_works(worker *w, deferred &d, std::unique_lock<pool_mutex> &lk);

static bool manage_workers(worker *w, std::unique_lock<pool_mutex> &lk)
{
	worker_pool *pool = w->pool;
	if (pool->flags & POOL_MANAGER_ACTIVE)
		return false;
	if (pool->max_workers && pool->nr_workers >= pool->max_workers)
		return false;
	if (now_ns() < pool->create_fail_until_ns)
		return false; // cooling down; the mayday timer retries and calls rescuers
	pool->flags |= POOL_MANAGER_ACTIVE;
	// Whether the lock was dropped: then the caller's checks are stale (the
	// item it saw may have been taken meanwhile, by another worker or the
	// rescuer) and it must look again, whether or not a worker was created.
	bool dropped = false;
	while (need_to_create_worker(pool->counts())) {
		lk.unlock();
		dropped = true;
		bool ok = create_worker(pool);
		lk.lock();
		if (!ok) {
			pool->create_fail_until_ns = now_ns() + 1000000000ull; // CREATE_COOLDOWN
			mayday_arm(pool);
			break;
		}
	}
	pool->flags &= ~POOL_MANAGER_ACTIVE;
	return dropped;
}

static bool assign_work(work_struct *work, worker *w)
{
	worker_pool *pool = w->pool;
	worker *collision = find_worker_executing_work(pool, work);
	if (collision) {
		move_linked_works(work, &collision->scheduled);
		return false;
	}
	move_linked_works(work, &w->scheduled);
	return true;
}

static void pin_self(const std::vector<int> &cpus)
{
	auto &gl = g();
	cpu_set_t set;
	CPU_ZERO(&set);
	int n = 0;
	for (int c : cpus)
		if (std::binary_search(gl.real_cpus.begin(), gl.real_cpus.end(), c) && c < CPU_SETSIZE) {
			CPU_SET(c, &set);
			n++;
		}
	if (n)
		sched_setaffinity(0, sizeof(set), &set);
}

static void worker_repatriate(worker *w)
{
	worker_pool *pool = w->pool;
	int cpu = sched_getcpu();
	if (std::binary_search(pool->pod_cpus.begin(), pool->pod_cpus.end(), cpu))
		return;
	// Narrow to the pod (the kernel moves the wake CPU), then widen again so
	// the scheduler may move it later, as with affinity_strict=0.
	pin_self(pool->pod_cpus);
	pin_self(pool->cpus);
}

static void process_one_work(worker *w, work_struct *work, deferred &d,
			     std::unique_lock<pool_mutex> &lk)
{
	worker_pool *pool = w->pool;
	unsigned long data = work_data(work);
	pool_workqueue *pwq = data_pwq(data);
	workqueue_struct *wq = pwq->wq;

	w->current_work = work;
	w->current_func = work->func;
	w->current_pwq = pwq;
	w->current_color = work_color(data);
	// The clock was read when the previous item ended (or at the wake): the
	// bookkeeping in between is far below anything the start time is used
	// for (hog and watchdog thresholds), and a read costs ~40 ns in a VM.
	w->current_start_ns = w->clock_ns;
	hash_add(pool, w);
	list_del_init(&work->entry);
	// Items still wait behind us on a concurrency-managed pool: if we block
	// without a hint, the monitor must notice.
	if (pool->cpu >= 0 && !(pool->flags & POOL_BH) && !list_empty(&pool->worklist) && !w->rescuer)
		monitor_watch(pool);
	if (wq->flags & WQ_CPU_INTENSIVE)
		worker_set_flags(w, WORKER_CPU_INTENSIVE);
	kick_pool(pool, d);
	// Release PENDING: the owner's stores become visible to the next owner,
	// and the function's loads cannot move above it (acquire): a queuer whose
	// test-and-set found PENDING still set wrote before this exchange, which
	// reads its value. One locked exchange instead of a store and a fence.
	__atomic_exchange_n(&work->data, make_offq(static_cast<unsigned long>(pool->id), 0,
						    pool->flags & POOL_BH),
			    __ATOMIC_ACQ_REL);
	PWQ_STAT_ADD_LOCKED(pwq, PWQ_STAT_STARTED, 1);
	// Written by this worker only (the monitor reads it): no locked add.
	w->progress.store(w->progress.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
	work_func_t fn = w->current_func;
	lk.unlock();
	d.run();
	d = deferred{};

	if (!pool->strict && !w->rescuer)
		worker_repatriate(w);
	// CPU time without a system call per item (thread CPU clocks have no
	// vDSO path; the kernel samples on the tick instead): an item shorter
	// than 50 us of wall time is charged its wall time; a longer one reads
	// the thread's CPU clock and is charged what the thread used since the
	// last read minus what short items were charged. The baseline is re-read
	// every 1024 short items, so the loop's own overhead that a long item may
	// absorb (~0.2 us per short item) stays far below the hog threshold; the
	// read is a system call (1.4-2.6 us in a VM), so every 64 items cost the
	// per-CPU fan-out ~30 ns per item.
	uint64_t t0 = w->current_start_ns;
	CMWQ_PROBE2(workqueue_execute_start, work, fn);
	fn(work);
	CMWQ_PROBE2(workqueue_execute_end, work, fn);
	w->clock_ns = now_ns();
	uint64_t wall = w->clock_ns - t0;
	uint64_t cpu = wall;
	if (wall >= 50000) {
		uint64_t c = thread_cpu_ns(0);
		uint64_t since = c - w->cpu_clock_last;
		cpu = since > w->cpu_charged ? since - w->cpu_charged : 0;
		w->cpu_clock_last = c;
		w->cpu_charged = 0;
		w->nr_short = 0;
	} else if (++w->nr_short >= 1024) {
		w->cpu_clock_last = thread_cpu_ns(0);
		w->cpu_charged = 0;
		w->nr_short = 0;
	} else {
		w->cpu_charged += wall;
	}

	lk.lock();
	PWQ_STAT_ADD_LOCKED(pwq, PWQ_STAT_CPU_TIME, cpu / 1000);
	PWQ_STAT_ADD_LOCKED(pwq, PWQ_STAT_COMPLETED, 1);
	if (w->sleeping && w->hint_depth == 0) {
		// The monitor had found it blocked; it runs again.
		w->sleeping = false;
		w->detected = false;
		if (!(w->flags & WORKER_NOT_RUNNING))
			pool->nr_running++;
	}
	// An item that slept is judged by the monitor, whose count restarts
	// after each sleep; one that never slept is judged here.
	if (!w->slept_in_item)
		hog_account(w, pwq, cpu, w->flags & WORKER_CPU_INTENSIVE);
	w->slept_in_item = false;
	worker_clr_flags(w, WORKER_CPU_INTENSIVE);
	w->last_func = fn;
	hash_del(pool, w);
	w->current_work = nullptr;
	w->current_func = nullptr;
	w->current_pwq = nullptr;
	pwq_dec_nr_in_flight(pwq, data, d);
}

static void process_scheduled_works(worker *w, deferred &d, std::unique_lock<pool_mutex> &lk)
{
	bool first = true;
	while (!list_empty(&w->scheduled)) {
		work_struct *work = entry_work(w->scheduled.next);
		if (first) {
			w->pool->last_progress_ns = w->clock_ns;
			first = false;
		}
		process_one_work(w, work, d, lk);
	}
}

static void set_thread_name(worker *w)
{
	char name[32];
	worker_pool *pool = w->pool;
	if (pool->cpu >= 0)
		snprintf(name, sizeof(name), "kworker/%d:%d%s", pool->cpu, w->id, pool->highpri ? "H" : "");
	else
		snprintf(name, sizeof(name), "kworker/u%d:%d", pool->id, w->id);
	name[15] = 0; // the kernel's comm limit
	pthread_setname_np(pthread_self(), name);
}

static void apply_nice(int nice)
{
	if (nice == 0)
		return;
	if (setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice) == 0)
		return;
	struct rlimit rl;
	int lowest = 0;
	if (getrlimit(RLIMIT_NICE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		lowest = 20 - static_cast<int>(rl.rlim_cur);
	lowest = std::max(lowest, nice);
	if (lowest < 0)
		setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), lowest);
	warn_once_msg("nice", "cmwq: cannot set nice " + std::to_string(nice) +
				      " for high-priority workers (needs CAP_SYS_NICE or RLIMIT_NICE); using " +
				      std::to_string(std::min(lowest, 0)));
}

static void worker_thread(worker *w)
{
	worker_pool *pool = w->pool;
	tl_worker = w;
	w->thread = pthread_self(); // published by the tid store below
	w->cpu_clock_last = thread_cpu_ns(0);
	w->clock_ns = now_ns();
	__atomic_store_n(&w->tid, static_cast<pid_t>(syscall(SYS_gettid)), __ATOMIC_RELEASE);
	set_thread_name(w);
	pin_self(pool->cpus);
	apply_nice(pool->nice);

	deferred d;
	std::unique_lock lk(pool->lock);
	for (;;) {
		if (w->flags & WORKER_DIE)
			break;
		worker_leave_idle(w);
	recheck:
		if (!need_more_worker(pool->counts()))
			goto sleep;
		if (!may_start_working(pool->counts()) && manage_workers(w, lk))
			goto recheck;
		worker_clr_flags(w, WORKER_PREP);
		do {
			work_struct *work = entry_work(pool->worklist.next);
			if (assign_work(work, w))
				process_scheduled_works(w, d, lk);
		} while (keep_working(pool->counts()));
		worker_set_flags(w, WORKER_PREP);
	sleep:
		worker_enter_idle(w);
		w->last_cpu = sched_getcpu();
		w->wake.store(0, std::memory_order_relaxed);
		lk.unlock();
		d.run();
		d = deferred{};
		{
			unsigned spin_ns = params().idle_spin_ns.load(std::memory_order_relaxed);
			if (spin_ns) {
				uint64_t until = now_ns() + spin_ns;
				while (w->wake.load(std::memory_order_acquire) == 0 && now_ns() < until)
					__builtin_ia32_pause();
			}
			int expected = 0;
			if (w->wake.compare_exchange_strong(expected, 2, std::memory_order_acq_rel))
				while (w->wake.load(std::memory_order_acquire) == 2)
					futex_wait(&w->wake, 2);
		}
		w->clock_ns = now_ns();
		lk.lock();
	}
	// Dying: the culler already took us off the idle list and the counts.
	auto &ws = pool->workers;
	ws.erase(std::find(ws.begin(), ws.end(), w));
	lk.unlock();
	int n = 0;
	while (w->pins.load(std::memory_order_acquire))
		spin_pause(n);
	delete w;
}

static bool create_worker(worker_pool *pool)
{
	long f = params().fail_worker_creation.load();
	if (f == -1 || (f > 0 && params().fail_worker_creation.compare_exchange_strong(f, f - 1))) {
		warn_once_msg("create-fail", "cmwq: Failed to create a worker thread (injected by cmwq.fail_worker_creation)");
		return false;
	}
	auto *w = new worker;
	INIT_LIST_HEAD(&w->entry);
	INIT_LIST_HEAD(&w->scheduled);
	w->pool = pool;
	w->flags = WORKER_PREP | ((pool->cpu < 0 || (pool->flags & POOL_BH)) ? unsigned(WORKER_UNBOUND) : 0u);
	{
		std::lock_guard lk(pool->lock);
		w->id = pool->next_worker_id++;
		pool->workers.push_back(w);
		pool->nr_workers++;
		worker_enter_idle(w);
		w->wake.store(1);
	}
	try {
		std::thread(worker_thread, w).detach();
	} catch (const std::system_error &e) {
		std::lock_guard lk(pool->lock);
		worker_leave_idle(w);
		pool->nr_workers--;
		auto &ws = pool->workers;
		ws.erase(std::find(ws.begin(), ws.end(), w));
		pool->lock.unlock();
		int n = 0;
		while (w->pins.load(std::memory_order_acquire)) // a kicker picked it
			spin_pause(n);
		pool->lock.lock();
		delete w;
		warn_once_msg("create-fail-real", std::string("cmwq: Failed to create a worker thread: ") + e.what() +
							  " (retrying after a 1 s cooldown)");
		return false;
	}
	return true;
}

static void idle_timer_fn(timer_list *t)
{
	worker_pool *pool = container_of(t, worker_pool, idle_timer);
	std::vector<worker *> dying;
	{
		std::lock_guard lk(pool->lock);
		uint64_t timeout = params().idle_timeout_s.load() * 1000000000ull;
		while (too_many_workers(pool->counts())) {
			worker *w = container_of(pool->idle_list.prev, worker, entry);
			uint64_t expires = w->last_active_ns + timeout;
			if (w->kicked)
				break;
			if (now_ns() < expires) {
				timer_add(&pool->idle_timer, expires, idle_timer_fn);
				break;
			}
			worker_leave_idle(w);
			w->flags |= WORKER_DIE;
			pool->nr_workers--;
			w->pins.fetch_add(1);
			dying.push_back(w);
		}
	}
	for (worker *w : dying)
		wake_worker(w);
}

// ---- deferred actions --------------------------------------------------------


// A pwq's count of some color reached zero while someone flushes: the
// flushers re-scan (they advance flush_color themselves).
static void flush_color_done(workqueue_struct *wq)
{
	std::lock_guard lk(wq->flush_mutex);
	wq->flush_gen++;
	wq->flush_cv.notify_all();
}

void deferred::run()
{
	for (int i = 0; i < nr_wake; i++)
		wake_worker(wake[i]);
	for (int i = 0; i < nr_activate; i++) {
		pool_workqueue *pwq = activate[i];
		deferred d;
		bool activated;
		wq_node_nr_active *nna = pwq_nna(pwq);
		{
			std::lock_guard lk(pwq->pool->lock);
			activated = pwq_activate_first_inactive(pwq, true);
			if (activated)
				kick_pool(pwq->pool, d);
			if (!list_empty(&pwq->inactive_works)) {
				std::lock_guard nl(nna->lock);
				if (!pwq->on_pending) {
					nna->pending.push_back(pwq);
					pwq->on_pending = true;
				}
			}
		}
		d.run();
		if (!activated) {
			// Nothing there after all: offer the slot to the next waiter.
			deferred d2;
			node_activate_pending(nullptr, nna, d2);
			d2.run();
		}
		pwq->wq->busy_refs.fetch_sub(1, std::memory_order_acq_rel);
	}
	for (int i = 0; i < nr_release; i++) {
		workqueue_struct *wq = release[i]->wq;
		pwq_release(release[i]);
		wq->busy_refs.fetch_sub(1, std::memory_order_acq_rel);
	}
	if (create) {
		worker_pool *pool = create;
		{
			std::lock_guard lk(pool->lock);
			if (pool->creating || !need_to_create_worker(pool->counts()) ||
			    now_ns() < pool->create_fail_until_ns ||
			    (pool->max_workers && pool->nr_workers >= pool->max_workers))
				return;
			pool->creating = true;
		}
		bool ok = create_worker(pool);
		deferred d;
		{
			std::lock_guard lk(pool->lock);
			pool->creating = false;
			if (!ok) {
				pool->create_fail_until_ns = now_ns() + 1000000000ull;
				mayday_arm(pool);
			}
			kick_pool(pool, d);
		}
		d.run();
	}
}

// ---- blocking hints (kernel wq_worker_sleeping / wq_worker_running) ----------

void worker_sleeping(worker *w, bool from_monitor);
void worker_running(worker *w);

void worker_sleeping(worker *w, bool from_monitor)
{
	deferred d;
	{
		std::lock_guard lk(w->pool->lock);
		if (w->sleeping || (w->flags & WORKER_NOT_RUNNING) || !w->current_work)
			return;
		w->sleeping = true;
		w->slept_in_item = true;
		w->pool->nr_running--;
		if (kick_pool(w->pool, d) && w->current_pwq)
			PWQ_STAT_ADD(w->current_pwq, PWQ_STAT_CM_WAKEUP, 1);
		(void)from_monitor;
	}
	d.run();
}

void worker_running(worker *w)
{
	std::lock_guard lk(w->pool->lock);
	if (!w->sleeping)
		return;
	w->sleeping = false;
	w->detected = false;
	if (!(w->flags & WORKER_NOT_RUNNING))
		w->pool->nr_running++;
	w->current_at_cpu_ns = thread_cpu_ns(0); // hog timing restarts after a sleep
}

uint64_t thread_cpu_ns(pid_t)
{
	timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// ---- CPU selection -----------------------------------------------------------

static int current_cpu()
{
	auto &gl = g();
	int cpu = sched_getcpu();
	if (cpu >= 0 && cpu < static_cast<int>(gl.cpu_index.size()) && gl.cpu_index[cpu] >= 0)
		return cpu;
	if (cpu < 0)
		cpu = 0;
	return gl.usable[static_cast<size_t>(cpu) % gl.usable.size()];
}

static int wq_select_unbound_cpu(int cpu)
{
	auto &gl = g();
	if (!params().debug_force_rr_cpu.load(std::memory_order_relaxed))
		return cpu;
	warn_once_msg("rr", "workqueue: round-robin CPU selection forced, expect performance impact");
	thread_local size_t rr = 0;
	rr = (rr + 1) % gl.usable.size();
	return gl.usable[rr];
}

static bool cpu_usable(int cpu)
{
	auto &gl = g();
	return cpu >= 0 && cpu < static_cast<int>(gl.cpu_index.size()) && gl.cpu_index[cpu] >= 0;
}

// ---- queueing --------------------------------------------------------------

static bool is_chained_work(workqueue_struct *wq)
{
	worker *w = tl_worker;
	return w && w->current_pwq && w->current_pwq->wq == wq;
}

static void insert_work(pool_workqueue *pwq, work_struct *work, list_head *head, unsigned long extra)
{
	__atomic_store_n(&work->data,
			 reinterpret_cast<unsigned long>(pwq) | WORK_STRUCT_PENDING | WORK_STRUCT_PWQ | extra,
			 __ATOMIC_RELEASE);
	list_add_tail(&work->entry, head);
	get_pwq(pwq);
}

static void clear_pending_keep_offq(work_struct *work)
{
	__atomic_fetch_and(&work->data, ~WORK_STRUCT_PENDING, __ATOMIC_RELEASE);
}

static void __queue_work(int req_cpu, workqueue_struct *wq, work_struct *work)
{
	unsigned wqf = wq->aflags.load(std::memory_order_acquire);
	if ((wqf & (__WQ_DESTROYING | __WQ_DRAINING)) && !is_chained_work(wq)) {
		warn_once_msg("cannot-queue-" + wq->name, "workqueue: cannot queue " + func_name(work->func) +
								    " on wq " + wq->name);
		clear_pending_keep_offq(work);
		return;
	}
	if (wqf & __WQ_DEPRECATED)
		warn_once_msg("deprecated-" + wq->name,
			      "workqueue: " + wq->name + " is deprecated; use system_percpu_wq or system_dfl_wq");
	deferred d;
	for (int tries = 0;; tries++) {
		int cpu = req_cpu;
		if (cpu == WORK_CPU_UNBOUND || !cpu_usable(cpu)) {
			if (cpu != WORK_CPU_UNBOUND)
				warn_once_msg("bad-cpu", "cmwq: queue_work_on: CPU " + std::to_string(cpu) +
								 " is not usable (not online or outside the process affinity mask); "
								 "using the current CPU");
			cpu = current_cpu();
			if (wqf & WQ_UNBOUND)
				cpu = wq_select_unbound_cpu(cpu);
		}
		pool_workqueue *pwq = wq->cpu_pwq[static_cast<size_t>(cpu)].load(std::memory_order_acquire);
		worker_pool *pool = pwq->pool;
		worker_pool *last_pool = (wqf & __WQ_ORDERED) ? nullptr : get_work_pool(work);
		std::unique_lock<pool_mutex> lk;
		if (last_pool && last_pool != pool) {
			lk = std::unique_lock(last_pool->lock);
			worker *w = find_worker_executing_work(last_pool, work);
			if (w && w->current_pwq->wq == wq) {
				pwq = w->current_pwq;
				pool = last_pool;
			} else {
				lk.unlock();
				lk = std::unique_lock(pool->lock);
			}
		} else {
			lk = std::unique_lock(pool->lock);
		}
		if (pwq->refcnt == 0 || pwq->released) {
			lk.unlock();
			int n = 0;
			spin_pause(n);
			continue;
		}
		CMWQ_PROBE5(workqueue_queue_work, work, work->func, wq->name.c_str(), req_cpu, pool->cpu);
		// Read under pool->lock: a flusher that moves work_color on scans
		// this pwq under the same lock afterwards, so it either sees this
		// item counted in the old color or this load sees the new color.
		int color = wq->work_color.load(std::memory_order_relaxed);
		pwq->nr_in_flight_color[color]++;
		pwq->nr_in_flight++;
		unsigned long cflags = static_cast<unsigned long>(color) << WORK_STRUCT_COLOR_SHIFT;
		if (list_empty(&pwq->inactive_works) && pwq_tryinc_nr_active(pwq, false)) {
			if (list_empty(&pool->worklist))
				pool->last_progress_ns = now_ns();
			insert_work(pwq, work, &pool->worklist, cflags);
			CMWQ_PROBE2(workqueue_activate_work, work, work->func);
			if (!kick_pool(pool, d) && pool->nr_running > 0 && pool->cpu >= 0 &&
			    !(pool->flags & POOL_BH))
				monitor_watch(pool);
		} else {
			insert_work(pwq, work, &pwq->inactive_works, cflags | WORK_STRUCT_INACTIVE);
		}
		break;
	}
	d.run();
}

// true if the item is disabled: PENDING was released and the caller fails.
static bool clear_pending_if_disabled(work_struct *work)
{
	unsigned long data = work_data(work);
	if (data & WORK_STRUCT_PWQ)
		return false;
	if (!offq_depth(data))
		return false;
	clear_pending_keep_offq(work);
	return true;
}

static bool test_and_set_pending(work_struct *work)
{
	return __atomic_fetch_or(&work->data, WORK_STRUCT_PENDING, __ATOMIC_ACQ_REL) & WORK_STRUCT_PENDING;
}

static void delayed_work_timer_fn(timer_list *t)
{
	auto *dw = container_of(t, delayed_work, timer);
	__queue_work(dw->cpu, dw->wq, &dw->work);
}

static void __queue_delayed_work(int cpu, workqueue_struct *wq, delayed_work *dw, unsigned long delay)
{
	if (!delay) {
		__queue_work(cpu, wq, &dw->work);
		return;
	}
	dw->wq = wq;
	dw->cpu = cpu;
	timer_add(&dw->timer, now_ns() + static_cast<uint64_t>(delay) * 1000000ull, delayed_work_timer_fn);
}

// ---- grabbing PENDING (try_to_grab_pending) -----------------------------------

enum { WORK_CANCEL_DELAYED = 1, WORK_CANCEL_DISABLE = 2 };

static int try_to_grab_pending(work_struct *work, unsigned cflags)
{
	if (cflags & WORK_CANCEL_DELAYED) {
		delayed_work *dw = to_delayed_work(work);
		if (timer_delete(&dw->timer))
			return 1;
	}
	if (!test_and_set_pending(work))
		return 0;
	worker_pool *pool = get_work_pool(work);
	if (!pool)
		return -EAGAIN;
	deferred d;
	{
		std::lock_guard lk(pool->lock);
		unsigned long data = work_data(work);
		if (!(data & WORK_STRUCT_PWQ))
			return -EAGAIN;
		pool_workqueue *pwq = data_pwq(data);
		if (pwq->pool != pool)
			return -EAGAIN;
		// Barriers linked behind an inactive item go to the worklist with
		// it; the item itself keeps INACTIVE so it gives back no slot.
		if (data & WORK_STRUCT_INACTIVE) {
			if (list_empty(&pool->worklist))
				pool->last_progress_ns = now_ns();
			move_linked_works(work, &pool->worklist);
		}
		list_del_init(&work->entry);
		__atomic_store_n(&work->data,
				 make_offq(static_cast<unsigned long>(pool->id), 0, pool->flags & POOL_BH) |
					 WORK_STRUCT_PENDING,
				 __ATOMIC_RELEASE);
		pwq_dec_nr_in_flight(pwq, data, d);
		// A barrier moved to the worklist needs a worker: the pool may
		// have none running (or none at all, after an attribute change).
		if (!list_empty(&pool->worklist))
			kick_pool(pool, d);
	}
	d.run();
	return 1;
}

static int work_grab_pending(work_struct *work, unsigned cflags)
{
	int n = 0;
	for (;;) {
		int ret = try_to_grab_pending(work, cflags);
		if (ret >= 0)
			return ret;
		spin_pause(n);
	}
}

static bool __cancel_work(work_struct *work, unsigned cflags)
{
	int ret = work_grab_pending(work, cflags);
	unsigned long data = work_data(work);
	unsigned long depth = offq_depth(data);
	if (cflags & WORK_CANCEL_DISABLE) {
		if (depth == (1UL << WORK_OFFQ_DISABLE_BITS) - 1)
			warn_once_msg("disable-overflow", "workqueue: work disable count overflowed");
		else
			depth++;
	}
	__atomic_store_n(&work->data, make_offq(offq_pool(data), depth, data & (1UL << WORK_OFFQ_BH_BIT)),
			 __ATOMIC_RELEASE);
	return ret != 0;
}

// ---- flushing -----------------------------------------------------------------

struct wq_barrier {
	work_struct work;
	std::atomic<int> done{0};
	pid_t task = 0;
};

static void wq_barrier_func(work_struct *w)
{
	auto *b = container_of(w, wq_barrier, work);
	b->done.store(1, std::memory_order_release);
	futex_wake(&b->done, 1);
}

static void insert_wq_barrier(pool_workqueue *pwq, wq_barrier *barr, work_struct *target, worker *w)
{
	INIT_WORK(&barr->work, wq_barrier_func);
	barr->task = static_cast<pid_t>(syscall(SYS_gettid));
	unsigned long flags = WORK_STRUCT_INACTIVE;
	list_head *head;
	int color;
	if (w) {
		head = w->scheduled.next;
		color = w->current_color;
	} else {
		unsigned long tdata = work_data(target);
		head = target->entry.next;
		flags |= tdata & WORK_STRUCT_LINKED;
		color = work_color(tdata);
		__atomic_fetch_or(&target->data, WORK_STRUCT_LINKED, __ATOMIC_RELEASE);
	}
	pwq->nr_in_flight_color[color]++;
	pwq->nr_in_flight++;
	insert_work(pwq, &barr->work, head, flags | (static_cast<unsigned long>(color) << WORK_STRUCT_COLOR_SHIFT));
}

static void wait_barrier(wq_barrier *b)
{
	cmwq_blocking_begin();
	while (!b->done.load(std::memory_order_acquire))
		futex_wait(&b->done, 0);
	cmwq_blocking_end();
}

void check_flush_dependency(workqueue_struct *target, work_struct *target_work);

static bool __flush_work(work_struct *work, bool from_cancel)
{
	if (!work->func) {
		warn_once_msg("flush-null", "cmwq: flush_work() on a work item with no function");
		return false;
	}
	worker_pool *pool = get_work_pool(work);
	if (!pool)
		return false;
	wq_barrier barr;
	{
		std::lock_guard lk(pool->lock);
		unsigned long data = work_data(work);
		pool_workqueue *pwq;
		worker *w = nullptr;
		if ((data & WORK_STRUCT_PWQ) && data_pwq(data)->pool == pool) {
			pwq = data_pwq(data);
		} else {
			w = find_worker_executing_work(pool, work);
			if (!w)
				return false;
			pwq = w->current_pwq;
		}
		if (tl_worker && tl_worker->current_work == work && w == tl_worker) {
			warn_once_msg("self-flush-" + func_name(work->func),
				      "cmwq: " + func_name(work->func) + " on workqueue " + pwq->wq->name +
					      (from_cancel ? " cancels-and-waits for" : " flushes") +
					      " itself; that would deadlock, returning without waiting");
			return false;
		}
		if (!from_cancel)
			check_flush_dependency(pwq->wq, work);
		insert_wq_barrier(pwq, &barr, work, w);
	}
	wait_barrier(&barr);
	return true;
}

} // namespace cmwq::detail

using namespace cmwq::detail;

// ===========================================================================
// Public C API
// ===========================================================================

extern "C" {

bool queue_work_on(int cpu, workqueue_struct *wq, work_struct *work)
{
	if (test_and_set_pending(work))
		return false;
	if (clear_pending_if_disabled(work))
		return false;
	__queue_work(cpu, wq, work);
	return true;
}

bool queue_work_node(int node, workqueue_struct *wq, work_struct *work)
{
	if (!(wq->flags & WQ_UNBOUND))
		warn_once_msg("qwn-percpu", "cmwq: queue_work_node() on per-CPU workqueue " + wq->name +
						    " (only WQ_UNBOUND workqueues are meant for it)");
	int cpu = WORK_CPU_UNBOUND;
	auto &gl = g();
	if (node >= 0 && node < gl.nr_nodes) {
		int cur = current_cpu();
		if (gl.cpu_node[static_cast<size_t>(cur)] == node)
			cpu = cur;
		else
			for (int c : gl.usable)
				if (gl.cpu_node[static_cast<size_t>(c)] == node) {
					cpu = c;
					break;
				}
	}
	return queue_work_on(cpu, wq, work);
}

bool queue_delayed_work_on(int cpu, workqueue_struct *wq, delayed_work *dwork, unsigned long delay)
{
	if (test_and_set_pending(&dwork->work))
		return false;
	if (clear_pending_if_disabled(&dwork->work))
		return false;
	__queue_delayed_work(cpu, wq, dwork, delay);
	return true;
}

bool mod_delayed_work_on(int cpu, workqueue_struct *wq, delayed_work *dwork, unsigned long delay)
{
	int ret = work_grab_pending(&dwork->work, WORK_CANCEL_DELAYED);
	if (!clear_pending_if_disabled(&dwork->work))
		__queue_delayed_work(cpu, wq, dwork, delay);
	return ret != 0;
}

bool schedule_work_on(int cpu, work_struct *work) { return queue_work_on(cpu, system_percpu_wq, work); }
bool schedule_work(work_struct *work) { return queue_work(system_percpu_wq, work); }
bool schedule_delayed_work_on(int cpu, delayed_work *dw, unsigned long delay)
{
	return queue_delayed_work_on(cpu, system_percpu_wq, dw, delay);
}
bool schedule_delayed_work(delayed_work *dw, unsigned long delay)
{
	return queue_delayed_work(system_percpu_wq, dw, delay);
}

bool flush_work(work_struct *work)
{
	ensure_started();
	return __flush_work(work, false);
}

bool flush_delayed_work(delayed_work *dwork)
{
	if (timer_delete(&dwork->timer))
		__queue_work(dwork->cpu, dwork->wq, &dwork->work);
	return flush_work(&dwork->work);
}

bool cancel_work(work_struct *work) { return __cancel_work(work, 0); }
bool cancel_delayed_work(delayed_work *dwork) { return __cancel_work(&dwork->work, WORK_CANCEL_DELAYED); }

static bool __cancel_work_sync(work_struct *work, unsigned cflags)
{
	bool ret = __cancel_work(work, cflags | WORK_CANCEL_DISABLE);
	__flush_work(work, true);
	if (!(cflags & WORK_CANCEL_DISABLE))
		enable_work(work);
	return ret;
}

bool cancel_work_sync(work_struct *work) { return __cancel_work_sync(work, 0); }
bool cancel_delayed_work_sync(delayed_work *dwork)
{
	return __cancel_work_sync(&dwork->work, WORK_CANCEL_DELAYED);
}
bool disable_work(work_struct *work) { return __cancel_work(work, WORK_CANCEL_DISABLE); }
bool disable_work_sync(work_struct *work) { return __cancel_work_sync(work, WORK_CANCEL_DISABLE); }
bool disable_delayed_work(delayed_work *dwork)
{
	return __cancel_work(&dwork->work, WORK_CANCEL_DELAYED | WORK_CANCEL_DISABLE);
}
bool disable_delayed_work_sync(delayed_work *dwork)
{
	return __cancel_work_sync(&dwork->work, WORK_CANCEL_DELAYED | WORK_CANCEL_DISABLE);
}

bool enable_work(work_struct *work)
{
	work_grab_pending(work, 0);
	unsigned long data = work_data(work);
	unsigned long depth = offq_depth(data);
	if (depth == 0)
		warn_once_msg("disable-underflow", "workqueue: work disable count underflowed");
	else
		depth--;
	__atomic_store_n(&work->data, make_offq(offq_pool(data), depth, data & (1UL << WORK_OFFQ_BH_BIT)),
			 __ATOMIC_RELEASE);
	return depth == 0;
}
bool enable_delayed_work(delayed_work *dwork) { return enable_work(&dwork->work); }

unsigned int work_busy(work_struct *work)
{
	unsigned ret = 0;
	if (work_pending(work))
		ret |= WORK_BUSY_PENDING;
	worker_pool *pool = get_work_pool(work);
	if (pool) {
		std::lock_guard lk(pool->lock);
		if (find_worker_executing_work(pool, work))
			ret |= WORK_BUSY_RUNNING;
	}
	return ret;
}

work_struct *current_work(void)
{
	worker *w = tl_worker;
	return w ? w->current_work : nullptr;
}

bool current_is_workqueue_rescuer(void)
{
	worker *w = tl_worker;
	return w && w->rescuer && w->current_work;
}

void cmwq_blocking_begin(void)
{
	worker *w = tl_worker;
	if (!w || w->hint_depth++ > 0)
		return;
	worker_sleeping(w, false);
}

void cmwq_blocking_end(void)
{
	worker *w = tl_worker;
	if (!w || w->hint_depth == 0 || --w->hint_depth > 0)
		return;
	worker_running(w);
}

void set_worker_desc(const char *fmt, ...)
{
	worker *w = tl_worker;
	if (!w)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w->desc, sizeof(w->desc), fmt, ap);
	va_end(ap);
}

unsigned long cmwq_jiffies(void) { return static_cast<unsigned long>(now_ns() / 1000000ull); }

} // extern "C"

namespace cmwq::detail {

// ---- flush_workqueue / drain ------------------------------------------------

// Whether no pwq of wq holds an item (or barrier) of color c. Takes
// wq->mutex and each pool's lock, so it runs without flush_mutex.
static bool color_drained(workqueue_struct *wq, int c)
{
	std::lock_guard wk(wq->mutex);
	for (list_head *e = wq->pwqs.next; e != &wq->pwqs; e = e->next) {
		pool_workqueue *pwq = container_of(e, pool_workqueue, pwqs_node);
		std::lock_guard lk(pwq->pool->lock);
		if (pwq->nr_in_flight_color[c])
			return false;
	}
	return true;
}

void flush_workqueue_impl(workqueue_struct *wq)
{
	auto dist = [](int from, int to) { return (to - from + WORK_NR_COLORS) % WORK_NR_COLORS; };
	std::unique_lock lk(wq->flush_mutex);
	// Colors exhausted: wait for the oldest to drain (the kernel's overflow queue).
	while ((wq->work_color.load() + 1) % WORK_NR_COLORS == wq->flush_color)
		wq->flush_cv.wait(lk);
	int my_color = wq->work_color.load();
	wq->nr_flushers.fetch_add(1, std::memory_order_seq_cst);
	wq->work_color.store((my_color + 1) % WORK_NR_COLORS, std::memory_order_seq_cst);
	bool hinted = false;
	for (;;) {
		// my_color is done when it lies outside [flush_color, work_color).
		int fc = wq->flush_color;
		int wc = wq->work_color.load();
		if (dist(fc, my_color) >= dist(fc, wc))
			break;
		uint64_t gen = wq->flush_gen;
		uint64_t moves = wq->flush_moves;
		lk.unlock();
		// A color older than work_color gets no new items until flush_color
		// has passed it, so what is found drained here stays drained.
		int to = fc;
		while (to != wc && color_drained(wq, to))
			to = (to + 1) % WORK_NR_COLORS;
		lk.lock();
		if (wq->flush_moves != moves)
			continue; // another flusher moved flush_color: start again from it
		if (to != fc) {
			wq->flush_color = to;
			wq->flush_moves++;
			wq->flush_gen++;
			wq->flush_cv.notify_all();
			continue;
		}
		if (!hinted) {
			lk.unlock();
			cmwq_blocking_begin();
			hinted = true;
			lk.lock();
		}
		// Returns at once if something drained while we looked (or hinted).
		wq->flush_cv.wait(lk, [&] { return wq->flush_gen != gen; });
	}
	wq->nr_flushers.fetch_sub(1);
	wq->flush_cv.notify_all();
	if (hinted) {
		lk.unlock();
		cmwq_blocking_end();
	}
}

} // namespace cmwq::detail

extern "C" void __flush_workqueue(workqueue_struct *wq)
{
	check_flush_dependency(wq, nullptr);
	flush_workqueue_impl(wq);
}

namespace cmwq::detail {
bool pwq_busy(pool_workqueue *pwq)
{
	std::lock_guard lk(pwq->pool->lock);
	return pwq->nr_active || !list_empty(&pwq->inactive_works);
}
} // namespace cmwq::detail

extern "C" void drain_workqueue(workqueue_struct *wq)
{
	{
		std::lock_guard lk(wq->mutex);
		if (wq->nr_drainers++ == 0)
			wq->aflags.fetch_or(__WQ_DRAINING);
	}
	for (unsigned tries = 1;; tries++) {
		flush_workqueue_impl(wq);
		bool busy = false;
		{
			std::lock_guard lk(wq->mutex);
			for (list_head *e = wq->pwqs.next; e != &wq->pwqs; e = e->next)
				if (pwq_busy(container_of(e, pool_workqueue, pwqs_node)))
					busy = true;
		}
		if (!busy)
			break;
		if (tries == 10 || (tries % 100 == 0 && tries <= 1000))
			fprintf(stderr, "workqueue %s: drain_workqueue() isn't complete after %u tries\n",
				wq->name.c_str(), tries);
	}
	std::lock_guard lk(wq->mutex);
	if (--wq->nr_drainers == 0)
		wq->aflags.fetch_and(~static_cast<unsigned>(__WQ_DRAINING));
}

namespace cmwq::detail {
// The rescuer runs up to `batch` items of pwq on pwq's pool (rescuer_thread).
// Returns the number run.
int rescue_pwq(worker *r, pool_workqueue *pwq, int batch)
{
	worker_pool *pool = pwq->pool;
	deferred d;
	int n = 0;
	r->clock_ns = now_ns();
	std::unique_lock lk(pool->lock);
	r->pool = pool;
	while (n < batch) {
		work_struct *found = nullptr;
		for (list_head *e = pool->worklist.next; e != &pool->worklist; e = e->next) {
			unsigned long data = work_data(entry_work(e));
			if ((data & WORK_STRUCT_PWQ) && data_pwq(data) == pwq) {
				found = entry_work(e);
				break;
			}
		}
		if (!found)
			break;
		PWQ_STAT_ADD(pwq, PWQ_STAT_RESCUED, 1);
		if (assign_work(found, r))
			process_scheduled_works(r, d, lk);
		n++;
	}
	kick_pool(pool, d);
	lk.unlock();
	d.run();
	return n;
}

bool kick_pool_pub(worker_pool *pool, deferred &d) { return kick_pool(pool, d); }
void worker_set_flags_pub(worker *w, unsigned f) { worker_set_flags(w, f); }

void deferred_create(worker_pool *pool)
{
	deferred d;
	d.create = pool;
	d.run();
}

// For workqueue_alloc.cpp: activate one inactive item and kick (pool->lock held).
bool pwq_activate_first_inactive_pub(pool_workqueue *pwq, deferred &d)
{
	if (!pwq_activate_first_inactive(pwq, true))
		return false;
	kick_pool(pwq->pool, d);
	return true;
}

void pwq_release(pool_workqueue *pwq);
} // namespace cmwq::detail
