// fork.cpp - a child of fork() can use cmwq.
//
// Before the fork every engine lock is taken, in the lock order, so no other
// thread is inside a section that changes what the child copies. In the
// child no library thread exists: the engine is rebuilt around that. Pools
// have no workers (new ones are created on first use, as at start); the
// parent's queued, running and delayed items are the parent's business, so
// in the child they are dropped: off their lists, not pending, free to be
// queued again; the counts that tracked them are zeroed and references they
// held dropped. Rescuers get new threads; the monitor thread and, when the
// parent had it running, the control endpoint start with the child's first
// worker, so a child that only execs creates no thread.
#include "engine/engine.h"

#include <cmwq/control.h>

#include <pthread.h>

#include <vector>

namespace cmwq::detail {
namespace {

std::atomic<unsigned> fork_generation{0}; // the forks between the first process and this one

// The locks held over fork, in the order they were taken. Collected under
// G in prepare, used again by the parent and child handlers (one thread).
struct fork_locks {
	std::vector<workqueue_struct *> wqs;
	std::vector<worker_pool *> pools;
};
fork_locks &held()
{
	static fork_locks *f = new fork_locks;
	return *f;
}

void fork_prepare() NO_THREAD_SAFETY_ANALYSIS
{
	auto &gl = g();
	auto &h = held();
	detect_fork_lock(); // D comes before every other engine lock
	gl.pool_mutex.lock();
	h.wqs = gl.workqueues;
	h.pools.assign(gl.pools.begin(), gl.pools.begin() + static_cast<long>(gl.nr_pools.load()));
	for (auto *wq : h.wqs)
		wq->mutex.lock();
	// No thread holds two pool locks, and nothing nested inside a pool
	// lock waits for one: taking all of them (then what nests inside) under
	// G and every W cannot deadlock.
	for (auto *pool : h.pools)
		pool->lock.lock();
	for (auto *wq : h.wqs) {
		for (auto *nna : wq->node_nr_active)
			nna->lock.lock();
		wq->flush_mutex.lock();
		wq->mayday_lock.lock();
	}
	timer_fork_lock();
	monitor_fork_lock();
	hog_fork_lock();
	warn_fork_lock();
	log_fork_lock();
	rcu_fork_lock(); // a leaf: no lock is taken under it
	transit_fork_lock(); // a leaf: every thread's item in transit stays put
	symbol_fork_lock(); // a leaf, with the spare's lock nested inside it
	fd_fork_lock();     // a leaf too (taken under D)
}

void fork_unlock(bool child) NO_THREAD_SAFETY_ANALYSIS
{
	auto &h = held();
	fd_fork_unlock();
	symbol_fork_unlock();
	// After the lists were dropped: what the parent's threads had in
	// transit (on no list, no heap) becomes idle too.
	transit_fork_unlock(child ? forget_pending : nullptr, child ? forget_delayed_work_timer : nullptr);
	rcu_fork_unlock(child);
	log_fork_unlock();
	warn_fork_unlock();
	hog_fork_unlock();
	monitor_fork_unlock(child);
	timer_fork_unlock(child ? forget_delayed_work_timer : nullptr);
	for (auto it = h.wqs.rbegin(); it != h.wqs.rend(); ++it) {
		(*it)->mayday_lock.unlock();
		(*it)->flush_mutex.unlock();
		for (auto n = (*it)->node_nr_active.rbegin(); n != (*it)->node_nr_active.rend(); ++n)
			(*n)->lock.unlock();
	}
	for (auto it = h.pools.rbegin(); it != h.pools.rend(); ++it)
		(*it)->lock.unlock();
	for (auto it = h.wqs.rbegin(); it != h.wqs.rend(); ++it)
		(*it)->mutex.unlock();
	g().pool_mutex.unlock();
	detect_fork_unlock(child);
}

void fork_parent() { fork_unlock(false); }

// An item the child drops: idle (not pending), last seen on pool.
void drop_item(work_struct *w, worker_pool *pool) NO_THREAD_SAFETY_ANALYSIS
{
	INIT_LIST_HEAD(&w->entry);
	__atomic_store_n(&w->data, make_offq(static_cast<unsigned long>(pool->id), 0, pool->flags & POOL_BH),
			 __ATOMIC_RELEASE);
}

void drop_list(list_head *head, worker_pool *pool)
{
	while (!list_empty(head)) {
		work_struct *w = entry_work(head->next);
		list_del_init(&w->entry);
		drop_item(w, pool);
	}
}

// Every lock is held (and owned by this, the only thread).
void rebuild_pools() NO_THREAD_SAFETY_ANALYSIS
{
	for (auto *pool : held().pools) {
		drop_list(&pool->worklist, pool);
		for (worker *w : pool->workers) {
			drop_list(&w->scheduled, pool);
			delete w;
		}
		pool->workers.clear();
		INIT_LIST_HEAD(&pool->idle_list);
		for (auto &b : pool->busy_hash)
			b = nullptr;
		pool->nr_workers = pool->nr_idle = pool->nr_running = 0;
		pool->nr_returning.store(0, std::memory_order_relaxed);
		pool->watchers.clear();
		pool->flags &= ~POOL_MANAGER_ACTIVE;
		pool->creating = false;
		pool->mayday_armed = false; // the child's timers were dropped
		pool->create_fail_until_ns = 0;
		pool->watch.store(false, std::memory_order_relaxed);
	}
}

// The pwqs lose the items they counted; those that had only items left (a
// replaced pwq waiting for its last one) are released after unlock.
void rebuild_workqueues(std::vector<pool_workqueue *> &release) NO_THREAD_SAFETY_ANALYSIS
{
	for (auto *wq : held().wqs) {
		for (list_head *e = wq->pwqs.next; e != &wq->pwqs; e = e->next) {
			auto *pwq = container_of(e, pool_workqueue, pwqs_node);
			drop_list(&pwq->inactive_works, pwq->pool);
			pwq->refcnt -= pwq->nr_in_flight;
			pwq->nr_in_flight = 0;
			for (int &c : pwq->nr_in_flight_color)
				c = 0;
			pwq->nr_active = 0;
			pwq->on_pending = false;
			pwq->on_mayday = false;
			if (pwq->refcnt == 0 && !pwq->released) {
				pwq->released = true;
				release.push_back(pwq);
			}
		}
		for (auto *nna : wq->node_nr_active) {
			nna->nr = 0;
			nna->pending.clear();
		}
		wq->maydays.clear();
		// Flushers and drainers were the parent's threads.
		wq->flush_color = wq->work_color.load();
		wq->nr_flushers.store(0);
		wq->flush_gen++;
		wq->nr_drainers = 0;
		wq->aflags.fetch_and(~static_cast<unsigned>(__WQ_DRAINING));
		wq->busy_refs.store(0);
	}
}

bool control_was_running; // in the parent, as the child's handler saw it

// The child's first worker creation: threads the child needs only once it
// uses cmwq (a child that execs at once creates none).
void child_first_use()
{
	monitor_start();
	if (control_was_running)
		cmwq_control_start();
}

void fork_child() NO_THREAD_SAFETY_ANALYSIS
{
	// control.cpp's own child handler runs after this one and forgets the
	// parent's endpoint; whether there was one is read here.
	control_was_running = cmwq_control_path() != nullptr;
	tl_worker = nullptr; // forked from a work item: this thread is no worker here
	std::vector<pool_workqueue *> release;
	rebuild_pools();
	rebuild_workqueues(release);
	std::vector<workqueue_struct *> rescued;
	for (auto *wq : held().wqs)
		if (wq->rescuer)
			rescued.push_back(wq);
	fork_unlock(true);
	deferred d;
	for (auto *pwq : release)
		pwq_release(pwq, d);
	d.run();
	for (auto *wq : rescued)
		rescuer_fork_child(wq);
	g().child_first_use.store(true);
	fork_generation.fetch_add(1, std::memory_order_relaxed);
}

} // namespace

void fork_handlers_install()
{
	g().child_start = child_first_use;
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}

} // namespace cmwq::detail

extern "C" unsigned cmwq_fork_generation(void)
{
	return cmwq::detail::fork_generation.load(std::memory_order_relaxed);
}
