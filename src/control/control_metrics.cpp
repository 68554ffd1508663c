// control_metrics.cpp - the counters as text for the control protocol:
// OpenMetrics (the "metrics" verb, cmwq_metrics_text, wq_exporter) and the
// "stats" lines, from an engine snapshot.
#include "control_proto.h"

#include <cmwq/linux/workqueue.h>
#include <cmwq/topology.hpp>

#include <algorithm>
#include <cstdio>

namespace cmwq::control {

namespace {

// OpenMetrics label value: backslash, double quote and newline escaped.
// The length of the valid UTF-8 sequence at s[i] (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF), or 0.
std::size_t utf8_len(std::string_view s, std::size_t i)
{
	auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
	unsigned char c = b(i);
	if (c < 0x80)
		return 1;
	std::size_t n = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
	if (!n || i + n > s.size())
		return 0;
	for (std::size_t k = 1; k < n; k++)
		if ((b(i + k) & 0xC0) != 0x80)
			return 0;
	unsigned char c1 = b(i + 1);
	if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 > 0x9F) || (c == 0xF0 && c1 < 0x90) ||
	    (c == 0xF4 && c1 > 0x8F))
		return 0;
	return n;
}

// A label value: valid UTF-8 always (each byte that does not start a valid
// sequence becomes U+FFFD), with \, " and newline escaped as OpenMetrics
// requires.
std::string label_value(std::string_view s)
{
	std::string out;
	for (std::size_t i = 0; i < s.size();) {
		std::size_t n = utf8_len(s, i);
		if (!n) {
			out += "\xEF\xBF\xBD";
			i++;
			continue;
		}
		char c = s[i];
		if (c == '\\')
			out += "\\\\";
		else if (c == '"')
			out += "\\\"";
		else if (c == '\n')
			out += "\\n";
		else
			out.append(s.substr(i, n));
		i += n;
	}
	return out;
}

// Seconds with microsecond precision, exactly, from a microsecond count.
std::string usec_to_seconds(uint64_t us)
{
	char buf[48];
	std::snprintf(buf, sizeof(buf), "%llu.%06llu", static_cast<unsigned long long>(us / 1000000),
		      static_cast<unsigned long long>(us % 1000000));
	return buf;
}

} // namespace

std::string render_metrics(const system_info &si)
{
	std::string out;
	// Label sets must be unique within a family: repeated workqueue names
	// get a "wq_instance" label (not "instance", which Prometheus sets to
	// the scrape target and would rename).
	std::vector<std::string> wq_labels;
	{
		std::vector<std::string> seen;
		for (const auto &wq : si.workqueues) {
			int n = static_cast<int>(std::count(seen.begin(), seen.end(), wq.name));
			seen.push_back(wq.name);
			std::string l = "workqueue=\"" + label_value(wq.name) + "\"";
			if (n > 0)
				l += ",wq_instance=\"" + std::to_string(n + 1) + "\"";
			wq_labels.push_back(l);
		}
	}
	for (int stat = 0; stat < PWQ_NR_STATS; stat++) {
		// The family is named after the counter's key; CPU time is counted
		// in microseconds and exported in seconds.
		const auto *d = pwq_stat_desc(stat);
		bool usec = d->unit && std::string_view(d->unit) == "microseconds";
		std::string name = std::string("cmwq_workqueue_") + d->key + (usec ? "_seconds" : "");
		out += "# TYPE " + name + " counter\n";
		if (usec)
			out += "# UNIT " + name + " seconds\n";
		out += "# HELP " + name + " " + d->help + "\n";
		for (std::size_t i = 0; i < si.workqueues.size(); i++) {
			uint64_t v = si.workqueues[i].stats[stat];
			out += name + "_total{" + wq_labels[i] + "} " + (usec ? usec_to_seconds(v) : std::to_string(v)) +
			       "\n";
		}
	}
	struct wq_gauge {
		const char *name, *help;
		int workqueue_info::*field;
	};
	static constexpr wq_gauge wq_gauges[] = {
		{"cmwq_workqueue_active", "work items counted active", &workqueue_info::nr_active},
		{"cmwq_workqueue_inactive", "work items held back by max_active",
		 &workqueue_info::nr_inactive},
		{"cmwq_workqueue_max_active", "max_active as requested",
		 &workqueue_info::max_active},
	};
	for (const auto &g : wq_gauges) {
		out += std::string("# TYPE ") + g.name + " gauge\n";
		out += std::string("# HELP ") + g.name + " " + g.help + "\n";
		for (std::size_t i = 0; i < si.workqueues.size(); i++)
			out += std::string(g.name) + "{" + wq_labels[i] + "} " +
			       std::to_string(si.workqueues[i].*g.field) + "\n";
	}
	struct pool_gauge {
		const char *name, *help;
		int pool_info::*field;
	};
	static constexpr pool_gauge pool_gauges[] = {
		{"cmwq_pool_workers", "worker threads of the pool", &pool_info::nr_workers},
		{"cmwq_pool_idle", "idle workers", &pool_info::nr_idle},
		{"cmwq_pool_running", "workers counted running by concurrency management",
		 &pool_info::nr_running},
		{"cmwq_pool_pending", "work items on the worklist", &pool_info::nr_pending},
	};
	for (const auto &g : pool_gauges) {
		out += std::string("# TYPE ") + g.name + " gauge\n";
		out += std::string("# HELP ") + g.name + " " + g.help + "\n";
		for (const auto &p : si.pools)
			out += std::string(g.name) + "{pool=\"" + std::to_string(p.id) +
			       "\",cpus=\"" + cmwq::format_cpulist(p.cpus) + "\",nice=\"" +
			       std::to_string(p.nice) + "\"} " + std::to_string(p.*g.field) + "\n";
	}
	out += "# EOF\n";
	return out;
}

std::string render_stats(const system_info &si)
{
	std::string out;
	for (const auto &wq : si.workqueues) {
		out += "unbound=";
		out += wq.unbound ? '1' : '0';
		out += " mem_reclaim=";
		out += (wq.flags & WQ_MEM_RECLAIM) ? '1' : '0';
		for (int s = 0; s < PWQ_NR_STATS; s++) {
			out += ' ';
			out += pwq_stat_desc(s)->key;
			out += '=';
			out += std::to_string(wq.stats[s]);
		}
		out += " name=";
		append_escaped(out, wq.name);
		out += '\n';
	}
	return out;
}

} // namespace cmwq::control
