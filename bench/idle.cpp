// bench/idle.cpp - wq_bench --idle-wakeups SECONDS: what an executor costs
// once it has nothing to do. Each executor (cmwq's default unbound
// workqueue, then every peer at its default size) runs in a process of its
// own: a burst of 2000 items, a second to settle, then SECONDS of idleness
// in which the context switches of every thread but the main one are
// counted (/proc/self/task/*/status: a thread that wakes and sleeps again
// switches once). Reported per minute, as powertop counts wakeups.
#include <cmwq/linux/workqueue.h>

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>

#include "cmwq_executor.hpp"
#include "executor.hpp"
#include "wq_bench.hpp"

namespace wqb {
namespace {

constexpr int BURST = 2000;

// Context switches of each thread but the calling (main) one, by tid.
std::map<long, long> thread_switches()
{
	std::map<long, long> out;
	long self = static_cast<long>(getpid());
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return out;
	while (dirent *e = readdir(d)) {
		long tid = std::atol(e->d_name);
		if (tid <= 0 || tid == self)
			continue;
		std::string path = std::string("/proc/self/task/") + e->d_name + "/status";
		long v = std::atol(read_first(path.c_str(), "voluntary_ctxt_switches").c_str());
		long n = std::atol(read_first(path.c_str(), "nonvoluntary_ctxt_switches").c_str());
		out[tid] = v + n;
	}
	closedir(d);
	return out;
}

std::atomic<int> ran{0};
void count_fn(bench_item *) { ran.fetch_add(1, std::memory_order_relaxed); }

// In the child: one executor, one line "threads wakeups".
int measure_one(const std::string &name, double secs)
{
	std::unique_ptr<executor> ex;
	workqueue_struct *wq = nullptr;
	if (name == "cmwq") {
		wq = alloc_workqueue("idle_bench", WQ_UNBOUND, 0);
		if (!wq)
			return 1;
		ex = std::make_unique<cmwq_executor>(wq);
	} else {
		int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
		for (auto &p : available_peers())
			if (name == p.name && !p.limit) {
				peer_config c;
				c.pool_threads = p.default_threads ? p.default_threads(cpus) : cpus;
				for (int i = 0; i < cpus; i++)
					c.usable.push_back(i);
				c.producer_cpus = {0};
				ex = p.make(c);
			}
		if (!ex)
			return 1;
	}
	std::vector<bench_item> items(BURST);
	for (auto &it : items) {
		it.fn = count_fn;
		ex->prepare(&it);
	}
	for (auto &it : items)
		while (!ex->post(&it, 0))
			std::this_thread::yield();
	while (ran.load() < BURST)
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	std::this_thread::sleep_for(std::chrono::seconds(1));
	auto before = thread_switches();
	std::this_thread::sleep_for(std::chrono::duration<double>(secs));
	auto after = thread_switches();
	long wakeups = 0;
	for (auto &[tid, n] : after) {
		auto b = before.find(tid);
		wakeups += n - (b == before.end() ? 0 : b->second);
	}
	std::printf("%zu %ld\n", after.size(), wakeups);
	std::fflush(stdout);
	_exit(0); // the executors' threads are not joined: the process just ends
}

} // namespace

int idle_child(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	return measure_one(argv[2], std::atof(argv[3]));
}

int run_idle_wakeups(const options &o, char **argv)
{
	std::vector<std::pair<std::string, std::string>> execs{{"cmwq", "cmwq (default unbound workqueue)"}};
	int cpus = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
	for (auto &p : available_peers()) {
		if (p.limit || (!o.peers.empty() && std::find(o.peers.begin(), o.peers.end(), p.name) == o.peers.end()))
			continue;
		int n = p.default_threads ? p.default_threads(cpus) : cpus;
		execs.emplace_back(p.name, std::string(p.label) + " (" + std::to_string(n) + " threads)");
	}
	std::printf("idle wakeups: a burst of %d items, 1 s to settle, then %.0f s idle; context switches of "
		    "every thread but main, per minute (lower is better)\n",
		    BURST, o.idle_secs);
	std::printf("%-44s %8s %10s %12s\n", "executor", "threads", "switches", "per minute");
	int rc = 0;
	for (auto &[name, label] : execs) {
		int fds[2];
		if (pipe(fds))
			return 1;
		pid_t pid = fork();
		if (pid == 0) {
			dup2(fds[1], 1);
			close(fds[0]);
			close(fds[1]);
			std::string secs = std::to_string(o.idle_secs);
			execl("/proc/self/exe", argv[0], "--idle-one", name.c_str(), secs.c_str(), static_cast<char *>(nullptr));
			_exit(127);
		}
		close(fds[1]);
		char buf[128] = {};
		ssize_t n = read(fds[0], buf, sizeof(buf) - 1);
		close(fds[0]);
		int st = 0;
		waitpid(pid, &st, 0);
		long threads = 0, wakeups = 0;
		if (n <= 0 || std::sscanf(buf, "%ld %ld", &threads, &wakeups) != 2 || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 0) {
			std::printf("%-44s   failed\n", label.c_str());
			rc = 1;
			continue;
		}
		std::printf("%-44s %8ld %10ld %12.1f\n", label.c_str(), threads, wakeups,
			    static_cast<double>(wakeups) * 60.0 / o.idle_secs);
	}
	std::printf("  command: wq_bench --idle-wakeups %.0f\n", o.idle_secs);
	return rc;
}

} // namespace wqb
