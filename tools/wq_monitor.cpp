// wq_monitor - per-workqueue counters of a running cmwq process, sampled at
// an interval, in the columns of the kernel's wq_monitor.py.
//
// Reads the "stats" request of the control endpoint (docs/control.md) over
// one connection kept open for the whole run, rather than attaching a
// debugger to the process as the kernel's drgn script does: the library
// already keeps the counters and the endpoint is the supported way in.
#include "cli.hpp"
#include "ctl_client.hpp"

#include <cmwq/control.h>
#include <cmwq/stats.h>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <time.h>

namespace {

const char usage[] =
	"usage: wq_monitor [-i|--interval SECONDS] [-j|--json] [-c|--count N]\n"
	"                  PID|SOCKET [REGEX...]\n"
	"\n"
	"Prints the workqueue counters of a cmwq process every interval (default 1 s;\n"
	"0 prints once). Counters are running totals since the workqueue was created.\n"
	"REGEXes (ECMAScript, searched anywhere in the name, any one may match) pick\n"
	"the workqueues shown. The process must have its control endpoint started\n"
	"(cmwq_control_start() or CMWQ_PARAMS=cmwq.control=1); see wqctl --help.\n"
	"\n"
	"Columns:\n"
	"  total    work items started execution\n"
	"  infl     work items executing now (started - completed; items waiting\n"
	"           to start are not counted)\n"
	"  CPUtime  total CPU time consumed, in seconds\n"
	"  CPUitsv  wq_cpu_intensive_thresh_us violations (items flagged as CPU\n"
	"           hogs); '-' for unbound workqueues\n"
	"  CMW/RPR  per-CPU workqueues: concurrency-management worker wakeups;\n"
	"           unbound workqueues: unbound workers brought back into scope\n"
	"  mayday   maydays to rescuer; '-' without WQ_MEM_RECLAIM\n"
	"  rescued  linked work items executed by rescuer; '-' without WQ_MEM_RECLAIM\n"
	"\n"
	"Options:\n"
	"  -i, --interval S  seconds between samples (0: one sample and exit)\n"
	"  -j, --json        one JSON object per workqueue per sample, with keys\n"
	"                    timestamp, name, unbound, mem_reclaim, started,\n"
	"                    completed, cpu_time (microseconds), cpu_intensive,\n"
	"                    cm_wakeup, repatriated, mayday, rescued\n"
	"  -c, --count N     stop after N samples\n"
	"  -h, --help        this text\n"
	"\n"
	"Exit status: 0 success, 1 the process refused the request or went away,\n"
	"2 usage error, 3 the process could not be reached.\n";

struct wq_stats {
	std::string name;
	bool unbound = false;
	bool mem_reclaim = false;
	uint64_t stats[PWQ_NR_STATS] = {}; // by enum pool_workqueue_stats
	uint64_t get(int stat) const { return stats[stat]; }
};

// "unbound=0 mem_reclaim=1 started=5 ... name=<rest of line>"; unknown keys
// are skipped so newer servers stay readable.
bool parse_stats_line(const std::string &line, wq_stats &out)
{
	std::size_t pos = 0;
	bool have_name = false;
	while (pos < line.size()) {
		std::size_t sp = line.find(' ', pos);
		std::string tok = line.substr(pos, sp == std::string::npos ? std::string::npos : sp - pos);
		if (tok.rfind("name=", 0) == 0) {
			out.name = cmwq_tools::unescape_name(line.substr(pos + 5));
			have_name = true;
			break;
		}
		auto eq = tok.find('=');
		if (eq != std::string::npos) {
			std::string key = tok.substr(0, eq);
			uint64_t v = std::strtoull(tok.c_str() + eq + 1, nullptr, 10);
			if (key == "unbound")
				out.unbound = v != 0;
			else if (key == "mem_reclaim")
				out.mem_reclaim = v != 0;
			else
				for (int st = 0; st < PWQ_NR_STATS; st++)
					if (key == pwq_stat_desc(st)->key)
						out.stats[st] = v;
		}
		if (sp == std::string::npos)
			break;
		pos = sp + 1;
	}
	return have_name;
}

using cmwq_tools::json_string;

void print_table(const std::vector<wq_stats> &wqs)
{
	std::printf("\n%-24s %8s %5s %8s %7s %7s %7s %7s\n", "", "total", "infl", "CPUtime", "CPUitsv",
		    "CMW/RPR", "mayday", "rescued");
	for (const auto &w : wqs) {
		std::string name = w.name.size() > 24 ? w.name.substr(w.name.size() - 24) : w.name;
		uint64_t started = w.get(PWQ_STAT_STARTED), completed = w.get(PWQ_STAT_COMPLETED);
		uint64_t infl = started > completed ? started - completed : 0;
		std::string itsv = w.unbound ? "-" : std::to_string(w.get(PWQ_STAT_CPU_INTENSIVE));
		uint64_t cmw = w.get(w.unbound ? PWQ_STAT_REPATRIATED : PWQ_STAT_CM_WAKEUP);
		std::string mayday = w.mem_reclaim ? std::to_string(w.get(PWQ_STAT_MAYDAY)) : "-";
		std::string rescued = w.mem_reclaim ? std::to_string(w.get(PWQ_STAT_RESCUED)) : "-";
		std::printf("%-24s %8llu %5llu %8.1f %7s %7llu %7s %7s\n", name.c_str(),
			    static_cast<unsigned long long>(started),
			    static_cast<unsigned long long>(infl), static_cast<double>(w.get(PWQ_STAT_CPU_TIME)) / 1e6,
			    itsv.c_str(), static_cast<unsigned long long>(cmw), mayday.c_str(),
			    rescued.c_str());
	}
}

void print_json(const std::vector<wq_stats> &wqs, double timestamp)
{
	for (const auto &w : wqs) {
		std::printf("{\"timestamp\": %.6f, \"name\": %s, \"unbound\": %s, \"mem_reclaim\": %s", timestamp,
			    json_string(w.name).c_str(), w.unbound ? "true" : "false", w.mem_reclaim ? "true" : "false");
		for (int st = 0; st < PWQ_NR_STATS; st++)
			std::printf(", \"%s\": %llu", pwq_stat_desc(st)->key, static_cast<unsigned long long>(w.get(st)));
		std::printf("}\n");
	}
}


} // namespace

int main(int argc, char **argv)
{
	double interval = 1.0;
	bool json = false;
	long long count = -1;
	std::vector<std::string> pos;
	std::string interval_s, count_s;
	CLI::App app{"wq_monitor"};
	cmwq_tools::add_help(app, usage);
	app.add_flag("-j,--json", json);
	app.add_option("-i,--interval", interval_s);
	app.add_option("-c,--count", count_s);
	app.add_option("target", pos); // PID|SOCKET, then the regexes
	cmwq_tools::parse_or_exit(app, argc, argv, "wq_monitor", usage);
	{
		std::string v = interval_s;
		if (app.count("--interval")) {
			char *end = nullptr;
			interval = std::strtod(v.c_str(), &end);
			if (v.empty() || *end || !std::isfinite(interval) || interval < 0 ||
			    interval > 86400) {
				std::fprintf(stderr, "wq_monitor: --interval: expected seconds in "
						     "[0, 86400], got '%s'\n",
					     v.c_str());
				return 2;
			}
		}
		v = count_s;
		if (app.count("--count")) {
			char *end = nullptr;
			count = std::strtoll(v.c_str(), &end, 10);
			if (v.empty() || *end || count < 1) {
				std::fprintf(stderr, "wq_monitor: --count: expected a positive "
						     "integer, got '%s'\n",
					     v.c_str());
				return 2;
			}
		}
	}
	if (pos.empty()) {
		std::fprintf(stderr, "wq_monitor: missing PID\n\n%s", usage);
		return 2;
	}
	std::vector<std::regex> filters;
	for (std::size_t i = 1; i < pos.size(); i++) {
		try {
			filters.emplace_back(pos[i], std::regex::ECMAScript);
		} catch (const std::regex_error &e) {
			std::fprintf(stderr, "wq_monitor: bad regex '%s': %s\n", pos[i].c_str(), e.what());
			return 2;
		}
	}
	if (interval == 0)
		count = 1;

	std::string path = ctl_client::find_socket(pos[0]);
	if (path.empty()) {
		if (!ctl_client::is_number(pos[0])) {
			std::fprintf(stderr, "wq_monitor: '%s' is neither a pid nor a socket path\n",
				     pos[0].c_str());
			return 2;
		}
		std::fprintf(stderr, "wq_monitor: process %s has no control socket here (see "
				     "wqctl --help)\n",
			     pos[0].c_str());
		return 3;
	}
	ctl_client::connection conn;
	std::string err;
	if (!conn.open(path, err)) {
		std::fprintf(stderr, "wq_monitor: cannot connect: %s\n", err.c_str());
		return 3;
	}

	timespec next{};
	clock_gettime(CLOCK_MONOTONIC, &next);
	for (long long n = 0; count < 0 || n < count; n++) {
		if (n > 0) {
			double whole = std::floor(interval);
			next.tv_sec += static_cast<time_t>(whole);
			next.tv_nsec += static_cast<long>((interval - whole) * 1e9);
			if (next.tv_nsec >= 1000000000L) {
				next.tv_sec++;
				next.tv_nsec -= 1000000000L;
			}
			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, nullptr) == EINTR) {
			}
		}
		ctl_client::reply r;
		if (!conn.request("stats", r, 30000, err)) {
			std::fprintf(stderr, "wq_monitor: %s: %s\n", path.c_str(), err.c_str());
			return 1;
		}
		if (!r.ok()) {
			std::fprintf(stderr, "wq_monitor: %s\n", r.error_text().c_str());
			return 1;
		}
		timespec wall{};
		clock_gettime(CLOCK_REALTIME, &wall);
		double ts = static_cast<double>(wall.tv_sec) + static_cast<double>(wall.tv_nsec) / 1e9;
		std::vector<wq_stats> wqs;
		for (const auto &line : r.data) {
			wq_stats w;
			if (!parse_stats_line(line, w))
				continue;
			bool keep = filters.empty();
			for (const auto &re : filters)
				if (!keep && std::regex_search(w.name, re))
					keep = true;
			if (keep)
				wqs.push_back(std::move(w));
		}
		if (json)
			print_json(wqs, ts);
		else
			print_table(wqs);
		if (std::fflush(stdout) != 0)
			return 1;
	}
	return 0;
}
