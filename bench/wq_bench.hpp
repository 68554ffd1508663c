// bench/wq_bench.hpp - what wq_bench's parts share: the options, a
// measured series, and the results the tables and the JSON are printed from.
#pragma once

#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "harness.hpp"

namespace wqb {

extern const char *const kernel_scope_order[6];


struct options {
	std::set<std::string> protocols;
	std::vector<std::string> scopes;
	int threads = 0;
	int items = -1;
	int warmup = -1;
	int repeat = 1;
	bool percpu = false;
	bool ab_wake = false;
	bool cxx = false; // --cxx: the C++ task round trip against the C API's, then exit
	bool ab_detect = false; // --block-detect
	bool vs = false;
	bool json = false;
	std::string json_out; // --json-out FILE: tables on stdout, JSON to FILE
	bool quick = false;
	bool timeline = false;
	std::vector<std::string> peers; // empty: all
	std::vector<unsigned> shard_sizes;
	int fanout_items = -1;
	int fanout_max_active = 0; // 0: the workqueue's default
	int blocking_items = -1;
	unsigned sleep_us = 1000;
	int regression_items = -1;
	unsigned cs_ns = 20000;
	unsigned outside_ns = 0;
	std::vector<int> max_actives{8, 768};
	std::string sysfs_root;
	double timeout = 120;
	double idle_secs = 0; // --idle-wakeups
	std::vector<std::pair<std::string, std::string>> params; // --param
};

// --idle-wakeups (idle.cpp): the table, each executor measured in a child
// started as `wq_bench --idle-one NAME SECONDS` (idle_child).
int run_idle_wakeups(const options &o, char **argv);
int idle_child(int argc, char **argv);
// The command line (bench_options.cpp); exits 2 with a message on bad input.
options parse_options(int argc, char **argv);
// --sysfs-root: checks the snapshot and re-executes with CMWQ_SYSFS_ROOT.
void sysfs_root_reexec(const options &o, char **argv);
// The first line of a file, or the value of its first "prefix: value" line.
std::string read_first(const char *path, const char *prefix);
// The load average, "1 5 15".
std::string loadavg();

using metrics = std::map<std::string, double>;

struct series {
	std::string group;  // kernel, ab_baseline, shard, kernel_peer, fanout, blocking, regression
	std::string label;  // first column of the table
	std::map<std::string, std::string> tags;  // JSON strings
	std::map<std::string, double> ntags;      // JSON numbers fixed by the configuration
	std::vector<metrics> runs;
	std::vector<std::string> errors;
	std::vector<std::pair<uint32_t, uint32_t>> timeline; // of the last run
	std::function<bool(metrics &, std::string &, series &)> job;

	bool has(const char *k) const { return !runs.empty() && runs.front().count(k); }
	spread spr(const char *k) const
	{
		std::vector<double> v;
		for (auto &r : runs)
			if (auto it = r.find(k); it != r.end())
				v.push_back(it->second);
		return summarize(v);
	}
	double med(const char *k) const { return spr(k).median; }
	// The first run's value: the cold one, before pools kept workers around.
	double first(const char *k) const
	{
		if (runs.empty() || !runs.front().count(k))
			return NAN;
		return runs.front().at(k);
	}
	bool ok() const { return errors.empty() && !runs.empty(); }
};

// What the report reads: the options, the CPUs, every series and the notes.
struct results {
	options o;
	std::vector<int> usable;
	std::vector<int> producer_cpus;
	std::vector<series> all;
	std::map<std::string, std::vector<std::string>> notes; // per protocol, printed under its table
	int failures = 0;
	std::string load_start; // load average when measuring began

	const series *find(const std::string &group, const std::string &label) const;
	// The cmwq row peers are compared with in the kernel protocol.
	const series *kernel_ref() const;
	const series *first_ok(const std::string &group, const std::string &impl) const;
	struct goal {
		std::string name, detail;
		bool met;
	};
	std::vector<goal> goals() const;
};

// The tables (report.cpp).
void print_tables(const results &b, const std::string &cmdline);
// The same as one JSON object.
void print_json(const results &b, const std::string &cmdline, FILE *out);

} // namespace wqb
