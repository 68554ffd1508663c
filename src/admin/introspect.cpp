// introspect.cpp - what the tools see of this process: the counters summed
// per workqueue and the snapshot of pools and workqueues (<cmwq/introspect.hpp>).
// A snapshot copies under the locks and returns plain data, so a caller
// never holds an engine lock while it formats or sends the result.
#include "engine/engine.h"

#include <algorithm>

namespace cmwq::detail {

static void sum_stats(workqueue_struct *wq, uint64_t *out) REQUIRES(wq->mutex)
{
	for (int i = 0; i < PWQ_NR_STATS; i++)
		out[i] = 0;
	auto add = [&](pool_workqueue *pwq) {
		for (int i = 0; i < PWQ_NR_STATS; i++)
			out[i] += pwq->stats[i].load(std::memory_order_relaxed);
	};
	for (list_head *e = wq->pwqs.next; e != &wq->pwqs; e = e->next)
		add(container_of(e, pool_workqueue, pwqs_node));
	for (int i = 0; i < PWQ_NR_STATS; i++)
		out[i] += wq->retired_stats[i];
}

} // namespace cmwq::detail

using namespace cmwq::detail;

extern "C" {

void cmwq_workqueue_stats(struct workqueue_struct *wq, uint64_t stats[PWQ_NR_STATS])
{
	if (!stats && null_arg("cmwq_workqueue_stats", "stats"))
		return;
	if (wq_refused(wq, "cmwq_workqueue_stats")) {
		std::fill(stats, stats + PWQ_NR_STATS, uint64_t{0});
		return;
	}
	lock_guard wk(wq->mutex);
	sum_stats(wq, stats);
}

} // extern "C"

namespace cmwq {

system_info snapshot()
{
	using namespace detail;
	ensure_started();
	auto &gl = g();
	system_info si;
	uint64_t now = now_ns();
	lock_guard gk(gl.pool_mutex);
	si.usable = gl.usable;
	for (auto *pool : gl.pools) {
		pool_info pi;
		lock_guard lk(pool->lock);
		pi.id = pool->id;
		pi.cpu = pool->cpu;
		pi.highpri = pool->highpri;
		pi.nice = pool->nice;
		pi.refcnt = pool->refcnt;
		pi.node = pool->node;
		pi.strict = pool->strict;
		pi.cpus = pool->run_cpus; // the unbound cpumask while its CPU is offline
		pi.pod_cpus = pool->pod_cpus;
		pi.nr_workers = pool->nr_workers;
		pi.nr_idle = pool->nr_idle;
		pi.nr_running = pool->nr_running;
		for (list_head *e = pool->worklist.next; e != &pool->worklist; e = e->next)
			pi.nr_pending++;
		// last_progress_ns may be a worker's counter-derived time, a few ns
		// ahead of this read.
		pi.hung_s = list_empty(&pool->worklist) || now <= pool->last_progress_ns
				    ? 0
				    : (now - pool->last_progress_ns) / 1e9;
		pi.flags = pool->flags;
		si.pools.push_back(std::move(pi));
	}
	for (auto *wq : gl.workqueues) {
		workqueue_info wi;
		lock_guard wk(wq->mutex);
		wi.name = wq->name;
		wi.flags = wq->flags;
		wi.max_active = wq->saved_max_active;
		wi.min_active = wq->saved_min_active;
		wi.unbound = wq->flags & WQ_UNBOUND;
		wi.ordered = wq->flags & __WQ_ORDERED;
		if (wi.unbound) {
			wi.affinity_scope = scope_attr(wq);
			wi.strict = wq->unbound_attrs.affn_strict;
			wi.nice = wq->unbound_attrs.nice;
			wi.cpumask = attrs_cpus(wq->unbound_attrs);
			wi.dfl_pool = wq->dfl_pwq ? wq->dfl_pwq->pool->id : -1;
			for (auto *nna : wq->node_nr_active) {
				lock_guard nl(nna->lock);
				wi.node_nr.push_back(nna->nr);
				wi.node_max.push_back(nna->max);
			}
		} else {
			wi.nice = (wq->flags & WQ_HIGHPRI) ? -20 : 0;
		}
		for (int c : gl.usable) {
			auto *pwq = wq->cpu_pwq[static_cast<size_t>(c)].load();
			wi.cpu_pool.push_back(pwq ? pwq->pool->id : -1);
		}
		for (list_head *e = wq->pwqs.next; e != &wq->pwqs; e = e->next) {
			auto *pwq = container_of(e, pool_workqueue, pwqs_node);
			lock_guard lk(pwq->pool->lock);
			wi.nr_active += pwq->nr_active;
			wi.nr_in_flight += pwq->nr_in_flight;
			for (list_head *x = pwq->inactive_works.next; x != &pwq->inactive_works; x = x->next)
				wi.nr_inactive++;
		}
		if (wq->rescuer)
			wi.rescuer_tid = __atomic_load_n(&wq->rescuer->tid, __ATOMIC_ACQUIRE);
		uint64_t st[PWQ_NR_STATS];
		sum_stats(wq, st);
		std::copy(st, st + PWQ_NR_STATS, wi.stats.begin());
		si.workqueues.push_back(std::move(wi));
	}
	return si;
}

} // namespace cmwq
