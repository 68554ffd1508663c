// bench/bench_options.cpp - wq_bench's command line: usage, parsing with
// a message naming the option and what it accepts, and --sysfs-root.
#include "wq_bench.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include <cmwq/topology.hpp>

#include "cmwq_executor.hpp"
#include "executor.hpp"

namespace wqb {

const char *const kernel_scope_order[6] = {"cpu", "smt", "cache_shard", "cache", "numa", "system"};

namespace {

void usage(FILE *out)
{
	std::fputs(
		"usage: wq_bench [options]\n"
		"Measures cmwq with the kernel's test_workqueue protocol (N producers, one\n"
		"item in flight each, on an unbound workqueue) for each affinity scope, and\n"
		"optionally more protocols and peers. Tables on stdout, or --json.\n"
		"\n"
		"  --protocol P[,P]    kernel (default), fanout, blocking, regression, all\n"
		"  --scopes LIST       scopes for the kernel protocol, in the order given\n"
		"                      (default, or \"all\": cpu,smt,cache_shard,cache,numa,system);\n"
		"                      --scope is the same option\n"
		"  --threads N         producers (default: the usable CPUs); producer i runs\n"
		"                      on the (i mod CPUs)-th usable CPU\n"
		"  --items N           measured items per producer (default 50000)\n"
		"  --warmup N          unmeasured items per producer first (default 1000)\n"
		"  --cxx               only compare cmwq::submit(wq, f).get() with the C API's\n"
		"                      queue_work + completion round trip (per-CPU and default\n"
		"                      unbound workqueues; --repeat rounds each, alternated)\n"
		"  --repeat R          run every measurement R times; report medians and the\n"
		"                      range (max-min)/median of the throughput (default 1)\n"
		"  --percpu            kernel protocol on a per-CPU workqueue instead\n"
		"  --shard-sizes LIST  also sweep workqueue.cache_shard_size, e.g. 1,2,4,8\n"
		"  --block-detect      A/B of the block detector and unbound concurrency:\n"
		"                      kernel, fan-out and blocking (no hints) protocols on a\n"
		"                      per-CPU workqueue with cmwq.block_detect=perf, sample,\n"
		"                      off, and on an unbound one with\n"
		"                      cmwq.unbound_concurrency=kernel, managed\n"
		"  --ab-wake           also run with cmwq.wake_under_lock=1 (wake under the\n"
		"                      pool lock) and print baseline vs patched (=0)\n"
		"  --vs                also run the peers: oneTBB, Boost.Asio, libuv, GLib, a\n"
		"                      naive pool and the physical limits\n"
		"  --peers LIST        only these peers (implies --vs); names as printed by\n"
		"                      --list-peers\n"
		"  --list-peers        print the peers built in and those skipped, then exit\n"
		"  --fanout-items N    fan-out: items from one producer (default 1000000)\n"
		"  --fanout-max-active N  fan-out: max_active of cmwq's workqueue (default:\n"
		"                      the workqueue default, 1024 per CPU or 1024 system-wide)\n"
		"  --blocking-items N  blocking: items (default 200)\n"
		"  --sleep-us N        blocking: each item's sleep (default 1000)\n"
		"  --timeline          blocking: keep each item's start and end (--json)\n"
		"  --regression-items N  regression: items (default 20000)\n"
		"  --cs-ns N           regression: time under the shared lock (default 20000)\n"
		"  --outside-ns N      regression: work outside the lock (default 0)\n"
		"  --max-active LIST   regression: max_active values (default 8,768)\n"
		"  --sysfs-root DIR    use the pod layout of a sysfs snapshot (DIR contains\n"
		"                      devices/); refused when it needs CPUs this machine\n"
		"                      does not let wq_bench use\n"
		"  --param NAME=VALUE  set a cmwq parameter (cmwq_param_set) before measuring;\n"
		"                      repeatable, e.g. --param cmwq.idle_spin_ns=5000\n"
		"  --timeout S         limit for one run, then a state dump (default 120)\n"
		"  --idle-wakeups S    after a burst, the wakeups per minute of cmwq and each peer\n"
		"                      (--peers filters) over S idle seconds, each in its own process\n"
		"  --quick             small sizes, for smoke tests\n"
		"  --json              one JSON object on stdout instead of tables\n"
		"  --json-out FILE     tables on stdout and the JSON object to FILE\n"
		"  -h, --help          this text\n"
		"Exit status: 0 ok; 1 a run failed or lost items; 2 usage or refusal;\n"
		"3 a run did not finish within --timeout.\n",
		out);
}

[[noreturn]] void usage_error(const std::string &msg)
{
	std::fprintf(stderr, "wq_bench: %s\n(wq_bench --help lists the options)\n", msg.c_str());
	std::exit(2);
}

std::vector<std::string> split(const std::string &s)
{
	std::vector<std::string> v;
	std::stringstream ss(s);
	std::string x;
	while (std::getline(ss, x, ','))
		if (!x.empty())
			v.push_back(x);
	return v;
}

long parse_long(const std::string &opt, const std::string &s, long lo, long hi)
{
	char *end = nullptr;
	errno = 0;
	long v = std::strtol(s.c_str(), &end, 10);
	if (errno || end == s.c_str() || *end || v < lo || v > hi)
		usage_error(opt + " " + s + ": expected an integer in [" + std::to_string(lo) + ", " +
			    std::to_string(hi) + "]");
	return v;
}

} // namespace

options parse_options(int argc, char **argv)
{
	options o;
	auto need = [&](int &i) -> std::string {
		if (i + 1 >= argc)
			usage_error(std::string(argv[i]) + " needs a value");
		return argv[++i];
	};
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		std::string val;
		bool inline_value = false; // --name=value
		if (a.rfind("--", 0) == 0 && a.find('=') != std::string::npos) {
			val = a.substr(a.find('=') + 1);
			a = a.substr(0, a.find('='));
			inline_value = true;
		}
		auto value = [&]() -> std::string { return inline_value ? val : need(i); };
		if (a == "-h" || a == "--help") {
			usage(stdout);
			std::exit(0);
		} else if (a == "--protocol") {
			for (auto &p : split(value())) {
				if (p == "all")
					o.protocols.insert({"kernel", "fanout", "blocking", "regression"});
				else if (p == "kernel" || p == "fanout" || p == "blocking" || p == "regression")
					o.protocols.insert(p);
				else
					usage_error("--protocol " + p +
						    ": accepted values are kernel, fanout, blocking, regression, all");
			}
		} else if (a == "--scopes" || a == "--scope") {
			o.scopes.clear();
			for (auto &s : split(value())) {
				if (s == "all") {
					o.scopes.insert(o.scopes.end(), std::begin(kernel_scope_order),
							std::end(kernel_scope_order));
					continue;
				}
				bool known = s == "default";
				for (const char *k : kernel_scope_order)
					known = known || s == k;
				if (!known)
					usage_error("--scopes " + s +
						    ": accepted names are cpu, smt, cache_shard, cache, numa, system, default, all");
				o.scopes.push_back(s);
			}
		} else if (a == "--threads") {
			o.threads = static_cast<int>(parse_long(a, value(), 1, 4096));
		} else if (a == "--items") {
			o.items = static_cast<int>(parse_long(a, value(), 1, 100000000));
		} else if (a == "--warmup") {
			o.warmup = static_cast<int>(parse_long(a, value(), 0, 100000000));
		} else if (a == "--idle-wakeups") {
			o.idle_secs = static_cast<double>(parse_long(a, value(), 1, 3600));
		} else if (a == "--cxx") {
			o.cxx = true;
		} else if (a == "--repeat") {
			o.repeat = static_cast<int>(parse_long(a, value(), 1, 1000));
		} else if (a == "--percpu") {
			o.percpu = true;
		} else if (a == "--shard-sizes") {
			for (auto &s : split(value()))
				o.shard_sizes.push_back(static_cast<unsigned>(parse_long(a, s, 1, 4096)));
		} else if (a == "--ab-wake") {
			o.ab_wake = true;
		} else if (a == "--block-detect") {
			o.ab_detect = true;
		} else if (a == "--vs") {
			o.vs = true;
		} else if (a == "--peers") {
			o.vs = true;
			o.peers = split(value());
		} else if (a == "--list-peers") {
			for (auto &p : available_peers())
				std::printf("%-16s %s\n", p.name, p.label);
			for (auto &[n, why] : skipped_peers())
				std::printf("%-16s skipped: %s\n", n.c_str(), why.c_str());
			std::exit(0);
		} else if (a == "--fanout-items") {
			o.fanout_items = static_cast<int>(parse_long(a, value(), 1, 100000000));
		} else if (a == "--fanout-max-active") {
			o.fanout_max_active = static_cast<int>(parse_long(a, value(), 1, WQ_MAX_ACTIVE));
		} else if (a == "--blocking-items") {
			o.blocking_items = static_cast<int>(parse_long(a, value(), 1, 100000));
		} else if (a == "--sleep-us") {
			o.sleep_us = static_cast<unsigned>(parse_long(a, value(), 0, 10000000));
		} else if (a == "--timeline") {
			o.timeline = true;
		} else if (a == "--regression-items") {
			o.regression_items = static_cast<int>(parse_long(a, value(), 1, 100000000));
		} else if (a == "--cs-ns") {
			o.cs_ns = static_cast<unsigned>(parse_long(a, value(), 0, 100000000));
		} else if (a == "--outside-ns") {
			o.outside_ns = static_cast<unsigned>(parse_long(a, value(), 0, 100000000));
		} else if (a == "--max-active") {
			o.max_actives.clear();
			for (auto &s : split(value()))
				o.max_actives.push_back(static_cast<int>(parse_long(a, s, 1, WQ_MAX_ACTIVE)));
		} else if (a == "--sysfs-root") {
			o.sysfs_root = value();
		} else if (a == "--param") {
			std::string nv = value();
			auto eq = nv.find('=');
			if (eq == std::string::npos || eq == 0)
				usage_error("--param " + nv + ": expected NAME=VALUE");
			o.params.emplace_back(nv.substr(0, eq), nv.substr(eq + 1));
		} else if (a == "--timeout") {
			o.timeout = static_cast<double>(parse_long(a, value(), 1, 86400));
		} else if (a == "--quick") {
			o.quick = true;
		} else if (a == "--json") {
			o.json = true;
		} else if (a == "--json-out") {
			o.json_out = value();
		} else {
			usage_error("unknown option " + a);
		}
	}
	if (o.protocols.empty())
		o.protocols.insert("kernel");
	if (o.scopes.empty())
		o.scopes.assign(std::begin(kernel_scope_order), std::end(kernel_scope_order));
	auto dflt = [&](int &v, int normal, int quick) {
		if (v < 0)
			v = o.quick ? quick : normal;
	};
	dflt(o.items, 50000, 2000);
	dflt(o.warmup, 1000, 100);
	dflt(o.fanout_items, 1000000, 20000);
	dflt(o.blocking_items, 200, 200);
	dflt(o.regression_items, 20000, 2000);
	if (o.vs) {
		auto known = available_peers();
		auto skipped = skipped_peers();
		for (auto &p : o.peers) {
			bool ok = false;
			for (auto &k : known)
				ok = ok || p == k.name;
			for (auto &s : skipped)
				ok = ok || p == s.first;
			if (!ok)
				usage_error("--peers " + p + ": not a peer (wq_bench --list-peers names them)");
		}
	}
	return o;
}

// --sysfs-root: the layout must be set before the library starts, so the
// checks run here and the program re-executes itself with CMWQ_SYSFS_ROOT.
void sysfs_root_reexec(const options &o, char **argv)
{
	char real[PATH_MAX];
	if (!realpath(o.sysfs_root.c_str(), real)) {
		std::fprintf(stderr, "wq_bench: --sysfs-root %s: %s\n", o.sysfs_root.c_str(),
			     std::strerror(errno));
		std::exit(2);
	}
	const char *env = std::getenv("CMWQ_SYSFS_ROOT");
	char env_real[PATH_MAX];
	if (env && realpath(env, env_real) && std::strcmp(env_real, real) == 0)
		return; // already running on it
	std::error_code ec;
	if (!std::filesystem::is_directory(std::filesystem::path(real) / "devices/system/cpu", ec)) {
		std::fprintf(stderr,
			     "wq_bench: refusing --sysfs-root %s: %s/devices/system/cpu does not "
			     "exist; the root is the directory that contains devices/, as /sys does\n",
			     o.sysfs_root.c_str(), real);
		std::exit(2);
	}
	cmwq::topology snap = cmwq::build_topology(real, nullptr, 8);
	std::vector<int> here = process_cpus();
	if (snap.usable.size() > here.size()) {
		std::fprintf(stderr,
			     "wq_bench: refusing --sysfs-root %s: the snapshot has %zu CPUs (%s) but "
			     "this machine lets wq_bench use %zu (%s). The benchmark pins one producer "
			     "to every CPU of the layout and cmwq pins each pod's workers to its CPUs; "
			     "with fewer real CPUs they would share cores, so the numbers would describe "
			     "this machine's oversubscription, not that layout. Run it on a machine with "
			     "at least %zu usable CPUs.\n",
			     o.sysfs_root.c_str(), snap.usable.size(), cmwq::format_cpulist(snap.usable).c_str(),
			     here.size(), cmwq::format_cpulist(here).c_str(), snap.usable.size());
		std::exit(2);
	}
	std::vector<int> missing;
	for (int c : snap.usable)
		if (!std::binary_search(here.begin(), here.end(), c))
			missing.push_back(c);
	if (!missing.empty()) {
		std::fprintf(stderr,
			     "wq_bench: refusing --sysfs-root %s: the snapshot numbers its CPUs %s, "
			     "and CPUs %s are not usable here (this machine: %s); cmwq pins workers "
			     "by CPU number, so that layout cannot be placed on this machine.\n",
			     o.sysfs_root.c_str(), cmwq::format_cpulist(snap.usable).c_str(),
			     cmwq::format_cpulist(missing).c_str(), cmwq::format_cpulist(here).c_str());
		std::exit(2);
	}
	setenv("CMWQ_SYSFS_ROOT", real, 1);
	execv("/proc/self/exe", argv);
	std::fprintf(stderr, "wq_bench: cannot re-execute itself with CMWQ_SYSFS_ROOT=%s: %s\n",
		     real, std::strerror(errno));
	std::exit(2);
}

std::string read_first(const char *path, const char *prefix)
{
	std::ifstream f(path);
	std::string line;
	while (std::getline(f, line)) {
		if (!prefix)
			return line;
		if (line.rfind(prefix, 0) == 0) {
			auto pos = line.find(':');
			return pos == std::string::npos ? line : line.substr(pos + 2);
		}
	}
	return {};
}

std::string loadavg()
{
	std::string l = read_first("/proc/loadavg", nullptr);
	std::istringstream ss(l);
	std::string a, b, c;
	ss >> a >> b >> c;
	return a + " " + b + " " + c;
}

} // namespace wqb
