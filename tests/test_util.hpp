// test_util.hpp - helpers shared by the test programs.
#pragma once

#include <dirent.h>

#include <chrono>
#include <thread>

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
