// cmwq/topology.hpp - the CPU topology and the pods of every affinity scope.
//
// Topology is plain data built by one pure function from a sysfs root, so the
// same code reads /sys on this machine and a saved snapshot in tests; the code
// that applies affinity (pinning workers) lives in the engine, apart from it.
// A program that places its own threads can read the same snapshot the
// library uses through current_topology().
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <cmwq/export.h>
CMWQ_BEGIN_PUBLIC

namespace cmwq {

// The kernel's enum wq_affn_scope, in its order (dfl = "use the default").
enum class affinity_scope { dfl, cpu, smt, cache, cache_shard, numa, system };
inline constexpr int nr_affinity_scopes = 7;

// The names, by affinity_scope value: the one table every list of accepted
// scope names is made from.
inline constexpr std::array<const char *, nr_affinity_scopes> affinity_scope_names = {
	"default", "cpu", "smt", "cache", "cache_shard", "numa", "system"};

// The name of s (affinity_scope_names), "?" for a value outside the enum.
const char *scope_name(affinity_scope s) noexcept;
// "cpu, smt, cache, cache_shard, numa, system", with "default, " in front
// when with_default: the accepted names, for messages. Valid forever.
const char *scope_names_list(bool with_default) noexcept;
// Exact match of one of the names above (no prefix matching), else nullopt.
std::optional<affinity_scope> parse_scope(std::string_view name) noexcept;

// Pods of one scope: pods numbered by their lowest CPU, each the ascending
// list of its CPUs; every usable CPU is in exactly one pod.
struct pod_type {
	std::vector<std::vector<int>> pod_cpus;
	std::vector<int> pod_node;   // NUMA node of each pod (-1: spans nodes)
	std::vector<int> cpu_pod;    // indexed by CPU number; -1 when not usable
	int nr_pods() const noexcept { return static_cast<int>(pod_cpus.size()); }
};

struct topology {
	std::string sysfs_root;            // where it was read from
	std::vector<int> usable;           // ascending CPU numbers the library uses
	std::vector<int> cpu_node;         // indexed by CPU number; node of each CPU
	std::vector<int> cpu_llc_level;    // indexed by CPU number; 0 when unknown
	int nr_nodes = 1;
	unsigned cache_shard_size = 8;     // the size the cache_shard pods were built for
	// Indexed by scope; the dfl entry is empty (it resolves to the default).
	std::array<pod_type, nr_affinity_scopes> pods;
	// Degradations met while reading (one line each, already printed once).
	std::vector<std::string> warnings;

	const pod_type &scope(affinity_scope s) const { return pods[static_cast<int>(s)]; }
	int max_cpu() const noexcept { return usable.empty() ? -1 : usable.back(); }
};

// Build the topology from the directory that contains devices/ (e.g. "/sys").
// restrict_to: when set, usable = online CPUs that are also in it (the
// process affinity mask); when null, the snapshot's online CPUs alone decide.
// cache_shard_size 0 is treated as 1 with a warning, as in the kernel.
// Pure: reads files only, never touches the calling process or prints.
topology build_topology(const std::string &sysfs_root,
			const std::vector<int> *restrict_to,
			unsigned cache_shard_size);

// The topology the library runs on: CMWQ_SYSFS_ROOT when set (snapshot alone),
// else /sys restricted to the process affinity mask; the cache_shard pods
// use the current workqueue.cache_shard_size. Thread-safe; returns a copy.
topology current_topology();

// "0-3,8,10-11" <-> {0,1,2,3,8,10,11}. parse returns nullopt on bad input.
std::optional<std::vector<int>> parse_cpulist(std::string_view s);
std::string format_cpulist(const std::vector<int> &cpus);
// The kernel's %*pb hex bitmap: comma-separated 32-bit groups, e.g. "ff,ffffffff".
std::string format_cpumask_hex(const std::vector<int> &cpus, int nr_bits);
std::optional<std::vector<int>> parse_cpumask_hex(std::string_view s);

} // namespace cmwq

CMWQ_END_PUBLIC