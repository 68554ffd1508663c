// wqctl - read and change the workqueues of a running cmwq process through
// its control endpoint (docs/control.md).
//
// A thin client: each command is one request line; the server does the
// validation and writes the error messages, so wqctl and the library cannot
// disagree about what a value means.
#include "cli.hpp"
#include "ctl_client.hpp"

#include <cmwq/control.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

constexpr int exit_server_error = 1;
constexpr int exit_usage = 2;
constexpr int exit_unreachable = 3;

const char usage[] =
	"usage: wqctl [--timeout SECONDS] [PID|SOCKET COMMAND [ARGS...]]\n"
	"\n"
	"Without a command, lists the cmwq processes whose control endpoint this user\n"
	"can reach: pid, process name and socket path.\n"
	"\n"
	"Commands (WQ is a workqueue created with WQ_SYSFS; '-' names the global\n"
	"attributes cpumask, cpumask_requested and cpumask_isolated):\n"
	"  ls                       list the WQ_SYSFS workqueues\n"
	"  get WQ ATTR              read per_cpu, max_active, and for unbound workqueues\n"
	"                           cpumask, nice, affinity_scope, affinity_strict\n"
	"  set WQ ATTR VALUE        write an attribute (as the kernel's sysfs file)\n"
	"  param NAME [VALUE]       read or write a parameter (workqueue.* or cmwq.*)\n"
	"  params                   list every parameter as name=value\n"
	"  dump                     busy workqueues and worker pools\n"
	"  metrics                  every counter as OpenMetrics text\n"
	"  stats                    per-workqueue counters, one line each\n"
	"\n"
	"The endpoint is started in the target process by cmwq_control_start() or the\n"
	"parameter cmwq.control=1 (e.g. CMWQ_PARAMS=cmwq.control=1). Its socket is\n"
	"$XDG_RUNTIME_DIR/cmwq/PID.sock, or /tmp/cmwq-UID/PID.sock without\n"
	"XDG_RUNTIME_DIR; a SOCKET argument (containing '/') names one directly.\n"
	"\n"
	"Exit status: 0 success, 1 the process refused the request (its message is\n"
	"printed on stderr), 2 usage error, 3 the process could not be reached.\n";

struct command {
	const char *name;
	int min_args, max_args; // -1: any number (the value, joined with spaces)
	int names;              // leading arguments that are names (no spaces)
};

constexpr command commands[] = {
	{"ls", 0, 0, 0},     {"get", 2, 2, 2},  {"set", 3, -1, 2},     {"param", 1, -1, 1},
	{"params", 0, 0, 0}, {"dump", 0, 0, 0}, {"metrics", 0, 0, 0}, {"stats", 0, 0, 0},
};

int list_processes()
{
	cmwq_control_remove_stale(); // sockets of dead processes of this user
	std::printf("%-8s %-16s %s\n", "PID", "COMM", "SOCKET");
	ctl_client::for_each_socket([](const std::string &pid, const std::string &path) {
		int fd = ctl_client::connect_socket(path);
		if (fd < 0)
			return; // stale or not ours to reach: left alone
		::close(fd);
		std::printf("%-8s %-16s %s\n", pid.c_str(), ctl_client::read_comm(pid).c_str(), path.c_str());
	});
	return 0;
}

} // namespace

int main(int argc, char **argv)
{
	int timeout_ms = 30000;
	std::string timeout;
	// Options come before the target; everything from the target on is the
	// request (values may start with '-', e.g. "set WQ nice -5").
	CLI::App app{"wqctl"};
	cmwq_tools::add_help(app, usage);
	app.add_option("--timeout", timeout);
	app.prefix_command();
	cmwq_tools::parse_or_exit(app, argc, argv, "wqctl", usage);
	std::vector<std::string> args = app.remaining();
	if (!args.empty() && args[0] == "--") {
		args.erase(args.begin());
	} else if (!args.empty() && args[0].size() > 1 && args[0][0] == '-') {
		// The request starts at the target, a pid or a socket path: this
		// is an option wqctl does not have.
		std::fprintf(stderr, "wqctl: unknown option '%s'\n\n%s", args[0].c_str(), usage);
		return exit_usage;
	}
	if (!timeout.empty() || app.count("--timeout")) {
		char *end = nullptr;
		double s = std::strtod(timeout.c_str(), &end);
		if (timeout.empty() || *end || !(s > 0) || s > 86400) {
			std::fprintf(stderr, "wqctl: --timeout: expected seconds in (0, 86400], got '%s'\n",
				     timeout.c_str());
			return exit_usage;
		}
		timeout_ms = static_cast<int>(s * 1000) > 0 ? static_cast<int>(s * 1000) : 1;
	}
	if (args.empty())
		return list_processes();
	if (args.size() == 1) {
		std::fprintf(stderr, "wqctl: missing command after '%s'\n\n%s", args[0].c_str(), usage);
		return exit_usage;
	}

	const std::string &target = args[0];
	const std::string &verb = args[1];
	const command *cmd = nullptr;
	for (const auto &c : commands)
		if (verb == c.name)
			cmd = &c;
	int nargs = static_cast<int>(args.size()) - 2;
	if (!cmd) {
		std::fprintf(stderr, "wqctl: unknown command '%s'\n\n%s", verb.c_str(), usage);
		return exit_usage;
	}
	if (nargs < cmd->min_args || (cmd->max_args >= 0 && nargs > cmd->max_args)) {
		std::fprintf(stderr, "wqctl: wrong number of arguments for '%s'\n\n%s", verb.c_str(),
			     usage);
		return exit_usage;
	}
	std::string line = verb;
	for (std::size_t i = 2; i < args.size(); i++) {
		bool is_name = static_cast<int>(i) - 2 < cmd->names;
		if (args[i].empty() || args[i].find_first_of("\n\r") != std::string::npos ||
		    (is_name && args[i].find_first_of(" \t") != std::string::npos)) {
			std::fprintf(stderr, "wqctl: argument '%s': names may not be empty or hold "
					     "spaces, values may not hold line breaks\n",
				     args[i].c_str());
			return exit_usage;
		}
		line += ' ';
		line += args[i];
	}

	std::string path = ctl_client::find_socket(target);
	if (path.empty()) {
		if (!ctl_client::is_number(target) && target.find('/') == std::string::npos) {
			std::fprintf(stderr, "wqctl: '%s' is neither a pid nor a socket path\n",
				     target.c_str());
			return exit_usage;
		}
		std::fprintf(stderr,
			     "wqctl: process %s has no control socket here (is the endpoint "
			     "started, and XDG_RUNTIME_DIR the same as the process's?)\n",
			     target.c_str());
		return exit_unreachable;
	}
	ctl_client::connection conn;
	std::string err;
	if (!conn.open(path, err)) {
		std::fprintf(stderr, "wqctl: cannot connect: %s\n", err.c_str());
		return exit_unreachable;
	}
	ctl_client::reply r;
	if (!conn.request(line, r, timeout_ms, err)) {
		std::fprintf(stderr, "wqctl: %s: %s\n", path.c_str(), err.c_str());
		return exit_unreachable;
	}
	for (const auto &d : r.data)
		std::printf("%s\n", d.c_str());
	if (!r.ok()) {
		std::fprintf(stderr, "wqctl: %s\n", r.error_text().c_str());
		return exit_server_error;
	}
	if (std::fflush(stdout) != 0)
		return exit_server_error;
	return 0;
}
