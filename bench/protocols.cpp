// bench/protocols.cpp - the runners behind protocols.hpp.
//
// Timing brackets only the executor's call (queue latency) and the wait for
// the item (round trip); thread creation, pinning, warm-up and allocation
// of items happen before the clock starts. Each runner is bounded by the
// watchdog, so a lost wakeup ends the program with a state dump, not a hang.
#include "protocols.hpp"

#include <sched.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <thread>

namespace wqb {

void busy_ns(unsigned ns) noexcept
{
	if (!ns)
		return;
	uint64_t end = now_ns() + ns;
	while (now_ns() < end)
		cpu_relax();
}

namespace {

void check_counts(run_status &r)
{
	if (r.ok && r.done != r.expected) {
		r.ok = false;
		r.error = "ran " + std::to_string(r.done) + " items of " + std::to_string(r.expected);
	}
}

void max_into(std::atomic<int> &peak, int v) noexcept
{
	int p = peak.load(std::memory_order_relaxed);
	while (v > p && !peak.compare_exchange_weak(p, v, std::memory_order_relaxed))
		;
}

uint32_t clamp32(uint64_t v) noexcept { return v > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(v); }

// ---- kernel protocol ---------------------------------------------------------

struct alignas(64) producer {
	completion comp;
	std::atomic<uint64_t> done{0};
	std::atomic<uint64_t> local{0}; // items that ran on the producer's CPU
	int cpu = -1;
	bench_item item;
	std::vector<uint32_t> lat, rt;
	uint64_t finish = 0;
	std::string error; // set by the producer thread only
};

void kernel_item(bench_item *it)
{
	auto *p = static_cast<producer *>(it->ctx);
	census::note();
	if (sched_getcpu() == p->cpu)
		p->local.fetch_add(1, std::memory_order_relaxed);
	p->done.fetch_add(1, std::memory_order_relaxed);
	p->comp.complete();
}

void kernel_producer(executor &ex, producer &p, int index, int cpu, const kernel_config &cfg,
		     start_gate &gate)
{
	bool ok = pin_self(cpu);
	if (!ok)
		p.error = "cannot pin producer " + std::to_string(index) + " to CPU " +
			  std::to_string(cpu) + ": " + std::strerror(errno);
	for (int k = 0; ok && k < cfg.warmup; k++) {
		p.comp.reinit();
		if (!ex.post(&p.item, index)) {
			p.error = "the executor refused a warm-up item";
			ok = false;
			break;
		}
		p.comp.wait();
	}
	gate.arrive_and_wait();
	if (!ok)
		return;
	for (int k = 0; k < cfg.items; k++) {
		p.comp.reinit();
		uint64_t t0 = now_ns();
		bool queued = ex.post(&p.item, index);
		uint64_t t1 = now_ns();
		if (!queued) {
			p.error = "queueing returned false for an idle item (item " + std::to_string(k) + ")";
			break;
		}
		p.comp.wait();
		uint64_t t2 = now_ns();
		p.lat[static_cast<size_t>(k)] = clamp32(t1 - t0);
		p.rt[static_cast<size_t>(k)] = clamp32(t2 - t0);
	}
	p.finish = now_ns();
}

// ---- shared counting item for fan-out, blocking and regression --------------

struct batch {
	completion all_done;
	std::atomic<uint64_t> done{0};
	uint64_t total = 0;
	std::atomic<int> active{0};
	std::atomic<int> peak{0};
	// blocking
	unsigned sleep_us = 0;
	void (*sleep_fn)(unsigned) = nullptr;
	uint64_t t0 = 0;
	std::vector<std::pair<uint32_t, uint32_t>> *timeline = nullptr;
	// regression
	std::mutex shared_lock;
	uint64_t shared_counter = 0; // L: shared_lock
	unsigned cs_ns = 0, outside_ns = 0;
};

inline void batch_item_done(batch &b)
{
	if (b.done.fetch_add(1, std::memory_order_acq_rel) + 1 == b.total)
		b.all_done.complete();
}

void fanout_item(bench_item *it)
{
	auto *b = static_cast<batch *>(it->ctx);
	census::note();
	batch_item_done(*b);
}

void nanosleep_us(unsigned us)
{
	timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

void blocking_item(bench_item *it)
{
	auto *b = static_cast<batch *>(it->ctx);
	census::note();
	uint64_t start = now_ns();
	max_into(b->peak, b->active.fetch_add(1, std::memory_order_relaxed) + 1);
	if (b->sleep_fn)
		b->sleep_fn(b->sleep_us);
	else
		nanosleep_us(b->sleep_us);
	b->active.fetch_sub(1, std::memory_order_relaxed);
	if (b->timeline)
		(*b->timeline)[it->index] = {clamp32((start - b->t0) / 1000),
					     clamp32((now_ns() - b->t0) / 1000)};
	batch_item_done(*b);
}

void regression_item(bench_item *it)
{
	auto *b = static_cast<batch *>(it->ctx);
	census::note();
	max_into(b->peak, b->active.fetch_add(1, std::memory_order_relaxed) + 1);
	{
		std::lock_guard lk(b->shared_lock);
		busy_ns(b->cs_ns);
		b->shared_counter++;
	}
	busy_ns(b->outside_ns);
	b->active.fetch_sub(1, std::memory_order_relaxed);
	batch_item_done(*b);
}

std::unique_ptr<bench_item[]> make_items(executor &ex, size_t n, item_fn fn, void *ctx)
{
	std::unique_ptr<bench_item[]> items(new bench_item[n]);
	for (size_t i = 0; i < n; i++) {
		items[i].fn = fn;
		items[i].ctx = ctx;
		items[i].index = static_cast<uint32_t>(i);
		ex.prepare(&items[i]);
	}
	return items;
}

// Queue every item from one pinned thread; returns false with r.error set
// when the executor refuses one. t_queued gets the time after the last call.
bool queue_all(executor &ex, bench_item *items, size_t n, run_status &r, uint64_t &t_queued)
{
	for (size_t i = 0; i < n; i++) {
		if (!ex.post(&items[i], 0)) {
			r.ok = false;
			r.error = "queueing returned false for a fresh item (item " + std::to_string(i) + ")";
			t_queued = now_ns();
			return false;
		}
	}
	t_queued = now_ns();
	return true;
}

// Runs fn on a thread pinned to cpu and waits for it (the producer of the
// one-producer protocols; the calling thread keeps its own affinity).
template <class F>
bool on_pinned_thread(int cpu, run_status &r, F &&fn)
{
	bool pinned = false;
	std::thread t([&] {
		pinned = pin_self(cpu);
		if (pinned)
			fn();
	});
	t.join();
	if (!pinned) {
		r.ok = false;
		r.error = "cannot pin the producer to CPU " + std::to_string(cpu);
	}
	return pinned;
}

} // namespace

kernel_result run_kernel(executor &ex, const kernel_config &cfg, const std::string &what)
{
	kernel_result r;
	const size_t n = cfg.cpus.size();
	std::vector<std::unique_ptr<producer>> prods;
	for (size_t i = 0; i < n; i++) {
		auto p = std::make_unique<producer>();
		p->item.fn = kernel_item;
		p->item.ctx = p.get();
		p->item.index = static_cast<uint32_t>(i);
		p->cpu = cfg.cpus[i];
		ex.prepare(&p->item);
		p->lat.assign(static_cast<size_t>(cfg.items), 0);
		p->rt.assign(static_cast<size_t>(cfg.items), 0);
		prods.push_back(std::move(p));
	}
	watchdog_arm(cfg.timeout_s, what);
	start_gate gate;
	std::vector<std::thread> threads;
	for (size_t i = 0; i < n; i++)
		threads.emplace_back(kernel_producer, std::ref(ex), std::ref(*prods[i]),
				     static_cast<int>(i), cfg.cpus[i], std::cref(cfg), std::ref(gate));
	gate.wait_ready(static_cast<int>(n));
	census::begin();
	double cpu0 = process_cpu_s();
	uint64_t t_start = gate.open();
	for (auto &t : threads)
		t.join();
	r.cpu_s = process_cpu_s() - cpu0;
	watchdog_disarm();
	r.workers = census::count();

	uint64_t t_end = t_start;
	uint64_t local = 0;
	std::vector<uint32_t> lat, rt;
	lat.reserve(n * static_cast<size_t>(cfg.items));
	rt.reserve(n * static_cast<size_t>(cfg.items));
	for (auto &p : prods) {
		r.expected += static_cast<uint64_t>(cfg.items + cfg.warmup);
		r.done += p->done.load(std::memory_order_acquire);
		local += p->local.load(std::memory_order_relaxed);
		if (!p->error.empty() && r.ok) {
			r.ok = false;
			r.error = p->error;
		}
		t_end = std::max(t_end, p->finish);
		lat.insert(lat.end(), p->lat.begin(), p->lat.end());
		rt.insert(rt.end(), p->rt.begin(), p->rt.end());
	}
	check_counts(r);
	r.wall_s = static_cast<double>(t_end - t_start) / 1e9;
	r.items_per_sec = r.wall_s > 0 ? static_cast<double>(n) * cfg.items / r.wall_s : 0;
	r.p50 = percentile(lat, 0.50);
	r.p90 = percentile(lat, 0.90);
	r.p95 = percentile(lat, 0.95);
	r.p99 = percentile(lat, 0.99);
	r.rt_p50 = percentile(rt, 0.50);
	r.rt_p99 = percentile(rt, 0.99);
	r.local_pct = r.done ? 100.0 * static_cast<double>(local) / static_cast<double>(r.done) : 0;
	return r;
}

fanout_result run_fanout(executor &ex, const fanout_config &cfg, const std::string &what)
{
	fanout_result r;
	batch b;
	b.total = static_cast<uint64_t>(cfg.items);
	r.expected = b.total;
	auto items = make_items(ex, static_cast<size_t>(cfg.items), fanout_item, &b);
	uint64_t t0 = 0, t_queued = 0, t_done = 0;
	watchdog_arm(cfg.timeout_s, what);
	census::begin();
	double cpu0 = process_cpu_s();
	on_pinned_thread(cfg.cpu, r, [&] {
		t0 = now_ns();
		bool all = queue_all(ex, items.get(), static_cast<size_t>(cfg.items), r, t_queued);
		if (all)
			b.all_done.wait();
		t_done = now_ns();
	});
	r.cpu_s = process_cpu_s() - cpu0;
	if (!r.ok) {
		// Items queued before the refusal may still run; wait for them
		// to settle before the batch goes away.
		std::this_thread::sleep_for(std::chrono::milliseconds(200));
	}
	watchdog_disarm();
	r.workers = census::count();
	r.done = b.done.load(std::memory_order_acquire);
	check_counts(r);
	r.wall_s = static_cast<double>(t_done - t0) / 1e9;
	r.items_per_sec = r.wall_s > 0 ? cfg.items / r.wall_s : 0;
	r.ns_per_queue = cfg.items ? static_cast<double>(t_queued - t0) / cfg.items : 0;
	return r;
}

blocking_result run_blocking(executor &ex, const blocking_config &cfg, const std::string &what)
{
	blocking_result r;
	batch b;
	b.total = static_cast<uint64_t>(cfg.items);
	b.sleep_us = cfg.sleep_us;
	b.sleep_fn = cfg.sleep_fn;
	r.expected = b.total;
	if (cfg.timeline) {
		r.timeline.assign(static_cast<size_t>(cfg.items), {0, 0});
		b.timeline = &r.timeline;
	}
	auto items = make_items(ex, static_cast<size_t>(cfg.items), blocking_item, &b);

	// Samples the process's thread count while the items run.
	r.threads_before = process_threads();
	std::atomic<bool> sampling{true};
	std::atomic<int> peak_threads{r.threads_before};
	std::thread sampler([&] {
		while (sampling.load(std::memory_order_acquire)) {
			max_into(peak_threads, process_threads());
			std::this_thread::sleep_for(std::chrono::microseconds(250));
		}
	});

	uint64_t t_done = 0;
	watchdog_arm(cfg.timeout_s, what);
	census::begin();
	double cpu0 = process_cpu_s();
	on_pinned_thread(cfg.cpu, r, [&] {
		uint64_t t_queued;
		b.t0 = now_ns();
		if (queue_all(ex, items.get(), static_cast<size_t>(cfg.items), r, t_queued))
			b.all_done.wait();
		t_done = now_ns();
	});
	r.cpu_s = process_cpu_s() - cpu0;
	if (!r.ok)
		std::this_thread::sleep_for(std::chrono::milliseconds(200) +
					    std::chrono::microseconds(cfg.sleep_us) * cfg.items);
	watchdog_disarm();
	max_into(peak_threads, process_threads());
	sampling.store(false, std::memory_order_release);
	sampler.join();
	r.workers = census::count();
	r.done = b.done.load(std::memory_order_acquire);
	check_counts(r);
	r.wall_ms = static_cast<double>(t_done - b.t0) / 1e6;
	r.peak_concurrency = b.peak.load();
	// Not counted: wq_bench's sampler and producer threads.
	r.peak_threads = std::max(r.threads_before, peak_threads.load() - 2);
	return r;
}

regression_result run_regression(executor &ex, const regression_config &cfg,
				 const std::string &what)
{
	regression_result r;
	batch b;
	b.total = static_cast<uint64_t>(cfg.items);
	b.cs_ns = cfg.cs_ns;
	b.outside_ns = cfg.outside_ns;
	r.expected = b.total;
	auto items = make_items(ex, static_cast<size_t>(cfg.items), regression_item, &b);
	uint64_t t0 = 0, t_done = 0;
	watchdog_arm(cfg.timeout_s, what);
	census::begin();
	double cpu0 = process_cpu_s();
	on_pinned_thread(cfg.cpu, r, [&] {
		uint64_t t_queued;
		t0 = now_ns();
		if (queue_all(ex, items.get(), static_cast<size_t>(cfg.items), r, t_queued))
			b.all_done.wait();
		t_done = now_ns();
	});
	r.cpu_s = process_cpu_s() - cpu0;
	if (!r.ok)
		std::this_thread::sleep_for(std::chrono::milliseconds(500));
	watchdog_disarm();
	r.workers = census::count();
	r.done = b.done.load(std::memory_order_acquire);
	{
		std::lock_guard lk(b.shared_lock);
		if (r.ok && b.shared_counter != r.done) {
			r.ok = false;
			r.error = "the shared counter reads " + std::to_string(b.shared_counter) +
				  " after " + std::to_string(r.done) + " items";
		}
	}
	check_counts(r);
	r.wall_ms = static_cast<double>(t_done - t0) / 1e6;
	r.items_per_sec = r.wall_ms > 0 ? cfg.items / (r.wall_ms / 1e3) : 0;
	r.peak_active = b.peak.load();
	return r;
}

} // namespace wqb
