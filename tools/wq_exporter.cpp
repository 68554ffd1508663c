// wq_exporter - an HTTP endpoint for Prometheus: /metrics serves the
// counters of every local cmwq process whose control endpoint this user can
// reach, each sample labelled with the process's pid and name.
//
// OpenMetrics 1.0.0 text when the scraper's Accept header asks for it,
// otherwise the Prometheus text format 0.0.4 (counter families named by
// their _total samples, no UNIT lines, no "# EOF"). Processes are asked one
// after another at each scrape; one that does not answer within --timeout is
// left out of that scrape (counted in cmwq_exporter_errors_total).
#include <cmwq/control.h>

#include <httplib.h>

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli.hpp"
#include "ctl_client.hpp"

namespace {

const char usage[] = "usage: wq_exporter [--listen HOST:PORT] [--timeout SECONDS]\n";
const char help_text[] = R"help(
Serves GET /metrics over HTTP: the workqueue counters of every local cmwq
process with a control endpoint this user can reach (root: every user's),
labelled pid and process. The processes start their endpoint with
cmwq_control_start() or CMWQ_PARAMS=cmwq.control=1 (see wqctl(1)).

  --listen HOST:PORT  address to listen on (default 127.0.0.1:9797; port 0
                      picks a free one); the address is printed on stdout
  --timeout SECONDS   how long to wait for each process (default 2)
  -h, --help          this text

The reply is OpenMetrics text (application/openmetrics-text; version=1.0.0)
when the request's Accept header names it, else the Prometheus text format
0.0.4 (text/plain; version=0.0.4). Exit status: 0 after SIGTERM/SIGINT,
1 if it cannot listen, 2 usage error.
)help";

struct family {
	std::string type, help, unit;
	std::vector<std::string> samples; // with the pid/process labels added
};

// Label values as OpenMetrics writes them: \\, \" and \n escaped, bytes
// that are not UTF-8 replaced by U+FFFD.
std::string label_value(const std::string &s)
{
	std::string u = cmwq_tools::json_string(s); // valid UTF-8, JSON-escaped
	std::string out;
	// Undo JSON's escapes except the three OpenMetrics keeps.
	nlohmann::json j = nlohmann::json::parse(u);
	for (char c : j.get<std::string>()) {
		if (c == '\\')
			out += "\\\\";
		else if (c == '"')
			out += "\\\"";
		else if (c == '\n')
			out += "\\n";
		else
			out += c;
	}
	return out;
}

// Adds one process's OpenMetrics text to the families, in first-seen order.
void merge(const std::vector<std::string> &lines, const std::string &labels, std::vector<std::string> &order,
	   std::map<std::string, family> &fams)
{
	std::string current;
	for (const auto &l : lines) {
		if (l == "# EOF" || l.empty())
			continue;
		if (l.rfind("# ", 0) == 0) {
			std::string kind = l.substr(2, 4);
			std::size_t sp = l.find(' ', 7);
			std::string name = l.substr(7, sp == std::string::npos ? std::string::npos : sp - 7);
			std::string rest = sp == std::string::npos ? "" : l.substr(sp + 1);
			if (!fams.count(name))
				order.push_back(name);
			family &f = fams[name];
			if (kind == "TYPE")
				f.type = rest;
			else if (kind == "HELP")
				f.help = rest;
			else if (kind == "UNIT")
				f.unit = rest;
			current = name;
			continue;
		}
		if (current.empty())
			continue;
		std::size_t brace = l.find('{'), space = l.find(' ');
		std::string s;
		if (brace != std::string::npos && brace < space)
			s = l.substr(0, brace + 1) + labels + "," + l.substr(brace + 1);
		else if (space != std::string::npos)
			s = l.substr(0, space) + "{" + labels + "}" + l.substr(space);
		else
			continue;
		fams[current].samples.push_back(s);
	}
}

struct exporter {
	int timeout_ms = 2000;
	std::atomic<unsigned long long> errors{0};
	std::mutex scrape_lock; // one scrape at a time: the endpoints answer one by one anyway

	std::string scrape(bool openmetrics)
	{
		std::lock_guard lk(scrape_lock);
		std::vector<std::string> order;
		std::map<std::string, family> fams;
		int processes = 0;
		ctl_client::for_each_socket([&](const std::string &pid, const std::string &path) {
			ctl_client::connection conn;
			ctl_client::reply r;
			std::string err;
			if (!conn.open(path, err))
				return; // stale, or not ours to reach
			if (!conn.request("metrics", r, timeout_ms, err) || !r.ok()) {
				errors++;
				return;
			}
			processes++;
			std::string labels =
				"pid=\"" + pid + "\",process=\"" + label_value(ctl_client::read_comm(pid)) + "\"";
			merge(r.data, labels, order, fams);
		});
		std::string out;
		for (const auto &n : order) {
			const family &f = fams[n];
			bool counter = f.type == "counter";
			std::string shown = (!openmetrics && counter) ? n + "_total" : n;
			if (!f.help.empty())
				out += "# HELP " + shown + " " + f.help + "\n";
			out += "# TYPE " + shown + " " + (f.type.empty() ? "unknown" : f.type) + "\n";
			if (openmetrics && !f.unit.empty())
				out += "# UNIT " + n + " " + f.unit + "\n";
			for (const auto &s : f.samples)
				out += s + "\n";
		}
		const char *g = "cmwq_exporter_processes";
		out += std::string("# HELP ") + g + " processes whose counters this scrape holds\n";
		out += std::string("# TYPE ") + g + " gauge\n";
		out += std::string(g) + " " + std::to_string(processes) + "\n";
		std::string c = openmetrics ? "cmwq_exporter_errors" : "cmwq_exporter_errors_total";
		out += "# HELP " + c + " processes that did not answer a scrape in time\n";
		out += "# TYPE " + c + " counter\n";
		out += "cmwq_exporter_errors_total " + std::to_string(errors.load()) + "\n";
		if (openmetrics)
			out += "# EOF\n";
		return out;
	}
};

} // namespace

int main(int argc, char **argv)
{
	std::string listen = "127.0.0.1:9797";
	std::string timeout;
	CLI::App app{"wq_exporter"};
	cmwq_tools::add_help(app, std::string(usage) + help_text);
	app.add_option("--listen", listen);
	app.add_option("--timeout", timeout);
	cmwq_tools::parse_or_exit(app, argc, argv, "wq_exporter", usage);
	exporter ex;
	if (app.count("--timeout")) {
		char *end = nullptr;
		double s = std::strtod(timeout.c_str(), &end);
		if (timeout.empty() || *end || !(s > 0) || s > 3600) {
			std::fprintf(stderr, "wq_exporter: --timeout: expected seconds in (0, 3600], got '%s'\n",
				     timeout.c_str());
			return cmwq_tools::exit_usage;
		}
		ex.timeout_ms = static_cast<int>(s * 1000) > 0 ? static_cast<int>(s * 1000) : 1;
	}
	std::size_t colon = listen.rfind(':');
	int port = -1;
	if (colon != std::string::npos && colon + 1 < listen.size()) {
		char *end = nullptr;
		long p = std::strtol(listen.c_str() + colon + 1, &end, 10);
		if (!*end && p >= 0 && p <= 65535)
			port = static_cast<int>(p);
	}
	std::string host = colon == std::string::npos ? "" : listen.substr(0, colon);
	if (port < 0 || host.empty()) {
		std::fprintf(stderr, "wq_exporter: --listen: expected HOST:PORT (port 0-65535), got '%s'\n",
			     listen.c_str());
		return cmwq_tools::exit_usage;
	}
	if (host.size() > 2 && host.front() == '[' && host.back() == ']')
		host = host.substr(1, host.size() - 2); // [::1]:9797

	// SIGTERM and SIGINT go to one thread that stops the server (blocked
	// before any thread starts, so the server's threads never take them).
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	pthread_sigmask(SIG_BLOCK, &stop, nullptr);
	httplib::Server svr;
	svr.Get("/metrics", [&](const httplib::Request &req, httplib::Response &res) {
		bool om = req.get_header_value("Accept").find("application/openmetrics-text") != std::string::npos;
		res.set_content(ex.scrape(om), om ? "application/openmetrics-text; version=1.0.0; charset=utf-8"
						  : "text/plain; version=0.0.4; charset=utf-8");
	});
	svr.Get("/", [](const httplib::Request &, httplib::Response &res) {
		res.set_content("wq_exporter: the metrics are at /metrics\n", "text/plain; charset=utf-8");
	});
	int bound = port == 0 ? svr.bind_to_any_port(host) : (svr.bind_to_port(host, port) ? port : -1);
	if (bound < 0) {
		std::fprintf(stderr, "wq_exporter: cannot listen on %s\n", listen.c_str());
		return 1;
	}
	std::printf("wq_exporter: listening on %s:%d\n", host.c_str(), bound);
	std::fflush(stdout);
	std::thread stopper([&] {
		int sig = 0;
		sigwait(&stop, &sig);
		svr.stop();
	});
	svr.listen_after_bind();
	if (stopper.joinable()) {
		// listen_after_bind returned by itself (an error): wake the waiter.
		pthread_kill(stopper.native_handle(), SIGTERM);
		stopper.join();
	}
	return 0;
}
