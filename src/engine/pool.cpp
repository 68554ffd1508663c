// pool.cpp - worker_pool: the pool table, the busy hash, worker flags and
// the idle list, kick_pool (the wake policy), culling idle workers, and
// creating per-CPU and unbound pools.
// The wake itself is issued after pool->lock is dropped (deferred, see
// worker.cpp); kick_pool only picks and pins the worker under the lock.
#include "engine.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>

namespace cmwq::detail {

constinit thread_local worker *tl_worker = nullptr;

worker_pool *get_pool_by_id(unsigned long id)
{
	auto &gl = g();
	// Pools only grow, and the table is reserved at start, so its storage
	// never moves: a reader needs only the published count (nr_pools, stored
	// after the slot is filled) and no lock.
	if (id >= gl.nr_pools.load(std::memory_order_acquire))
		return nullptr;
	return gl.pools.data()[id];
}

static unsigned hash_work(const work_struct *w)
{
	return static_cast<unsigned>((reinterpret_cast<uintptr_t>(w) >> 4) * 0x9E3779B1u) >> (32 - BUSY_WORKER_HASH_ORDER);
}

worker *find_worker_executing_work(worker_pool *pool, work_struct *work)
{
	for (worker *w = pool->busy_hash[hash_work(work)]; w; w = w->hnext)
		if (w->current_work == work && w->current_func == work->func)
			return w;
	return nullptr;
}

void hash_add(worker_pool *pool, worker *w)
{
	unsigned h = hash_work(w->current_work);
	w->hnext = pool->busy_hash[h];
	pool->busy_hash[h] = w;
}

void hash_del(worker_pool *pool, worker *w)
{
	worker **pp = &pool->busy_hash[hash_work(w->current_work)];
	while (*pp != w)
		pp = &(*pp)->hnext;
	*pp = w->hnext;
	w->hnext = nullptr;
}

void worker_set_flags(worker *w, unsigned f)
{
	w->pool->lock.assert_held();
	if ((f & WORKER_NOT_RUNNING) && !(w->flags & WORKER_NOT_RUNNING))
		w->pool->nr_running--;
	w->flags |= f;
}

void worker_clr_flags(worker *w, unsigned f)
{
	w->pool->lock.assert_held();
	unsigned old = w->flags;
	w->flags &= ~f;
	if ((f & WORKER_NOT_RUNNING) && (old & WORKER_NOT_RUNNING) && !(w->flags & WORKER_NOT_RUNNING))
		w->pool->nr_running++;
}

void worker_set_running(worker *w)
{
	w->sleeping = false;
	w->detected = false;
	w->marked.store(false, std::memory_order_relaxed);
	if (!(w->flags & WORKER_NOT_RUNNING))
		w->pool->nr_running++;
}

static void idle_timer_fn(timer_list *t);

void worker_enter_idle(worker *w)
{
	worker_pool *pool = w->pool;
	w->pool->lock.assert_held();
	if (WQ_WARN_ON_ONCE(w->flags & WORKER_IDLE))
		return;
	w->flags |= WORKER_IDLE;
	pool->nr_idle++;
	// Every worker idle, yet some counted as running: nr_running drifted.
	WQ_WARN_ON_ONCE(pool->nr_workers == pool->nr_idle && pool->nr_running);
	// A worker going idle read the clock when its last item ended.
	w->last_active_ns = w->clock_ns ? w->clock_ns : now_ns();
	list_add(&w->entry, &pool->idle_list);
	if (too_many_workers(pool->counts()))
		timer_add_if_idle(&pool->idle_timer,
				  w->last_active_ns + params().idle_timeout_s.load() * 1000000000ull, idle_timer_fn);
}

void worker_leave_idle(worker *w)
{
	worker_pool *pool = w->pool;
	w->pool->lock.assert_held();
	if (WQ_WARN_ON_ONCE(!(w->flags & WORKER_IDLE)))
		return;
	w->flags &= ~WORKER_IDLE;
	pool->nr_idle--;
	list_del_init(&w->entry);
	w->kicked = false;
}

// Pick an idle worker to run the pool's items; the wakeup itself is issued
// by deferred::run() after the lock is dropped (or here, under the lock,
// when cmwq.wake_under_lock=1 asks for the old order). Returns whether a
// worker is on its way.
bool kick_pool(worker_pool *pool, deferred &d)
{
	pool->lock.assert_held();
	if (!need_more_worker(pool->counts()))
		return false;
	// A worker of a kernel-mode unbound pool has finished its item and
	// will take the pool's next one (see nr_returning): waking another
	// would only put a second worker on the same item.
	if (pool->nr_returning.load(std::memory_order_relaxed) > 0 && pool->cpu < 0 && !pool->managed &&
	    params().unbound_returning_takes.load(std::memory_order_relaxed))
		return true;
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
	int cpu = -1;
	if (pool->cpu < 0) {
		// Unbound pools: among the few most recently idle workers, prefer
		// one that last ran on this CPU; waking it is a same-CPU wakeup,
		// far cheaper than an IPI to another CPU (the scheduler's
		// wake-affine choice, which user space has to make itself).
		cpu = sched_getcpu();
		int n = 0;
		for (list_head *e = pool->idle_list.next; e != &pool->idle_list && n < WAKE_AFFINE_SCAN; e = e->next, n++) {
			worker *c = container_of(e, worker, entry);
			if (c->last_cpu == cpu && !c->kicked) {
				w = c;
				break;
			}
		}
	}
	w->kicked = true;
	// One item waiting, queued by a thread that is not one of this pool's
	// workers (a queue-and-wait round trip): the scheduler would put the
	// woken worker on an idle CPU, since the queueing one is busy, but that
	// CPU is about to idle while the other needs a cross-CPU wakeup. Keep
	// the worker on the queueing CPU (within the pod, so affinity_strict
	// holds). Any other kick leaves the worker's affinity as it is, and a
	// narrowed worker that meets a backlog widens itself (process_one_work):
	// wake_worker changes the affinity only when this choice differs from
	// the worker's, so neither a steady round trip nor producers on two CPUs
	// (one or two items waiting by turns) pay a system call per item.
	// cmwq.unbound_local_wake=0 gives every worker the pool's CPUs back.
	int keep_on = -1;
	if (pool->cpu < 0 && params().unbound_local_wake.load(std::memory_order_relaxed)) {
		keep_on = w->narrowed.load(std::memory_order_relaxed);
		if (cpu >= 0 && (!tl_worker || tl_worker->pool != pool) && !list_empty(&pool->worklist) &&
		    pool->worklist.next == pool->worklist.prev &&
		    std::binary_search(pool->pod_cpus.begin(), pool->pod_cpus.end(), cpu))
			keep_on = cpu;
	}
	w->wake_cpu.store(keep_on, std::memory_order_relaxed);
	int last_cpu = w->last_cpu;
	if (!pool->strict && last_cpu >= 0 &&
	    !std::binary_search(pool->pod_cpus.begin(), pool->pod_cpus.end(), last_cpu)) {
		// Repatriation: the worker moves itself into the pod when it starts
		// the item (worker_repatriate); counted on the first item's pwq.
		work_struct *first = entry_work(pool->worklist.next);
		unsigned long data = work_data(first);
		if (data & WORK_STRUCT_PWQ)
			PWQ_STAT_ADD(data_pwq(data),
				     PWQ_STAT_REPATRIATED, 1);
	}
	w->pins.fetch_add(1, std::memory_order_relaxed);
	if (params().wake_under_lock.load(std::memory_order_relaxed) || d.nr_wake == MAX_DEFERRED_WAKES)
		wake_worker(w);
	else
		d.wake[d.nr_wake++] = w;
	return true;
}

// Takes idle workers off the pool, oldest first, and marks them to exit:
// all of them (the pool lost its last user) or, from the idle timer, those
// idle past cmwq.idle_timeout_s while the pool has too many. Workers picked
// by a kicker are left alone. The caller wakes the dying after unlock.
static void cull_idle_workers(worker_pool *pool, bool all, std::vector<worker *> &dying) REQUIRES(pool->lock)
{
	uint64_t timeout = params().idle_timeout_s.load() * 1000000000ull;
	while (all ? !list_empty(&pool->idle_list) : too_many_workers(pool->counts())) {
		worker *w = container_of(pool->idle_list.prev, worker, entry);
		if (w->kicked)
			break;
		uint64_t expires = w->last_active_ns + timeout;
		if (!all && now_ns() < expires) {
			timer_add(&pool->idle_timer, expires, idle_timer_fn);
			break;
		}
		worker_leave_idle(w);
		w->flags |= WORKER_DIE;
		pool->nr_workers--;
		w->pins.fetch_add(1, std::memory_order_relaxed);
		dying.push_back(w);
	}
}

// The pool's idle timer (kernel idle_cull_fn).
static void idle_timer_fn(timer_list *t)
{
	worker_pool *pool = container_of(t, worker_pool, idle_timer);
	std::vector<worker *> dying;
	{
		lock_guard lk(pool->lock);
		cull_idle_workers(pool, false, dying);
	}
	for (worker *w : dying)
		wake_worker(w);
}

void pool_set_managed(worker_pool *pool, bool managed)
{
	if (pool->cpu >= 0 || (pool->flags & POOL_BH))
		return; // per-CPU pools are always managed, BH pools never
	if (pool->managed != managed) {
		for (worker *w : pool->workers) {
			if (managed) {
				worker_clr_flags(w, WORKER_UNBOUND);
			} else {
				if (w->sleeping)
					worker_set_running(w); // counted back before the flag takes it out
				worker_set_flags(w, WORKER_UNBOUND);
			}
		}
	}
	pool->managed = managed;
	// A managed pool lets its pod's CPUs' worth of workers run, and no more
	// than the process's CPU quota allows (a container's limits.cpu): more
	// runnable workers than the quota are throttled, not faster.
	int cpus = static_cast<int>(pool->pod_cpus.size());
	if (unsigned quota = params().cpu_quota.load(std::memory_order_relaxed); quota && static_cast<int>(quota) < cpus)
		cpus = static_cast<int>(quota);
	pool->concurrency = managed ? std::max<int>(1, cpus) : 1;
}

int set_unbound_concurrency(bool managed)
{
	auto &gl = g();
	params().unbound_managed.store(managed);
	if (gl.usable.empty())
		return 0; // applied to each pool as it is created
	std::vector<worker_pool *> pools;
	{
		lock_guard gk(gl.pool_mutex);
		pools.assign(gl.pools.begin(), gl.pools.begin() + static_cast<long>(gl.nr_pools.load()));
	}
	for (auto *pool : pools) {
		deferred d;
		{
			lock_guard lk(pool->lock);
			pool_set_managed(pool, managed);
			kick_pool(pool, d);
		}
		d.run();
	}
	return 0;
}

void mayday_arm(worker_pool *pool)
{
	if (pool->mayday_armed)
		return;
	pool->mayday_armed = true;
	timer_add_if_idle(&pool->mayday_timer, now_ns() + MAYDAY_INITIAL_TIMEOUT_NS, g().mayday_timeout);
}

void monitor_watch(worker_pool *pool)
{
	// Called on every queue call while a worker runs: a plain load first
	// keeps the common case free of a locked instruction.
	if (pool->watch.load(std::memory_order_relaxed) || pool->watch.exchange(true, std::memory_order_relaxed))
		return;
	auto &m = g().monitor;
	lock_guard lk(m.lock);
	if (!m.armed) {
		m.armed = true;
		if (m.efd >= 0) {
			uint64_t one = 1;
			(void)!write(m.efd, &one, sizeof(one));
		} else {
			m.cv.notify_one();
		}
	}
}

void monitor_poke()
{
	auto &m = g().monitor;
	lock_guard lk(m.lock);
	if (m.efd >= 0) {
		uint64_t one = 1;
		(void)!write(m.efd, &one, sizeof(one));
	} else {
		m.cv.notify_one();
	}
}

static worker_pool *new_pool()
{
	auto &gl = g();
	auto *p = new worker_pool;
	INIT_LIST_HEAD(&p->worklist);
	INIT_LIST_HEAD(&p->idle_list);
	p->idle_timer.heap_index = -1;
	p->mayday_timer.heap_index = -1;
	p->id = static_cast<int>(gl.pools.size());
	if (gl.pools.size() == gl.pools.capacity()) {
		log_printf(LOG_WARNING, "cmwq: too many worker pools (%zu); refusing to create more\n", gl.pools.size());
		delete p;
		return nullptr;
	}
	gl.pools.push_back(p);
	gl.nr_pools.store(gl.pools.size(), std::memory_order_release);
	return p;
}

void init_percpu_pools(globals &gl)
{
	size_t n = static_cast<size_t>(gl.topo.max_cpu() + 1);
	for (int hi = 0; hi < 2; hi++) {
		gl.cpu_pools[hi].assign(n, nullptr);
		gl.bh_pools[hi].assign(n, nullptr);
	}
	for (int cpu : gl.usable) {
		for (int bh = 0; bh < 2; bh++)
			for (int hi = 0; hi < 2; hi++) {
				worker_pool *p = new_pool();
				p->cpu = cpu;
				p->node = gl.topo.cpu_node[static_cast<size_t>(cpu)];
				p->highpri = hi;
				p->nice = hi ? -20 : 0;
				p->cpus = {cpu};
				p->pod_cpus = {cpu};
				p->watchers.init(p->pod_cpus);
				p->strict = true;
				lock_guard lk(p->lock); // not yet seen by anyone: for the analysis
				p->run_cpus = {cpu};
				if (bh) {
					p->flags |= POOL_BH;
					p->max_workers = 1;
					gl.bh_pools[hi][static_cast<size_t>(cpu)] = p;
				} else {
					p->managed = true;
					gl.cpu_pools[hi][static_cast<size_t>(cpu)] = p;
				}
			}
	}
}

static std::map<std::string, worker_pool *> &unbound_pool_hash()
{
	static auto *m = new std::map<std::string, worker_pool *>; // G
	return *m;
}

static std::string pool_key(int nice, bool strict, const std::vector<int> &pod, const std::vector<int> &mask)
{
	return std::to_string(nice) + (strict ? "S" : "N") + format_cpulist(pod) + "/" +
	       (strict ? std::string() : format_cpulist(mask));
}

static int node_of(const std::vector<int> &cpus)
{
	auto &gl = g();
	int node = -2;
	for (int c : cpus) {
		int n = gl.topo.cpu_node[static_cast<size_t>(c)];
		if (node == -2)
			node = n;
		else if (node != n)
			return -1;
	}
	return node < 0 ? -1 : node;
}

// Called with G held.
worker_pool *get_unbound_pool(int nice, bool strict, const std::vector<int> &pod,
				     const std::vector<int> &mask)
{
	auto &h = unbound_pool_hash();
	std::string key = pool_key(nice, strict, pod, mask);
	auto it = h.find(key);
	if (it != h.end()) {
		it->second->refcnt++;
		return it->second;
	}
	worker_pool *p = new_pool();
	if (!p)
		return nullptr;
	p->cpu = -1;
	p->nice = nice;
	p->highpri = nice < 0;
	p->strict = strict;
	p->pod_cpus = pod;
	p->watchers.init(p->pod_cpus);
	p->cpus = strict ? pod : mask;
	p->node = node_of(pod);
	p->key = key;
	{
		lock_guard lk(p->lock); // not yet seen by anyone: for the analysis
		p->run_cpus = p->cpus;
		p->flags |= POOL_DISASSOCIATED;
		pool_set_managed(p, params().unbound_managed.load());
	}
	p->refcnt = 1;
	h[key] = p;
	return p;
}

// Called without locks. A pool nobody uses keeps its struct (see internal.h)
// and loses its idle workers.
void put_unbound_pool(worker_pool *pool)
{
	std::vector<worker *> dying;
	{
		lock_guard gk(g().pool_mutex);
		if (--pool->refcnt > 0)
			return;
		lock_guard lk(pool->lock);
		cull_idle_workers(pool, true, dying);
	}
	for (worker *w : dying)
		wake_worker(w);
}

} // namespace cmwq::detail
