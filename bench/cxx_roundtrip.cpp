// bench/cxx_roundtrip.cpp - wq_bench --cxx: the C++ task's round trip,
// cmwq::submit(wq, f).get(), against the C API's, queue_work() of one
// work_struct and a futex wait for its completion (what a C user writes with
// a completion), on the same workqueue, from one producer pinned to the
// first usable CPU. The two alternate round by round so drift hits both.
#include <cmwq/linux/workqueue.h>
#include <cmwq/workqueue.hpp>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

namespace wqb {

namespace {

struct c_item {
	work_struct ws;
	std::atomic<uint32_t> done{0}; // 1 done, 2 a waiter sleeps
	int value = 0;
};

void c_fn(work_struct *w)
{
	auto *it = container_of(w, c_item, ws);
	it->value++;
	if (it->done.exchange(1, std::memory_order_acq_rel) == 2)
		cmwq_futex_wake(reinterpret_cast<const uint32_t *>(&it->done));
}

void c_wait(c_item &it)
{
	uint32_t s = 0;
	if (it.done.compare_exchange_strong(s, 2, std::memory_order_acq_rel) || s == 2) {
		cmwq_blocking_begin();
		while (it.done.load(std::memory_order_acquire) != 1)
			cmwq_futex_wait(reinterpret_cast<const uint32_t *>(&it.done), 2);
		cmwq_blocking_end();
	}
}

// ns per round trip over n round trips; -1 when a queue call failed.
double c_round(workqueue_struct *wq, c_item &it, int n)
{
	uint64_t t0 = now_ns();
	for (int i = 0; i < n; i++) {
		it.done.store(0, std::memory_order_relaxed);
		if (!queue_work(wq, &it.ws))
			return -1;
		c_wait(it);
	}
	return static_cast<double>(now_ns() - t0) / n;
}

double cxx_round(workqueue_struct *wq, int n)
{
	uint64_t t0 = now_ns();
	long sum = 0;
	for (int i = 0; i < n; i++)
		sum += cmwq::submit(wq, [i] { return i; }).get();
	if (sum != static_cast<long>(n) * (n - 1) / 2)
		return -1;
	return static_cast<double>(now_ns() - t0) / n;
}

double median(std::vector<double> v)
{
	std::sort(v.begin(), v.end());
	return v.empty() ? 0 : v[v.size() / 2];
}

} // namespace

int run_cxx_roundtrip(int repeat, int cpu, const std::string &cmdline)
{
	const int n = 20000;
	struct row {
		const char *label;
		unsigned flags;
	} rows[] = {{"per-CPU (WQ_PERCPU)", WQ_PERCPU}, {"unbound, default scope (WQ_UNBOUND)", WQ_UNBOUND}};
	int failures = 0;
	std::printf("C++ task round trip vs the C API's (%d round trips per round, %d rounds each, "
		    "alternated; producer on CPU %d)\n",
		    n, repeat, cpu);
	std::printf("  %-38s %10s %10s %8s  %s\n", "workqueue", "C ns/rt", "C++ ns/rt", "C++/C", "(range of rounds)");
	for (auto &r : rows) {
		workqueue_struct *wq = alloc_workqueue("wqb_cxx", r.flags, 0);
		if (!wq) {
			std::fprintf(stderr, "wq_bench --cxx: cannot create the workqueue\n");
			return 1;
		}
		std::vector<double> c, cxx;
		std::thread t([&] {
			if (!pin_self(cpu)) {
				failures++;
				return;
			}
			c_item it;
			INIT_WORK(&it.ws, c_fn);
			// Warm-up: workers exist and caches are warm for both.
			(void)c_round(wq, it, 2000);
			(void)cxx_round(wq, 2000);
			for (int k = 0; k < repeat; k++) {
				double a = c_round(wq, it, n), b = cxx_round(wq, n);
				if (a < 0 || b < 0) {
					failures++;
					return;
				}
				c.push_back(a);
				cxx.push_back(b);
			}
		});
		t.join();
		destroy_workqueue(wq);
		if (c.empty()) {
			std::fprintf(stderr, "wq_bench --cxx: %s: a round failed (pinning or a queue call)\n", r.label);
			continue;
		}
		// Each round pairs a C and a C++ run back to back: the ratio is
		// the median of the per-round ratios, so drift cancels.
		std::vector<double> ratio;
		for (size_t k = 0; k < c.size(); k++)
			ratio.push_back(cxx[k] / c[k]);
		auto [lo, hi] = std::minmax_element(ratio.begin(), ratio.end());
		std::printf("  %-38s %10.0f %10.0f %7.2fx  (%.2f-%.2f)\n", r.label, median(c), median(cxx),
			    median(ratio), *lo, *hi);
	}
	std::printf("  (medians; C++/C is the median of per-round ratios, above 1 the C++ task is slower)\n"
		    "  command: %s\n",
		    cmdline.c_str());
	return failures ? 1 : 0;
}

} // namespace wqb
