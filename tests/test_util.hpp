// test_util.hpp - helpers shared by the test programs.
#pragma once

#include <dirent.h>

#include <chrono>
#include <string>
#include <thread>

#include <cmwq/introspect.hpp>
#include <cmwq/params.h>
#include <gtest/gtest.h>

// A parameter's value as cmwq_param_get reads it back.
inline std::string param(const char *name)
{
	char buf[64] = {};
	EXPECT_EQ(cmwq_param_get(name, buf, sizeof(buf)), 0) << name;
	return buf;
}

// Restores the block detector's mode and sampling period a test changes
// ("perf" goes back to "auto", which chose it).
struct saved_detector_params {
	std::string detect = param("cmwq.block_detect");
	std::string sample = param("cmwq.blocked_sample_us");
	~saved_detector_params()
	{
		cmwq_param_set("cmwq.block_detect", detect == "perf" ? "auto" : detect.c_str());
		cmwq_param_set("cmwq.blocked_sample_us", sample.c_str());
	}
};

// Poll f every millisecond until it holds or the limit passes; generous
// limits keep tests correct on a loaded machine without timing assertions.
template <class F>
bool wait_until(F f, std::chrono::milliseconds limit = std::chrono::milliseconds(10000))
{
	auto end = std::chrono::steady_clock::now() + limit;
	while (!f()) {
		if (std::chrono::steady_clock::now() > end)
			return false;
		std::this_thread::sleep_for(std::chrono::milliseconds(1));
	}
	return true;
}

// Threads of this process now (the entries of /proc/self/task).
inline int process_threads()
{
	int n = 0;
	if (DIR *d = opendir("/proc/self/task")) {
		while (dirent *e = readdir(d))
			n += e->d_name[0] != '.';
		closedir(d);
	}
	return n;
}

// Workers of the pool a workqueue's first pwq is on (its name as given to
// alloc_workqueue), from the snapshot; -1 when there is none.
inline int pool_workers_of(const std::string &wq_name)
{
	auto si = cmwq::snapshot();
	int pool = -1;
	for (auto &w : si.workqueues)
		if (w.name == wq_name && !w.cpu_pool.empty())
			pool = w.cpu_pool.front();
	for (auto &p : si.pools)
		if (p.id == pool)
			return p.nr_workers;
	return -1;
}
