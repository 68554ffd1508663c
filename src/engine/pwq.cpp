// pwq.cpp - pool_workqueue: the state-word transitions of a queued item,
// references, nr_active and the per-node active slots of unbound
// workqueues, activation of inactive items, in-flight and flush-color
// accounting, and release of a pwq once its last reference is gone.
// Slots of unbound workqueues are shared per node (wq_node_nr_active), so a
// freed slot may go to a pwq of another pool: that activation is handed to
// the caller's deferred actions and runs after this pool's lock is dropped.
#include "engine.h"

#include <algorithm>

namespace cmwq::detail {

worker_pool *get_work_pool(work_struct *work)
{
	unsigned long data = work_data(work);
	if (data & WORK_STRUCT_PWQ)
		return pwq_pool(data_pwq(data));
	unsigned long id = offq_pool(data);
	if (id == WORK_OFFQ_POOL_NONE)
		return nullptr;
	return get_pool_by_id(id);
}

static void get_pwq(pool_workqueue *pwq) REQUIRES(pwq->pool->lock)
{
	pwq->pool->lock.assert_held();
	WQ_WARN_ON_ONCE(pwq->refcnt <= 0); // a released pwq gains no reference
	pwq->refcnt++;
}

static void put_pwq(pool_workqueue *pwq, deferred &d) REQUIRES(pwq->pool->lock)
{
	pwq->pool->lock.assert_held();
	if (WQ_WARN_ON_ONCE(pwq->refcnt <= 0))
		return;
	if (--pwq->refcnt)
		return;
	pwq->released = true;
	// destroy_workqueue waits for busy_refs, so it cannot free the pwq or
	// the workqueue before this release has run.
	pwq->wq->busy_refs.fetch_add(1, std::memory_order_acq_rel);
	// A locked section drops at most one item's reference (one completion
	// or one grab), so the slot is always free.
	d.release[d.nr_release++] = pwq;
}

static bool wq_unbound(const workqueue_struct *wq) { return wq->flags & WQ_UNBOUND; }

wq_node_nr_active *pwq_nna(pool_workqueue *pwq)
{
	if (!wq_unbound(pwq->wq))
		return nullptr;
	return pwq->wq->node_nr_active[pwq->slot_node];
}

static bool nna_full(wq_node_nr_active *nna)
{
	lock_guard lk(nna->lock);
	return nna->nr >= nna->max;
}

// The node FIFO of pwqs waiting for a slot (N held): join once, leave once.
void nna_add_pending(wq_node_nr_active *nna, pool_workqueue *pwq) REQUIRES(nna->lock)
{
	if (!pwq->on_pending) {
		nna->pending.push_back(pwq);
		pwq->on_pending = true;
	}
}

static void nna_remove_pending(wq_node_nr_active *nna, pool_workqueue *pwq) REQUIRES(nna->lock)
{
	if (!pwq->on_pending)
		return;
	auto it = std::find(nna->pending.begin(), nna->pending.end(), pwq);
	if (it != nna->pending.end())
		nna->pending.erase(it);
	pwq->on_pending = false;
}

// Try to take an active slot for one item of pwq (kernel pwq_tryinc_nr_active).
bool pwq_tryinc_nr_active(pool_workqueue *pwq, bool fill)
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
	lock_guard lk(nna->lock);
	if (pwq->on_pending && !fill && nna->pending.front() != pwq)
		return false;
	if (nna->nr < nna->max) {
		nna->nr++;
		nna_remove_pending(nna, pwq);
		pwq->nr_active++;
		return true;
	}
	nna_add_pending(nna, pwq);
	return false;
}

void move_linked_works(worker_pool *pool, work_struct *work, list_head *head)
{
	pool->lock.assert_held();
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

static void pwq_activate_work(pool_workqueue *pwq, work_struct *work) REQUIRES(pwq->pool->lock)
{
	worker_pool *pool = pwq->pool;
	pwq->pool->lock.assert_held();
	if (list_empty(&pool->worklist))
		pool->last_progress_ns = now_ns();
	move_linked_works(pwq->pool, work, &pool->worklist);
	// A load and a store, not a locked fetch_and (the per-CPU fan-out runs
	// 15% faster, docs/benchmarks-history.md, "Activating a waiting item without a locked instruction"): while the item is queued
	// its word changes only under this lock, apart from queuers' fetch_or
	// of PENDING, which finds PENDING set and writes the value back
	// unchanged. The acquire load takes in what those queuers stored before
	// their call, for the worker's exchange to pass on (locking.md, "The
	// work state word").
	unsigned long data = __atomic_load_n(&work->data, __ATOMIC_ACQUIRE);
	__atomic_store_n(&work->data, data & ~WORK_STRUCT_INACTIVE, __ATOMIC_RELEASE);
	CMWQ_PROBE2(workqueue_activate_work, work, work->func);
}

// Activate the first inactive item if a slot is free. Called under pool->lock.
bool pwq_activate_first_inactive(pool_workqueue *pwq, bool fill, deferred &d)
{
	if (list_empty(&pwq->inactive_works))
		return false;
	if (!pwq_tryinc_nr_active(pwq, fill))
		return false;
	pwq_activate_work(pwq, entry_work(pwq->inactive_works.next));
	if (d.rechecks != pwq->pool)
		kick_pool(pwq->pool, d);
	return true;
}


// pwq was first in its node's FIFO and was given the free slot: activate
// one item (kicking the pool) and stay in the FIFO while items wait.
// Whether one was activated (a cancelled item may have left nothing).
static bool take_node_slot(pool_workqueue *pwq, wq_node_nr_active *nna, deferred &d) REQUIRES(pwq->pool->lock)
{
	bool activated = pwq_activate_first_inactive(pwq, true, d);
	if (!list_empty(&pwq->inactive_works)) {
		lock_guard nl(nna->lock);
		nna_add_pending(nna, pwq);
	}
	return activated;
}

// A slot of pwq's node was handed to it by another pool's completion
// (deferred, pwq->pool->lock not held): activate one item there. Whether
// one was activated; if not, the caller offers the slot on.
bool node_activate_handoff(pool_workqueue *pwq, wq_node_nr_active *nna, deferred &d) NO_THREAD_SAFETY_ANALYSIS
{
	// It may have been released (and reused) since it was handed over.
	worker_pool *pool = pwq_pool(pwq);
	lock_guard lk(pool->lock);
	if (pwq_pool(pwq) != pool || pwq->released || pwq_nna(pwq) != nna)
		return false;
	return take_node_slot(pwq, nna, d);
}

static void pwq_dec_nr_active(pool_workqueue *pwq, deferred &d) REQUIRES(pwq->pool->lock)
{
	WQ_WARN_ON_ONCE(pwq->nr_active <= 0);
	pwq->nr_active--;
	wq_node_nr_active *nna = pwq_nna(pwq);
	if (!nna) {
		pwq_activate_first_inactive(pwq, true, d);
		return;
	}
	bool handed;
	{
		lock_guard lk(nna->lock);
		// The common case of a busy unbound workqueue: nobody else waits on
		// the node, so the slot goes straight to this pwq's next inactive
		// item in one hold of N (what node_activate_pending would decide,
		// without the release and retake).
		handed = !pwq->plugged && !list_empty(&pwq->inactive_works) && nna->nr <= nna->max &&
			 (nna->pending.empty() || (nna->pending.size() == 1 && nna->pending.front() == pwq));
		if (handed) {
			pwq->nr_active++;
			pwq_activate_work(pwq, entry_work(pwq->inactive_works.next));
			if (list_empty(&pwq->inactive_works))
				nna_remove_pending(nna, pwq);
			else
				nna_add_pending(nna, pwq);
		} else {
			nna->nr--;
		}
	}
	if (handed) {
		if (d.rechecks != pwq->pool)
			kick_pool(pwq->pool, d);
		return;
	}
	node_activate_pending(pwq, nna, d);
}

// A slot of nna is free: give it to the first waiting pwq that has an
// inactive item (kernel node_activate_pending_pwq). pwqs of our own pool are
// handled here; the first of another pool is handed to deferred::run, which
// offers the slot on (node_activate_pending with pwq NULL) if it had nothing
// after all. Holds pwq's pool lock only when pwq is not NULL, which the
// analysis cannot express.
void node_activate_pending(pool_workqueue *pwq, wq_node_nr_active *nna, deferred &d) NO_THREAD_SAFETY_ANALYSIS
{
	for (;;) {
		pool_workqueue *next = nullptr;
		{
			lock_guard lk(nna->lock);
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
			if (pwq)
				pwq_activate_first_inactive(pwq, false, d);
			return;
		}
		// next left the FIFO under N, and N is dropped: it may have been
		// released, or recycled onto another pool (pwq_recycle stores its
		// pool under the old pool's lock), since. Its pool is read as
		// pwq_recycle publishes it. On our own pool, whose lock we hold,
		// it cannot move now; one released or re-noded meanwhile is passed.
		if (pwq && pwq_pool(next) == pwq->pool) {
			if (next->released || pwq_nna(next) != nna)
				continue;
			bool activated = take_node_slot(next, nna, d);
			if (activated || nna_full(nna))
				return;
			continue; // it had nothing (cancelled): try the next waiter
		} else if (d.nr_activate < MAX_DEFERRED_ACTIVATIONS) {
			// Activated after our lock is dropped; busy_refs keeps the
			// workqueue (and so the pwq) from being freed meanwhile.
			next->wq->busy_refs.fetch_add(1, std::memory_order_acq_rel);
			d.activate_nna[d.nr_activate] = nna;
			d.activate[d.nr_activate++] = next;
		} else {
			lock_guard lk(nna->lock);
			nna->pending.insert(nna->pending.begin(), next);
			next->on_pending = true;
		}
		return;
	}
}

// A pwq's count of some color reached zero while someone flushes: the
// flushers re-scan (they advance flush_color themselves).
static void flush_color_done(workqueue_struct *wq)
{
	lock_guard lk(wq->flush_mutex);
	wq->flush_gen++;
	wq->flush_cv.notify_all();
}

void pwq_dec_nr_in_flight(pool_workqueue *pwq, unsigned long data, deferred &d)
{
	if (!(data & WORK_STRUCT_INACTIVE))
		pwq_dec_nr_active(pwq, d);
	workqueue_struct *wq = pwq->wq;
	int color = work_color(data);
	// Flushers are told under pool->lock (flush_mutex nests inside it), so
	// once destroy_workqueue has taken this pool's lock no worker still
	// touches the workqueue. A flusher that scanned this pwq before this
	// completion had raised nr_flushers before its scan took this lock.
	WQ_WARN_ON_ONCE(pwq->nr_in_flight_color[color] <= 0 || pwq->nr_in_flight <= 0);
	if (--pwq->nr_in_flight_color[color] == 0 && wq->nr_flushers.load(std::memory_order_seq_cst) > 0)
		flush_color_done(wq);
	pwq->nr_in_flight--;
	put_pwq(pwq, d);
}

void insert_work(pool_workqueue *pwq, work_struct *work, list_head *head, unsigned long extra)
{
	pwq->pool->lock.assert_held();
	__atomic_store_n(&work->data,
			 reinterpret_cast<unsigned long>(pwq) | WORK_STRUCT_PENDING | WORK_STRUCT_PWQ | extra,
			 __ATOMIC_RELEASE);
	list_add_tail(&work->entry, head);
	get_pwq(pwq);
	if (debug_objects_on())
		debug_work_active(work);
}

void clear_pending_keep_offq(work_struct *work)
{
	__atomic_fetch_and(&work->data, ~WORK_STRUCT_PENDING, __ATOMIC_RELEASE);
}

// true if the item is disabled: PENDING was released and the caller fails.
bool clear_pending_if_disabled(work_struct *work)
{
	unsigned long data = work_data(work);
	if (data & WORK_STRUCT_PWQ)
		return false;
	if (!offq_depth(data))
		return false;
	clear_pending_keep_offq(work);
	return true;
}

bool test_and_set_pending(work_struct *work)
{
	return __atomic_fetch_or(&work->data, WORK_STRUCT_PENDING, __ATOMIC_ACQ_REL) & WORK_STRUCT_PENDING;
}

// A released pwq of wq becomes a new one on `pool`. Lock-free readers may
// still hold its address (from a CPU slot or an item's state word, loaded
// before it was released): they lock the pool they read from it and check
// that it still belongs there. So the old pool's lock is held while the pwq
// is reset and moved: a reader under that lock sees it either released or
// belonging elsewhere, and retries. The memory is never returned, so a
// stale address always points at a pwq of this workqueue (type-stable, as
// the kernel's SLAB_TYPESAFE_BY_RCU objects are).
static void pwq_recycle(pool_workqueue *pwq, worker_pool *pool) NO_THREAD_SAFETY_ANALYSIS
{
	worker_pool *old = pwq->pool;
	lock_guard lk(old->lock);
	pwq->refcnt = 1;
	pwq->nr_in_flight = 0;
	for (int &c : pwq->nr_in_flight_color)
		c = 0;
	pwq->nr_active = 0;
	pwq->plugged = false;
	pwq->released = false;
	pwq->on_pending = false;
	pwq->on_mayday = false;
	INIT_LIST_HEAD(&pwq->inactive_works);
	INIT_LIST_HEAD(&pwq->pwqs_node);
	for (auto &st : pwq->stats)
		st.store(0, std::memory_order_relaxed);
	if (pwq->wq->flags & WQ_UNBOUND)
		pwq->slot_node = pool->node >= 0 ? pool->node : g().nr_nodes;
	__atomic_store_n(&pwq->pool, pool, __ATOMIC_RELEASE);
}

pool_workqueue *new_pwq(workqueue_struct *wq, worker_pool *pool) REQUIRES(wq->mutex)
{
	pool_workqueue *pwq;
	if (!wq->free_pwqs.empty()) {
		pwq = wq->free_pwqs.back();
		wq->free_pwqs.pop_back();
		pwq_recycle(pwq, pool);
	} else {
		pwq = new pool_workqueue;
		pwq->wq = wq;
		pwq->pool = pool;
		INIT_LIST_HEAD(&pwq->inactive_works);
		INIT_LIST_HEAD(&pwq->pwqs_node);
		if (wq->flags & WQ_UNBOUND)
			pwq->slot_node = pool->node >= 0 ? pool->node : g().nr_nodes;
	}
	return pwq;
}

// Last reference gone (deferred, no locks held). Ordered workqueues unplug
// the successor here, which keeps FIFO across an attribute change.
void pwq_release(pool_workqueue *pwq, deferred &d)
{
	workqueue_struct *wq = pwq->wq;
	worker_pool *pool = pwq->pool;
	{
		lock_guard wk(wq->mutex);
		list_del_init(&pwq->pwqs_node);
		if (wq->flags & WQ_UNBOUND) {
			wq_node_nr_active *nna = wq->node_nr_active[static_cast<size_t>(pwq->slot_node)];
			lock_guard nl(nna->lock);
			nna_remove_pending(nna, pwq);
		}
		// Its counters stay in the workqueue's totals; the pwq itself is
		// reused by the next attribute change (new_pwq).
		for (int i = 0; i < PWQ_NR_STATS; i++)
			wq->retired_stats[i] += pwq->stats[i].load(std::memory_order_relaxed);
		{
			lock_guard ml(wq->mayday_lock);
			auto &m = wq->maydays;
			m.erase(std::remove(m.begin(), m.end(), pwq), m.end());
		}
		wq->free_pwqs.push_back(pwq);
		if ((wq->flags & __WQ_ORDERED) && !list_empty(&wq->pwqs)) {
			auto *next = container_of(wq->pwqs.next, pool_workqueue, pwqs_node);
			lock_guard lk(next->pool->lock);
			if (next->plugged) {
				next->plugged = false;
				pwq_activate_first_inactive(next, true, d);
			}
		}
	}
	if (wq->flags & WQ_UNBOUND)
		put_unbound_pool(pool);
}

// Drop a base reference. Returns the pwq if it must be released.
pool_workqueue *put_base_ref(pool_workqueue *pwq)
{
	lock_guard lk(pwq->pool->lock);
	if (--pwq->refcnt)
		return nullptr;
	pwq->released = true;
	return pwq;
}

} // namespace cmwq::detail
