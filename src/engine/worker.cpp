// worker.cpp - worker: creating and managing workers, the worker thread,
// process_one_work and its CPU-time charge, repatriation, the blocking
// hints (the kernel's wq_worker_sleeping/running), hog accounting, and the
// deferred actions every locked section hands over to run after unlock.
// A worker sleeps on its own futex word, not a pool-wide condition
// variable, so kick_pool wakes exactly the worker it picked.
#include "engine.h"

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <new>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>

namespace cmwq::detail {

static bool create_worker(worker_pool *pool);

static bool manage_workers(worker *w) REQUIRES(w->pool->lock)
{
	worker_pool *pool = w->pool;
	if (pool->flags & POOL_MANAGER_ACTIVE)
		return false;
	if (pool->max_workers && pool->nr_workers >= pool->max_workers)
		return false;
	if (pool->create_fail_until_ns && now_ns() < pool->create_fail_until_ns)
		return false; // cooling down; the mayday timer retries and calls rescuers
	pool->flags |= POOL_MANAGER_ACTIVE;
	// Whether the lock was dropped: then the caller's checks are stale (the
	// item it saw may have been taken meanwhile, by another worker or the
	// rescuer) and it must look again, whether or not a worker was created.
	bool dropped = false;
	while (need_to_create_worker(pool->counts())) {
		w->pool->lock.unlock();
		dropped = true;
		bool ok = create_worker(pool);
		w->pool->lock.lock();
		if (!ok) {
			pool->create_fail_until_ns = now_ns() + CREATE_COOLDOWN_NS;
			mayday_arm(pool);
			break;
		}
	}
	pool->flags &= ~POOL_MANAGER_ACTIVE;
	return dropped;
}

bool assign_work(work_struct *work, worker *w)
{
	worker_pool *pool = w->pool;
	worker *collision = find_worker_executing_work(pool, work);
	if (collision) {
		move_linked_works(pool, work, &collision->scheduled);
		return false;
	}
	move_linked_works(pool, work, &w->scheduled);
	return true;
}

static void worker_repatriate(worker *w)
{
	worker_pool *pool = w->pool;
	int cpu = sched_getcpu();
	if (std::binary_search(pool->pod_cpus.begin(), pool->pod_cpus.end(), cpu))
		return;
	// Narrow to the pod (the kernel moves the wake CPU), then widen again so
	// the scheduler may move it later, as with affinity_strict=0. That
	// undoes any narrowing of the local wake too, so say so (the worker
	// runs an item: no kicker writes narrowed meanwhile).
	pin_self(pool->pod_cpus);
	pin_self(pool->cpus);
	w->narrowed.store(-1, std::memory_order_relaxed);
}

// Hog counts per function (the kernel's wci table, WCI_MAX_ENTS entries).
struct hog_table {
	mutex lock;
	std::map<std::string, uint64_t> counts; // lock: by item name
};

static hog_table &hogs()
{
	static hog_table *t = new hog_table; // never freed: workers may outlive main
	return *t;
}

void hog_fork_lock() NO_THREAD_SAFETY_ANALYSIS { hogs().lock.lock(); }
void hog_fork_unlock() NO_THREAD_SAFETY_ANALYSIS { hogs().lock.unlock(); }

static bool is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

void hog_report(const worker *w)
{
	std::string fn = current_item_name(w);
	auto &m = hogs();
	unsigned thresh = params().cpu_intensive_warning_thresh.load();
	uint64_t cnt;
	{
		lock_guard lk(m.lock);
		auto it = m.counts.find(fn);
		if (it == m.counts.end()) {
			if (m.counts.size() >= 128)
				return;
			it = m.counts.emplace(fn, 0).first;
		}
		cnt = ++it->second;
	}
	// The kernel's advice is for per-CPU items; an item that already runs
	// on an unbound (managed) pool is told what helps there.
	const char *advice = w->pool->cpu < 0 ? "consider WQ_CPU_INTENSIVE or splitting the item"
					      : "consider switching to WQ_UNBOUND";
	if (thresh && cnt >= thresh && is_pow2(cnt + 1 - thresh))
		log_printf(LOG_WARNING, "cmwq: %s hogged CPU for >%luus %llu times, %s\n", fn.c_str(),
			   params().cpu_intensive_thresh_us.load(), static_cast<unsigned long long>(cnt), advice);
}

// CPU time without a system call per item (thread CPU clocks have no vDSO
// path; the kernel samples on the tick instead): an item shorter than
// SHORT_ITEM_NS of wall time is charged its wall time; a longer one reads
// the thread's CPU clock and is charged what the thread used since the last
// read minus what short items were charged. The baseline is re-read every
// CPU_REBASE_ITEMS short items, so the loop's own overhead that a long item
// may absorb (~0.2 us per short item) stays far below the hog threshold;
// the read is a system call (1.4-2.6 us in a VM), which every 64 items cost
// the per-CPU fan-out ~30 ns per item. Returns the item's CPU time.
static constexpr uint64_t SHORT_ITEM_NS = 50000;
static constexpr int CPU_REBASE_ITEMS = 1024;

static uint64_t charge_cpu_time(worker *w, uint64_t wall)
{
	if (wall >= SHORT_ITEM_NS) {
		uint64_t c = thread_cpu_ns();
		uint64_t since = c - w->cpu_clock_last;
		w->cpu_clock_last = c;
		uint64_t cpu = since > w->cpu_charged ? since - w->cpu_charged : 0;
		w->cpu_charged = 0;
		w->nr_short = 0;
		return cpu;
	}
	if (++w->nr_short >= CPU_REBASE_ITEMS) {
		w->cpu_clock_last = thread_cpu_ns();
		w->cpu_charged = 0;
		w->nr_short = 0;
	} else {
		w->cpu_charged += wall;
	}
	return wall;
}

static void hog_account(worker *w, pool_workqueue *pwq, uint64_t cpu_ns, bool flagged) REQUIRES(w->pool->lock)
{
	uint64_t thresh = params().cpu_intensive_thresh_us.load() * 1000ull;
	if (flagged || !thresh || cpu_ns < thresh || !w->pool->managed || (w->flags & WORKER_NOT_RUNNING))
		return;
	// Ran past the threshold without the monitor seeing it (nothing waited):
	// counted and reported as the kernel's tick would have.
	PWQ_STAT_ADD(pwq, PWQ_STAT_CPU_INTENSIVE, 1);
	hog_report(w);
}

static void process_one_work(worker *w, work_struct *work, deferred &d) REQUIRES(w->pool->lock)
{
	worker_pool *pool = w->pool;
	unsigned long data = work_data(work);
	pool_workqueue *pwq = data_pwq(data);
	workqueue_struct *wq = pwq->wq;

	w->current_work = work;
	w->current_func = work->func;
	if (work->name) [[unlikely]] {
		// Under L for every named item (an Asio executor names each
		// handler): a bounded copy, not snprintf's formatting.
		size_t n = strnlen(work->name, sizeof(w->current_name) - 1);
		memcpy(w->current_name, work->name, n);
		w->current_name[n] = '\0';
	} else
		w->current_name[0] = '\0';
	w->desc[0] = '\0';
	w->current_pwq = pwq;
	w->current_color = work_color(data);
	// The time the previous item ended (or the wake): the bookkeeping in
	// between is far below anything the start time is used for (hog and
	// watchdog thresholds), and no second read is paid per item.
	w->current_start_ns = w->clock_ns;
	hash_add(pool, w);
	list_del_init(&work->entry);
	// Items still wait behind us on a concurrency-managed pool: if we block
	// without a hint, the monitor must notice (and our context-switch
	// event, enabled below before the function runs, tells it at once).
	bool watched = pool->managed && !list_empty(&pool->worklist) && !w->rescuer;
	if (watched)
		monitor_watch(pool);
	if (wq->flags & WQ_CPU_INTENSIVE)
		worker_set_flags(w, WORKER_CPU_INTENSIVE);
	// Once the function returns, this worker is on its way back to the
	// worklist (kernel-mode unbound pools only: a managed or per-CPU pool
	// counts it in nr_running instead; the rescuer takes only its own
	// workqueue's items). Decided now, under the lock, for both ends.
	bool counts_return = pool->cpu < 0 && !pool->managed && !w->rescuer;
	// A worker kept on its queueing CPU (kick_pool) that meets a backlog,
	// two or more items still waiting, takes the pool's CPUs back: a burst
	// should spread, and nobody waits on this CPU for one item.
	bool widen = pool->cpu < 0 && w->narrowed.load(std::memory_order_relaxed) >= 0 &&
		     !list_empty(&pool->worklist) && pool->worklist.next != pool->worklist.prev;
	kick_pool(pool, d);
	// Release PENDING: the owner's stores become visible to the next owner,
	// and the function's loads cannot move above it (acquire): a queuer whose
	// test-and-set found PENDING still set wrote before this exchange, which
	// reads its value. One locked exchange instead of a store and a fence.
	__atomic_exchange_n(&work->data, make_offq(static_cast<unsigned long>(pool->id), 0,
						    pool->flags & POOL_BH),
			    __ATOMIC_ACQ_REL);
	if (debug_objects_on())
		debug_work_idle(work);
	PWQ_STAT_ADD_LOCKED(pwq, PWQ_STAT_STARTED, 1);
	// Written by this worker only (the monitor reads it): no locked add.
	w->progress.store(w->progress.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
	work_func_t fn = w->current_func;
	w->pool->lock.unlock();
	d.run();
	d.reset();
	if (watched) {
		detect_enable_self(w);
	} else if (detect_quiet_self(w)) {
		// Nothing waits behind this item, so its switches matter to no
		// one: the event left on by an earlier item went off (a worker
		// that never goes idle, such as one re-queuing its own item,
		// would otherwise wake the monitor at every switch). An item
		// queued since L was dropped may have found the event still
		// on, and the monitor then left it alone: look once more.
		bool behind;
		{
			lock_guard lk(pool->lock);
			behind = !list_empty(&pool->worklist);
		}
		if (behind)
			detect_enable_self(w);
	}

	if (widen) {
		pin_self(pool->cpus);
		w->narrowed.store(-1, std::memory_order_relaxed);
	}
	if (!pool->strict && !w->rescuer)
		worker_repatriate(w);
	uint64_t t0 = w->current_start_ns;
	CMWQ_PROBE3(workqueue_execute_start, work, fn, w->current_name[0] ? w->current_name : nullptr);
	// The block detector counts only switches inside the function: a
	// worker waiting for pool->lock between items has not blocked its item.
	w->in_item.store(true, std::memory_order_relaxed);
	fn(work);
	w->in_item.store(false, std::memory_order_relaxed);
	CMWQ_PROBE2(workqueue_execute_end, work, fn);
	w->clock_ns = worker_clock_ns(w);
	uint64_t cpu = charge_cpu_time(w, w->clock_ns - t0);

	if (counts_return)
		pool->nr_returning.fetch_add(1, std::memory_order_relaxed);
	w->pool->lock.lock();
	if (counts_return)
		pool->nr_returning.fetch_sub(1, std::memory_order_relaxed);
	PWQ_STAT_ADD_LOCKED(pwq, PWQ_STAT_CPU_TIME, cpu / 1000);
	PWQ_STAT_ADD_LOCKED(pwq, PWQ_STAT_COMPLETED, 1);
	if (w->sleeping && w->hint_depth.load(std::memory_order_relaxed) == 0)
		worker_set_running(w); // the monitor had found it blocked; it runs again
	// An item that slept is judged by the monitor, whose count restarts
	// after each sleep; one that never slept is judged here.
	if (!w->slept_in_item)
		hog_account(w, pwq, cpu, w->flags & WORKER_CPU_INTENSIVE);
	w->slept_in_item = false;
	worker_clr_flags(w, WORKER_CPU_INTENSIVE);
	hash_del(pool, w);
	w->current_work = nullptr;
	w->current_func = nullptr;
	w->current_pwq = nullptr;
	if (!w->rescuer)
		d.rechecks = pool;
	pwq_dec_nr_in_flight(pwq, data, d);
	d.rechecks = nullptr;
}

void process_scheduled_works(worker *w, deferred &d)
{
	bool first = true;
	while (!list_empty(&w->scheduled)) {
		work_struct *work = entry_work(w->scheduled.next);
		if (first) {
			w->pool->last_progress_ns = w->clock_ns;
			first = false;
		}
		process_one_work(w, work, d);
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

// A worker that goes idle may wait for its wake word a while before it
// sleeps on it (cmwq.unbound_idle_spin_ns for unbound pools, 20 us by
// default; cmwq.idle_spin_ns for per-CPU ones, off): a kick that finds it
// there costs the kicker no FUTEX_WAKE and the worker no wakeup, which is
// most of a round trip's cost in a VM. It yields the CPU on every turn, so
// a runnable producer or worker on its CPU goes first, and one worker per
// pod CPU waits so, the latest to go idle there (watch_slots): one per CPU
// is enough to take the next item queued there; more only took CPU time
// from the producers, and a watcher its busy CPU kept from running for
// hundreds of microseconds held the place of the worker kicks pick
// (docs/benchmarks-history.md, "Waking fewer workers, and keeping them near their producers" and "Which idle worker watches: the latest on each CPU"). cpu: where it went idle.
static void idle_spin(worker *w, int cpu)
{
	worker_pool *pool = w->pool;
	auto &p = params();
	unsigned spin_ns = (pool->cpu < 0 ? p.unbound_idle_spin_ns : p.idle_spin_ns).load(std::memory_order_relaxed);
	if (!spin_ns)
		return;
	watch_slots::slot *s = pool->watchers.claim(w, cpu);
	if (!s)
		return; // idle outside its pod: no kick looks for it there
	uint64_t until = now_ns() + spin_ns;
	while (w->wake.load(std::memory_order_acquire) == 0 && watch_slots::held(s, w) && now_ns() < until)
		sched_yield();
	watch_slots::release(s, w);
}

static void *worker_thread(void *arg)
{
	auto *w = static_cast<worker *>(arg);
	worker_pool *pool = w->pool;
	tl_worker = w;
	w->thread = pthread_self(); // published by the tid store below
	w->cpu_clock_last = thread_cpu_ns();
	w->clock_ns = worker_clock_anchor(w);
	// An unbound pool's worker takes the pool's CPUs before the tid is
	// published: a kicker narrows a worker through its tid (wake_worker),
	// and a narrowing that landed before this pin would be undone while
	// worker::narrowed still named the CPU, so no later kick would narrow
	// it again.
	if (pool->cpu < 0)
		pin_self(pool->cpus);
	__atomic_store_n(&w->tid, static_cast<pid_t>(syscall(SYS_gettid)), __ATOMIC_RELEASE);
	set_thread_name(w);
	apply_nice(pool->nice);
	detect_worker_start(w);

	deferred d;
	w->pool->lock.lock();
	// A per-CPU pool's worker pins under the lock, after its tid is out:
	// a CPU going offline or returning (hotplug.cpp) moves, under the same
	// lock, the workers whose tid it sees, so each worker ends on where its
	// pool runs now.
	if (pool->cpu >= 0)
		pin_self(w->pool->run_cpus);
	for (;;) {
		if (w->flags & WORKER_DIE)
			break;
		worker_leave_idle(w);
	recheck:
		if (!need_more_worker(pool->counts()))
			goto sleep;
		if (!may_start_working(pool->counts()) && manage_workers(w))
			goto recheck;
		// Only a worker about to run items fills its scheduled list.
		WQ_WARN_ON_ONCE(!list_empty(&w->scheduled));
		worker_clr_flags(w, WORKER_PREP);
		do {
			work_struct *work = entry_work(pool->worklist.next);
			if (assign_work(work, w))
				process_scheduled_works(w, d);
		} while (keep_working(pool->counts()));
		worker_set_flags(w, WORKER_PREP);
	sleep:
		worker_enter_idle(w);
		int idle_cpu = sched_getcpu();
		w->last_cpu = idle_cpu;
		w->wake.store(0, std::memory_order_relaxed);
		w->pool->lock.unlock();
		d.run();
		d.reset();
		detect_disable_self(w); // idle: its switches are nobody's business
		idle_spin(w, idle_cpu);
		worker_wait_word(w);
		w->clock_ns = worker_clock_anchor(w);
		w->pool->lock.lock();
	}
	// Dying: the culler already took us off the idle list and the counts.
	auto &ws = pool->workers;
	ws.erase(std::find(ws.begin(), ws.end(), w));
	w->pool->lock.unlock();
	detect_worker_exit(w);
	int n = 0;
	while (w->pins.load(std::memory_order_acquire))
		spin_pause(n);
	delete w;
	return nullptr;
}

static bool create_worker(worker_pool *pool)
{
	auto &gl = g();
	if (gl.child_first_use.load(std::memory_order_relaxed) && gl.child_first_use.exchange(false))
		gl.child_start();
	if (fault_injected(params().fail_worker_creation)) {
		warn_once_msg("create-fail", "cmwq: Failed to create a worker thread (injected by cmwq.fail_worker_creation)");
		return false;
	}
	auto *w = new (std::nothrow) worker;
	if (!w) {
		thread_start_failed("worker", ENOMEM, "the work stays queued; retried after a 1 s cooldown");
		return false;
	}
	INIT_LIST_HEAD(&w->entry);
	INIT_LIST_HEAD(&w->scheduled);
	w->pool = pool;
	{
		lock_guard lk(pool->lock);
		// A per-CPU pool whose CPU is offline runs its workers unbound.
		bool unbound = !pool->managed || (pool->cpu >= 0 && (pool->flags & POOL_DISASSOCIATED));
		w->flags = WORKER_PREP | (unbound ? unsigned(WORKER_UNBOUND) : 0u);
		w->id = pool->next_worker_id++;
		pool->workers.push_back(w);
		pool->nr_workers++;
		worker_enter_idle(w);
		w->wake.store(1);
	}
	if (int err = spawn_thread(CMWQ_THREAD_WORKER, worker_thread, w)) {
		{
			lock_guard lk(pool->lock);
			worker_leave_idle(w);
			pool->nr_workers--;
			auto &ws = pool->workers;
			ws.erase(std::find(ws.begin(), ws.end(), w));
		}
		int n = 0;
		while (w->pins.load(std::memory_order_acquire)) // a kicker picked it
			spin_pause(n);
		delete w;
		thread_start_failed("worker", err, "the work stays queued; retried after a 1 s cooldown");
		return false;
	}
	// The monitor watches workers: it starts with the first (a process that
	// loads the library starts no thread before it queues work).
	monitor_start();
	return true;
}

void deferred::run_collected()
{
	for (int i = 0; i < nr_wake; i++)
		wake_worker(wake[i]);
	for (int i = 0; i < nr_activate; i++) {
		pool_workqueue *pwq = activate[i];
		deferred d;
		bool activated = node_activate_handoff(pwq, activate_nna[i], d);
		d.run();
		if (!activated) {
			// Nothing there after all: offer the slot to the next waiter.
			deferred d2;
			node_activate_pending(nullptr, activate_nna[i], d2);
			d2.run();
		}
		pwq->wq->busy_refs.fetch_sub(1, std::memory_order_acq_rel);
	}
	for (int i = 0; i < nr_release; i++) {
		workqueue_struct *wq = release[i]->wq;
		deferred d;
		pwq_release(release[i], d);
		d.run();
		wq->busy_refs.fetch_sub(1, std::memory_order_acq_rel);
	}
	if (create) {
		worker_pool *pool = create;
		{
			lock_guard lk(pool->lock);
			if (pool->creating || !need_to_create_worker(pool->counts()) ||
			    now_ns() < pool->create_fail_until_ns ||
			    (pool->max_workers && pool->nr_workers >= pool->max_workers))
				return;
			pool->creating = true;
		}
		bool ok = create_worker(pool);
		deferred d;
		{
			lock_guard lk(pool->lock);
			pool->creating = false;
			if (!ok) {
				pool->create_fail_until_ns = now_ns() + CREATE_COOLDOWN_NS;
				mayday_arm(pool);
			}
			kick_pool(pool, d);
		}
		d.run();
	}
}

void deferred_create(worker_pool *pool)
{
	deferred d;
	d.create = pool;
	d.run();
}


void worker_sleeping(worker *w)
{
	deferred d;
	{
		lock_guard lk(w->pool->lock);
		if (w->sleeping || (w->flags & WORKER_NOT_RUNNING) || !w->current_work)
			return;
		w->sleeping = true;
		w->slept_in_item = true;
		w->pool->nr_running--;
		if (kick_pool(w->pool, d) && w->current_pwq)
			PWQ_STAT_ADD(w->current_pwq, PWQ_STAT_CM_WAKEUP, 1);
	}
	d.run();
}

void worker_running(worker *w)
{
	lock_guard lk(w->pool->lock);
	if (!w->sleeping)
		return;
	worker_set_running(w);
	w->current_at_cpu_ns = thread_cpu_ns(); // hog timing restarts after a sleep
}

} // namespace cmwq::detail

using namespace cmwq::detail;

extern "C" {

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

bool current_is_workqueue_mem_reclaim(void)
{
	worker *w = tl_worker;
	if (!w || !w->current_pwq)
		return false;
	unsigned f = w->current_pwq->wq->flags;
	return (f & (WQ_MEM_RECLAIM | __WQ_LEGACY)) == WQ_MEM_RECLAIM;
}

void cmwq_blocking_begin(void)
{
	worker *w = tl_worker;
	if (!w)
		return;
	int depth = w->hint_depth.load(std::memory_order_relaxed);
	w->hint_depth.store(depth + 1, std::memory_order_relaxed); // only its worker writes it
	if (depth > 0)
		return;
	worker_sleeping(w);
}

void cmwq_blocking_end(void)
{
	worker *w = tl_worker;
	if (!w)
		return;
	int depth = w->hint_depth.load(std::memory_order_relaxed);
	if (depth == 0)
		return;
	w->hint_depth.store(depth - 1, std::memory_order_relaxed);
	if (depth > 1)
		return;
	worker_running(w);
}

void set_worker_desc(const char *fmt, ...)
{
	worker *w = tl_worker;
	if (!w)
		return;
	char buf[WORKER_DESC_LEN];
	va_list ap;
	va_start(ap, fmt);
	std::string formatted = vformat_without_n("set_worker_desc", fmt, ap);
	snprintf(buf, sizeof(buf), "%s", formatted.c_str());
	va_end(ap);
	// Under the pool lock: the state dump reads it from another thread.
	lock_guard lk(w->pool->lock);
	memcpy(w->desc, buf, sizeof(buf));
}

const char *cmwq_current_workqueue_name(void)
{
	worker *w = tl_worker;
	if (!w || !w->current_pwq)
		return nullptr;
	return w->current_pwq->wq->name.c_str();
}

workqueue_struct *cmwq_current_workqueue(void)
{
	worker *w = tl_worker;
	return w && w->current_pwq ? w->current_pwq->wq : nullptr;
}

void cmwq_report_work_failure(const char *what)
{
	worker *w = tl_worker;
	if (!w || !w->current_pwq) {
		log_printf(LOG_CRIT, "cmwq: %s outside a work item\n", what ? what : "(null)");
		return;
	}
	log_printf(LOG_CRIT, "cmwq: %s in work item %s on workqueue %s\n", what ? what : "(null)",
		   current_item_name(w).c_str(), w->current_pwq->wq->name.c_str());
}

} // extern "C"
