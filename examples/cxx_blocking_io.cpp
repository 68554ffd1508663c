// Blocking I/O on a per-CPU workqueue: 16 requests each wait up to 50 ms for
// a slow device (poll on a pipe nobody writes). blocking_scope tells the
// pool the worker is about to sleep, so it starts the next request at once:
// the requests wait together instead of two at a time on a 2-CPU machine
// (the block detector finds unannounced sleeps too, later). The requests go
// to the pool of the CPU that queues them; without the hint that pool would
// run them one at a time. Exits 0 when all 16 finished and at least 8 waited
// at once.
//
//   c++ -std=c++20 cxx_blocking_io.cpp $(pkg-config --cflags --libs cmwq)
#include <cmwq/workqueue.hpp>

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

int main()
{
	int fds[2];
	if (pipe(fds) != 0)
		return 1;
	cmwq::workqueue wq("blocking_io", WQ_PERCPU);
	std::atomic<int> in_flight{0}, peak{0};
	auto t0 = std::chrono::steady_clock::now();
	std::vector<cmwq::task<int>> reqs;
	for (int i = 0; i < 16; i++)
		reqs.push_back(cmwq::submit(wq, "device_read", [&, i] {
			int now = ++in_flight;
			int p = peak.load();
			while (now > p && !peak.compare_exchange_weak(p, now)) {
			}
			pollfd pfd{fds[0], POLLIN, 0};
			{
				cmwq::blocking_scope blocking;
				(void)poll(&pfd, 1, 50);
			}
			--in_flight;
			return i;
		}));
	int sum = 0;
	for (auto &r : reqs)
		sum += r.get();
	auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count();
	unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
	std::printf("cxx_blocking_io: 16 requests in %lld ms, up to %d at once on %u CPUs\n",
		    static_cast<long long>(ms), peak.load(), cpus);
	close(fds[0]);
	close(fds[1]);
	return sum == 120 && peak.load() >= 8 ? 0 : 1;
}
