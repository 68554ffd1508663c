// wq_dump - the affinity scopes, worker pools and workqueues of the calling
// process's cmwq, in the sections of the kernel's tools/workqueue/wq_dump.py,
// or as one JSON object with --json.
// It links only the public API: the topology comes from current_topology()
// (or build_topology() on a snapshot), the rest from cmwq::snapshot(), so it
// shows a fresh library's state unless linked into a running program.
#include "cli.hpp"

#include <sys/stat.h>

#include <cmwq/introspect.hpp>
#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>
#include <cmwq/stats.h>
#include <cmwq/topology.hpp>

#include <sched.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace {

using cmwq::pool_flag_bh;

const char *const usage =
	"usage: wq_dump [-j|--json] [--topology-only] [--cpulist] [--sysfs-root DIR]\n";

const char *const help_text = R"help(
Prints the affinity scopes, worker pools and workqueues of cmwq, in the
sections of the kernel's wq_dump.py.

  -j, --json        one JSON object instead of the tables
  --topology-only   only the topology (Affinity Scopes; in JSON, no "pools"
                    or "workqueues"): deterministic for a given sysfs tree
  --cpulist         CPU sets as lists ("0-3,8") instead of hex bitmaps
  --sysfs-root DIR  read the topology below DIR, as CMWQ_SYSFS_ROOT=DIR
  -h, --help        this text

Environment: CMWQ_SYSFS_ROOT (a saved sysfs tree instead of /sys), CMWQ_PARAMS
(e.g. "workqueue.cache_shard_size=4 workqueue.default_affinity_scope=cache").

Affinity Scopes
  usable              CPUs the library uses (online, within the process
                      affinity mask unless a snapshot is read)
  cpu_quota           the process's cgroup CPU quota in whole CPUs (cmwq.cpu_quota;
                      none: no quota); effective_cpus: usable, at most the quota
  cache_shard_size    cores per cache_shard pod the pods were built for
  wq_unbound_cpumask  CPUs unbound workqueues may use
  CPU SMT CACHE CACHE_SHARD NUMA SYSTEM: one block per scope; "(default)"
  marks workqueue.default_affinity_scope
    nr_pods   number of pods
    pod_cpus  [pod]=CPUs of each pod (pods numbered by their lowest CPU)
    pod_node  [pod]=NUMA node of each pod (-1: spans nodes)
    cpu_pod   [cpu]=pod of each CPU (-1: CPU not usable)

Worker Pools
  pool[id]      pool id: per-CPU pools first, then unbound pools
  flags         pool flags (0x1 BH, 0x2 manager active, 0x4 disassociated)
  ref           workqueue slots using an unbound pool
  nice          nice level of the workers
  idle/workers  idle workers / all workers
  cpu=N [bh]    per-CPU pool of CPU N (bh: runs in the BH context)
  cpus= pod_cpus= [strict]
                unbound pool: CPUs its workers may run on, the pod it serves;
                strict: workers never leave the pod

Workqueue CPU -> pool
  type  percpu, unbound, unbound,S (strict affinity), ordered or bh
  then the pool serving each usable CPU, and for unbound workqueues the
  pool of the default pwq (dfl), used when a CPU's pod has no usable CPU

Workqueue -> rescuer  (WQ_MEM_RECLAIM workqueues)
  unbound_cpus  requested CPUs (blank for per-CPU workqueues)
  pid           thread id of the rescuer
  rescuer_cpus  CPUs the rescuer thread may run on

Unbound workqueue -> node_nr/max_active
  online_cpus, NODE[n]  usable CPUs, and those of each node
  min max       min_active and max_active of the workqueue
  NODE n        active items / limit on node n; dfl: the no-node slot

JSON (--json): online (the usable CPUs), nr_cpu_ids, nr_nodes,
default_scope, cache_shard_size, unbound_cpumask, cpu_node (node of each CPU
number, -1 unknown), scopes (per scope, its pods as ascending CPU lists in
order of their lowest CPU), pod_node, warnings, then pools and workqueues
(the fields of cmwq/introspect.hpp; left out with --topology-only).
)help";

struct options {
	bool json = false;
	bool topology_only = false;
	bool cpulist = false;
	std::string sysfs_root;
};

struct context {
	options opt;
	cmwq::topology topo;
	std::string default_scope = "cache_shard";
	int nr_cpu_ids = 0;
	bool have_system = false;
	cmwq::system_info si;
	std::string unbound_cpumask; // as the library reports it, hex
};

const std::array<cmwq::affinity_scope, 6> scopes = {
	cmwq::affinity_scope::cpu, cmwq::affinity_scope::smt, cmwq::affinity_scope::cache,
	cmwq::affinity_scope::cache_shard, cmwq::affinity_scope::numa,
	cmwq::affinity_scope::system,
};

std::string upper(std::string s)
{
	for (char &c : s)
		c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
	return s;
}

std::string cpus_str(const context &c, const std::vector<int> &cpus)
{
	if (c.opt.cpulist)
		return cmwq::format_cpulist(cpus);
	return cmwq::format_cpumask_hex(cpus, c.nr_cpu_ids);
}

std::string param(const char *name, const char *fallback)
{
	char buf[256];
	if (cmwq_param_get(name, buf, sizeof(buf)) == 0)
		return buf;
	return fallback;
}

std::vector<int> thread_cpus(long tid)
{
	std::vector<int> out;
	cpu_set_t set;
	CPU_ZERO(&set);
	if (tid <= 0 || sched_getaffinity(static_cast<pid_t>(tid), sizeof(set), &set) != 0)
		return out;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (CPU_ISSET(cpu, &set))
			out.push_back(cpu);
	}
	return out;
}

const char *wq_type(const cmwq::workqueue_info &wq)
{
	if (wq.flags & WQ_BH)
		return "bh";
	if (wq.ordered)
		return "ordered";
	if (wq.unbound)
		return wq.strict ? "unbound,S" : "unbound";
	return "percpu";
}

int width_of(long v)
{
	return static_cast<int>(std::to_string(v).size());
}

std::string heading(const char *title)
{
	return std::string(title) + "\n" + std::string(std::strlen(title), '=') + "\n";
}

// ---- tables ----

// cmwq.cpu_quota: the process's cgroup CPU quota in whole CPUs (0: none).
unsigned cpu_quota()
{
	char buf[32] = {};
	if (cmwq_param_get("cmwq.cpu_quota", buf, sizeof(buf)) != 0)
		return 0;
	return static_cast<unsigned>(std::strtoul(buf, nullptr, 10));
}

// What managed unbound pools size their concurrency from: the usable CPUs,
// at most the quota.
size_t effective_cpus(const cmwq::topology &t, unsigned quota)
{
	return quota && quota < t.usable.size() ? quota : t.usable.size();
}

void print_scopes(const context &c, std::ostream &out)
{
	const auto &t = c.topo;
	out << heading("Affinity Scopes");
	out << "usable=" << cpus_str(c, t.usable) << "\n";
	if (!c.opt.topology_only) {
		unsigned q = cpu_quota();
		out << "cpu_quota=" << (q ? std::to_string(q) : std::string("none")) << " effective_cpus="
		    << effective_cpus(t, q) << "\n";
	}
	out << "cache_shard_size=" << t.cache_shard_size << "\n";
	if (!c.unbound_cpumask.empty()) {
		std::string mask = c.unbound_cpumask;
		if (c.opt.cpulist) {
			if (auto cpus = cmwq::parse_cpumask_hex(mask))
				mask = cmwq::format_cpulist(*cpus);
		}
		out << "wq_unbound_cpumask=" << mask << "\n";
	}
	for (auto s : scopes) {
		const auto &pt = t.scope(s);
		std::string name = cmwq::scope_name(s);
		out << "\n" << upper(name) << (name == c.default_scope ? " (default)" : "") << "\n";
		out << "  nr_pods  " << pt.nr_pods() << "\n";
		out << "  pod_cpus";
		for (int pod = 0; pod < pt.nr_pods(); pod++)
			out << " [" << pod << "]=" << cpus_str(c, pt.pod_cpus[pod]);
		out << "\n  pod_node";
		for (int pod = 0; pod < pt.nr_pods(); pod++)
			out << " [" << pod << "]=" << pt.pod_node[pod];
		out << "\n  cpu_pod ";
		for (size_t cpu = 0; cpu < pt.cpu_pod.size(); cpu++)
			out << " [" << cpu << "]=" << pt.cpu_pod[cpu];
		out << "\n";
	}
	for (const auto &w : t.warnings)
		out << "warning: " << w << "\n";
}

void print_pools(const context &c, std::ostream &out)
{
	const auto &pools = c.si.pools;
	int id_w = 1, ref_w = 1;
	for (const auto &p : pools) {
		id_w = std::max(id_w, width_of(p.id));
		ref_w = std::max(ref_w, width_of(p.refcnt));
	}
	out << "\n" << heading("Worker Pools");
	char buf[128];
	for (const auto &p : pools) {
		std::snprintf(buf, sizeof(buf), "pool[%0*d] flags=0x%02x ref=%*d nice=%3d idle/workers=%3d/%3d ",
			      id_w, p.id, p.flags, ref_w, p.refcnt, p.nice, p.nr_idle, p.nr_workers);
		out << buf;
		if (p.cpu >= 0) {
			std::snprintf(buf, sizeof(buf), "cpu=%3d", p.cpu);
			out << buf << ((p.flags & pool_flag_bh) ? " bh" : "");
		} else {
			out << "cpus=" << cpus_str(c, p.cpus) << " pod_cpus=" << cpus_str(c, p.pod_cpus)
			    << (p.strict ? " strict" : "");
		}
		out << "\n";
	}
}

void print_cpu_pools(const context &c, std::ostream &out)
{
	const auto &usable = c.si.usable;
	size_t name_w = 16;
	int col_w = 2;
	for (const auto &wq : c.si.workqueues) {
		name_w = std::max(name_w, wq.name.size());
		for (int id : wq.cpu_pool)
			col_w = std::max(col_w, width_of(id));
		col_w = std::max(col_w, width_of(wq.dfl_pool));
	}
	for (int cpu : usable)
		col_w = std::max(col_w, width_of(cpu));
	char buf[64];
	out << "\n" << heading("Workqueue CPU -> pool");
	std::snprintf(buf, sizeof(buf), "[%-*s \\ %-9s CPU", static_cast<int>(name_w), "workqueue", "type");
	out << buf;
	for (int cpu : usable) {
		std::snprintf(buf, sizeof(buf), " %*d", col_w, cpu);
		out << buf;
	}
	out << " dfl]\n";
	for (const auto &wq : c.si.workqueues) {
		std::snprintf(buf, sizeof(buf), "%-*s   %-9s    ", static_cast<int>(name_w + 1),
			      wq.name.c_str(), wq_type(wq));
		out << buf;
		for (int id : wq.cpu_pool) {
			std::snprintf(buf, sizeof(buf), " %*d", col_w, id);
			out << buf;
		}
		if (wq.unbound && wq.dfl_pool >= 0) {
			std::snprintf(buf, sizeof(buf), " %3d", wq.dfl_pool);
			out << buf;
		}
		out << "\n";
	}
}

void print_rescuers(const context &c, std::ostream &out)
{
	struct row {
		std::string name, unbound_cpus, pid, rescuer_cpus;
	};
	std::vector<row> rows;
	size_t name_w = 16, mask_w = std::strlen("unbound_cpus"), pid_w = 3;
	for (const auto &wq : c.si.workqueues) {
		if (!(wq.flags & WQ_MEM_RECLAIM))
			continue;
		auto rcpus = thread_cpus(wq.rescuer_tid);
		row r{wq.name, wq.unbound ? cpus_str(c, wq.cpumask) : std::string(),
		      std::to_string(wq.rescuer_tid), rcpus.empty() ? std::string("-") : cpus_str(c, rcpus)};
		name_w = std::max(name_w, r.name.size());
		mask_w = std::max(mask_w, r.unbound_cpus.size());
		pid_w = std::max(pid_w, r.pid.size());
		rows.push_back(std::move(r));
	}
	auto line = [&](const std::string &a, const char *sep, const std::string &b,
			const std::string &pid, const std::string &d) {
		char buf[64];
		std::snprintf(buf, sizeof(buf), "%-*s %s ", static_cast<int>(name_w), a.c_str(), sep);
		out << buf << b << std::string(mask_w - b.size(), ' ') << " "
		    << std::string(pid_w - pid.size(), ' ') << pid << " " << d;
	};
	out << "\n" << heading("Workqueue -> rescuer");
	out << "[";
	line("workqueue", "\\", "unbound_cpus", "pid", "rescuer_cpus ]");
	out << "\n";
	for (const auto &r : rows) {
		out << " ";
		line(r.name, " ", r.unbound_cpus, r.pid, r.rescuer_cpus);
		out << "\n";
	}
}

void print_node_nr(const context &c, std::ostream &out)
{
	const auto &t = c.topo;
	out << "\n" << heading("Unbound workqueue -> node_nr/max_active");
	out << "online_cpus=" << cpus_str(c, t.usable) << "\n";
	for (int node = 0; node < t.nr_nodes; node++) {
		std::vector<int> cpus;
		for (int cpu : t.usable) {
			if (t.cpu_node[cpu] == node)
				cpus.push_back(cpu);
		}
		char buf[32];
		std::snprintf(buf, sizeof(buf), "NODE[%02d]=", node);
		out << buf << cpus_str(c, cpus) << "\n";
	}
	size_t name_w = 16;
	for (const auto &wq : c.si.workqueues)
		name_w = std::max(name_w, wq.name.size());
	char buf[64];
	std::snprintf(buf, sizeof(buf), "[%-*s \\  min  max", static_cast<int>(name_w), "workqueue");
	out << buf;
	for (int node = 0; node < t.nr_nodes; node++) {
		std::snprintf(buf, sizeof(buf), " %9s", ("NODE " + std::to_string(node)).c_str());
		out << buf;
	}
	out << "       dfl ]\n";
	for (const auto &wq : c.si.workqueues) {
		if (!wq.unbound || (wq.flags & WQ_BH))
			continue;
		std::snprintf(buf, sizeof(buf), "%-*s   %4d %4d", static_cast<int>(name_w + 1),
			      wq.name.c_str(), wq.min_active, wq.max_active);
		out << buf;
		for (size_t i = 0; i < wq.node_nr.size(); i++) {
			int max = i < wq.node_max.size() ? wq.node_max[i] : 0;
			std::snprintf(buf, sizeof(buf), " %9s",
				      (std::to_string(wq.node_nr[i]) + "/" + std::to_string(max)).c_str());
			out << buf;
		}
		out << "\n";
	}
}

// ---- JSON ----

std::string json_str(const std::string &s) { return cmwq_tools::json_string(s); }

template <class T> std::string json_arr(const std::vector<T> &v)
{
	std::string out = "[";
	for (size_t i = 0; i < v.size(); i++) {
		if (i)
			out += ",";
		out += std::to_string(v[i]);
	}
	return out + "]";
}

std::string json_pods(const std::vector<std::vector<int>> &pods)
{
	std::string out = "[";
	for (size_t i = 0; i < pods.size(); i++)
		out += (i ? "," : "") + json_arr(pods[i]);
	return out + "]";
}

const char *const stat_names[PWQ_NR_STATS] = {
	"started", "completed", "cpu_time", "cpu_intensive",
	"cm_wakeup", "repatriated", "mayday", "rescued",
};

void print_json(const context &c, std::ostream &out)
{
	const auto &t = c.topo;
	out << "{\n";
	out << "\"sysfs_root\": " << json_str(t.sysfs_root) << ",\n";
	out << "\"online\": " << json_arr(t.usable) << ",\n";
	out << "\"nr_cpu_ids\": " << c.nr_cpu_ids << ",\n";
	out << "\"nr_nodes\": " << t.nr_nodes << ",\n";
	out << "\"default_scope\": " << json_str(c.default_scope) << ",\n";
	out << "\"cache_shard_size\": " << t.cache_shard_size << ",\n";
	if (!c.opt.topology_only) {
		unsigned q = cpu_quota();
		out << "\"cpu_quota\": " << q << ",\n";
		out << "\"effective_cpus\": " << effective_cpus(t, q) << ",\n";
	}
	if (!c.unbound_cpumask.empty()) {
		auto cpus = cmwq::parse_cpumask_hex(c.unbound_cpumask);
		out << "\"unbound_cpumask\": " << json_arr(cpus.value_or(std::vector<int>{})) << ",\n";
	}
	out << "\"cpu_node\": " << json_arr(t.cpu_node) << ",\n";
	out << "\"scopes\": {";
	for (size_t i = 0; i < scopes.size(); i++) {
		out << (i ? ",\n" : "\n") << "  " << json_str(cmwq::scope_name(scopes[i])) << ": "
		    << json_pods(t.scope(scopes[i]).pod_cpus);
	}
	out << "\n},\n";
	out << "\"pod_node\": {";
	for (size_t i = 0; i < scopes.size(); i++) {
		out << (i ? ", " : "") << json_str(cmwq::scope_name(scopes[i])) << ": "
		    << json_arr(t.scope(scopes[i]).pod_node);
	}
	out << "},\n";
	out << "\"warnings\": [";
	for (size_t i = 0; i < t.warnings.size(); i++)
		out << (i ? ", " : "") << json_str(t.warnings[i]);
	out << "]";
	if (c.have_system) {
		out << ",\n\"pools\": [";
		for (size_t i = 0; i < c.si.pools.size(); i++) {
			const auto &p = c.si.pools[i];
			out << (i ? ",\n  " : "\n  ") << "{\"id\": " << p.id << ", \"cpu\": " << p.cpu
			    << ", \"bh\": " << ((p.cpu >= 0 && (p.flags & pool_flag_bh)) ? "true" : "false")
			    << ", \"highpri\": " << (p.highpri ? "true" : "false")
			    << ", \"flags\": " << p.flags << ", \"nice\": " << p.nice
			    << ", \"refcnt\": " << p.refcnt << ", \"node\": " << p.node
			    << ", \"strict\": " << (p.strict ? "true" : "false")
			    << ", \"cpus\": " << json_arr(p.cpus) << ", \"pod_cpus\": " << json_arr(p.pod_cpus)
			    << ", \"nr_workers\": " << p.nr_workers << ", \"nr_idle\": " << p.nr_idle
			    << ", \"nr_running\": " << p.nr_running << ", \"nr_pending\": " << p.nr_pending
			    << ", \"hung_s\": " << p.hung_s << "}";
		}
		out << "\n],\n\"workqueues\": [";
		for (size_t i = 0; i < c.si.workqueues.size(); i++) {
			const auto &wq = c.si.workqueues[i];
			out << (i ? ",\n  " : "\n  ") << "{\"name\": " << json_str(wq.name)
			    << ", \"type\": " << json_str(wq_type(wq)) << ", \"flags\": " << wq.flags
			    << ", \"max_active\": " << wq.max_active << ", \"min_active\": " << wq.min_active
			    << ", \"unbound\": " << (wq.unbound ? "true" : "false")
			    << ", \"ordered\": " << (wq.ordered ? "true" : "false")
			    << ", \"affinity_scope\": " << json_str(wq.affinity_scope)
			    << ", \"strict\": " << (wq.strict ? "true" : "false") << ", \"nice\": " << wq.nice
			    << ", \"cpumask\": " << json_arr(wq.cpumask)
			    << ", \"cpu_pool\": " << json_arr(wq.cpu_pool) << ", \"dfl_pool\": " << wq.dfl_pool
			    << ", \"nr_active\": " << wq.nr_active << ", \"nr_inactive\": " << wq.nr_inactive
			    << ", \"nr_in_flight\": " << wq.nr_in_flight
			    << ", \"node_nr\": " << json_arr(wq.node_nr) << ", \"node_max\": " << json_arr(wq.node_max)
			    << ", \"rescuer_tid\": " << wq.rescuer_tid << ", \"stats\": {";
			for (int s = 0; s < PWQ_NR_STATS; s++)
				out << (s ? ", " : "") << json_str(stat_names[s]) << ": " << wq.stats[s];
			out << "}}";
		}
		out << "\n]";
	}
	out << "\n}\n";
}

bool parse_args(int argc, char **argv, options &opt)
{
	CLI::App app{"wq_dump"};
	cmwq_tools::add_help(app, std::string(usage) + help_text);
	app.add_flag("-j,--json", opt.json);
	app.add_flag("--topology-only", opt.topology_only);
	app.add_flag("--cpulist", opt.cpulist);
	app.add_option("--sysfs-root", opt.sysfs_root);
	cmwq_tools::parse_or_exit(app, argc, argv, "wq_dump", usage);
	if (!opt.sysfs_root.empty()) {
		// A tree without the CPU topology would give a made-up machine.
		struct stat st;
		std::string cpu = opt.sysfs_root + "/devices/system/cpu";
		if (stat(cpu.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
			std::cerr << "wq_dump: --sysfs-root " << opt.sysfs_root
				  << ": no CPU topology there (" << cpu << " is not a directory)\n";
			return false;
		}
	}
	return true;
}

} // namespace

int main(int argc, char **argv)
{
	context c;
	if (!parse_args(argc, argv, c.opt))
		return 2;
	// Before the library is first touched, so the engine reads the same tree.
	if (!c.opt.sysfs_root.empty())
		setenv("CMWQ_SYSFS_ROOT", c.opt.sysfs_root.c_str(), 1);

	c.topo = cmwq::current_topology();
	if (!c.opt.sysfs_root.empty() && c.topo.sysfs_root != c.opt.sysfs_root) {
		std::cerr << "wq_dump: the library already runs on " << c.topo.sysfs_root
			  << "; the scopes shown are read from " << c.opt.sysfs_root << "\n";
		c.topo = cmwq::build_topology(c.opt.sysfs_root, nullptr, c.topo.cache_shard_size);
	}
	c.default_scope = param("workqueue.default_affinity_scope", "cache_shard");
	c.nr_cpu_ids = static_cast<int>(c.topo.scope(cmwq::affinity_scope::cpu).cpu_pod.size());

	if (!c.opt.topology_only) {
		c.si = cmwq::snapshot();
		c.have_system = true;
		char buf[4096];
		if (cmwq_sysfs_get(nullptr, "cpumask", buf, sizeof(buf)) == 0)
			c.unbound_cpumask = buf;
		while (!c.unbound_cpumask.empty() && std::isspace(static_cast<unsigned char>(c.unbound_cpumask.back())))
			c.unbound_cpumask.pop_back();
	}

	std::ostringstream out;
	if (c.opt.json) {
		print_json(c, out);
	} else {
		print_scopes(c, out);
		if (c.have_system) {
			print_pools(c, out);
			print_cpu_pools(c, out);
			print_rescuers(c, out);
			print_node_nr(c, out);
		}
	}
	std::cout << out.str() << std::flush;
	return 0;
}
