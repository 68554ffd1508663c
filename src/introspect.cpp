// introspect.cpp - what the tools see: counters, the snapshot, the state
// dump of show_all_workqueues(), and the sysfs-like attributes of WQ_SYSFS
// workqueues with the kernel's names, formats and errors.
// Attribute writes build a modified copy of the attrs and go through
// apply_workqueue_attrs(), so a refused value changes nothing.
#include "internal.h"

#include <cmwq/linux/delay.h>

#include <errno.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace cmwq::detail {

static void sum_stats(workqueue_struct *wq, uint64_t *out)
{
	for (int i = 0; i < PWQ_NR_STATS; i++)
		out[i] = 0;
	auto add = [&](pool_workqueue *pwq) {
		for (int i = 0; i < PWQ_NR_STATS; i++)
			out[i] += pwq->stats[i].load(std::memory_order_relaxed);
	};
	for (list_head *e = wq->pwqs.next; e != &wq->pwqs; e = e->next)
		add(container_of(e, pool_workqueue, pwqs_node));
	for (auto *p : wq->retired)
		add(p);
}

static std::string scope_attr(const workqueue_struct *wq)
{
	auto s = wq->unbound_attrs.affn_scope;
	if (s == WQ_AFFN_DFL)
		return std::string("default (") + scope_name(g().default_scope) + ")";
	return scope_name(static_cast<affinity_scope>(s));
}

static std::vector<int> attrs_cpus(const workqueue_attrs &a)
{
	std::vector<int> out;
	for (int c = 0; c < NR_CPUS; c++)
		if (cpumask_test_cpu(c, a.cpumask))
			out.push_back(c);
	return out;
}

static workqueue_struct *find_sysfs_wq(const char *name)
{
	for (auto *wq : g().workqueues)
		if (wq->sysfs && wq->name == name)
			return wq;
	return nullptr;
}

static void print_pool_line(FILE *f, worker_pool *pool, uint64_t now)
{
	fprintf(f, "pool %d: cpus=%s", pool->id, format_cpulist(pool->cpus).c_str());
	if (pool->node >= 0)
		fprintf(f, " node=%d", pool->node);
	fprintf(f, " flags=0x%x nice=%d", pool->flags, pool->nice);
	if (!list_empty(&pool->worklist))
		fprintf(f, " hung=%llus", static_cast<unsigned long long>((now - pool->last_progress_ns) / 1000000000ull));
	fprintf(f, " workers=%d", pool->nr_workers);
	if (pool->flags & POOL_MANAGER_ACTIVE)
		fprintf(f, " manager");
	if (pool->nr_idle) {
		fprintf(f, " idle:");
		for (list_head *e = pool->idle_list.next; e != &pool->idle_list; e = e->next)
			fprintf(f, " %d", __atomic_load_n(&container_of(e, worker, entry)->tid, __ATOMIC_ACQUIRE));
	}
	fprintf(f, "\n");
}

static void print_func_list(FILE *f, const char *label, std::vector<std::string> names)
{
	if (names.empty())
		return;
	fprintf(f, "    %s: ", label);
	for (size_t i = 0; i < names.size();) {
		size_t j = i;
		while (j < names.size() && names[j] == names[i])
			j++;
		if (i)
			fprintf(f, ", ");
		if (j - i > 1)
			fprintf(f, "%zu*%s", j - i, names[i].c_str());
		else
			fprintf(f, "%s", names[i].c_str());
		i = j;
	}
	fprintf(f, "\n");
}

// One workqueue's busy pwqs (spec 7.6). Takes each pool lock in turn.
static void show_wq(FILE *f, workqueue_struct *wq, uint64_t now)
{
	bool header = false;
	for (list_head *e = wq->pwqs.next; e != &wq->pwqs; e = e->next) {
		auto *pwq = container_of(e, pool_workqueue, pwqs_node);
		worker_pool *pool = pwq->pool;
		std::lock_guard lk(pool->lock);
		if (!pwq->nr_in_flight && !pwq->nr_active && list_empty(&pwq->inactive_works))
			continue;
		if (!header) {
			fprintf(f, "workqueue %s: flags=0x%x\n", wq->name.c_str(), wq->flags);
			header = true;
		}
		fprintf(f, "  pwq %d: cpus=%s", pool->id, format_cpulist(pool->cpus).c_str());
		if (pool->node >= 0)
			fprintf(f, " node=%d", pool->node);
		fprintf(f, " flags=0x%x nice=%d active=%d refcnt=%d%s\n", pool->flags, pool->nice, pwq->nr_active,
			pwq->refcnt, pwq->on_mayday ? " MAYDAY" : "");
		std::string infl;
		for (worker *w : pool->workers) {
			if (w->current_pwq != pwq)
				continue;
			char buf[256];
			snprintf(buf, sizeof(buf), "%s%d%s:%s for %llus", infl.empty() ? "" : ", ",
				 __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE),
				 w->rescuer ? "(RESCUER)" : "", func_name(w->current_func).c_str(),
				 static_cast<unsigned long long>((now - w->current_start_ns) / 1000000000ull));
			infl += buf;
		}
		if (!infl.empty())
			fprintf(f, "    in-flight: %s\n", infl.c_str());
		std::vector<std::string> pending, inactive;
		for (list_head *x = pool->worklist.next; x != &pool->worklist; x = x->next) {
			work_struct *w = entry_work(x);
			unsigned long d = work_data(w);
			if ((d & WORK_STRUCT_PWQ) && reinterpret_cast<pool_workqueue *>(d & ~255UL) == pwq)
				pending.push_back(func_name(w->func));
		}
		for (list_head *x = pwq->inactive_works.next; x != &pwq->inactive_works; x = x->next)
			inactive.push_back(func_name(entry_work(x)->func));
		print_func_list(f, "pending", pending);
		print_func_list(f, "inactive", inactive);
	}
}

void dump_all(FILE *f)
{
	auto &gl = g();
	uint64_t now = now_ns();
	std::lock_guard gk(gl.pool_mutex);
	fprintf(f, "Showing busy workqueues and worker pools:\n");
	for (auto *wq : gl.workqueues) {
		std::lock_guard wk(wq->mutex);
		show_wq(f, wq, now);
	}
	for (auto *pool : gl.pools) {
		std::lock_guard lk(pool->lock);
		if (pool->nr_workers == pool->nr_idle && list_empty(&pool->worklist))
			continue;
		print_pool_line(f, pool, now);
	}
	fflush(f);
}

int wq_sysfs_get(workqueue_struct *wq, const std::string &attr, std::string &out)
{
	bool unbound = wq->flags & WQ_UNBOUND;
	std::lock_guard wk(wq->mutex);
	if (attr == "per_cpu")
		out = unbound ? "0" : "1";
	else if (attr == "max_active")
		out = std::to_string(wq->saved_max_active);
	else if (unbound && attr == "nice")
		out = std::to_string(wq->unbound_attrs.nice);
	else if (unbound && attr == "cpumask")
		out = cmwq::format_cpumask_hex(attrs_cpus(wq->unbound_attrs), g().topo.max_cpu() + 1);
	else if (unbound && attr == "affinity_scope")
		out = scope_attr(wq);
	else if (unbound && attr == "affinity_strict")
		out = wq->unbound_attrs.affn_strict ? "1" : "0";
	else
		return -ENOENT;
	return 0;
}

// A sysfs write may end in a newline (echo); the value is what precedes it.
static std::string trim_value(const char *value)
{
	std::string s(value);
	while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
		s.pop_back();
	return s;
}

static bool parse_int(const char *s, long &out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	while (*end == '\n' || *end == ' ')
		end++;
	if (errno || end == s || *end)
		return false;
	out = v;
	return true;
}

static int wq_sysfs_set(workqueue_struct *wq, const std::string &attr, const char *value)
{
	bool unbound = wq->flags & WQ_UNBOUND;
	bool fixed_max = wq->flags & (WQ_BH | __WQ_ORDERED);
	long v = 0;
	if (attr == "per_cpu")
		return -EACCES;
	if (attr == "max_active") {
		if (fixed_max)
			return -EACCES;
		if (!parse_int(value, v) || v <= 0)
			return -EINVAL;
		workqueue_set_max_active(wq, static_cast<int>(std::min<long>(v, 1 << 30)));
		return 0;
	}
	if (!unbound)
		return -ENOENT;
	workqueue_attrs a;
	{
		std::lock_guard wk(wq->mutex);
		a = wq->unbound_attrs;
	}
	if (attr == "nice") {
		if (!parse_int(value, v) || v < -20 || v > 19)
			return -EINVAL;
		a.nice = static_cast<int>(v);
	} else if (attr == "cpumask") {
		std::string s = trim_value(value);
		auto cpus = parse_cpumask_hex(s);
		if (!cpus)
			return -EINVAL;
		cpumask_clear(a.cpumask);
		for (int c : *cpus)
			if (c < NR_CPUS)
				cpumask_set_cpu(static_cast<unsigned>(c), a.cpumask);
		bool any = false;
		for (int c : g().usable)
			any = any || cpumask_test_cpu(c, a.cpumask);
		if (!any)
			return -EINVAL;
	} else if (attr == "affinity_scope") {
		std::string s = trim_value(value);
		auto sc = parse_scope(s);
		if (!sc)
			return -EINVAL;
		a.affn_scope = static_cast<wq_affn_scope>(*sc);
	} else if (attr == "affinity_strict") {
		if (!parse_int(value, v))
			return -EINVAL;
		a.affn_strict = v != 0;
	} else {
		return -ENOENT;
	}
	return apply_workqueue_attrs(wq, &a);
}

} // namespace cmwq::detail

using namespace cmwq::detail;

extern "C" {

void cmwq_workqueue_stats(struct workqueue_struct *wq, uint64_t stats[PWQ_NR_STATS])
{
	std::lock_guard wk(wq->mutex);
	sum_stats(wq, stats);
}

void cmwq_dump(FILE *out) { dump_all(out); }
void show_all_workqueues(void) { dump_all(stderr); }
void show_one_workqueue(struct workqueue_struct *wq)
{
	std::lock_guard wk(wq->mutex);
	show_wq(stderr, wq, now_ns());
}

int cmwq_sysfs_get(const char *wq_name, const char *attr, char *buf, size_t len)
{
	ensure_started();
	std::string out;
	auto &gl = g();
	std::lock_guard gk(gl.pool_mutex);
	if (!wq_name) {
		std::vector<int> isolated;
		if (!strcmp(attr, "cpumask"))
			out = cmwq::format_cpumask_hex(gl.unbound_cpus, gl.topo.max_cpu() + 1);
		else if (!strcmp(attr, "cpumask_requested"))
			out = cmwq::format_cpumask_hex(gl.requested_unbound, gl.topo.max_cpu() + 1);
		else if (!strcmp(attr, "cpumask_isolated"))
			out = cmwq::format_cpumask_hex(isolated, gl.topo.max_cpu() + 1);
		else
			return -ENOENT;
	} else {
		workqueue_struct *wq = find_sysfs_wq(wq_name);
		if (!wq)
			return -ENOENT;
		if (int err = wq_sysfs_get(wq, attr, out))
			return err;
	}
	if (out.size() + 1 > len)
		return -ERANGE;
	memcpy(buf, out.c_str(), out.size() + 1);
	return 0;
}

int cmwq_sysfs_set(const char *wq_name, const char *attr, const char *value)
{
	ensure_started();
	if (!value)
		return -EINVAL;
	if (!wq_name) {
		if (!strcmp(attr, "cpumask_requested") || !strcmp(attr, "cpumask_isolated"))
			return -EACCES;
		if (strcmp(attr, "cpumask"))
			return -ENOENT;
		// The global unbound cpumask: parsed, limited to the usable CPUs,
		// empty refused; every unbound workqueue is re-podded onto it.
		auto cpus = cmwq::parse_cpumask_hex(trim_value(value));
		if (!cpus)
			return -EINVAL;
		return set_unbound_cpumask(*cpus);
	}
	workqueue_struct *wq;
	{
		std::lock_guard gk(g().pool_mutex);
		wq = find_sysfs_wq(wq_name);
		if (!wq)
			return -ENOENT;
	}
	return wq_sysfs_set(wq, attr, value);
}

int cmwq_sysfs_list(void (*fn)(const char *name, void *arg), void *arg)
{
	ensure_started();
	std::lock_guard gk(g().pool_mutex);
	int n = 0;
	for (auto *wq : g().workqueues)
		if (wq->sysfs) {
			fn(wq->name.c_str(), arg);
			n++;
		}
	return n;
}

// ---- delay.h ------------------------------------------------------------------

static void sleep_ns(uint64_t ns, bool hint)
{
	timespec ts{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
	if (hint)
		cmwq_blocking_begin();
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR) {
	}
	if (hint)
		cmwq_blocking_end();
}

void msleep(unsigned int msecs) { sleep_ns(static_cast<uint64_t>(msecs) * 1000000ull, true); }
void ssleep(unsigned int seconds) { sleep_ns(static_cast<uint64_t>(seconds) * 1000000000ull, true); }
void usleep_range(unsigned long min_us, unsigned long max_us)
{
	sleep_ns((min_us + (max_us > min_us ? (max_us - min_us) / 2 : 0)) * 1000ull, true);
}
unsigned long msleep_interruptible(unsigned int msecs)
{
	timespec ts{static_cast<time_t>(msecs / 1000), static_cast<long>(msecs % 1000) * 1000000L};
	cmwq_blocking_begin();
	int r = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts);
	cmwq_blocking_end();
	if (r == EINTR)
		return static_cast<unsigned long>(ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
	return 0;
}
static void busy_ns(uint64_t ns)
{
	uint64_t until = now_ns() + ns;
	while (now_ns() < until)
		__builtin_ia32_pause();
}
void udelay(unsigned long usecs) { busy_ns(usecs * 1000ull); }
void ndelay(unsigned long nsecs) { busy_ns(nsecs); }
void mdelay(unsigned long msecs) { busy_ns(msecs * 1000000ull); }

// ---- work_on_cpu / schedule_on_each_cpu -----------------------------------

struct work_for_cpu {
	work_struct work;
	long (*fn)(void *);
	void *arg;
	long ret;
};

static void work_for_cpu_fn(work_struct *w)
{
	auto *wfc = container_of(w, work_for_cpu, work);
	wfc->ret = wfc->fn(wfc->arg);
}

long work_on_cpu(int cpu, long (*fn)(void *), void *arg)
{
	work_for_cpu wfc{};
	INIT_WORK(&wfc.work, work_for_cpu_fn);
	wfc.fn = fn;
	wfc.arg = arg;
	schedule_work_on(cpu, &wfc.work);
	flush_work(&wfc.work);
	return wfc.ret;
}

int schedule_on_each_cpu(work_func_t func)
{
	ensure_started();
	auto &usable = g().usable;
	std::vector<work_struct> works(usable.size());
	for (size_t i = 0; i < usable.size(); i++) {
		INIT_WORK(&works[i], func);
		schedule_work_on(usable[i], &works[i]);
	}
	for (auto &w : works)
		flush_work(&w);
	return 0;
}

void wq_watchdog_touch(int cpu)
{
	cmwq::detail::watchdog_touch(cpu);
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
	std::lock_guard gk(gl.pool_mutex);
	si.usable = gl.usable;
	for (auto *pool : gl.pools) {
		pool_info pi;
		std::lock_guard lk(pool->lock);
		pi.id = pool->id;
		pi.cpu = pool->cpu;
		pi.highpri = pool->highpri;
		pi.nice = pool->nice;
		pi.refcnt = pool->refcnt;
		pi.node = pool->node;
		pi.strict = pool->strict;
		pi.cpus = pool->cpus;
		pi.pod_cpus = pool->pod_cpus;
		pi.nr_workers = pool->nr_workers;
		pi.nr_idle = pool->nr_idle;
		pi.nr_running = pool->nr_running;
		for (list_head *e = pool->worklist.next; e != &pool->worklist; e = e->next)
			pi.nr_pending++;
		pi.hung_s = list_empty(&pool->worklist) ? 0 : (now - pool->last_progress_ns) / 1e9;
		pi.flags = pool->flags;
		si.pools.push_back(std::move(pi));
	}
	for (auto *wq : gl.workqueues) {
		workqueue_info wi;
		std::lock_guard wk(wq->mutex);
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
				std::lock_guard nl(nna->lock);
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
			std::lock_guard lk(pwq->pool->lock);
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
