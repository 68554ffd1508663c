// A periodic job with a clean stop: a delayed work item re-arms itself every
// 10 ms; disable_sync() cancels a pending run, waits for a running one and
// makes every later queue call (the re-arm included) refuse, so nothing runs
// after it returns. Exits 0 when the job ran and stopped.
//
//   c++ -std=c++20 cxx_periodic.cpp $(pkg-config --cflags --libs cmwq)
#include <cmwq/workqueue.hpp>

#include <atomic>
#include <cstdio>
#include <thread>

using namespace std::chrono_literals;

int main()
{
	cmwq::workqueue wq("periodic", WQ_UNBOUND);
	std::atomic<int> ticks{0};
	cmwq::delayed_work tick("flush_stats", [&] {
		ticks++;
		(void)wq.queue(tick, 10ms); // false once disabled
	});
	(void)wq.queue(tick, 10ms);
	std::this_thread::sleep_for(100ms);
	for (int i = 0; i < 500 && ticks.load() == 0; i++) // a loaded machine: up to 5 s for the first
		std::this_thread::sleep_for(10ms);
	tick.disable_sync();
	int at_stop = ticks.load();
	std::this_thread::sleep_for(50ms);
	int after = ticks.load() - at_stop;
	std::printf("cxx_periodic: %d ticks, %d after the stop\n", at_stop, after);
	return at_stop > 0 && after == 0 ? 0 : 1;
}
