// hotplug.cpp - CPUs going offline and coming back (the kernel's
// workqueue_offline_cpu and workqueue_online_cpu, spec 6.7).
//
// A per-CPU pool whose CPU goes offline is disassociated: POOL_DISASSOCIATED
// is set, every worker carries WORKER_UNBOUND (so nr_running is 0 and the
// pool no longer limits concurrency: its items run as on an unbound pool),
// the workers are moved onto the unbound cpumask, and the pool is kicked so
// that what waits starts. Items queued to that CPU afterwards still run
// there. When the CPU returns, the flag and WORKER_UNBOUND are cleared and
// the workers are pinned to the CPU again, but only once one of them can
// be: the online file lists a CPU before the scheduler takes threads there
// (a loaded machine showed the gap), so until a pin succeeds the CPU stays
// offline to the pools and is tried again every HOTPLUG_RETRY_NS. Unbound
// workqueues get new pods
// on both changes: the effective unbound cpumask leaves out offline CPUs
// (the kernel's wq_update_pod), so their pods and per-node max_active
// shares follow the online CPUs.
//
// The online CPUs are learnt from <sysfs>/devices/system/cpu/online, read
// by the monitor thread at most once a second on its passes (it passes at
// least once a second while the engine has work, every watchdog period
// while idle); nothing on the queueing or execution path looks at it. Only
// a change of the file's text is acted on, so a mask given through
// cpus_online_changed() (tests, programs told by other means) stands
// until the file changes. CPUs that were offline when the process started
// have no pools: they stay unused until the process restarts.
#include "engine.h"

#include <cmwq/topology.hpp>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <string>
#include <vector>

namespace cmwq::detail {

namespace {

struct hotplug_state {
	mutex lock; // H: one change at a time, outside every other lock
	std::string path GUARDED_BY(lock);      // the online file
	std::string last_text GUARDED_BY(lock); // its text as last acted on
	uint64_t next_read_ns GUARDED_BY(lock) = 0;
	uint64_t changes GUARDED_BY(lock) = 0;
	// CPUs online in the file whose workers could not be pinned to them
	// yet: read again on the next pass, not a second later.
	std::vector<int> not_ready GUARDED_BY(lock);
};

hotplug_state &hs()
{
	static auto *s = new hotplug_state; // never freed: workers may outlive main
	return *s;
}

std::vector<int> minus(const std::vector<int> &a, const std::vector<int> &b)
{
	std::vector<int> out;
	std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
	return out;
}

// The per-CPU pools of cpu (normal, highpri, and the BH ones).
std::vector<worker_pool *> cpu_pools_of(int cpu)
{
	auto &gl = g();
	std::vector<worker_pool *> out;
	for (auto *table : {gl.cpu_pools, gl.bh_pools})
		for (int hi = 0; hi < 2; hi++)
			if (auto *p = table[hi][static_cast<size_t>(cpu)])
				out.push_back(p);
	return out;
}

// Context: no lock. The kernel's unbind_workers: run is the unbound cpumask
// the pool's workers move to. Also used to move an already disassociated
// pool's workers when that mask changes.
void pool_unbind(worker_pool *pool, const std::vector<int> &run)
{
	deferred d;
	{
		lock_guard lk(pool->lock);
		pool->flags |= POOL_DISASSOCIATED;
		pool->run_cpus = run;
		for (worker *w : pool->workers) {
			if (w->sleeping)
				worker_set_running(w); // counted back before the flag takes it out
			worker_set_flags(w, WORKER_UNBOUND);
			if (pid_t tid = __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE); tid > 0)
				pin_thread(tid, run);
		}
		WQ_WARN_ON_ONCE(pool->nr_running != 0);
		kick_pool(pool, d); // no longer concurrency managed: what waits may start
	}
	d.run();
}

bool pin_or_hook(pid_t tid, const std::vector<int> &cpus)
{
	if (auto hook = hotplug_pin_hook.load())
		return hook(tid, cpus);
	return pin_thread(tid, cpus);
}

// Context: no lock. The kernel's rebind_workers. False, with nothing
// changed, when the CPU is ours but a worker cannot be pinned to it yet:
// the online file lists a CPU before the scheduler takes threads there
// (cpu_online_mask is set before cpu_active_mask), and a CPU can also be
// taken out of the process's cpuset.
bool pool_rebind(worker_pool *pool)
{
	auto &gl = g();
	lock_guard lk(pool->lock);
	bool ours = std::any_of(pool->cpus.begin(), pool->cpus.end(), [&](int c) {
		return std::binary_search(gl.real_cpus.begin(), gl.real_cpus.end(), c);
	});
	if (ours) {
		for (worker *w : pool->workers) {
			pid_t tid = __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE);
			if (tid <= 0)
				continue;
			if (!pin_or_hook(tid, pool->cpus))
				return false; // this one stays on the unbound mask, as all do
			break; // pinned: the CPU takes threads, the rest follow below
		}
	}
	pool->flags &= ~POOL_DISASSOCIATED;
	pool->run_cpus = pool->cpus;
	for (worker *w : pool->workers) {
		if (pool->managed)
			worker_clr_flags(w, WORKER_UNBOUND); // BH pools keep it: never managed
		if (pid_t tid = __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE); tid > 0)
			pin_or_hook(tid, pool->cpus);
	}
	return true;
}

} // namespace

std::atomic<bool (*)(pid_t, const std::vector<int> &)> hotplug_pin_hook{nullptr};

void hotplug_init()
{
	const char *root = getenv("CMWQ_SYSFS_ROOT");
	auto &h = hs();
	lock_guard hk(h.lock);
	h.path = std::string(root && *root ? root : "/sys") + "/devices/system/cpu/online";
	h.last_text = read_small_file(h.path);
}

uint64_t hotplug_changes()
{
	lock_guard hk(hs().lock);
	return hs().changes;
}

int cpus_online_changed(const std::vector<int> &reported)
{
	auto &gl = g();
	auto &h = hs();
	std::vector<int> online = reported;
	std::sort(online.begin(), online.end());
	online.erase(std::unique(online.begin(), online.end()), online.end());
	std::vector<int> kept;
	std::set_intersection(online.begin(), online.end(), gl.usable.begin(), gl.usable.end(),
			      std::back_inserter(kept));
	if (kept.empty())
		return -EINVAL; // no CPU of ours online: nothing could run, keep what is
	lock_guard hk(h.lock);
	std::vector<int> returning;
	{
		lock_guard gk(gl.pool_mutex);
		returning = minus(kept, gl.online);
	}
	// CPUs back first are bound again (the kernel rebinds a CPU's workers
	// before it updates the pods). One whose workers cannot be pinned to
	// it yet stays offline to us and is tried again on the next pass.
	std::vector<int> not_ready;
	for (int cpu : returning) {
		bool ready = true;
		for (auto *p : cpu_pools_of(cpu))
			ready = pool_rebind(p) && ready;
		if (!ready)
			not_ready.push_back(cpu);
	}
	if (!not_ready.empty() && not_ready != h.not_ready)
		log_printf(LOG_INFO, "cmwq: CPUs %s are online but take no threads yet; tried again shortly\n",
			   format_cpulist(not_ready).c_str());
	bool poke = !not_ready.empty() && h.not_ready.empty();
	h.not_ready = not_ready;
	if (!not_ready.empty())
		h.next_read_ns = std::min(h.next_read_ns, now_ns() + HOTPLUG_RETRY_NS);
	if (poke)
		monitor_poke(); // it may sleep a watchdog period: retries come sooner
	kept = minus(kept, not_ready);
	std::vector<int> down, up, run;
	{
		lock_guard gk(gl.pool_mutex);
		if (kept.empty())
			kept = gl.online; // only CPUs not ready yet: keep what is
		down = minus(gl.online, kept);
		up = minus(kept, gl.online);
		if (down.empty() && up.empty())
			return 0;
		gl.online = kept;
		update_unbound_cpus(gl);
		run = gl.unbound_cpus;
	}
	h.changes++;
	// The pools of every CPU still offline (or not ready) move to the new
	// unbound mask: it may have grown or shrunk.
	for (int cpu : minus(gl.usable, kept))
		for (auto *p : cpu_pools_of(cpu))
			pool_unbind(p, run);
	repod_unbound();
	if (!down.empty())
		log_printf(LOG_INFO, "cmwq: CPUs %s went offline: their per-CPU pools run on CPUs %s until they return\n",
			   format_cpulist(down).c_str(), format_cpulist(run).c_str());
	if (!up.empty())
		log_printf(LOG_INFO, "cmwq: CPUs %s came back online: their workers are bound to them again\n",
			   format_cpulist(up).c_str());
	return 0;
}

bool hotplug_retry_pending()
{
	lock_guard hk(hs().lock);
	return !hs().not_ready.empty();
}

int hotplug_poll(bool force)
{
	auto &h = hs();
	std::string path;
	{
		lock_guard hk(h.lock);
		uint64_t now = now_ns();
		if (!force && now < h.next_read_ns)
			return 0;
		h.next_read_ns = now + (h.not_ready.empty() ? 1000000000ull : HOTPLUG_RETRY_NS);
		path = h.path;
	}
	if (path.empty())
		return 0;
	std::string text = read_small_file(path);
	if (text.empty())
		return 0; // unreadable (or no descriptor to spare): next time
	{
		lock_guard hk(h.lock);
		if (text == h.last_text && h.not_ready.empty())
			return 0;
		h.last_text = text;
	}
	auto cpus = parse_cpulist(text);
	if (!cpus) {
		while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
			text.pop_back();
		warn_once_msg("hotplug-parse", "cmwq: cannot parse " + path + " (\"" + text +
						       "\", not a CPU list); CPU hotplug is not followed until it reads as one");
		return -EINVAL;
	}
	return cpus_online_changed(*cpus);
}

void hotplug_set_path(const std::string &path)
{
	auto &h = hs();
	lock_guard hk(h.lock);
	h.path = path;
	h.last_text = path.empty() ? std::string() : read_small_file(path);
}

} // namespace cmwq::detail
