// test_hotplug_whitebox.cpp - CPUs going offline and coming back: the
// per-CPU pools of an offline CPU are disassociated (their workers unbound,
// on the unbound cpumask, still running what is queued there), bound to
// their CPU again when it returns; unbound pods follow the online CPUs;
// items flowing meanwhile are neither lost nor doubled; the online file is
// followed when its text changes. The online mask is given to the engine
// here (cpus_online_changed), so the CPUs stay online for the scheduler:
// the guest stage (scripts/guest-run.sh) takes real CPUs offline.
#include <gtest/gtest.h>

#include <cmwq/linux/workqueue.h>

#include "engine/engine.h"
#include "test_util.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace cmwq::detail;

std::vector<int> usable() { return g().usable; }

std::vector<int> without(std::vector<int> v, int cpu)
{
	v.erase(std::remove(v.begin(), v.end(), cpu), v.end());
	return v;
}

std::vector<int> affinity_of(pid_t tid)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	std::vector<int> out;
	if (sched_getaffinity(tid, sizeof(set), &set) != 0)
		return out;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			out.push_back(c);
	return out;
}

struct pool_view {
	unsigned flags = 0;
	int nr_running = 0;
	int nr_workers = 0;
	bool all_unbound = true, none_unbound = true;
	std::vector<std::vector<int>> affinity; // of each started worker
};

pool_view view(worker_pool *p) NO_THREAD_SAFETY_ANALYSIS
{
	pool_view v;
	lock_guard lk(p->lock);
	v.flags = p->flags;
	v.nr_running = p->nr_running;
	v.nr_workers = p->nr_workers;
	for (worker *w : p->workers) {
		bool ub = w->flags & WORKER_UNBOUND;
		v.all_unbound &= ub;
		v.none_unbound &= !ub;
		if (pid_t tid = __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE); tid > 0)
			v.affinity.push_back(affinity_of(tid));
	}
	return v;
}

struct probe {
	work_struct work;
	std::atomic<int> runs{0};
	worker_pool *pool = nullptr;
	std::vector<int> affinity;
	int ran_on = -1;
};

void probe_fn(work_struct *w)
{
	auto *p = container_of(w, probe, work);
	p->pool = tl_worker->pool;
	p->affinity = affinity_of(0);
	p->ran_on = sched_getcpu();
	p->runs.fetch_add(1);
}

// Runs one probe on cpu through wq and waits for it.
void run_probe_on(workqueue_struct *wq, int cpu, probe &p)
{
	p.runs = 0;
	INIT_WORK(&p.work, probe_fn);
	ASSERT_TRUE(queue_work_on(cpu, wq, &p.work));
	flush_work(&p.work);
	ASSERT_EQ(p.runs.load(), 1);
}

// A temporary online file the engine follows instead of the real one, with
// the given CPUs in it; the real one is followed again when it goes.
class online_file {
public:
	explicit online_file(const std::vector<int> &cpus)
	{
		int fd = mkstemp(path_);
		if (fd < 0)
			return;
		close(fd);
		write(cpus);
		hotplug_set_path(path_);
		ok_ = true;
	}
	~online_file()
	{
		if (!ok_)
			return;
		hotplug_set_path("/sys/devices/system/cpu/online");
		unlink(path_);
	}
	online_file(const online_file &) = delete;
	online_file &operator=(const online_file &) = delete;
	bool ok() const { return ok_; }
	void write(const std::vector<int> &cpus) { write_text(cmwq::format_cpulist(cpus) + "\n"); }
	void write_text(const std::string &text) { std::ofstream(path_) << text; }

private:
	char path_[32] = "/tmp/cmwq-online-XXXXXX";
	bool ok_ = false;
};

// Puts every usable CPU back online when a test ends, even a failing one.
struct all_online {
	~all_online()
	{
		hotplug_pin_hook = nullptr;
		cpus_online_changed(g().usable);
	}
};

} // namespace

TEST(hotplug, an_offline_cpus_pools_run_unbound_and_are_bound_again_when_it_returns)
{
	auto cpus = usable();
	if (cpus.size() < 2)
		GTEST_SKIP() << "needs two usable CPUs";
	all_online restore;
	int cpu = cpus.back();
	auto *wq = alloc_workqueue("t_hp_percpu", WQ_PERCPU, 0);
	auto *uwq = alloc_workqueue("t_hp_unbound", WQ_UNBOUND, 0);
	ASSERT_TRUE(wq && uwq);
	worker_pool *pool = g().cpu_pools[0][static_cast<size_t>(cpu)];
	probe p;
	run_probe_on(wq, cpu, p); // a worker exists
	EXPECT_EQ(p.pool, pool);
	EXPECT_EQ(view(pool).flags & POOL_DISASSOCIATED, 0u);

	uint64_t before = hotplug_changes();
	ASSERT_EQ(cpus_online_changed(without(cpus, cpu)), 0);
	EXPECT_EQ(hotplug_changes(), before + 1);
	auto v = view(pool);
	EXPECT_NE(v.flags & POOL_DISASSOCIATED, 0u);
	EXPECT_TRUE(v.all_unbound);
	EXPECT_EQ(v.nr_running, 0);
	ASSERT_GE(v.nr_workers, 1);
	for (auto &a : v.affinity)
		EXPECT_EQ(a, without(cpus, cpu)) << "a worker of the offline CPU's pool stays pinned to it";
	// Queued to the offline CPU: still runs, on its (disassociated) pool,
	// off the CPU.
	run_probe_on(wq, cpu, p);
	EXPECT_EQ(p.pool, pool);
	EXPECT_EQ(p.affinity, without(cpus, cpu));
	// Unbound: no pod holds the offline CPU, and the node shares count
	// only the online ones.
	{
		lock_guard gk(g().pool_mutex);
		lock_guard wk(uwq->mutex);
		for (int c : cpus) {
			auto *pwq = uwq->cpu_pwq[static_cast<size_t>(c)].load();
			ASSERT_TRUE(pwq);
			const auto &pod = pwq->pool->pod_cpus;
			EXPECT_EQ(std::count(pod.begin(), pod.end(), cpu), 0) << "CPU " << c << "'s pod";
		}
		EXPECT_EQ(g().unbound_cpus, without(cpus, cpu));
	}

	ASSERT_EQ(cpus_online_changed(cpus), 0);
	v = view(pool);
	EXPECT_EQ(v.flags & POOL_DISASSOCIATED, 0u);
	EXPECT_TRUE(v.none_unbound);
	for (auto &a : v.affinity)
		EXPECT_EQ(a, std::vector<int>{cpu}) << "a worker was not bound to its CPU again";
	run_probe_on(wq, cpu, p);
	EXPECT_EQ(p.affinity, std::vector<int>{cpu});
	EXPECT_EQ(p.ran_on, cpu);
	{
		lock_guard gk(g().pool_mutex);
		EXPECT_EQ(g().unbound_cpus, cpus);
	}
	destroy_workqueue(wq);
	destroy_workqueue(uwq);
}

TEST(hotplug, a_worker_started_while_its_cpu_is_offline_runs_unbound_and_is_bound_on_return)
{
	auto cpus = usable();
	if (cpus.size() < 2)
		GTEST_SKIP() << "needs two usable CPUs";
	all_online restore;
	int cpu = cpus.front();
	// Highpri: a pool no earlier item started a worker on.
	auto *wq = alloc_workqueue("t_hp_new", WQ_PERCPU | WQ_HIGHPRI, 0);
	ASSERT_TRUE(wq);
	worker_pool *pool = g().cpu_pools[1][static_cast<size_t>(cpu)];
	ASSERT_EQ(cpus_online_changed(without(cpus, cpu)), 0);
	probe p;
	run_probe_on(wq, cpu, p);
	EXPECT_EQ(p.pool, pool);
	EXPECT_EQ(p.affinity, without(cpus, cpu));
	auto v = view(pool);
	EXPECT_TRUE(v.all_unbound);
	EXPECT_EQ(v.nr_running, 0);
	ASSERT_EQ(cpus_online_changed(cpus), 0);
	run_probe_on(wq, cpu, p);
	EXPECT_EQ(p.affinity, std::vector<int>{cpu});
	destroy_workqueue(wq);
}

TEST(hotplug, items_flowing_while_cpus_go_and_return_are_neither_lost_nor_doubled)
{
	auto cpus = usable();
	if (cpus.size() < 2)
		GTEST_SKIP() << "needs two usable CPUs";
	all_online restore;
	auto *wq = alloc_workqueue("t_hp_flow", WQ_PERCPU, 0);
	auto *uwq = alloc_workqueue("t_hp_flow_u", WQ_UNBOUND, 4);
	ASSERT_TRUE(wq && uwq);
	struct item {
		delayed_work dw;
		std::atomic<int> runs{0};
	};
	constexpr int N = 3000;
	auto items = std::make_unique<item[]>(N);
	auto fn = [](work_struct *w) {
		auto *it = container_of(to_delayed_work(w), item, dw);
		if ((reinterpret_cast<uintptr_t>(it) >> 6) % 8 == 0)
			usleep(200); // some block: new workers start meanwhile
		it->runs.fetch_add(1);
	};
	for (int i = 0; i < N; i++)
		INIT_DELAYED_WORK(&items[i].dw, fn);
	std::atomic<bool> stop{false};
	std::atomic<unsigned> toggles{0};
	std::thread toggler([&] {
		for (unsigned n = 0; !stop.load(); n++) {
			int cpu = cpus[n % cpus.size()];
			cpus_online_changed(n % 3 == 2 ? cpus : without(cpus, cpu));
			toggles.fetch_add(1);
			std::this_thread::sleep_for(std::chrono::microseconds(200));
		}
	});
	// Rounds of N items until the online CPUs changed at least 300 times.
	int rounds = 0;
	for (; rounds < 2 || toggles.load() < 300; rounds++) {
		ASSERT_LT(rounds, 1000) << "the toggler made no progress";
		for (int i = 0; i < N; i++) {
			int cpu = cpus[static_cast<size_t>(i) % cpus.size()];
			bool queued = false;
			switch (i % 3) {
			case 0:
				queued = queue_work_on(cpu, wq, &items[i].dw.work);
				break;
			case 1:
				queued = queue_delayed_work_on(cpu, wq, &items[i].dw, i % 2);
				break;
			default:
				queued = queue_work(uwq, &items[i].dw.work);
			}
			ASSERT_TRUE(queued) << "item " << i << " of round " << rounds << " was still pending";
			if (i % 500 == 499) {
				flush_workqueue(wq); // flush never hangs while CPUs come and go
				flush_workqueue(uwq);
			}
		}
		for (int i = 0; i < N; i++)
			flush_delayed_work(&items[i].dw);
	}
	stop = true;
	toggler.join();
	flush_workqueue(wq);
	flush_workqueue(uwq);
	int lost = 0, doubled = 0;
	for (int i = 0; i < N; i++) {
		lost += items[i].runs < rounds;
		doubled += items[i].runs > rounds;
	}
	EXPECT_EQ(lost, 0) << rounds << " rounds, " << toggles.load() << " changes";
	EXPECT_EQ(doubled, 0);
	ASSERT_EQ(cpus_online_changed(cpus), 0);
	for (int cpu : cpus) {
		auto v = view(g().cpu_pools[0][static_cast<size_t>(cpu)]);
		EXPECT_EQ(v.flags & POOL_DISASSOCIATED, 0u) << cpu;
		EXPECT_TRUE(v.none_unbound) << cpu;
		for (auto &a : v.affinity)
			EXPECT_EQ(a, std::vector<int>{cpu}) << "a worker of CPU " << cpu << " is not bound to it";
	}
	destroy_workqueue(wq);
	destroy_workqueue(uwq);
}

TEST(hotplug, the_online_file_is_followed_when_its_text_changes)
{
	auto cpus = usable();
	if (cpus.size() < 2)
		GTEST_SKIP() << "needs two usable CPUs";
	all_online restore;
	int cpu = cpus.back();
	online_file file(cpus);
	ASSERT_TRUE(file.ok());
	worker_pool *pool = g().cpu_pools[0][static_cast<size_t>(cpu)];
	uint64_t before = hotplug_changes();
	EXPECT_EQ(hotplug_poll(true), 0);
	EXPECT_EQ(hotplug_changes(), before) << "an unchanged file changed something";

	file.write(without(cpus, cpu));
	EXPECT_EQ(hotplug_poll(true), 0);
	EXPECT_NE(view(pool).flags & POOL_DISASSOCIATED, 0u);
	file.write(cpus);
	EXPECT_EQ(hotplug_poll(true), 0);
	EXPECT_EQ(view(pool).flags & POOL_DISASSOCIATED, 0u);

	// A mask given directly stands while the file stays as it was.
	ASSERT_EQ(cpus_online_changed(without(cpus, cpu)), 0);
	EXPECT_EQ(hotplug_poll(true), 0);
	EXPECT_NE(view(pool).flags & POOL_DISASSOCIATED, 0u);
	ASSERT_EQ(cpus_online_changed(cpus), 0);

	// The monitor reads it on its own passes (within a watchdog period).
	before = hotplug_changes();
	auto *wq = alloc_workqueue("t_hp_file", WQ_PERCPU, 0);
	probe p;
	run_probe_on(wq, cpu, p); // the monitor starts with the first worker
	file.write(without(cpus, cpu));
	EXPECT_TRUE(wait_until([&] { return hotplug_changes() > before; }, std::chrono::seconds(40)))
		<< "the monitor did not follow the online file";
	EXPECT_NE(view(pool).flags & POOL_DISASSOCIATED, 0u);

	// Garbage is refused with a message, and changes nothing.
	file.write_text("0-x\n");
	EXPECT_EQ(hotplug_poll(true), -EINVAL);
	EXPECT_NE(view(pool).flags & POOL_DISASSOCIATED, 0u);
	destroy_workqueue(wq);
}

namespace {
std::atomic<bool> refuse_pins{false};
std::atomic<int> pins_refused{0};
bool refusing_pin(pid_t tid, const std::vector<int> &cpus)
{
	if (refuse_pins.load()) {
		pins_refused.fetch_add(1);
		return false;
	}
	return pin_thread(tid, cpus);
}
} // namespace

// The online file lists a returning CPU before the scheduler takes threads
// there: until a worker can be pinned to it, the CPU stays offline to the
// pools (disassociated, its items run on the unbound mask) and the monitor
// tries again on its own, soon, without the file changing again.
TEST(hotplug, a_returning_cpu_that_refuses_its_workers_stays_offline_until_it_takes_them)
{
	auto cpus = usable();
	if (cpus.size() < 2)
		GTEST_SKIP() << "needs two usable CPUs";
	all_online restore;
	int cpu = cpus.back();
	online_file file(cpus);
	ASSERT_TRUE(file.ok());
	auto *wq = alloc_workqueue("t_hp_refuse", WQ_PERCPU, 0);
	ASSERT_TRUE(wq);
	worker_pool *pool = g().cpu_pools[0][static_cast<size_t>(cpu)];
	probe p;
	run_probe_on(wq, cpu, p); // a worker exists, and the monitor runs
	file.write(without(cpus, cpu));
	EXPECT_EQ(hotplug_poll(true), 0);
	ASSERT_NE(view(pool).flags & POOL_DISASSOCIATED, 0u);

	pins_refused = 0;
	refuse_pins = true;
	hotplug_pin_hook = refusing_pin;
	file.write(cpus);
	EXPECT_EQ(hotplug_poll(true), 0);
	EXPECT_GE(pins_refused.load(), 1);
	auto v = view(pool);
	EXPECT_NE(v.flags & POOL_DISASSOCIATED, 0u) << "bound again although no worker could be pinned";
	EXPECT_TRUE(v.all_unbound);
	for (auto &a : v.affinity)
		EXPECT_EQ(a, without(cpus, cpu));
	run_probe_on(wq, cpu, p);
	EXPECT_EQ(p.pool, pool);
	EXPECT_EQ(p.affinity, without(cpus, cpu));
	EXPECT_TRUE(hotplug_retry_pending());
	{
		lock_guard gk(g().pool_mutex);
		EXPECT_EQ(g().online, without(cpus, cpu));
	}
	// The monitor keeps trying, with the file unchanged.
	int seen = pins_refused.load();
	EXPECT_TRUE(wait_until([&] { return pins_refused.load() > seen + 1; }, std::chrono::seconds(20)))
		<< "no retry while the CPU refused its workers";

	refuse_pins = false;
	EXPECT_TRUE(wait_until([&] { return (view(pool).flags & POOL_DISASSOCIATED) == 0; }, std::chrono::seconds(20)))
		<< "not bound again once the CPU took its workers";
	hotplug_pin_hook = nullptr;
	v = view(pool);
	EXPECT_TRUE(v.none_unbound);
	for (auto &a : v.affinity)
		EXPECT_EQ(a, std::vector<int>{cpu});
	run_probe_on(wq, cpu, p);
	EXPECT_EQ(p.affinity, std::vector<int>{cpu});
	EXPECT_EQ(p.ran_on, cpu);
	EXPECT_FALSE(hotplug_retry_pending());
	destroy_workqueue(wq);
}

TEST(hotplug, a_mask_without_any_usable_cpu_is_refused_and_changes_nothing)
{
	uint64_t before = hotplug_changes();
	EXPECT_EQ(cpus_online_changed({}), -EINVAL);
	EXPECT_EQ(cpus_online_changed({9999}), -EINVAL);
	EXPECT_EQ(hotplug_changes(), before);
	lock_guard gk(g().pool_mutex);
	EXPECT_EQ(g().online, g().usable);
}
