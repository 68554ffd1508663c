// cmwq/introspect.hpp - a read-only snapshot of pools and workqueues.
//
// What wq_dump and wq_monitor print, as data. Taken under the library's
// locks one object at a time: each pool and workqueue is self-consistent,
// the whole is not an atomic picture. Any thread may call it; it allocates.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <cmwq/stats.h>

#include <cmwq/export.h>
CMWQ_BEGIN_PUBLIC

namespace cmwq {

struct pool_info {
	int id = 0;
	int cpu = -1;              // per-CPU pools: the CPU; unbound: -1
	bool highpri = false;
	int nice = 0;
	int refcnt = 0;            // unbound pools: workqueue slots using it
	int node = -1;
	bool strict = false;
	std::vector<int> cpus;     // CPUs its workers may run on now (a per-CPU pool
	                           // whose CPU is offline: the unbound cpumask)
	std::vector<int> pod_cpus; // the pod it serves
	int nr_workers = 0;
	int nr_idle = 0;
	int nr_running = 0;        // concurrency-managed workers counted running
	int nr_pending = 0;        // items on the worklist
	double hung_s = 0;         // seconds since progress while items wait
	unsigned flags = 0;        // pool_flag_* (the kernel's POOL_*)
};

// pool_info::flags: the kernel's POOL_BH, POOL_MANAGER_ACTIVE and
// POOL_DISASSOCIATED, with their values.
inline constexpr unsigned pool_flag_bh = 1u << 0;
inline constexpr unsigned pool_flag_manager_active = 1u << 1;
inline constexpr unsigned pool_flag_disassociated = 1u << 2;

struct workqueue_info {
	std::string name;
	unsigned flags = 0;
	int max_active = 0;        // saved (requested, clamped) value
	int min_active = 0;
	bool unbound = false;
	bool ordered = false;
	std::string affinity_scope; // unbound: "default (cache_shard)", "numa", ...
	bool strict = false;
	int nice = 0;
	std::vector<int> cpumask;   // unbound: requested CPUs
	std::vector<int> cpu_pool;  // pool id for each usable CPU, in usable order
	int dfl_pool = -1;          // unbound: pool of the whole-mask pwq
	int nr_active = 0;
	int nr_inactive = 0;
	int nr_in_flight = 0;
	std::vector<int> node_nr;   // unbound: active items per node, last = no-node slot
	std::vector<int> node_max;
	long rescuer_tid = 0;       // WQ_MEM_RECLAIM: the rescuer thread id
	std::array<uint64_t, PWQ_NR_STATS> stats{};
};

struct system_info {
	std::vector<int> usable;    // the CPUs (topology().usable)
	std::vector<pool_info> pools;
	std::vector<workqueue_info> workqueues;
};

system_info snapshot();

} // namespace cmwq

CMWQ_END_PUBLIC