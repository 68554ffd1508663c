// startup.cpp - the library's start: CPUs and topology, per-CPU pools, the
// system workqueues and the monitor, once, when the library is loaded (or
// on first use, whichever comes first), so system_wq and friends are valid
// before main. Workers are created on first use of a pool rather than up
// front, which keeps a 176-CPU snapshot cheap on a small machine.
#include "engine/engine.h"

#include <cmwq/control.h>

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

extern "C" {
workqueue_struct *system_wq;
workqueue_struct *system_percpu_wq;
workqueue_struct *system_highpri_wq;
workqueue_struct *system_long_wq;
workqueue_struct *system_unbound_wq;
workqueue_struct *system_dfl_wq;
workqueue_struct *system_dfl_long_wq;
workqueue_struct *system_freezable_wq;
workqueue_struct *system_power_efficient_wq;
workqueue_struct *system_freezable_power_efficient_wq;
workqueue_struct *system_bh_wq;
workqueue_struct *system_bh_highpri_wq;
}

namespace cmwq::detail {

static void build_cpu_index(globals &gl)
{
	gl.usable = gl.topo.usable;
	gl.cpu_index.assign(static_cast<size_t>(gl.topo.max_cpu() + 1), -1);
	cpumask_clear(&gl.usable_mask);
	for (size_t i = 0; i < gl.usable.size(); i++) {
		gl.cpu_index[static_cast<size_t>(gl.usable[i])] = static_cast<int>(i);
		cpumask_set_cpu(static_cast<unsigned>(gl.usable[i]), &gl.usable_mask);
	}
}

static void create_system_workqueues()
{
	system_percpu_wq = alloc_workqueue("events", WQ_PERCPU, 0);
	system_wq = alloc_workqueue("events", WQ_PERCPU | __WQ_DEPRECATED, 0);
	system_highpri_wq = alloc_workqueue("events_highpri", WQ_HIGHPRI | WQ_PERCPU, 0);
	system_long_wq = alloc_workqueue("events_long", WQ_PERCPU, 0);
	system_dfl_wq = alloc_workqueue("events_unbound", WQ_UNBOUND, WQ_MAX_ACTIVE);
	system_unbound_wq = alloc_workqueue("events_unbound", WQ_UNBOUND | __WQ_DEPRECATED, WQ_MAX_ACTIVE);
	system_dfl_long_wq = alloc_workqueue("events_dfl_long", WQ_UNBOUND, WQ_MAX_ACTIVE);
	system_freezable_wq = alloc_workqueue("events_freezable", WQ_FREEZABLE | WQ_PERCPU, 0);
	system_power_efficient_wq = alloc_workqueue("events_power_efficient", WQ_POWER_EFFICIENT | WQ_PERCPU, 0);
	system_freezable_power_efficient_wq = alloc_workqueue(
		"events_freezable_pwr_efficient", WQ_FREEZABLE | WQ_POWER_EFFICIENT | WQ_PERCPU, 0);
	system_bh_wq = alloc_workqueue("events_bh", WQ_BH | WQ_PERCPU, 0);
	system_bh_highpri_wq = alloc_workqueue("events_bh_highpri", WQ_BH | WQ_HIGHPRI | WQ_PERCPU, 0);
}

static std::once_flag start_once;
static bool started = false;

void ensure_started()
{
	if (__atomic_load_n(&started, __ATOMIC_ACQUIRE))
		return;
	std::call_once(start_once, [] {
		auto &gl = g();
		gl.pools.reserve(1 << 14);
		gl.mayday_timeout = pool_mayday_timeout;
		params_load_env();
		gl.real_cpus = affinity_cpus();
		// A quota set in CMWQ_PARAMS wins over the cgroup's.
		if (!params().cpu_quota_set.load())
			params().cpu_quota.store(read_cpu_quota("/proc/self/cgroup", "/sys/fs/cgroup"));
		gl.topo = read_topology(params().cache_shard_size.load());
		for (auto &w : gl.topo.warnings)
			log_printf(LOG_WARNING, "cmwq: %s\n", w.c_str());
		build_cpu_index(gl);
		gl.cpu_node = gl.topo.cpu_node;
		gl.nr_nodes = gl.topo.nr_nodes;
		gl.unbound_cpus = gl.usable;
		gl.requested_unbound = gl.usable;
		gl.online = gl.usable;
		hotplug_init();
		{
			lock_guard gk(gl.pool_mutex);
			init_percpu_pools(gl);
		}
		__atomic_store_n(&started, true, __ATOMIC_RELEASE);
		create_system_workqueues();
		fork_handlers_install();
		// A failed start said why; the parameter reads back what is in effect.
		if (params().control.load() && cmwq_control_start() != 0)
			params().control.store(false);
	});
}

__attribute__((constructor)) static void cmwq_autostart() { ensure_started(); }

} // namespace cmwq::detail

using namespace cmwq::detail;

extern "C" {

const struct cpumask *cmwq_usable_cpumask(void)
{
	ensure_started();
	return &g().usable_mask;
}

int cmwq_num_online_cpus(void)
{
	ensure_started();
	return static_cast<int>(g().usable.size());
}

void cmwq_init(void) { ensure_started(); }

} // extern "C"

namespace cmwq {
topology current_topology()
{
	detail::ensure_started();
	lock_guard gk(detail::g().pool_mutex);
	return detail::g().topo;
}
} // namespace cmwq
