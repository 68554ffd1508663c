// bench/harness.hpp - the measuring pieces every wq_bench protocol shares:
// clock, futex completion, start gate, CPU pinning, percentiles, worker
// census, watchdog and a small JSON writer.
//
// Producers wait for their items with a futex completion (no spinning), the
// same for cmwq and every peer, so ratios compare the queue side alone; a
// spin-then-sleep wait was rejected because it would hide wakeup costs that
// the kernel's wait_for_completion() pays.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <cmwq/linux/workqueue.h>

namespace wqb {

// CLOCK_MONOTONIC in nanoseconds (vDSO, about 20 ns).
uint64_t now_ns() noexcept;

void futex_wait(std::atomic<uint32_t> *addr, uint32_t val) noexcept;
void futex_wake(std::atomic<uint32_t> *addr, int nr) noexcept;

inline void cpu_relax() noexcept
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	asm volatile("yield" ::: "memory");
#endif
}

// The kernel's struct completion on a futex: complete() from any thread,
// wait() by one waiter, reinit() before reuse. wait() has acquire semantics
// against complete()'s release.
class completion {
public:
	void reinit() noexcept { state_.store(0, std::memory_order_relaxed); }
	void complete() noexcept
	{
		if (state_.exchange(1, std::memory_order_acq_rel) == 2)
			futex_wake(&state_, 1);
	}
	void wait() noexcept
	{
		uint32_t s = state_.load(std::memory_order_acquire);
		while (s != 1) {
			if (s == 0 && !state_.compare_exchange_weak(s, 2, std::memory_order_acquire))
				continue;
			futex_wait(&state_, 2);
			s = state_.load(std::memory_order_acquire);
		}
	}
	bool done() const noexcept { return state_.load(std::memory_order_acquire) == 1; }

private:
	std::atomic<uint32_t> state_{0}; // 0 pending, 1 done, 2 waiter asleep
};

// Releases N threads together: each calls arrive_and_wait(); the controller
// calls wait_ready(N) then open(), which returns the release time.
class start_gate {
public:
	void arrive_and_wait() noexcept;
	void wait_ready(int n) noexcept;
	uint64_t open() noexcept;

private:
	std::atomic<int> ready_{0};
	std::atomic<uint32_t> go_{0};
};

// Pins the calling thread to one CPU; false (errno set) when refused.
bool pin_self(int cpu) noexcept;
// CPUs the process may run on (sched_getaffinity), ascending.
std::vector<int> process_cpus();
// Threads in this process now (/proc/self/status).
int process_threads();
// CPU time (user + system) used by the whole process so far, in seconds.
double process_cpu_s();
// Machine-wide CPU seconds from /proc/stat: busy (all but idle, iowait and
// steal) and steal (taken by the hypervisor). 10 ms resolution.
struct machine_cpu {
	double busy_s = 0, steal_s = 0;
};
machine_cpu machine_cpu_now();

// The work item every protocol and every executor runs: an embedded cmwq
// work_struct (so queueing on cmwq allocates nothing), the function the
// protocol wants run, and its argument.
struct bench_item;
using item_fn = void (*)(bench_item *);
struct bench_item {
	work_struct work;
	item_fn fn = nullptr;
	void *ctx = nullptr;
	uint32_t index = 0;
};

// Counts the distinct threads that run items during one measured run:
// begin() opens a generation, note() is called by every item (one TLS
// compare when the thread was already counted), count() reads the total.
namespace census {
void begin() noexcept;
void note() noexcept;
int count() noexcept;
} // namespace census

// Percentile q in [0, 1] of v (reorders v). 0 for an empty vector.
uint64_t percentile(std::vector<uint32_t> &v, double q);

// Median and spread of repeated measurements.
struct spread {
	double median = 0, min = 0, max = 0;
	// (max - min) / median in percent; 0 for one sample.
	double range_pct() const noexcept { return median > 0 ? 100.0 * (max - min) / median : 0; }
};
spread summarize(std::vector<double> v);

// A watchdog for one phase: if disarm() is not called within `seconds`, it
// prints what was running, calls the dump hook (the workqueue state) and
// exits with status 3.
void watchdog_set_dump(void (*dump)());
void watchdog_arm(double seconds, const std::string &what);
void watchdog_disarm();

// Minimal JSON writer: objects and arrays nest; commas are automatic.
class json_writer {
public:
	explicit json_writer(FILE *out) : out_(out) {}
	json_writer &begin_object(const char *key = nullptr);
	json_writer &end_object();
	json_writer &begin_array(const char *key = nullptr);
	json_writer &end_array();
	json_writer &kv(const char *key, const std::string &v);
	json_writer &kv(const char *key, const char *v) { return kv(key, std::string(v)); }
	json_writer &kv(const char *key, double v);
	json_writer &kv(const char *key, int v) { return kv(key, static_cast<double>(v)); }
	json_writer &kv(const char *key, unsigned v) { return kv(key, static_cast<double>(v)); }
	json_writer &kv(const char *key, uint64_t v) { return kv(key, static_cast<double>(v)); }
	json_writer &kv(const char *key, bool v);
	json_writer &value(double v);
	json_writer &value(const std::string &v);
	void finish();

private:
	void sep(const char *key);
	FILE *out_;
	std::vector<bool> first_{true};
};

} // namespace wqb
