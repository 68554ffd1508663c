// cpus.cpp - what the process may use: the CPUs of its affinity mask, the
// topology read from /sys (or CMWQ_SYSFS_ROOT) restricted to them, and the
// CPU quota of its cgroups. Read at start and when cache_shard_size or the
// quota is set; apart from sys.cpp's mechanisms (clocks, wakes, messages).
#include "engine/engine.h"

#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace cmwq::detail {

namespace {

// The first line of path, or "" when it cannot be read (through the
// library's spare descriptor: the quota is read again while the program
// runs).
std::string read_line(const std::string &path)
{
	std::string out = read_small_file(path);
	if (size_t nl = out.find('\n'); nl != std::string::npos)
		out.resize(nl);
	while (!out.empty() && out.back() == ' ')
		out.pop_back();
	return out;
}

// ceil(quota / period), or 0 for "max", -1 or anything unreadable.
unsigned quota_cpus(long long quota, long long period)
{
	if (quota <= 0 || period <= 0)
		return 0;
	return static_cast<unsigned>((quota + period - 1) / period);
}

// The least non-zero limit along dir and its parents up to root.
template <class F>
unsigned least_along(std::string dir, const std::string &root, F limit_at)
{
	unsigned best = 0;
	for (;;) {
		unsigned q = limit_at(dir);
		if (q && (!best || q < best))
			best = q;
		if (dir.size() <= root.size())
			return best;
		dir.erase(dir.find_last_of('/'));
	}
}

} // namespace

unsigned read_cpu_quota(const std::string &proc_cgroup, const std::string &root)
{
	std::string text = read_small_file(proc_cgroup);
	unsigned best = 0;
	for (size_t at = 0; at < text.size();) {
		size_t nl = text.find('\n', at);
		if (nl == std::string::npos)
			nl = text.size();
		std::string l = text.substr(at, nl - at);
		at = nl + 1;
		size_t a = l.find(':'), b = a == std::string::npos ? a : l.find(':', a + 1);
		if (b == std::string::npos)
			continue;
		std::string ctrl = l.substr(a + 1, b - a - 1), path = l.substr(b + 1);
		if (path == "/")
			path.clear();
		unsigned q = 0;
		if (l.compare(0, a, "0") == 0 && ctrl.empty()) {
			// cgroup v2: "max 100000" or "<quota> <period>".
			q = least_along(root + path, root, [](const std::string &dir) {
				long long quota = -1, period = 0;
				std::string v = read_line(dir + "/cpu.max");
				if (sscanf(v.c_str(), "%lld %lld", &quota, &period) != 2)
					return 0u;
				return quota_cpus(quota, period);
			});
		} else if (("," + ctrl + ",").find(",cpu,") != std::string::npos) {
			// cgroup v1: the cpu controller's hierarchy, named by its list.
			std::string base = root + "/" + ctrl;
			q = least_along(base + path, base, [](const std::string &dir) {
				return quota_cpus(atoll(read_line(dir + "/cpu.cfs_quota_us").c_str()),
						  atoll(read_line(dir + "/cpu.cfs_period_us").c_str()));
			});
		}
		if (q && (!best || q < best))
			best = q;
	}
	return best;
}

std::vector<int> affinity_cpus()
{
	std::vector<int> out;
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		for (int c = 0; c < CPU_SETSIZE; c++)
			if (CPU_ISSET(c, &set))
				out.push_back(c);
	return out;
}

topology read_topology(unsigned shard)
{
	auto &gl = g();
	const char *root = getenv("CMWQ_SYSFS_ROOT");
	topology t;
	if (root && *root) {
		t = build_topology(root, nullptr, shard);
	} else {
		t = build_topology("/sys", &gl.real_cpus, shard);
	}
	if (t.usable.empty()) {
		// Nothing readable: every CPU we may run on, one pod per scope level.
		topology f = build_topology("/nonexistent", &gl.real_cpus, shard);
		if (!f.usable.empty())
			t = f;
	}
	return t;
}

} // namespace cmwq::detail
