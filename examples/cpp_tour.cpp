// cpp_tour.cpp - the C++ API in one program: RAII workqueues, work items that
// hold a callable, std::chrono delays, fire-and-wait tasks, blocking hints.
//
// The same engine as the kernel-style C API underneath (kernel_style.c does
// the same things in C); the wrappers only add ownership and lambdas.
//
//   c++ -std=c++20 cpp_tour.cpp $(pkg-config --cflags --libs cmwq)
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include <cmwq/workqueue.hpp>

using namespace std::chrono_literals;

int main()
{
	int bad = 0;

	// A workqueue is an owning handle: destroyed (drained first) at scope end.
	cmwq::workqueue wq("cpp_tour", WQ_UNBOUND);

	// A work item owns a callable; queue() says whether it was queued.
	std::atomic<int> hits{0};
	cmwq::work hello([&] { hits.fetch_add(1, std::memory_order_relaxed); });
	if (!wq.queue(hello))
		bad++;
	wq.flush(); // every item queued before the call has run
	if (hits.load() != 1)
		bad++;

	// Delayed work takes any std::chrono duration.
	auto t0 = std::chrono::steady_clock::now();
	std::atomic<bool> fired{false};
	cmwq::delayed_work later([&] { fired.store(true); });
	if (!wq.queue(later, 20ms))
		bad++;
	if (wq.queue(later, 20ms))
		bad++; // already pending: not queued twice
	while (!fired.load())
		std::this_thread::sleep_for(1ms);
	if (std::chrono::steady_clock::now() - t0 < 20ms)
		bad++;

	// cancel() removes a pending instance and says so.
	if (!wq.queue(later, 10s) || !later.cancel() || later.cancel())
		bad++;

	// An ordered workqueue runs one item at a time, in queueing order.
	auto ordered = cmwq::workqueue::ordered("cpp_tour_ordered");
	std::vector<int> order;
	std::vector<cmwq::task<>> tasks;
	for (int i = 0; i < 8; i++)
		tasks.push_back(cmwq::submit(ordered, [&order, i] { order.push_back(i); }));
	for (auto &t : tasks)
		t.get();
	for (int i = 0; i < 8; i++)
		if (order.at(static_cast<size_t>(i)) != i)
			bad++;

	// A task that sleeps says so; a per-CPU pool starts the next item meanwhile.
	cmwq::workqueue percpu("cpp_tour_percpu", WQ_PERCPU);
	auto slow = cmwq::submit(percpu, "cpp_tour_slow", [] {
		cmwq::blocking_scope blocking;
		std::this_thread::sleep_for(10ms);
	});
	auto quick = cmwq::submit(percpu, [&] { return hits.fetch_add(1) + 1; });
	if (quick.get() != 2)
		bad++;
	slow.wait();
	if (!slow.ready() || hits.load() != 2)
		bad++;

	std::printf("cpp_tour: ordered %zu tasks, %d unexpected results\n", order.size(), bad);
	return bad ? 1 : 0;
}
