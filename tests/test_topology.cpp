// test_topology.cpp - build_topology over the saved sysfs snapshots in
// data/topologies (each with an expected.json of the pods of every scope and
// of cache_shard at several sizes), the cache_shard layout rules on generated
// trees, and the cpulist / hex bitmap / scope-name formats.
// expected.json is read by a small reader here rather than a JSON library so
// the test needs nothing beyond GoogleTest.
#include <cmwq/topology.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>

#include <unistd.h>

namespace fs = std::filesystem;
using cmwq::affinity_scope;

namespace {

// ---- a minimal JSON reader (objects, arrays, strings, numbers) ----

struct json {
	enum kind_t { null, number, string, array, object } kind = null;
	double num = 0;
	std::string str;
	std::vector<json> arr;
	std::vector<std::pair<std::string, json>> obj;

	const json *find(const std::string &key) const
	{
		for (const auto &[k, v] : obj) {
			if (k == key)
				return &v;
		}
		return nullptr;
	}
	const json &at(const std::string &key) const
	{
		if (const json *v = find(key))
			return *v;
		throw std::runtime_error("missing key " + key);
	}
};

struct json_reader {
	const std::string &s;
	size_t i = 0;

	void ws()
	{
		while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])))
			i++;
	}
	void expect(char c)
	{
		ws();
		if (i >= s.size() || s[i] != c)
			throw std::runtime_error(std::string("expected '") + c + "' at " + std::to_string(i));
		i++;
	}
	std::string string_lit()
	{
		expect('"');
		std::string out;
		while (i < s.size() && s[i] != '"') {
			if (s[i] == '\\' && i + 1 < s.size())
				i++;
			out += s[i++];
		}
		expect('"');
		return out;
	}
	json value()
	{
		ws();
		json v;
		if (i >= s.size())
			throw std::runtime_error("unexpected end");
		char c = s[i];
		if (c == '{') {
			v.kind = json::object;
			i++;
			ws();
			if (s[i] == '}') {
				i++;
				return v;
			}
			while (true) {
				std::string key = string_lit();
				expect(':');
				v.obj.emplace_back(key, value());
				ws();
				if (s[i] == ',') {
					i++;
					continue;
				}
				expect('}');
				return v;
			}
		}
		if (c == '[') {
			v.kind = json::array;
			i++;
			ws();
			if (s[i] == ']') {
				i++;
				return v;
			}
			while (true) {
				v.arr.push_back(value());
				ws();
				if (s[i] == ',') {
					i++;
					continue;
				}
				expect(']');
				return v;
			}
		}
		if (c == '"') {
			v.kind = json::string;
			v.str = string_lit();
			return v;
		}
		size_t used = 0;
		v.kind = json::number;
		v.num = std::stod(s.substr(i), &used);
		i += used;
		return v;
	}
};

json read_json(const fs::path &p)
{
	std::ifstream in(p);
	std::stringstream ss;
	ss << in.rdbuf();
	std::string text = ss.str();
	json_reader r{text};
	return r.value();
}

// ---- helpers ----

const fs::path topologies_dir = fs::path(CMWQ_TEST_DATA) / "topologies";

std::vector<std::string> snapshot_names()
{
	std::vector<std::string> names;
	std::error_code ec;
	for (const auto &e : fs::directory_iterator(topologies_dir, ec)) {
		if (fs::exists(e.path() / "expected.json"))
			names.push_back(e.path().filename().string());
	}
	std::sort(names.begin(), names.end());
	return names;
}

std::string sysfs_of(const std::string &name)
{
	return (topologies_dir / name / "sys").string();
}

// Pods as cpulist strings, in pod order.
std::vector<std::string> pod_lists(const cmwq::pod_type &pt)
{
	std::vector<std::string> out;
	for (const auto &cpus : pt.pod_cpus)
		out.push_back(cmwq::format_cpulist(cpus));
	return out;
}

std::vector<std::string> strings_of(const json &arr)
{
	std::vector<std::string> out;
	for (const auto &v : arr.arr)
		out.push_back(v.str);
	return out;
}

const std::array<affinity_scope, 6> real_scopes = {
	affinity_scope::cpu, affinity_scope::smt, affinity_scope::cache,
	affinity_scope::cache_shard, affinity_scope::numa, affinity_scope::system,
};

// Pods partition the usable CPUs, ascending inside, ordered by lowest CPU,
// and cpu_pod agrees with pod_cpus.
void expect_well_formed(const cmwq::topology &t, affinity_scope s)
{
	SCOPED_TRACE(cmwq::scope_name(s));
	const auto &pt = t.scope(s);
	ASSERT_EQ(pt.pod_node.size(), pt.pod_cpus.size());
	ASSERT_GT(pt.cpu_pod.size(), static_cast<size_t>(t.max_cpu()));
	std::vector<int> seen;
	int prev_lowest = -1;
	for (int pod = 0; pod < pt.nr_pods(); pod++) {
		const auto &cpus = pt.pod_cpus[pod];
		ASSERT_FALSE(cpus.empty()) << "pod " << pod;
		EXPECT_TRUE(std::is_sorted(cpus.begin(), cpus.end())) << "pod " << pod;
		EXPECT_GT(cpus.front(), prev_lowest) << "pods not ordered by lowest CPU";
		prev_lowest = cpus.front();
		for (int cpu : cpus) {
			EXPECT_EQ(pt.cpu_pod[cpu], pod) << "cpu " << cpu;
			seen.push_back(cpu);
		}
	}
	std::sort(seen.begin(), seen.end());
	EXPECT_EQ(seen, t.usable) << "every usable CPU in exactly one pod";
	for (size_t cpu = 0; cpu < pt.cpu_pod.size(); cpu++) {
		bool usable = std::binary_search(t.usable.begin(), t.usable.end(), static_cast<int>(cpu));
		if (!usable) {
			EXPECT_EQ(pt.cpu_pod[cpu], -1) << "cpu " << cpu << " is not usable";
		}
	}
}

class snapshot_test : public ::testing::TestWithParam<std::string> {
protected:
	void SetUp() override { expected = read_json(topologies_dir / GetParam() / "expected.json"); }
	json expected;
};

TEST_P(snapshot_test, usable_cpus_are_the_online_cpus)
{
	auto t = cmwq::build_topology(sysfs_of(GetParam()), nullptr, 8);
	EXPECT_EQ(cmwq::format_cpulist(t.usable), expected.at("online").str);
	EXPECT_EQ(t.sysfs_root, sysfs_of(GetParam()));
	EXPECT_EQ(t.cache_shard_size, 8u);
}

TEST_P(snapshot_test, pods_of_every_scope_match_expected)
{
	auto t = cmwq::build_topology(sysfs_of(GetParam()), nullptr, 8);
	const json &pods = expected.at("pods");
	for (auto s : real_scopes) {
		SCOPED_TRACE(cmwq::scope_name(s));
		EXPECT_EQ(pod_lists(t.scope(s)), strings_of(pods.at(cmwq::scope_name(s))));
		expect_well_formed(t, s);
	}
	EXPECT_TRUE(t.scope(affinity_scope::dfl).pod_cpus.empty());
}

TEST_P(snapshot_test, cache_shard_pods_match_expected_for_every_shard_size)
{
	const json &by_size = expected.at("cache_shard_by_size");
	ASSERT_FALSE(by_size.obj.empty());
	for (const auto &[size, pods] : by_size.obj) {
		SCOPED_TRACE("cache_shard_size " + size);
		auto t = cmwq::build_topology(sysfs_of(GetParam()), nullptr,
					      static_cast<unsigned>(std::stoul(size)));
		EXPECT_EQ(t.cache_shard_size, std::stoul(size));
		EXPECT_EQ(pod_lists(t.scope(affinity_scope::cache_shard)), strings_of(pods));
		expect_well_formed(t, affinity_scope::cache_shard);
	}
}

TEST_P(snapshot_test, cache_shards_never_split_smt_siblings_or_cross_an_llc)
{
	for (unsigned size : {1u, 2u, 3u, 8u}) {
		auto t = cmwq::build_topology(sysfs_of(GetParam()), nullptr, size);
		const auto &shard = t.scope(affinity_scope::cache_shard);
		const auto &smt = t.scope(affinity_scope::smt);
		const auto &cache = t.scope(affinity_scope::cache);
		for (const auto &cpus : smt.pod_cpus) {
			for (int cpu : cpus)
				EXPECT_EQ(shard.cpu_pod[cpu], shard.cpu_pod[cpus.front()]) << "cpu " << cpu;
		}
		for (const auto &cpus : shard.pod_cpus) {
			for (int cpu : cpus)
				EXPECT_EQ(cache.cpu_pod[cpu], cache.cpu_pod[cpus.front()]) << "cpu " << cpu;
		}
	}
}

TEST_P(snapshot_test, pod_nodes_follow_the_cpus_and_system_spans_all_nodes)
{
	auto t = cmwq::build_topology(sysfs_of(GetParam()), nullptr, 8);
	for (auto s : real_scopes) {
		SCOPED_TRACE(cmwq::scope_name(s));
		const auto &pt = t.scope(s);
		for (int pod = 0; pod < pt.nr_pods(); pod++) {
			std::set<int> nodes;
			for (int cpu : pt.pod_cpus[pod])
				nodes.insert(t.cpu_node[cpu]);
			if (s == affinity_scope::system)
				EXPECT_EQ(pt.pod_node[pod], -1);
			else
				EXPECT_EQ(pt.pod_node[pod], nodes.size() == 1 ? *nodes.begin() : -1);
		}
	}
	for (int cpu : t.usable) {
		EXPECT_GE(t.cpu_node[cpu], 0);
		EXPECT_LT(t.cpu_node[cpu], t.nr_nodes);
	}
	if (const json *nr = expected.find("nr_nodes")) {
		EXPECT_EQ(t.nr_nodes, static_cast<int>(nr->num));
	}
	if (const json *pn = expected.find("pod_node")) {
		for (const auto &[scope, nodes] : pn->obj) {
			std::vector<int> want;
			for (const auto &v : nodes.arr)
				want.push_back(static_cast<int>(v.num));
			EXPECT_EQ(t.scope(*cmwq::parse_scope(scope)).pod_node, want) << scope;
		}
	}
}

TEST_P(snapshot_test, llc_level_is_the_highest_data_or_unified_cache)
{
	auto t = cmwq::build_topology(sysfs_of(GetParam()), nullptr, 8);
	const json *levels = expected.find("llc_level");
	if (!levels) {
		// The shipped machine snapshots all have an L3 on every CPU.
		for (int cpu : t.usable)
			EXPECT_EQ(t.cpu_llc_level[cpu], 3) << "cpu " << cpu;
		return;
	}
	for (const auto &[level, list] : levels->obj) {
		auto cpus = cmwq::parse_cpulist(list.str);
		ASSERT_TRUE(cpus.has_value()) << list.str;
		for (int cpu : *cpus)
			EXPECT_EQ(t.cpu_llc_level[cpu], std::stoi(level)) << "cpu " << cpu;
	}
}

TEST_P(snapshot_test, degradations_give_one_warning_each_and_complete_trees_none)
{
	auto t = cmwq::build_topology(sysfs_of(GetParam()), nullptr, 8);
	std::vector<std::string> want;
	if (const json *w = expected.find("warnings"))
		want = strings_of(*w);
	ASSERT_EQ(t.warnings.size(), want.size()) << ::testing::PrintToString(t.warnings);
	for (const auto &needle : want) {
		bool found = std::any_of(t.warnings.begin(), t.warnings.end(),
			[&](const std::string &w) { return w.find(needle) != std::string::npos; });
		EXPECT_TRUE(found) << "no warning contains \"" << needle << "\": "
				   << ::testing::PrintToString(t.warnings);
	}
}

TEST_P(snapshot_test, restricting_to_a_subset_leaves_only_those_cpus_in_pods)
{
	auto full = cmwq::build_topology(sysfs_of(GetParam()), nullptr, 8);
	// Every other online CPU, plus a CPU number that does not exist.
	std::vector<int> mask;
	for (size_t i = 0; i < full.usable.size(); i += 2)
		mask.push_back(full.usable[i]);
	mask.push_back(100000);
	auto t = cmwq::build_topology(sysfs_of(GetParam()), &mask, 8);
	mask.pop_back();
	EXPECT_EQ(t.usable, mask);
	for (auto s : real_scopes) {
		expect_well_formed(t, s);
		// Restricting never merges pods: each restricted pod lies in one
		// full pod. cache_shard is the exception: shards are recounted
		// over the cores that remain.
		if (s == affinity_scope::cache_shard)
			continue;
		const auto &pt = t.scope(s);
		for (const auto &cpus : pt.pod_cpus) {
			for (int cpu : cpus)
				EXPECT_EQ(full.scope(s).cpu_pod[cpu], full.scope(s).cpu_pod[cpus.front()]);
		}
	}
}

std::string param_name(const ::testing::TestParamInfo<std::string> &info)
{
	std::string n = info.param;
	for (char &c : n) {
		if (!std::isalnum(static_cast<unsigned char>(c)))
			c = '_';
	}
	return n;
}

INSTANTIATE_TEST_SUITE_P(snapshots, snapshot_test, ::testing::ValuesIn(snapshot_names()),
			 param_name);

TEST(topology_snapshots, the_shipped_snapshots_are_all_there)
{
	auto names = snapshot_names();
	for (const char *want : {"epyc-9d64-176", "grace-72", "ryzen-3900x-24", "single-llc-36c",
				 "vm-8", "offline-smt-adjacent-8", "two-nodes-16", "l2-llc-6",
				 "hybrid-12", "no-cache-4", "online-only-3"})
		EXPECT_NE(std::find(names.begin(), names.end(), want), names.end()) << want;
}

// ---- generated trees: the cache_shard layout rules ----

// A sysfs tree of nr_cores cores with `smt` threads each (siblings numbered
// core + k * nr_cores, as on x86), all sharing one L3, one node.
class generated_tree {
public:
	generated_tree(int nr_cores, int smt)
	{
		static int seq = 0;
		root = fs::path(::testing::TempDir()) /
		       ("cmwq-topo-" + std::to_string(::getpid()) + "-" + std::to_string(seq++));
		int nr_cpus = nr_cores * smt;
		std::vector<int> all(nr_cpus);
		for (int i = 0; i < nr_cpus; i++)
			all[i] = i;
		auto cpu = root / "devices/system/cpu";
		write(cpu / "online", cmwq::format_cpulist(all));
		write(cpu / "possible", cmwq::format_cpulist(all));
		write(root / "devices/system/node/node0/cpulist", cmwq::format_cpulist(all));
		for (int i = 0; i < nr_cpus; i++) {
			auto d = cpu / ("cpu" + std::to_string(i));
			std::vector<int> sib;
			for (int k = 0; k < smt; k++)
				sib.push_back(i % nr_cores + k * nr_cores);
			write(d / "topology/thread_siblings_list", cmwq::format_cpulist(sib));
			write(d / "cache/index0/level", "2");
			write(d / "cache/index0/type", "Unified");
			write(d / "cache/index0/shared_cpu_list", cmwq::format_cpulist(sib));
			write(d / "cache/index1/level", "3");
			write(d / "cache/index1/type", "Unified");
			write(d / "cache/index1/shared_cpu_list", cmwq::format_cpulist(all));
		}
	}
	~generated_tree()
	{
		std::error_code ec;
		fs::remove_all(root, ec);
	}
	fs::path root;

private:
	static void write(const fs::path &p, const std::string &text)
	{
		fs::create_directories(p.parent_path());
		std::ofstream(p) << text << "\n";
	}
};

// Number of cores (SMT groups) in each cache_shard pod.
std::vector<int> shard_core_counts(const cmwq::topology &t)
{
	std::vector<int> out;
	const auto &smt = t.scope(affinity_scope::smt);
	for (const auto &cpus : t.scope(affinity_scope::cache_shard).pod_cpus) {
		int cores = 0;
		for (int cpu : cpus)
			cores += smt.pod_cpus[smt.cpu_pod[cpu]].front() == cpu;
		out.push_back(cores);
	}
	return out;
}

struct shard_case {
	int nr_cores, smt;
	unsigned size;
	std::vector<int> cores_per_shard;
};

TEST(cache_shard_layout, shard_count_rounds_half_up_and_large_shards_come_first)
{
	const std::vector<shard_case> cases = {
		{8, 1, 8, {8}},
		{11, 1, 8, {11}},            // round(1.375) = 1: one shard above size
		{12, 1, 8, {6, 6}},          // round(1.5) = 2: the smallest split
		{20, 1, 8, {7, 7, 6}},
		{36, 2, 8, {8, 7, 7, 7, 7}},
		{72, 1, 8, {8, 8, 8, 8, 8, 8, 8, 8, 8}},
		{64, 2, 8, {8, 8, 8, 8, 8, 8, 8, 8}},
		{3, 1, 2, {2, 1}},
		{4, 1, 16, {4}},             // round(0.25) = 0, at least one shard
		{10, 1, 4, {4, 3, 3}},
	};
	for (const auto &c : cases) {
		SCOPED_TRACE(std::to_string(c.nr_cores) + " cores x" + std::to_string(c.smt) +
			     ", size " + std::to_string(c.size));
		generated_tree tree(c.nr_cores, c.smt);
		auto t = cmwq::build_topology(tree.root.string(), nullptr, c.size);
		EXPECT_EQ(shard_core_counts(t), c.cores_per_shard);
		EXPECT_TRUE(t.warnings.empty()) << ::testing::PrintToString(t.warnings);
	}
}

TEST(cache_shard_layout, sixty_four_cores_with_smt2_give_shards_of_sixteen_cpus)
{
	generated_tree tree(64, 2);
	auto t = cmwq::build_topology(tree.root.string(), nullptr, 8);
	const auto &shard = t.scope(affinity_scope::cache_shard);
	ASSERT_EQ(shard.nr_pods(), 8);
	for (int i = 0; i < 8; i++) {
		std::string want = std::to_string(i * 8) + "-" + std::to_string(i * 8 + 7) + "," +
				   std::to_string(64 + i * 8) + "-" + std::to_string(64 + i * 8 + 7);
		EXPECT_EQ(cmwq::format_cpulist(shard.pod_cpus[i]), want);
	}
}

TEST(cache_shard_layout, size_zero_is_treated_as_one_with_the_kernel_warning)
{
	auto name = sysfs_of("vm-8");
	auto t = cmwq::build_topology(name, nullptr, 0);
	EXPECT_EQ(t.cache_shard_size, 1u);
	ASSERT_EQ(t.warnings.size(), 1u);
	EXPECT_EQ(t.warnings[0], "workqueue: cache_shard_size must be > 0, setting to 1");
	auto one = cmwq::build_topology(name, nullptr, 1);
	EXPECT_EQ(pod_lists(t.scope(affinity_scope::cache_shard)),
		  pod_lists(one.scope(affinity_scope::cache_shard)));
}

TEST(build_topology, cpu_indexed_arrays_cover_offline_cpus_with_minus_one_pods)
{
	auto t = cmwq::build_topology(sysfs_of("offline-smt-adjacent-8"), nullptr, 8);
	ASSERT_EQ(t.cpu_node.size(), 8u);
	ASSERT_EQ(t.cpu_llc_level.size(), 8u);
	for (auto s : real_scopes) {
		ASSERT_EQ(t.scope(s).cpu_pod.size(), 8u);
		EXPECT_EQ(t.scope(s).cpu_pod[3], -1);
		EXPECT_EQ(t.scope(s).cpu_pod[6], -1);
	}
	EXPECT_EQ(t.max_cpu(), 7);
}

TEST(build_topology, affinity_mask_without_online_cpus_falls_back_to_online_with_warning)
{
	std::vector<int> mask = {3, 6};  // both offline in this snapshot
	auto t = cmwq::build_topology(sysfs_of("offline-smt-adjacent-8"), &mask, 8);
	EXPECT_EQ(cmwq::format_cpulist(t.usable), "0-2,4-5,7");
	ASSERT_EQ(t.warnings.size(), 1u);
	EXPECT_NE(t.warnings[0].find("affinity mask"), std::string::npos);
}

TEST(build_topology, restricting_splits_smt_pods_and_shards_by_remaining_cores)
{
	// ryzen: CCX 0-2,12-14; keep 0,1,12 -> cores 0 and 1 remain (12 is 0's sibling).
	std::vector<int> mask = {12, 0, 1};
	auto t = cmwq::build_topology(sysfs_of("ryzen-3900x-24"), &mask, 1);
	EXPECT_EQ(pod_lists(t.scope(affinity_scope::smt)), (std::vector<std::string>{"0,12", "1"}));
	EXPECT_EQ(pod_lists(t.scope(affinity_scope::cache)), (std::vector<std::string>{"0-1,12"}));
	EXPECT_EQ(pod_lists(t.scope(affinity_scope::cache_shard)),
		  (std::vector<std::string>{"0,12", "1"}));
}

TEST(build_topology, missing_root_degrades_to_one_cpu_with_warnings)
{
	auto t = cmwq::build_topology("/nonexistent/cmwq-sysfs", nullptr, 8);
	EXPECT_EQ(t.usable, std::vector<int>{0});
	EXPECT_FALSE(t.warnings.empty());
	for (auto s : real_scopes)
		EXPECT_EQ(pod_lists(t.scope(s)), std::vector<std::string>{"0"});
}

// ---- scope names ----

TEST(scope_names, every_scope_name_parses_back_to_its_scope)
{
	for (int i = 0; i < cmwq::nr_affinity_scopes; i++) {
		auto s = static_cast<affinity_scope>(i);
		auto parsed = cmwq::parse_scope(cmwq::scope_name(s));
		ASSERT_TRUE(parsed.has_value()) << cmwq::scope_name(s);
		EXPECT_EQ(*parsed, s);
	}
	EXPECT_EQ(cmwq::parse_scope("default"), affinity_scope::dfl);
	EXPECT_STREQ(cmwq::scope_name(affinity_scope::cache_shard), "cache_shard");
}

TEST(scope_names, parse_is_an_exact_match_without_prefixes_or_case_folding)
{
	EXPECT_EQ(cmwq::parse_scope("cache"), affinity_scope::cache);
	EXPECT_EQ(cmwq::parse_scope("cache_shard"), affinity_scope::cache_shard);
	for (const char *bad : {"", "cach", "cache_", "cache_s", "cache_shards", "Cache", "CPU",
				"cpu ", " cpu", "cpu\n", "dfl", "def", "defaults", "numa0", "sys"})
		EXPECT_FALSE(cmwq::parse_scope(bad).has_value()) << '"' << bad << '"';
}

// ---- cpulist ----

TEST(cpulist, parses_ranges_singles_and_trailing_newline)
{
	EXPECT_EQ(cmwq::parse_cpulist("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
	EXPECT_EQ(cmwq::parse_cpulist("5\n"), std::vector<int>{5});
	EXPECT_EQ(cmwq::parse_cpulist(""), std::vector<int>{});
	EXPECT_EQ(cmwq::parse_cpulist("\n"), std::vector<int>{});
	EXPECT_EQ(cmwq::parse_cpulist("3,1,2-2,1"), (std::vector<int>{1, 2, 3}));
	EXPECT_EQ(cmwq::parse_cpulist("0-9:2/5"), (std::vector<int>{0, 1, 5, 6}));
}

TEST(cpulist, rejects_malformed_lists)
{
	for (const char *bad : {"a", "1,,2", ",1", "1,", "3-1", "1-", "-1", "1-2-3", "0x1",
				"1:2/3", "0-9:0/5", "0-9:6/5", "0-9:2", "99999999", "1 2"})
		EXPECT_FALSE(cmwq::parse_cpulist(bad).has_value()) << '"' << bad << '"';
}

TEST(cpulist, format_merges_consecutive_cpus_into_ranges)
{
	EXPECT_EQ(cmwq::format_cpulist({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
	EXPECT_EQ(cmwq::format_cpulist({}), "");
	EXPECT_EQ(cmwq::format_cpulist({7}), "7");
	EXPECT_EQ(cmwq::format_cpulist({4, 2, 3, 3}), "2-4");
}

TEST(cpulist, random_sets_round_trip_through_format_and_parse)
{
	std::mt19937 rng(12345);
	for (int round = 0; round < 500; round++) {
		std::vector<int> cpus;
		int nr = static_cast<int>(rng() % 300);
		for (int cpu = 0; cpu < nr; cpu++) {
			if (rng() % 3)
				cpus.push_back(cpu);
		}
		auto text = cmwq::format_cpulist(cpus);
		EXPECT_EQ(cmwq::parse_cpulist(text), cpus) << text;
	}
}

// ---- hex bitmaps ----

TEST(cpumask_hex, groups_are_32_bits_most_significant_first)
{
	std::vector<int> forty(40);
	for (int i = 0; i < 40; i++)
		forty[i] = i;
	EXPECT_EQ(cmwq::format_cpumask_hex(forty, 40), "ff,ffffffff");
	EXPECT_EQ(cmwq::format_cpumask_hex({0, 1, 2, 3, 4, 5, 6, 7}, 8), "ff");
	EXPECT_EQ(cmwq::format_cpumask_hex({0}, 64), "00000000,00000001");
	EXPECT_EQ(cmwq::format_cpumask_hex({63}, 64), "80000000,00000000");
	EXPECT_EQ(cmwq::format_cpumask_hex({32}, 40), "01,00000000");
	EXPECT_EQ(cmwq::format_cpumask_hex({}, 32), "00000000");
}

TEST(cpumask_hex, partial_leading_group_is_padded_to_its_own_width_only)
{
	EXPECT_EQ(cmwq::format_cpumask_hex({0}, 12), "001");
	EXPECT_EQ(cmwq::format_cpumask_hex({0}, 4), "1");
	EXPECT_EQ(cmwq::format_cpumask_hex({0, 3}, 6), "09");
	EXPECT_EQ(cmwq::format_cpumask_hex({0}, 176), "0000,00000000,00000000,00000000,00000000,00000001");
	EXPECT_EQ(cmwq::format_cpumask_hex({9}, 8), "00") << "CPUs beyond nr_bits are not shown";
	EXPECT_EQ(cmwq::format_cpumask_hex({0}, 0), "");
}

TEST(cpumask_hex, parse_reads_groups_and_rejects_malformed_masks)
{
	EXPECT_EQ(cmwq::parse_cpumask_hex("ff,ffffffff\n")->size(), 40u);
	EXPECT_EQ(cmwq::parse_cpumask_hex("1,0"), std::vector<int>{32});
	EXPECT_EQ(cmwq::parse_cpumask_hex("00000000,00000005"), (std::vector<int>{0, 2}));
	EXPECT_EQ(cmwq::parse_cpumask_hex("A"), (std::vector<int>{1, 3}));
	EXPECT_EQ(cmwq::parse_cpumask_hex("0"), std::vector<int>{});
	for (const char *bad : {"", "xyz", "1,,2", ",1", "1,", "123456789", "0x1", "-1", "1 2"})
		EXPECT_FALSE(cmwq::parse_cpumask_hex(bad).has_value()) << '"' << bad << '"';
}

TEST(cpumask_hex, random_sets_round_trip_through_format_and_parse)
{
	std::mt19937 rng(54321);
	for (int round = 0; round < 500; round++) {
		int nr_bits = 1 + static_cast<int>(rng() % 300);
		std::vector<int> cpus;
		for (int cpu = 0; cpu < nr_bits; cpu++) {
			if (rng() % 4 == 0)
				cpus.push_back(cpu);
		}
		auto text = cmwq::format_cpumask_hex(cpus, nr_bits);
		EXPECT_EQ(cmwq::parse_cpumask_hex(text), cpus) << text;
		EXPECT_EQ(std::count(text.begin(), text.end(), ','), (nr_bits + 31) / 32 - 1);
	}
}

} // namespace
