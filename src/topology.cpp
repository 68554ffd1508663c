// topology.cpp - the CPU topology and the pods of every affinity scope, read
// from a sysfs tree (/sys or a saved snapshot), plus the cpulist and hex
// bitmap formats. build_topology is a pure function of the files below the
// root; printing the warnings and applying affinity belong to the engine.
// Pods are grouped by the first-match rule on pairwise relations rather than
// by keys, so inconsistent sibling or cache lists in a snapshot give the same
// grouping a kernel would build from them.
#include <cmwq/topology.hpp>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

namespace cmwq {

namespace {

namespace fs = std::filesystem;

// CPU numbers above this are rejected by the parsers (a bad list must not
// allocate gigabytes); the kernel's largest NR_CPUS is 8192.
constexpr int max_cpu_number = 65535;

std::string_view trim(std::string_view s)
{
	while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
		s.remove_prefix(1);
	while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
		s.remove_suffix(1);
	return s;
}

// Whole file, trimmed; nullopt when it cannot be read.
std::optional<std::string> read_file(const fs::path &p)
{
	std::ifstream in(p);
	if (!in)
		return std::nullopt;
	std::ostringstream ss;
	ss << in.rdbuf();
	if (in.bad())
		return std::nullopt;
	return std::string(trim(ss.str()));
}

std::optional<std::vector<int>> read_cpulist(const fs::path &p)
{
	auto s = read_file(p);
	if (!s)
		return std::nullopt;
	return parse_cpulist(*s);
}

std::optional<int> parse_int(std::string_view s)
{
	s = trim(s);
	int v = 0;
	auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
	if (ec != std::errc() || end != s.data() + s.size() || s.empty())
		return std::nullopt;
	return v;
}

// "cpu12" -> 12 for directory entries named <prefix><number>.
std::optional<int> numbered_entry(const std::string &name, std::string_view prefix)
{
	if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0)
		return std::nullopt;
	std::string_view num(name);
	num.remove_prefix(prefix.size());
	if (!std::all_of(num.begin(), num.end(),
			 [](char c) { return c >= '0' && c <= '9'; }))
		return std::nullopt;
	auto v = parse_int(num);
	if (!v || *v > max_cpu_number)
		return std::nullopt;
	return v;
}

// Numbers of the <prefix>N entries of a directory, ascending; empty when the
// directory is missing.
std::vector<int> numbered_entries(const fs::path &dir, std::string_view prefix)
{
	std::vector<int> out;
	std::error_code ec;
	for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
		if (auto n = numbered_entry(it->path().filename().string(), prefix))
			out.push_back(*n);
	}
	std::sort(out.begin(), out.end());
	return out;
}

std::vector<int> set_union(const std::vector<int> &a, const std::vector<int> &b)
{
	std::vector<int> out;
	std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
	return out;
}

std::vector<int> set_intersection(const std::vector<int> &a, const std::vector<int> &b)
{
	std::vector<int> out;
	std::set_intersection(a.begin(), a.end(), b.begin(), b.end(),
			      std::back_inserter(out));
	return out;
}

bool contains(const std::vector<int> &sorted, int cpu)
{
	return std::binary_search(sorted.begin(), sorted.end(), cpu);
}

// The first-match grouping of the kernel's pod builder: each CPU, in
// ascending order, joins the pod of the first earlier CPU it shares with,
// else starts the next pod. Pods are thus numbered by their lowest CPU.
pod_type build_pod_type(const std::vector<int> &usable, size_t nr_cpu_ids,
			const std::vector<int> &cpu_node,
			const std::function<bool(int cur, int pre)> &share)
{
	pod_type pt;
	pt.cpu_pod.assign(nr_cpu_ids, -1);
	for (size_t i = 0; i < usable.size(); i++) {
		int cur = usable[i];
		int pod = -1;
		for (size_t j = 0; j < i && pod < 0; j++) {
			if (share(cur, usable[j]))
				pod = pt.cpu_pod[usable[j]];
		}
		if (pod < 0) {
			pod = pt.nr_pods();
			pt.pod_cpus.emplace_back();
		}
		pt.cpu_pod[cur] = pod;
		pt.pod_cpus[pod].push_back(cur);
	}
	for (const auto &cpus : pt.pod_cpus) {
		int node = cpu_node[cpus.front()];
		for (int cpu : cpus) {
			if (cpu_node[cpu] != node)
				node = -1;
		}
		pt.pod_node.push_back(node);
	}
	return pt;
}

// Shard index of every CPU of one LLC pod (the cache_shard layout): cores are
// counted by their leader (lowest CPU of the SMT group within the LLC),
// nr_shards = max(1, round-half-up(nr_cores / size)), the first
// nr_cores % nr_shards shards take one core more, and siblings follow their
// leader.
void assign_cache_shards(const std::vector<int> &llc_cpus, int llc_pod,
			 const pod_type &smt, const pod_type &cache,
			 unsigned size, std::vector<int> &shard_of)
{
	auto leader_of = [&](int cpu) {
		for (int c : smt.pod_cpus[smt.cpu_pod[cpu]]) {
			if (cache.cpu_pod[c] == llc_pod)
				return c;
		}
		return cpu;
	};
	unsigned nr_cores = 0;
	for (int cpu : llc_cpus)
		nr_cores += leader_of(cpu) == cpu;

	unsigned nr_shards = std::max(1u, (nr_cores + size / 2) / size);
	unsigned cores_per_shard = nr_cores / nr_shards;
	unsigned nr_large = nr_cores % nr_shards;

	unsigned shard = 0, filled = 0;
	for (int cpu : llc_cpus) {
		int leader = leader_of(cpu);
		if (leader != cpu) {
			shard_of[cpu] = shard_of[leader];
			continue;
		}
		unsigned quota = cores_per_shard + (shard < nr_large ? 1 : 0);
		if (filled >= quota && shard + 1 < nr_shards) {
			shard++;
			filled = 0;
		}
		shard_of[cpu] = static_cast<int>(shard);
		filled++;
	}
}

// The last-level cache of one CPU: the highest-level Data or Unified cache.
struct llc_info {
	int level = 0;
	std::vector<int> shared;
};

std::optional<llc_info> read_llc(const fs::path &cpu_dir)
{
	std::optional<llc_info> best;
	for (int idx : numbered_entries(cpu_dir / "cache", "index")) {
		fs::path d = cpu_dir / "cache" / ("index" + std::to_string(idx));
		auto type = read_file(d / "type");
		auto level_s = read_file(d / "level");
		auto shared = read_cpulist(d / "shared_cpu_list");
		if (!type || !level_s || !shared)
			continue;
		if (*type != "Data" && *type != "Unified")
			continue;
		auto level = parse_int(*level_s);
		if (!level || *level <= 0)
			continue;
		if (!best || *level > best->level)
			best = llc_info{*level, std::move(*shared)};
	}
	return best;
}

std::string cpus_warning(const char *what, const std::vector<int> &cpus, const char *then)
{
	return std::string("topology: ") + what + " for CPUs " + format_cpulist(cpus) +
	       "; " + then;
}

} // namespace

const char *scope_name(affinity_scope s) noexcept
{
	auto i = static_cast<std::size_t>(s);
	return i < affinity_scope_names.size() ? affinity_scope_names[i] : "?";
}

const char *scope_names_list(bool with_default) noexcept
{
	static const std::array<std::string, 2> lists = [] {
		std::array<std::string, 2> l; // [0] without "default", [1] with it
		for (const char *n : affinity_scope_names) {
			for (int with = 0; with < 2; with++) {
				if (!with && std::string_view(n) == "default")
					continue;
				if (!l[with].empty())
					l[with] += ", ";
				l[with] += n;
			}
		}
		return l;
	}();
	return lists[with_default ? 1 : 0].c_str();
}

std::optional<affinity_scope> parse_scope(std::string_view name) noexcept
{
	for (int i = 0; i < nr_affinity_scopes; i++) {
		auto s = static_cast<affinity_scope>(i);
		if (name == scope_name(s))
			return s;
	}
	return std::nullopt;
}

topology build_topology(const std::string &sysfs_root,
			const std::vector<int> *restrict_to,
			unsigned cache_shard_size)
{
	topology t;
	t.sysfs_root = sysfs_root;
	if (cache_shard_size == 0) {
		t.warnings.emplace_back("workqueue: cache_shard_size must be > 0, setting to 1");
		cache_shard_size = 1;
	}
	t.cache_shard_size = cache_shard_size;

	const fs::path cpu_root = fs::path(sysfs_root) / "devices/system/cpu";
	const fs::path node_root = fs::path(sysfs_root) / "devices/system/node";

	// Which CPUs exist and which are online.
	std::vector<int> cpu_dirs = numbered_entries(cpu_root, "cpu");
	auto online = read_cpulist(cpu_root / "online");
	auto possible = read_cpulist(cpu_root / "possible");
	if (!possible)
		possible = set_union(online.value_or(std::vector<int>{}), cpu_dirs);
	if (!online) {
		online = *possible;
		t.warnings.emplace_back("topology: cannot read devices/system/cpu/online; "
					"using CPUs " + format_cpulist(*online));
	}
	if (online->empty()) {
		online = std::vector<int>{0};
		t.warnings.emplace_back("topology: " + sysfs_root +
					": no CPU information; assuming one CPU, 0");
	}

	t.usable = *online;
	if (restrict_to) {
		std::vector<int> allowed(*restrict_to);
		std::sort(allowed.begin(), allowed.end());
		allowed.erase(std::unique(allowed.begin(), allowed.end()), allowed.end());
		auto both = set_intersection(*online, allowed);
		if (both.empty())
			t.warnings.emplace_back("topology: the affinity mask holds no online CPU; "
						"using all online CPUs");
		else
			t.usable = std::move(both);
	}

	int highest = std::max(t.usable.back(), possible->empty() ? 0 : possible->back());
	if (!cpu_dirs.empty())
		highest = std::max(highest, cpu_dirs.back());
	const size_t nr_cpu_ids = static_cast<size_t>(highest) + 1;

	// NUMA nodes. Node ids index per-node arrays, so nr_nodes is the highest
	// node id plus one, memory-only nodes included.
	t.cpu_node.assign(nr_cpu_ids, -1);
	std::vector<int> nodes = numbered_entries(node_root, "node");
	if (nodes.empty()) {
		t.warnings.emplace_back("topology: no devices/system/node; all CPUs are on node 0");
		std::fill(t.cpu_node.begin(), t.cpu_node.end(), 0);
	} else {
		t.nr_nodes = nodes.back() + 1;
		for (int node : nodes) {
			auto cpus = read_cpulist(node_root / ("node" + std::to_string(node)) / "cpulist");
			for (int cpu : cpus.value_or(std::vector<int>{})) {
				if (static_cast<size_t>(cpu) < nr_cpu_ids && t.cpu_node[cpu] < 0)
					t.cpu_node[cpu] = node;
			}
		}
		std::vector<int> nodeless;
		for (int cpu : t.usable) {
			if (t.cpu_node[cpu] < 0) {
				nodeless.push_back(cpu);
				t.cpu_node[cpu] = 0;
			}
		}
		if (!nodeless.empty())
			t.warnings.push_back(cpus_warning("no node lists", nodeless, "using node 0"));
	}

	// Per-CPU sibling and last-level-cache sets, within the usable CPUs.
	t.cpu_llc_level.assign(nr_cpu_ids, 0);
	std::vector<std::vector<int>> smt_mask(nr_cpu_ids), llc_mask(nr_cpu_ids);
	std::vector<int> no_siblings, llc_from_package, llc_everything;
	for (int cpu : t.usable) {
		const fs::path dir = cpu_root / ("cpu" + std::to_string(cpu));
		const fs::path topo = dir / "topology";

		auto siblings = read_cpulist(topo / "thread_siblings_list");
		if (!siblings)
			siblings = read_cpulist(topo / "core_cpus_list");
		if (!siblings) {
			no_siblings.push_back(cpu);
			siblings = std::vector<int>{};
		}
		smt_mask[cpu] = set_intersection(set_union(*siblings, {cpu}), t.usable);

		std::vector<int> llc;
		if (auto info = read_llc(dir)) {
			t.cpu_llc_level[cpu] = info->level;
			llc = std::move(info->shared);
		} else {
			auto package = read_cpulist(topo / "package_cpus_list");
			if (!package)
				package = read_cpulist(topo / "core_siblings_list");
			if (package) {
				llc_from_package.push_back(cpu);
				llc = std::move(*package);
			} else {
				llc_everything.push_back(cpu);
				llc = t.usable;
			}
		}
		llc_mask[cpu] = set_intersection(set_union(llc, {cpu}), t.usable);
	}
	if (!no_siblings.empty())
		t.warnings.push_back(cpus_warning("no thread_siblings_list", no_siblings,
						  "each is its own core"));
	if (!llc_from_package.empty())
		t.warnings.push_back(cpus_warning("no cache information", llc_from_package,
						  "their package is their last-level cache"));
	if (!llc_everything.empty())
		t.warnings.push_back(cpus_warning("no cache or package information", llc_everything,
						  "they share one last-level cache with all CPUs"));

	auto &pods = t.pods;
	auto at = [](affinity_scope s) { return static_cast<size_t>(s); };
	const auto &usable = t.usable;
	const auto &cpu_node = t.cpu_node;

	pods[at(affinity_scope::cpu)] = build_pod_type(usable, nr_cpu_ids, cpu_node,
		[](int, int) { return false; });
	pods[at(affinity_scope::smt)] = build_pod_type(usable, nr_cpu_ids, cpu_node,
		[&](int cur, int pre) {
			return contains(smt_mask[cur], pre) || contains(smt_mask[pre], cur);
		});
	pods[at(affinity_scope::cache)] = build_pod_type(usable, nr_cpu_ids, cpu_node,
		[&](int cur, int pre) {
			return contains(llc_mask[cur], pre) || contains(llc_mask[pre], cur);
		});

	const pod_type &smt = pods[at(affinity_scope::smt)];
	const pod_type &cache = pods[at(affinity_scope::cache)];
	std::vector<int> shard_of(nr_cpu_ids, -1);
	for (int pod = 0; pod < cache.nr_pods(); pod++)
		assign_cache_shards(cache.pod_cpus[pod], pod, smt, cache, cache_shard_size, shard_of);
	pods[at(affinity_scope::cache_shard)] = build_pod_type(usable, nr_cpu_ids, cpu_node,
		[&](int cur, int pre) {
			return cache.cpu_pod[cur] == cache.cpu_pod[pre] &&
			       shard_of[cur] == shard_of[pre];
		});

	pods[at(affinity_scope::numa)] = build_pod_type(usable, nr_cpu_ids, cpu_node,
		[&](int cur, int pre) { return cpu_node[cur] == cpu_node[pre]; });

	pod_type &system = pods[at(affinity_scope::system)];
	system = build_pod_type(usable, nr_cpu_ids, cpu_node, [](int, int) { return true; });
	system.pod_node.assign(1, -1);
	return t;
}

std::optional<std::vector<int>> parse_cpulist(std::string_view s)
{
	// Ranges "a", "a-b" and the grouped form "a-b:used/group" (the first
	// `used` of every `group` CPUs), comma separated; empty means no CPU.
	auto number = [](std::string_view &in) -> std::optional<int> {
		size_t n = 0;
		while (n < in.size() && in[n] >= '0' && in[n] <= '9')
			n++;
		if (n == 0 || n > 6)
			return std::nullopt;
		int v = 0;
		std::from_chars(in.data(), in.data() + n, v);
		in.remove_prefix(n);
		if (v > max_cpu_number)
			return std::nullopt;
		return v;
	};

	s = trim(s);
	std::vector<int> cpus;
	if (s.empty())
		return cpus;
	while (true) {
		size_t comma = s.find(',');
		std::string_view region = trim(s.substr(0, comma));
		auto first = number(region);
		if (!first)
			return std::nullopt;
		int last = *first, used = 1, group = 1;
		if (!region.empty() && region.front() == '-') {
			region.remove_prefix(1);
			auto l = number(region);
			if (!l || *l < *first)
				return std::nullopt;
			last = *l;
			if (!region.empty() && region.front() == ':') {
				region.remove_prefix(1);
				auto u = number(region);
				if (!u || region.empty() || region.front() != '/')
					return std::nullopt;
				region.remove_prefix(1);
				auto g = number(region);
				if (!g || *u == 0 || *g == 0 || *u > *g)
					return std::nullopt;
				used = *u;
				group = *g;
			}
		}
		if (!region.empty())
			return std::nullopt;
		for (int cpu = *first; cpu <= last; cpu++) {
			if ((cpu - *first) % group < used)
				cpus.push_back(cpu);
		}
		if (comma == std::string_view::npos)
			break;
		s.remove_prefix(comma + 1);
	}
	std::sort(cpus.begin(), cpus.end());
	cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
	return cpus;
}

std::string format_cpulist(const std::vector<int> &in)
{
	std::vector<int> cpus(in);
	std::sort(cpus.begin(), cpus.end());
	cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
	std::string out;
	for (size_t i = 0; i < cpus.size();) {
		size_t j = i;
		while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1)
			j++;
		if (!out.empty())
			out += ',';
		out += std::to_string(cpus[i]);
		if (j > i)
			out += '-' + std::to_string(cpus[j]);
		i = j + 1;
	}
	return out;
}

std::string format_cpumask_hex(const std::vector<int> &cpus, int nr_bits)
{
	// 32-bit groups, most significant first. Each group is zero-padded to
	// the hex digits its bits need: 8 for full groups, fewer for a partial
	// leading one (40 bits: "ff,ffffffff"; 12 bits holding CPU 0: "001").
	if (nr_bits <= 0)
		return {};
	const int nr_groups = (nr_bits + 31) / 32;
	std::vector<uint32_t> groups(nr_groups, 0);
	for (int cpu : cpus) {
		if (cpu >= 0 && cpu < nr_bits)
			groups[cpu / 32] |= uint32_t{1} << (cpu % 32);
	}
	static const char digits[] = "0123456789abcdef";
	std::string out;
	for (int g = nr_groups - 1; g >= 0; g--) {
		int bits = g == nr_groups - 1 && nr_bits % 32 ? nr_bits % 32 : 32;
		int width = (bits + 3) / 4;
		if (g != nr_groups - 1)
			out += ',';
		for (int d = width - 1; d >= 0; d--)
			out += digits[(groups[g] >> (4 * d)) & 0xf];
	}
	return out;
}

std::optional<std::vector<int>> parse_cpumask_hex(std::string_view s)
{
	// Comma-separated groups of 1-8 hex digits, each 32 bits, most
	// significant first.
	s = trim(s);
	if (s.empty())
		return std::nullopt;
	std::vector<uint32_t> groups; // most significant first
	while (true) {
		size_t comma = s.find(',');
		std::string_view g = s.substr(0, comma);
		if (g.empty() || g.size() > 8)
			return std::nullopt;
		uint32_t v = 0;
		auto [end, ec] = std::from_chars(g.data(), g.data() + g.size(), v, 16);
		if (ec != std::errc() || end != g.data() + g.size())
			return std::nullopt;
		groups.push_back(v);
		if (comma == std::string_view::npos)
			break;
		s.remove_prefix(comma + 1);
	}
	if (groups.size() * 32 > static_cast<size_t>(max_cpu_number) + 1)
		return std::nullopt;
	std::vector<int> cpus;
	const size_t n = groups.size();
	for (size_t i = 0; i < n; i++) {
		uint32_t v = groups[n - 1 - i];
		for (int b = 0; b < 32; b++) {
			if (v & (uint32_t{1} << b))
				cpus.push_back(static_cast<int>(i * 32 + b));
		}
	}
	return cpus;
}

} // namespace cmwq
