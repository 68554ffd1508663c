// bench/wq_bench.cpp - the workqueue benchmark: lib/test_workqueue.c's
// protocol for every affinity scope, shard-size sweeps, the wake-after-unlock
// A/B, fan-out, blocking and max_active-regression protocols, and the same
// protocols on oneTBB, Boost.Asio, libuv, GLib, a naive pool and the
// physical limit, side by side in one run (docs/benchmarks.md).
//
// Every measurement is a job run --repeat times, interleaved with the
// others so drift spreads evenly, and reported as a median with its range;
// running each configuration R times back to back was rejected because a
// neighbour's burst of load would then land on one configuration only.
#include "wq_bench.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <time.h>

#include <cmwq/linux/delay.h>
#include <cmwq/topology.hpp>
#include <cmwq/workqueue.hpp>

#include "cmwq_executor.hpp"
#include "executor.hpp"
#include "protocols.hpp"

using namespace wqb;

namespace {

// ---- measurements ----------------------------------------------------------------

metrics from(const kernel_result &r)
{
	return {{"items_per_sec", std::round(r.items_per_sec)},
		{"p50_ns", double(r.p50)},
		{"p90_ns", double(r.p90)},
		{"p95_ns", double(r.p95)},
		{"p99_ns", double(r.p99)},
		{"rt_p50_ns", double(r.rt_p50)},
		{"rt_p99_ns", double(r.rt_p99)},
		{"workers", double(r.workers)},
		{"local_pct", std::round(r.local_pct * 10) / 10},
		{"cpu_us_per_item", r.cpu_s * 1e6 / std::max(1.0, r.items_per_sec * r.wall_s)},
		{"wall_s", r.wall_s}};
}

metrics from(const fanout_result &r)
{
	return {{"items_per_sec", std::round(r.items_per_sec)},
		{"ns_per_queue", r.ns_per_queue},
		{"workers", double(r.workers)},
		{"cpu_us_per_item", r.cpu_s * 1e6 / std::max(1.0, r.items_per_sec * r.wall_s)},
		{"wall_s", r.wall_s}};
}

metrics from(const blocking_result &r)
{
	return {{"wall_ms", r.wall_ms},
		{"peak_concurrency", double(r.peak_concurrency)},
		{"cpu_ms", r.cpu_s * 1e3},
		{"workers", double(r.workers)},
		{"threads_before", double(r.threads_before)},
		{"peak_threads", double(r.peak_threads)}};
}

metrics from(const regression_result &r)
{
	return {{"items_per_sec", std::round(r.items_per_sec)},
		{"wall_ms", r.wall_ms},
		{"peak_active", double(r.peak_active)},
		{"cpu_us_per_item", r.cpu_s * 1e6 / std::max<double>(1, double(r.expected))},
		{"workers", double(r.workers)}};
}

void hinted_sleep(unsigned us)
{
	if (us % 1000 == 0) {
		msleep(us / 1000);
		return;
	}
	cmwq::blocking_scope hint;
	timespec ts{static_cast<time_t>(us / 1000000), static_cast<long>(us % 1000000) * 1000};
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

// The measurement plan: every series with its job, run interleaved.
struct bench : results {
	peer_config pcfg;
	std::string orig_shard_size;
	std::string cur_shard_size;
	std::string orig_wake;

	std::vector<peer_desc> chosen_peers(bool limits_too) const
	{
		std::vector<peer_desc> v;
		if (!o.vs)
			return v;
		for (auto &p : available_peers()) {
			if (p.limit && !limits_too)
				continue;
			bool want = o.peers.empty();
			for (auto &n : o.peers)
				want = want || n == p.name;
			if (want)
				v.push_back(p);
		}
		return v;
	}

	bool ensure_shard_size(const std::string &v, std::string &err)
	{
		if (v.empty() || v == cur_shard_size)
			return true;
		if (!set_param("workqueue.cache_shard_size", v, err))
			return false;
		cur_shard_size = v;
		return true;
	}

	bool set_wake(const char *v, std::string &err)
	{
		if (!o.ab_wake)
			return true;
		return set_param("cmwq.wake_under_lock", v, err);
	}

	kernel_config kcfg() const
	{
		kernel_config k;
		k.cpus = producer_cpus;
		k.items = o.items;
		k.warmup = o.warmup;
		k.timeout_s = o.timeout;
		return k;
	}

	// One cmwq kernel-protocol run on a fresh workqueue.
	bool cmwq_kernel(const std::string &scope, const char *wake, metrics &m, std::string &err,
			 const std::string &what)
	{
		if (!set_wake(wake, err))
			return false;
		workqueue_struct *wq;
		if (scope == "percpu") {
			wq = alloc_workqueue("%s", WQ_PERCPU, 0, "wqb_kernel");
			if (!wq)
				err = "alloc_workqueue(wqb_kernel, WQ_PERCPU) failed";
		} else {
			auto s = scope == "default" ? std::optional(cmwq::affinity_scope::dfl)
						    : cmwq::parse_scope(scope);
			wq = make_unbound_wq("wqb_kernel", 0, s.value_or(cmwq::affinity_scope::dfl), err);
		}
		if (!wq)
			return false;
		kernel_result r;
		{
			cmwq_executor ex(wq);
			r = run_kernel(ex, kcfg(), what);
		}
		m = from(r);
		m["pool_workers"] = pool_workers("wqb_kernel");
		destroy_workqueue(wq);
		if (!r.ok)
			err = r.error;
		return r.ok;
	}

	void add(series s) { all.push_back(std::move(s)); }

	// A peer at its default size (threads = 0) or at `threads`; the label
	// says how many threads its pool has.
	peer_config peer_cfg(const peer_desc &p, int threads) const
	{
		peer_config c = pcfg;
		if (threads)
			c.pool_threads = threads;
		else if (p.default_threads)
			c.pool_threads = p.default_threads(static_cast<int>(usable.size()));
		return c;
	}
	std::string peer_label(const peer_desc &p, int threads) const
	{
		if (!p.default_threads)
			return p.label;
		return std::string(p.label) + " (" + std::to_string(peer_cfg(p, threads).pool_threads) + " threads)";
	}

	// One series per chosen peer (not the limits) for a protocol: run(ex,
	// what) measures one executor and returns that protocol's result.
	// threads: 0 for each peer's default size, else that size for every
	// peer that can take it (the others get a row saying why not).
	template <class Run>
	void add_peer_series(const char *protocol, const char *what_prefix, Run run, const char *hints_tag = nullptr,
			     int threads = 0)
	{
		for (auto &p : chosen_peers(false)) {
			series ps{protocol, peer_label(p, threads)};
			ps.tags["peer"] = p.name;
			ps.tags["impl"] = p.label;
			ps.ntags["pool_threads"] = peer_cfg(p, threads).pool_threads;
			if (hints_tag)
				ps.tags["hints"] = hints_tag;
			if (threads && !p.sizable) {
				notes[protocol].push_back(std::string(p.label) + " at " + std::to_string(threads) +
							  " threads: not measured (its pool size is read once per "
							  "process; run wq_bench with UV_THREADPOOL_SIZE=" +
							  std::to_string(threads) + " for it)");
				continue;
			}
			auto make = p.make;
			std::string what = std::string(what_prefix) + ", peer " + p.name;
			peer_config cfg = peer_cfg(p, threads);
			ps.job = [run, make, what, cfg](metrics &m, std::string &err, series &se) {
				auto ex = make(cfg);
				auto r = run(*ex, what);
				m = from(r);
				if constexpr (requires { r.timeline; })
					se.timeline = std::move(r.timeline);
				if (!r.ok)
					err = r.error;
				return r.ok;
			};
			add(std::move(ps));
		}
	}

	// --block-detect: one series per (protocol, workqueue, setting). The
	// settings are applied around each run and put back after.
	void plan_detect()
	{
		struct cfg {
			const char *wq;     // percpu or unbound
			const char *detect; // cmwq.block_detect
			const char *unbound; // cmwq.unbound_concurrency
		};
		const cfg cfgs[] = {{"percpu", "perf", "kernel"},   {"percpu", "sample", "kernel"},
				    {"percpu", "off", "kernel"},    {"unbound", "auto", "kernel"},
				    {"unbound", "auto", "managed"}};
		for (const char *proto : {"kernel", "fanout", "blocking"}) {
			for (auto c : cfgs) {
				std::string label = std::string(proto) + " " + c.wq + " " + c.detect + " " + c.unbound;
				series s{"detect", label};
				s.tags["protocol"] = proto;
				s.tags["workqueue"] = c.wq;
				s.tags["block_detect"] = c.detect;
				s.tags["unbound_concurrency"] = c.unbound;
				std::string pr = proto;
				s.job = [this, pr, c, label](metrics &m, std::string &err, series &se) {
					std::string old_d = get_param("cmwq.block_detect");
					std::string old_u = get_param("cmwq.unbound_concurrency");
					if (!set_param("cmwq.block_detect", c.detect, err) ||
					    !set_param("cmwq.unbound_concurrency", c.unbound, err))
						return false;
					se.tags["block_detect_in_effect"] = get_param("cmwq.block_detect");
					bool percpu = std::string(c.wq) == "percpu";
					workqueue_struct *wq =
						percpu ? alloc_workqueue("%s", WQ_PERCPU, 0, "wqb_detect")
						       : make_unbound_wq("wqb_detect", 0, cmwq::affinity_scope::dfl, err);
					bool ok = wq != nullptr;
					if (!wq && err.empty())
						err = "alloc_workqueue(wqb_detect) failed";
					if (wq) {
						int before = process_threads();
						cmwq_executor ex(wq);
						std::string what = "block-detect A/B, " + label;
						auto take = [&](const auto &r) {
							m = from(r);
							ok = r.ok;
							err = r.error;
						};
						if (pr == "kernel") {
							kernel_config k = kcfg();
							k.cpus = {usable.front()};
							take(run_kernel(ex, k, what));
						} else if (pr == "fanout") {
							fanout_config f;
							f.cpu = usable.front();
							f.items = o.fanout_items;
							f.timeout_s = o.timeout;
							take(run_fanout(ex, f, what));
						} else {
							blocking_config b;
							b.cpu = usable.front();
							b.items = o.blocking_items;
							b.sleep_us = o.sleep_us;
							b.timeout_s = o.timeout;
							take(run_blocking(ex, b, what));
						}
						m["threads_created"] = std::max(0, process_threads() - before);
						destroy_workqueue(wq);
					}
					std::string e2;
					set_param("cmwq.block_detect", old_d == "off" || old_d == "sample" ? old_d : "auto", e2);
					set_param("cmwq.unbound_concurrency", old_u, e2);
					return ok;
				};
				add(std::move(s));
			}
		}
	}

	void plan()
	{
		// kernel protocol: cmwq for each scope (or per-CPU), A/B, sweep, peers
		if (o.protocols.count("kernel")) {
			std::vector<std::string> rows = o.percpu ? std::vector<std::string>{"percpu"} : o.scopes;
			for (auto &scope : rows) {
				series s{"kernel", scope};
				s.tags["scope"] = scope;
				s.job = [this, scope](metrics &m, std::string &err, series &) {
					return ensure_shard_size(orig_shard_size, err) &&
					       cmwq_kernel(scope, "0", m, err, "kernel protocol, scope " + scope);
				};
				add(std::move(s));
			}
			if (o.ab_wake) {
				for (auto &scope : rows) {
					series s{"ab_baseline", scope};
					s.tags["scope"] = scope;
					s.job = [this, scope](metrics &m, std::string &err, series &) {
						bool ok = ensure_shard_size(orig_shard_size, err) &&
							  cmwq_kernel(scope, "1", m, err,
								      "kernel protocol, wake under lock, scope " + scope);
						std::string e2;
						set_wake("0", e2);
						return ok;
					};
					add(std::move(s));
				}
			}
			for (unsigned size : o.shard_sizes) {
				series s{"shard", "cache_shard size " + std::to_string(size)};
				s.ntags["shard_size"] = size;
				s.job = [this, size](metrics &m, std::string &err, series &se) {
					if (!ensure_shard_size(std::to_string(size), err))
						return false;
					se.ntags["pods"] = cache_shard_pods();
					return cmwq_kernel("cache_shard", "0", m, err,
							   "kernel protocol, cache_shard_size " + std::to_string(size));
				};
				add(std::move(s));
			}
			for (auto &p : chosen_peers(true)) {
				series s{"kernel_peer", peer_label(p, 0)};
				s.ntags["pool_threads"] = peer_cfg(p, 0).pool_threads;
				s.tags["peer"] = p.name;
				s.tags["impl"] = p.label;
				auto make = p.make;
				bool other_cpu = std::string(p.name) != "futex_same_cpu" && p.limit;
				if (other_cpu && usable.size() < 2) {
					s.errors.push_back("needs two usable CPUs");
					add(std::move(s));
					continue;
				}
				std::string name = p.name;
				peer_config cfg = peer_cfg(p, 0);
				s.job = [this, make, name, cfg](metrics &m, std::string &err, series &) {
					auto ex = make(cfg);
					auto r = run_kernel(*ex, kcfg(), "kernel protocol, peer " + name);
					m = from(r);
					if (!r.ok)
						err = r.error;
					return r.ok;
				};
				add(std::move(s));
			}
		}
		if (o.protocols.count("fanout")) {
			fanout_config f;
			f.cpu = usable.front();
			f.items = o.fanout_items;
			f.timeout_s = o.timeout;
			std::string label = o.percpu ? "cmwq (per-CPU wq" : "cmwq (unbound wq";
			if (o.fanout_max_active)
				label += ", max_active " + std::to_string(o.fanout_max_active);
			series s{"fanout", label + ")"};
			s.tags["impl"] = "cmwq";
			s.tags["workqueue"] = o.percpu ? "percpu" : "unbound";
			if (o.fanout_max_active)
				s.ntags["max_active"] = o.fanout_max_active;
			s.job = [this, f](metrics &m, std::string &err, series &) {
				if (!ensure_shard_size(orig_shard_size, err))
					return false;
				int ma = o.fanout_max_active;
				workqueue_struct *wq =
					o.percpu ? alloc_workqueue("%s", WQ_PERCPU, ma, "wqb_fanout")
						 : make_unbound_wq("wqb_fanout", ma, cmwq::affinity_scope::dfl, err);
				if (!wq) {
					if (err.empty())
						err = "alloc_workqueue(wqb_fanout) failed";
					return false;
				}
				fanout_result r;
				{
					cmwq_executor ex(wq);
					r = run_fanout(ex, f, "fan-out protocol, cmwq");
				}
				m = from(r);
				m["pool_workers"] = pool_workers("wqb_fanout");
				destroy_workqueue(wq);
				if (!r.ok)
					err = r.error;
				return r.ok;
			};
			add(std::move(s));
			add_peer_series("fanout", "fan-out protocol", [f](executor &ex, const std::string &what) {
				return run_fanout(ex, f, what);
			});
		}
		if (o.protocols.count("blocking")) {
			blocking_config b;
			b.cpu = usable.front();
			b.items = o.blocking_items;
			b.sleep_us = o.sleep_us;
			b.timeline = o.timeline;
			b.timeout_s = o.timeout;
			// Per-CPU first (the ratio's reference), then the default
			// scope of an unbound workqueue, where the kernel's rule starts
			// every item at once.
			for (bool unbound : {false, true})
			for (bool hints : {true, false}) {
				std::string label = unbound ? (hints ? "cmwq default scope, hints" : "cmwq default scope, no hints")
							    : (hints ? "cmwq, blocking hints" : "cmwq, no hints");
				series s{"blocking", label};
				s.tags["impl"] = "cmwq";
				s.tags["hints"] = hints ? "yes" : "no";
				s.tags["wq"] = unbound ? "unbound" : "percpu";
				s.job = [this, b, hints, unbound](metrics &m, std::string &err, series &se) {
					workqueue_struct *wq =
						unbound ? make_unbound_wq("wqb_blocking", 0, cmwq::affinity_scope::dfl, err)
							: alloc_workqueue("%s", WQ_PERCPU, 0, "wqb_blocking");
					if (!wq) {
						if (err.empty())
							err = "alloc_workqueue(wqb_blocking, WQ_PERCPU) failed";
						return false;
					}
					blocking_config c = b;
					c.sleep_fn = hints ? hinted_sleep : nullptr;
					blocking_result r;
					{
						cmwq_executor ex(wq);
						r = run_blocking(ex, c,
								 std::string("blocking protocol, cmwq ") +
									 (hints ? "with" : "without") + " hints");
					}
					m = from(r);
					m["pool_workers"] = pool_workers("wqb_blocking");
					destroy_workqueue(wq);
					se.timeline = std::move(r.timeline);
					if (!r.ok)
						err = r.error;
					return r.ok;
				};
				add(std::move(s));
			}
			add_peer_series(
				"blocking", "blocking protocol",
				[b](executor &ex, const std::string &what) { return run_blocking(ex, b, what); }, "no");
			// The same at 32 threads: what a user who sizes a pool for
			// blocking work pays in threads.
			add_peer_series(
				"blocking", "blocking protocol (32 threads)",
				[b](executor &ex, const std::string &what) { return run_blocking(ex, b, what); }, "no",
				32);
		}
		if (o.ab_detect)
			plan_detect();
		if (o.protocols.count("regression")) {
			regression_config g;
			g.cpu = usable.front();
			g.items = o.regression_items;
			g.cs_ns = o.cs_ns;
			g.outside_ns = o.outside_ns;
			g.timeout_s = o.timeout;
			for (int ma : o.max_actives) {
				series s{"regression", "cmwq, max_active " + std::to_string(ma)};
				s.tags["impl"] = "cmwq";
				s.ntags["max_active"] = ma;
				s.job = [this, g, ma](metrics &m, std::string &err, series &) {
					if (!ensure_shard_size(orig_shard_size, err))
						return false;
					workqueue_struct *wq =
						make_unbound_wq("wqb_regression", ma, cmwq::affinity_scope::dfl, err);
					if (!wq)
						return false;
					int before = process_threads();
					regression_result r;
					{
						cmwq_executor ex(wq);
						r = run_regression(ex, g,
								   "regression protocol, max_active " + std::to_string(ma));
					}
					m = from(r);
					m["threads_created"] = std::max(0, process_threads() - before);
					m["pool_workers"] = pool_workers("wqb_regression");
					destroy_workqueue(wq);
					if (!r.ok)
						err = r.error;
					return r.ok;
				};
				add(std::move(s));
			}
			add_peer_series("regression", "regression protocol", [g](executor &ex, const std::string &what) {
				return run_regression(ex, g, what);
			});
		}
	}

	void run()
	{
		for (int rep = 0; rep < o.repeat; rep++) {
			for (auto &s : all) {
				if (!s.job || !s.errors.empty())
					continue;
				metrics m;
				std::string err;
				// What the rest of the machine did meanwhile: CPUs kept busy
				// by other processes, and time the hypervisor took.
				machine_cpu mc0 = machine_cpu_now();
				double own0 = process_cpu_s();
				uint64_t t0 = now_ns();
				bool ok = s.job(m, err, s);
				double wall = static_cast<double>(now_ns() - t0) / 1e9;
				machine_cpu mc1 = machine_cpu_now();
				double own = process_cpu_s() - own0;
				// /proc/stat counts in 10 ms ticks: too coarse for short runs.
				if (wall >= 0.5) {
					m["other_cpus"] = std::max(0.0, (mc1.busy_s - mc0.busy_s - own) / wall);
					m["steal_cpus"] = (mc1.steal_s - mc0.steal_s) / wall;
				}
				if (ok) {
					s.runs.push_back(std::move(m));
				} else {
					s.errors.push_back(err);
					std::fprintf(stderr, "wq_bench: %s / %s: %s\n", s.group.c_str(),
						     s.label.c_str(), err.c_str());
				}
			}
		}
		std::string err;
		ensure_shard_size(orig_shard_size, err);
		for (auto &s : all)
			if (s.job && !s.errors.empty() && !(s.errors.size() == 1 && s.errors[0] == "needs two usable CPUs"))
				failures++;
	}
};

} // namespace


namespace wqb {
int run_cxx_roundtrip(int repeat, int cpu, const std::string &cmdline);
}

int main(int argc, char **argv)
{
	std::string cmdline = "wq_bench";
	for (int i = 1; i < argc; i++)
		cmdline += std::string(" ") + argv[i];
	if (argc >= 2 && std::string(argv[1]) == "--idle-one")
		return idle_child(argc, argv);
	bench b;
	b.o = parse_options(argc, argv);
	if (b.o.idle_secs > 0)
		return run_idle_wakeups(b.o, argv);
	if (!b.o.sysfs_root.empty())
		sysfs_root_reexec(b.o, argv);

	cmwq_init();
	watchdog_set_dump([] { show_all_workqueues(); });
	cmwq::topology topo = cmwq::current_topology();
	b.usable = topo.usable;
	if (b.usable.empty()) {
		std::fprintf(stderr, "wq_bench: the library reports no usable CPUs\n");
		return 1;
	}
	int n = b.o.threads ? b.o.threads : static_cast<int>(b.usable.size());
	for (int i = 0; i < n; i++)
		b.producer_cpus.push_back(b.usable[static_cast<size_t>(i) % b.usable.size()]);
	b.pcfg.pool_threads = static_cast<int>(b.usable.size());
	b.pcfg.usable = b.usable;
	b.pcfg.producer_cpus = b.producer_cpus;
	for (auto &[name, value] : b.o.params) {
		std::string err;
		if (!set_param(name.c_str(), value, err)) {
			std::fprintf(stderr, "wq_bench: --param: %s\n", err.c_str());
			return 2;
		}
	}
	b.orig_shard_size = get_param("workqueue.cache_shard_size");
	b.cur_shard_size = b.orig_shard_size;
	if (b.o.ab_wake) {
		std::string err;
		if (!set_param("cmwq.wake_under_lock", "0", err)) {
			std::fprintf(stderr, "wq_bench: --ab-wake: %s\n", err.c_str());
			return 2;
		}
	}
	if (!b.o.shard_sizes.empty() && b.orig_shard_size.empty()) {
		std::fprintf(stderr, "wq_bench: --shard-sizes: this build of cmwq has no "
				     "workqueue.cache_shard_size parameter\n");
		return 2;
	}

	if (b.o.cxx)
		return run_cxx_roundtrip(b.o.repeat, b.usable.front(), cmdline);
	b.load_start = loadavg();
	b.plan();
	b.run();
	if (b.o.json)
		print_json(b, cmdline, stdout);
	else
		print_tables(b, cmdline);
	if (!b.o.json_out.empty()) {
		FILE *f = std::fopen(b.o.json_out.c_str(), "w");
		if (!f) {
			std::fprintf(stderr, "wq_bench: --json-out %s: %s\n", b.o.json_out.c_str(),
				     std::strerror(errno));
			return 2;
		}
		print_json(b, cmdline, f);
		std::fclose(f);
	}
	std::fflush(stdout);
	if (b.failures)
		std::fprintf(stderr, "wq_bench: %d measurement(s) failed (see above)\n", b.failures);
	return b.failures ? 1 : 0;
}
