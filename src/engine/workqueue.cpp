// workqueue.cpp - one workqueue: alloc_workqueue and destroy_workqueue, attributes (the kernel's
// apply_wqattrs prepare/commit), max_active and min_active with the
// per-node shares, the freezer, re-podding on scope and cpumask changes,
// flush_workqueue and drain_workqueue.
// A workqueue is a domain (flags, limits, flushing, forward progress) over
// shared pools, not a thread pool: creating one makes pwqs, never threads.
#include "engine.h"

#include <errno.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace cmwq::detail {

// Release pwqs whose last base reference an attribute change dropped.
static void release_pwqs(const std::vector<pool_workqueue *> &release)
{
	deferred d;
	for (auto *p : release)
		pwq_release(p, d);
	d.run();
}

static std::vector<int> intersect(const std::vector<int> &a, const std::vector<int> &b)
{
	std::vector<int> out;
	std::set_intersection(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
	return out;
}

static std::vector<int> mask_to_vec(const cpumask *m)
{
	std::vector<int> out;
	for (int c : g().usable)
		if (cpumask_test_cpu(c, m))
			out.push_back(c);
	return out;
}

static affinity_scope effective_scope(const workqueue_attrs &a)
{
	if (a.affn_scope == WQ_AFFN_DFL)
		return g().default_scope;
	return static_cast<affinity_scope>(a.affn_scope);
}

struct pwq_plan {
	std::vector<pool_workqueue *> slot; // by CPU number
	pool_workqueue *dfl = nullptr;
	std::vector<int> effective;
};

// Build the pwqs for attrs (G and W held). Nothing is installed yet.
static int plan_unbound_pwqs(workqueue_struct *wq, const workqueue_attrs &attrs, pwq_plan &plan)
	REQUIRES(g().pool_mutex, wq->mutex)
{
	auto &gl = g();
	std::vector<int> eff = intersect(mask_to_vec(attrs.cpumask), gl.unbound_cpus);
	if (eff.empty())
		eff = gl.unbound_cpus;
	plan.effective = eff;
	bool strict = attrs.affn_strict;
	bool ordered = wq->flags & __WQ_ORDERED;
	worker_pool *dpool = get_unbound_pool(attrs.nice, strict, eff, eff);
	if (!dpool)
		return -ENOMEM;
	plan.dfl = new_pwq(wq, dpool);
	plan.slot.assign(wq->cpu_pwq.size(), nullptr);
	const pod_type &pt = gl.topo.scope(effective_scope(attrs));
	for (int cpu : gl.usable) {
		if (ordered) {
			plan.slot[static_cast<size_t>(cpu)] = plan.dfl;
			continue;
		}
		std::vector<int> pod = intersect(pt.pod_cpus[static_cast<size_t>(pt.cpu_pod[static_cast<size_t>(cpu)])], eff);
		if (pod.empty())
			pod = eff;
		worker_pool *p = get_unbound_pool(attrs.nice, strict, pod, eff);
		if (!p)
			return -ENOMEM;
		plan.slot[static_cast<size_t>(cpu)] = new_pwq(wq, p);
	}
	return 0;
}

static void wq_update_node_max_active(workqueue_struct *wq, const std::vector<int> &eff) REQUIRES(wq->mutex);

// Install a plan (G and W held). Returns pwqs to release after unlocking.
static std::vector<pool_workqueue *> commit_unbound_pwqs(workqueue_struct *wq, pwq_plan &plan) REQUIRES(wq->mutex)
{
	std::vector<pool_workqueue *> old;
	bool ordered = wq->flags & __WQ_ORDERED;
	pool_workqueue *old_dfl = wq->dfl_pwq;
	{
		// Each installed slot holds one base reference. The default pwq's
		// are taken before any slot publishes it: a queuer that finds it
		// there takes its references under the same lock.
		lock_guard lk(plan.dfl->pool->lock);
		if (ordered && old_dfl)
			plan.dfl->plugged = true;
		for (int cpu : g().usable)
			if (plan.slot[static_cast<size_t>(cpu)] == plan.dfl)
				plan.dfl->refcnt++;
	}
	for (int cpu : g().usable) {
		pool_workqueue *n = plan.slot[static_cast<size_t>(cpu)];
		pool_workqueue *o = wq->cpu_pwq[static_cast<size_t>(cpu)].exchange(n, std::memory_order_acq_rel);
		if (n != plan.dfl)
			list_add_tail(&n->pwqs_node, &wq->pwqs);
		if (o && o != old_dfl)
			old.push_back(o);
	}
	list_add_tail(&plan.dfl->pwqs_node, &wq->pwqs);
	wq->dfl_pwq = plan.dfl;
	if (old_dfl) {
		int refs = ordered ? static_cast<int>(g().usable.size()) + 1 : 1;
		for (int i = 0; i < refs; i++)
			old.push_back(old_dfl);
	}
	wq_update_node_max_active(wq, plan.effective);
	std::vector<pool_workqueue *> release;
	for (auto *o : old)
		if (auto *r = put_base_ref(o))
			release.push_back(r);
	return release;
}

static std::vector<int> wq_effective_mask(workqueue_struct *wq) REQUIRES(wq->mutex)
{
	return wq->dfl_pwq ? wq->dfl_pwq->pool->pod_cpus : g().unbound_cpus;
}

// Node shares of max_active (spec 4.6), W held.
static void wq_update_node_max_active(workqueue_struct *wq, const std::vector<int> &eff) REQUIRES(wq->mutex)
{
	if (!(wq->flags & WQ_UNBOUND))
		return;
	auto &gl = g();
	int max = wq->max_active.load();
	int min = wq->min_active;
	int total = static_cast<int>(eff.size());
	int nr_nodes = gl.nr_nodes;
	for (int n = 0; n < nr_nodes; n++) {
		int cnt = 0;
		for (int c : eff)
			if (gl.cpu_node[static_cast<size_t>(c)] == n)
				cnt++;
		int share = total ? (max * cnt + total - 1) / total : min;
		share = std::clamp(share, min, std::max(min, max));
		lock_guard nl(wq->node_nr_active[static_cast<size_t>(n)]->lock);
		wq->node_nr_active[static_cast<size_t>(n)]->max = share;
	}
	lock_guard nl(wq->node_nr_active[static_cast<size_t>(nr_nodes)]->lock);
	wq->node_nr_active[static_cast<size_t>(nr_nodes)]->max = max;
}

// Publish max/min (W held) and activate what the new limits allow.
static void wq_adjust_max_active(workqueue_struct *wq) REQUIRES(wq->mutex)
{
	bool frozen = g().freezing && (wq->flags & WQ_FREEZABLE);
	wq->max_active.store(frozen ? 0 : wq->saved_max_active);
	wq->min_active = frozen ? 0 : wq->saved_min_active;
	wq_update_node_max_active(wq, wq_effective_mask(wq));
	bool activated;
	do {
		activated = false;
		for (list_head *e = wq->pwqs.next; e != &wq->pwqs; e = e->next) {
			auto *pwq = container_of(e, pool_workqueue, pwqs_node);
			deferred d;
			{
				lock_guard lk(pwq->pool->lock);
				if (pwq_activate_first_inactive(pwq, true, d))
					activated = true;
			}
			d.run();
		}
	} while (activated);
}

static int clamp_max_active(int max_active, const std::string &name)
{
	if (max_active < 1 || max_active > WQ_MAX_ACTIVE) {
		log_printf(LOG_WARNING,
			"workqueue: max_active %d requested for %s is out of range, clamping between %d and %d\n",
			max_active, name.c_str(), 1, WQ_MAX_ACTIVE);
		return std::clamp(max_active, 1, static_cast<int>(WQ_MAX_ACTIVE));
	}
	return max_active;
}

// Whether no pwq of wq holds an item (or barrier) of color c. Takes
// wq->mutex and each pool's lock, so it runs without flush_mutex.
static bool color_drained(workqueue_struct *wq, int c)
{
	lock_guard wk(wq->mutex);
	for (list_head *e = wq->pwqs.next; e != &wq->pwqs; e = e->next) {
		pool_workqueue *pwq = container_of(e, pool_workqueue, pwqs_node);
		lock_guard lk(pwq->pool->lock);
		if (pwq->nr_in_flight_color[c])
			return false;
	}
	return true;
}

static void flush_workqueue_wait(workqueue_struct *wq)
{
	auto dist = [](int from, int to) { return (to - from + WORK_NR_COLORS) % WORK_NR_COLORS; };
	unique_lock lk(wq->flush_mutex);
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
		wq->flush_cv.wait(lk, [&]() REQUIRES(wq->flush_mutex) { return wq->flush_gen != gen; });
	}
	wq->nr_flushers.fetch_sub(1);
	wq->flush_cv.notify_all();
	if (hinted) {
		lk.unlock();
		cmwq_blocking_end();
	}
}

static bool pwq_busy(pool_workqueue *pwq)
{
	lock_guard lk(pwq->pool->lock);
	return pwq->nr_active || !list_empty(&pwq->inactive_works);
}

// Re-pod every unbound, non-ordered workqueue (takes G).
// The freezer (kernel freeze_workqueues_begin / thaw_workqueues): freezable
// workqueues get max_active 0 while freezing, their saved limits after.
static void set_freezing(bool freezing)
{
	auto &gl = g();
	lock_guard gk(gl.pool_mutex);
	gl.freezing = freezing;
	for (auto *wq : gl.workqueues)
		if (wq->flags & WQ_FREEZABLE) {
			lock_guard wk(wq->mutex);
			wq_adjust_max_active(wq);
		}
}

static void repod_all(bool only_default)
{
	auto &gl = g();
	std::vector<pool_workqueue *> release;
	{
		lock_guard gk(gl.pool_mutex);
		for (auto *wq : gl.workqueues) {
			if (!(wq->flags & WQ_UNBOUND) || (wq->flags & __WQ_ORDERED))
				continue;
			lock_guard wk(wq->mutex);
			if (only_default && wq->unbound_attrs.affn_scope != WQ_AFFN_DFL)
				continue;
			pwq_plan plan;
			if (plan_unbound_pwqs(wq, wq->unbound_attrs, plan)) {
				log_printf(LOG_WARNING, "workqueue: allocation failed while updating CPU pod affinity of \"%s\"\n",
					wq->name.c_str());
				continue;
			}
			auto r = commit_unbound_pwqs(wq, plan);
			release.insert(release.end(), r.begin(), r.end());
		}
	}
	release_pwqs(release);
}

int set_default_scope(affinity_scope s)
{
	if (s == affinity_scope::dfl)
		return -EINVAL;
	{
		lock_guard gk(g().pool_mutex);
		g().default_scope = s;
	}
	repod_all(true);
	return 0;
}

int set_cache_shard_size(unsigned size)
{
	auto &gl = g();
	{
		lock_guard gk(gl.pool_mutex);
		topology t = read_topology(size);
		if (t.usable != gl.usable)
			return -EBUSY;
		gl.topo = std::move(t);
	}
	repod_all(false);
	return 0;
}

int set_unbound_cpumask(const std::vector<int> &requested)
{
	auto &gl = g();
	{
		lock_guard gk(gl.pool_mutex);
		std::vector<int> req = requested;
		std::sort(req.begin(), req.end());
		if (intersect(req, gl.usable).empty())
			return -EINVAL;
		gl.requested_unbound = req;
		update_unbound_cpus(gl);
	}
	repod_all(false);
	return 0;
}

void update_unbound_cpus(globals &gl)
{
	std::vector<int> eff = intersect(gl.requested_unbound, gl.usable);
	std::vector<int> on = intersect(eff, gl.online);
	gl.unbound_cpus = on.empty() ? eff : on;
}

void repod_unbound() { repod_all(false); }

} // namespace cmwq::detail

using namespace cmwq::detail;

extern "C" {




static const unsigned known_flags = WQ_BH | WQ_UNBOUND | WQ_FREEZABLE | WQ_MEM_RECLAIM | WQ_HIGHPRI |
				    WQ_CPU_INTENSIVE | WQ_SYSFS | WQ_POWER_EFFICIENT | WQ_PERCPU |
				    __WQ_ORDERED | __WQ_LEGACY | __WQ_DEPRECATED;

// Refuses unknown and contradictory flags with a message naming the
// workqueue and what is accepted; settles WQ_PERCPU/WQ_UNBOUND and
// max_active as the kernel does. Whether the workqueue may be created.
static bool validate_flags(const char *name, unsigned &flags, int &max_active)
{
	if (flags & ~known_flags) {
		log_printf(LOG_WARNING,
			"workqueue: %s: unknown flags 0x%x; accepted: WQ_BH, WQ_UNBOUND, WQ_FREEZABLE, "
			"WQ_MEM_RECLAIM, WQ_HIGHPRI, WQ_CPU_INTENSIVE, WQ_SYSFS, WQ_POWER_EFFICIENT, WQ_PERCPU\n",
			name, flags & ~known_flags);
		return false;
	}
	if (flags & WQ_BH) {
		if (flags & ~(__WQ_BH_ALLOWS | __WQ_DEPRECATED)) {
			log_printf(LOG_WARNING,
				"workqueue: %s: WQ_BH accepts only WQ_HIGHPRI and WQ_PERCPU besides it (got flags 0x%x)\n",
				name, flags);
			return false;
		}
		if (max_active) {
			log_printf(LOG_WARNING, "workqueue: %s: WQ_BH workqueues take max_active 0 (got %d)\n", name,
				max_active);
			return false;
		}
	}
	if ((flags & WQ_POWER_EFFICIENT) && params().power_efficient.load()) {
		flags &= ~WQ_PERCPU;
		flags |= WQ_UNBOUND;
	}
	if (!(flags & (WQ_UNBOUND | WQ_PERCPU))) {
		// The kernel's 6.17+ migration warning: off unless cmwq.warn_migration,
		// since a ported program cannot change every alloc_workqueue call.
		if (params().warn_migration.load(std::memory_order_relaxed))
			warn_once_msg("neither", std::string("workqueue: ") + name +
						 " is using neither WQ_PERCPU or WQ_UNBOUND. Setting WQ_PERCPU.");
		flags |= WQ_PERCPU;
	} else if ((flags & WQ_UNBOUND) && (flags & WQ_PERCPU)) {
		warn_once_msg("both", std::string("workqueue: ") + name +
					      " uses both WQ_PERCPU and WQ_UNBOUND. Dropped WQ_PERCPU, keeping WQ_UNBOUND.");
		flags &= ~WQ_PERCPU;
	}
	if (flags & WQ_BH)
		max_active = INT_MAX;
	else {
		if (!max_active)
			max_active = WQ_DFL_ACTIVE;
		max_active = clamp_max_active(max_active, name);
	}
	return true;
}

struct workqueue_struct *alloc_workqueue(const char *fmt, unsigned int flags, int max_active, ...)
{
	if (!fmt && null_arg("alloc_workqueue", "fmt"))
		return nullptr;
	ensure_started();
	auto &gl = g();
	char name[WQ_NAME_LEN];
	char full[256];
	va_list ap;
	va_start(ap, max_active);
	std::string formatted = vformat_without_n("alloc_workqueue", fmt, ap);
	snprintf(full, sizeof(full), "%s", formatted.c_str());
	va_end(ap);
	memcpy(name, full, WQ_NAME_LEN - 1);
	name[WQ_NAME_LEN - 1] = 0;
	if (strlen(full) >= WQ_NAME_LEN)
		warn_once_msg("name-trunc", std::string("workqueue: name exceeds WQ_NAME_LEN. Truncating to: ") + name);

	if (!validate_flags(name, flags, max_active))
		return nullptr;

	auto *wq = new workqueue_struct;
	wq->name = name;
	wq->flags = flags;
	wq->aflags.store(flags);
	{
		lock_guard wk(wq->mutex); // not yet seen by anyone: for the analysis
		wq->saved_max_active = max_active;
		wq->saved_min_active = std::min(max_active, static_cast<int>(WQ_DFL_MIN_ACTIVE));
		wq->min_active = wq->saved_min_active;
		INIT_LIST_HEAD(&wq->pwqs);
	}
	wq->max_active.store(max_active);
	wq->cpu_pwq = std::vector<std::atomic<pool_workqueue *>>(static_cast<size_t>(gl.topo.max_cpu() + 1));
	bool hi = flags & WQ_HIGHPRI;

	std::vector<pool_workqueue *> release;
	bool failed = false;
	{
		lock_guard gk(gl.pool_mutex);
		if ((flags & WQ_SYSFS))
			for (auto *o : gl.workqueues)
				if (o->sysfs && o->name == wq->name) {
					log_printf(LOG_WARNING, "workqueue: %s: a WQ_SYSFS workqueue of that name exists\n", name);
					delete wq;
					return nullptr;
				}
		lock_guard wk(wq->mutex);
		if (flags & WQ_UNBOUND) {
			for (int n = 0; n <= gl.nr_nodes; n++)
				wq->node_nr_active.push_back(new wq_node_nr_active);
			workqueue_attrs &a = wq->unbound_attrs;
			a.nice = hi ? -20 : 0;
			cpumask_clear(a.cpumask);
			for (int c : gl.usable)
				cpumask_set_cpu(static_cast<unsigned>(c), a.cpumask);
			a.affn_scope = WQ_AFFN_DFL;
			a.affn_strict = false;
			a.ordered = flags & __WQ_ORDERED;
			pwq_plan plan;
			if (plan_unbound_pwqs(wq, a, plan)) {
				// Out of pool ids: refuse (the partial plan is not freed).
				failed = true;
			} else {
				release = commit_unbound_pwqs(wq, plan);
			}
		} else {
			auto &pools = (flags & WQ_BH) ? gl.bh_pools[hi] : gl.cpu_pools[hi];
			for (int cpu : gl.usable) {
				auto *pwq = new_pwq(wq, pools[static_cast<size_t>(cpu)]);
				wq->cpu_pwq[static_cast<size_t>(cpu)].store(pwq);
				list_add_tail(&pwq->pwqs_node, &wq->pwqs);
			}
		}
		if (!failed) {
			wq_adjust_max_active(wq);
			wq->sysfs = flags & WQ_SYSFS;
			gl.workqueues.push_back(wq);
		}
	}
	if (failed) {
		delete wq;
		return nullptr;
	}
	release_pwqs(release);
	if ((flags & WQ_MEM_RECLAIM) && !rescuer_start(wq)) {
		destroy_workqueue(wq); // nothing was queued on it yet
		return nullptr;
	}
	return wq;
}

int workqueue_sysfs_register(struct workqueue_struct *wq)
{
	if (wq_refused(wq, "workqueue_sysfs_register"))
		return -EINVAL;
	if (wq->flags & __WQ_ORDERED) {
		warn_once_msg("sysfs-ordered-" + wq->name, "cmwq: workqueue_sysfs_register(" + wq->name +
								  "): ordered workqueues cannot be exposed (their "
								  "attributes must not change); -EINVAL");
		return -EINVAL;
	}
	lock_guard gk(g().pool_mutex);
	if (wq->sysfs)
		return -EEXIST;
	wq->sysfs = true;
	return 0;
}

// The structs of the last destroyed workqueues, kept with their magic
// saying dead (bounded: the oldest is freed when a newer one comes). A
// lock-free ring, so a fork child never finds it locked.
constexpr size_t WQ_QUARANTINE = 64;

static void quarantine(workqueue_struct *wq)
{
	static std::atomic<workqueue_struct *> ring[WQ_QUARANTINE];
	static std::atomic<size_t> next{0};
	size_t i = next.fetch_add(1, std::memory_order_relaxed) % WQ_QUARANTINE;
	delete ring[i].exchange(wq, std::memory_order_acq_rel);
}

void destroy_workqueue(struct workqueue_struct *wq)
{
	if (wq_refused(wq, "destroy_workqueue"))
		return;
	auto &gl = g();
	{
		lock_guard gk(gl.pool_mutex);
		wq->sysfs = false;
	}
	{
		lock_guard wk(wq->mutex);
		wq->aflags.fetch_or(__WQ_DESTROYING);
	}
	drain_workqueue(wq);
	rescuer_stop(wq);
	bool busy = false;
	{
		lock_guard wk(wq->mutex);
		for (list_head *e = wq->pwqs.next; e != &wq->pwqs; e = e->next) {
			auto *pwq = container_of(e, pool_workqueue, pwqs_node);
			lock_guard lk(pwq->pool->lock);
			if (pwq->nr_in_flight || pwq->nr_active || !list_empty(&pwq->inactive_works))
				busy = true;
		}
	}
	if (busy) {
		log_printf(LOG_WARNING, "destroy_workqueue: %s has the following busy pwq\n", wq->name.c_str());
		show_one_workqueue(wq);
		return;
	}
	{
		lock_guard gk(gl.pool_mutex);
		auto &v = gl.workqueues;
		v.erase(std::find(v.begin(), v.end(), wq));
	}
	// Wait for deferred actions that still hold the workqueue.
	while (wq->busy_refs.load(std::memory_order_acquire))
		sched_yield();
	std::vector<pool_workqueue *> all;
	{
		lock_guard wk(wq->mutex);
		for (list_head *e = wq->pwqs.next; e != &wq->pwqs; e = e->next)
			all.push_back(container_of(e, pool_workqueue, pwqs_node));
		INIT_LIST_HEAD(&wq->pwqs);
	}
	for (auto *pwq : all) {
		// Take the pool lock once so no worker is still inside a section
		// that touches this pwq.
		{ lock_guard lk(pwq->pool->lock); }
		if (wq->flags & WQ_UNBOUND)
			put_unbound_pool(pwq->pool);
		delete pwq;
	}
	{
		lock_guard wk(wq->mutex);
		for (auto *pwq : wq->free_pwqs)
			delete pwq;
	}
	for (auto *nna : wq->node_nr_active)
		delete nna;
	{ lock_guard fk(wq->flush_mutex); }
	// Later calls with this pointer are refused (wq_refused): the struct of
	// the last WQ_QUARANTINE destroyed workqueues is kept, so a call soon
	// after with the stale pointer reads no freed memory; under
	// cmwq.debug_objects every one is kept.
	wq->magic.store(WQ_MAGIC_DEAD, std::memory_order_release);
	if (!debug_objects_on())
		quarantine(wq);
}

void workqueue_set_max_active(struct workqueue_struct *wq, int max_active)
{
	if (wq_refused(wq, "workqueue_set_max_active"))
		return;
	if (wq->flags & (WQ_BH | __WQ_ORDERED)) {
		log_printf(LOG_WARNING, "workqueue: %s: max_active of %s workqueues cannot be changed\n", wq->name.c_str(),
			(wq->flags & WQ_BH) ? "BH" : "ordered");
		return;
	}
	max_active = clamp_max_active(max_active, wq->name);
	lock_guard gk(g().pool_mutex);
	lock_guard wk(wq->mutex);
	wq->saved_max_active = max_active;
	if (wq->flags & WQ_UNBOUND)
		wq->saved_min_active = std::min(wq->saved_min_active, max_active);
	wq_adjust_max_active(wq);
}

void workqueue_set_min_active(struct workqueue_struct *wq, int min_active)
{
	if (wq_refused(wq, "workqueue_set_min_active"))
		return;
	if ((wq->flags & (WQ_BH | __WQ_ORDERED)) || !(wq->flags & WQ_UNBOUND)) {
		log_printf(LOG_WARNING, "workqueue: %s: min_active applies to unbound, non-ordered workqueues only\n",
			wq->name.c_str());
		return;
	}
	lock_guard gk(g().pool_mutex);
	lock_guard wk(wq->mutex);
	wq->saved_min_active = std::clamp(min_active, 0, wq->saved_max_active);
	wq_adjust_max_active(wq);
}

unsigned int cmwq_workqueue_flags(struct workqueue_struct *wq)
{
	if (wq_refused(wq, "cmwq_workqueue_flags"))
		return 0;
	return wq->flags;
}

bool workqueue_congested(int cpu, struct workqueue_struct *wq)
{
	if (wq_refused(wq, "workqueue_congested"))
		return false;
	if (cpu == WORK_CPU_UNBOUND || cpu < 0 || cpu >= static_cast<int>(wq->cpu_pwq.size()) ||
	    !wq->cpu_pwq[static_cast<size_t>(cpu)].load()) {
		cpu = sched_getcpu();
		if (cpu < 0 || cpu >= static_cast<int>(wq->cpu_pwq.size()) || !wq->cpu_pwq[static_cast<size_t>(cpu)].load())
			cpu = g().usable.front();
	}
	// Under W the slot's pwq cannot be released and reused meanwhile.
	lock_guard wk(wq->mutex);
	pool_workqueue *pwq = wq->cpu_pwq[static_cast<size_t>(cpu)].load();
	lock_guard lk(pwq->pool->lock);
	return !list_empty(&pwq->inactive_works);
}

struct workqueue_attrs *alloc_workqueue_attrs(void)
{
	ensure_started();
	auto *a = new workqueue_attrs{};
	a->nice = 0;
	cpumask_clear(a->cpumask);
	for (int c : g().usable)
		cpumask_set_cpu(static_cast<unsigned>(c), a->cpumask);
	a->affn_scope = WQ_AFFN_DFL;
	a->affn_strict = false;
	a->ordered = false;
	return a;
}

void free_workqueue_attrs(struct workqueue_attrs *attrs) { delete attrs; }

int apply_workqueue_attrs(struct workqueue_struct *wq, const struct workqueue_attrs *attrs)
{
	if (wq_refused(wq, "apply_workqueue_attrs"))
		return -EINVAL;
	if (!attrs && null_arg("apply_workqueue_attrs", "attrs"))
		return -EINVAL;
	if (!(wq->flags & WQ_UNBOUND)) {
		log_printf(LOG_WARNING, "workqueue: %s: apply_workqueue_attrs() needs a WQ_UNBOUND workqueue\n",
			wq->name.c_str());
		return -EINVAL;
	}
	if (attrs->nice < -20 || attrs->nice > 19 || attrs->affn_scope < WQ_AFFN_DFL ||
	    attrs->affn_scope >= WQ_AFFN_NR_TYPES)
		return -EINVAL;
	auto &gl = g();
	std::vector<pool_workqueue *> release;
	{
		lock_guard gk(gl.pool_mutex);
		lock_guard wk(wq->mutex);
		workqueue_attrs a = *attrs;
		a.ordered = wq->flags & __WQ_ORDERED;
		pwq_plan plan;
		if (int err = plan_unbound_pwqs(wq, a, plan))
			return err;
		wq->unbound_attrs = a;
		release = commit_unbound_pwqs(wq, plan);
	}
	release_pwqs(release);
	return 0;
}

void freeze_workqueues_begin(void) { set_freezing(true); }

bool freeze_workqueues_busy(void)
{
	auto &gl = g();
	lock_guard gk(gl.pool_mutex);
	for (auto *wq : gl.workqueues) {
		if (!(wq->flags & WQ_FREEZABLE))
			continue;
		lock_guard wk(wq->mutex);
		for (list_head *e = wq->pwqs.next; e != &wq->pwqs; e = e->next) {
			auto *pwq = container_of(e, pool_workqueue, pwqs_node);
			lock_guard lk(pwq->pool->lock);
			if (pwq->nr_active)
				return true;
		}
	}
	return false;
}

void thaw_workqueues(void) { set_freezing(false); }

extern "C" void __flush_workqueue(workqueue_struct *wq)
{
	if (wq_refused(wq, "flush_workqueue"))
		return;
	if (check_flush_dependency(wq, nullptr))
		return;
	flush_workqueue_wait(wq);
}

extern "C" void drain_workqueue(workqueue_struct *wq)
{
	if (wq_refused(wq, "drain_workqueue"))
		return;
	{
		lock_guard lk(wq->mutex);
		if (wq->nr_drainers++ == 0)
			wq->aflags.fetch_or(__WQ_DRAINING);
	}
	for (unsigned tries = 1;; tries++) {
		flush_workqueue_wait(wq);
		bool busy = false;
		{
			lock_guard lk(wq->mutex);
			for (list_head *e = wq->pwqs.next; e != &wq->pwqs; e = e->next)
				if (pwq_busy(container_of(e, pool_workqueue, pwqs_node)))
					busy = true;
		}
		if (!busy)
			break;
		if (tries == 10 || (tries % 100 == 0 && tries <= 1000))
			log_printf(LOG_WARNING, "workqueue %s: drain_workqueue() isn't complete after %u tries\n",
				wq->name.c_str(), tries);
	}
	lock_guard lk(wq->mutex);
	if (--wq->nr_drainers == 0)
		wq->aflags.fetch_and(~static_cast<unsigned>(__WQ_DRAINING));
}

} // extern "C"
