// bench/protocols.hpp - the four measurements wq_bench makes, each written
// once over the executor interface so cmwq and every peer run the same code.
//
// kernel:     lib/test_workqueue.c - N pinned producers, one item in flight
//             each, queue-call latency and round trip per item.
// fanout:     one producer queues many tiny items, then waits for all.
// blocking:   items that sleep; wall time, peak concurrency and threads.
// regression: items that take one shared lock (the 2023 max_active report).
// Every runner counts the items that ran and reports a mismatch as failure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "executor.hpp"

namespace wqb {

struct run_status {
	double cpu_s = 0;       // process CPU time (all threads) while measured
	bool ok = true;
	std::string error;      // why not ok
	uint64_t expected = 0;  // items that should have run
	uint64_t done = 0;      // items that ran
};

struct kernel_config {
	std::vector<int> cpus;  // producer i runs on cpus[i]
	int items = 50000;      // per producer, measured
	int warmup = 1000;      // per producer, before the gate opens
	double timeout_s = 120;
};

struct kernel_result : run_status {
	double wall_s = 0;
	double items_per_sec = 0;
	uint64_t p50 = 0, p90 = 0, p95 = 0, p99 = 0; // queue-call latency, ns
	uint64_t rt_p50 = 0, rt_p99 = 0;             // queue to completion seen, ns
	int workers = 0;        // distinct threads that ran measured items
	double local_pct = 0;   // items (warm-up included) run on their producer's CPU, %
};

kernel_result run_kernel(executor &ex, const kernel_config &cfg, const std::string &what);

struct fanout_config {
	int cpu = 0;            // the producer's CPU
	int items = 1000000;
	double timeout_s = 120;
};

struct fanout_result : run_status {
	double wall_s = 0;
	double items_per_sec = 0;   // items / (first queue call .. last item done)
	double ns_per_queue = 0;    // producer time / items
	int workers = 0;
};

fanout_result run_fanout(executor &ex, const fanout_config &cfg, const std::string &what);

struct blocking_config {
	int cpu = 0;            // the producer's CPU
	int items = 200;
	unsigned sleep_us = 1000;
	// How an item sleeps; nullptr: clock_nanosleep (no blocking hint).
	void (*sleep_fn)(unsigned us) = nullptr;
	bool timeline = false;  // keep each item's start and end
	double timeout_s = 60;
};

struct blocking_result : run_status {
	double wall_ms = 0;
	int peak_concurrency = 0;  // items asleep at the same time
	int workers = 0;           // distinct threads that ran the items
	int threads_before = 0;    // threads in the process before the run
	int peak_threads = 0;      // most threads in the process during the run
	std::vector<std::pair<uint32_t, uint32_t>> timeline; // us since the first queue call
};

blocking_result run_blocking(executor &ex, const blocking_config &cfg, const std::string &what);

struct regression_config {
	int cpu = 0;            // the producer's CPU
	int items = 20000;
	unsigned cs_ns = 20000;     // critical section under the shared lock
	unsigned outside_ns = 0;    // work outside the lock
	double timeout_s = 120;
};

struct regression_result : run_status {
	double wall_ms = 0;
	double items_per_sec = 0;
	int peak_active = 0;    // items inside the work function at once
	int workers = 0;
};

regression_result run_regression(executor &ex, const regression_config &cfg,
				 const std::string &what);

// Busy-waits ns nanoseconds on the clock (the CPU stays busy).
void busy_ns(unsigned ns) noexcept;

} // namespace wqb
