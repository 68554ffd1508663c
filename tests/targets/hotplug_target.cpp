/*
 * hotplug_target.cpp - real CPU hotplug under load, for the many-CPU guest
 * (scripts/guest-run.sh): while producers queue items to every CPU's
 * per-CPU pool (plain and delayed) and to an unbound workqueue, CPUs are
 * taken offline through /sys/devices/system/cpu/cpuN/online and brought
 * back. Checked: the library notices each change (the pool of the CPU
 * shows POOL_DISASSOCIATED, then loses it); an item queued to the offline
 * CPU still runs, elsewhere; no unbound pod holds the offline CPU; the
 * CPU's workers are bound to it again when it returns; no item is lost
 * or run twice, and every flush returns.
 *
 * It takes CPUs of the machine it runs on offline, so it does nothing
 * unless CMWQ_HOTPLUG_REAL=1 is set (the guest sets it). Exit 0 when every
 * check passes.
 */
#include <cmwq/introspect.hpp>
#include <cmwq/linux/workqueue.h>
#include <cmwq/topology.hpp>

#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int PRODUCERS = 2;
constexpr int PER_PRODUCER = 20000;

int failures = 0;
#define CHECK(cond, ...)                                      \
	do {                                                  \
		if (!(cond)) {                                \
			printf("hotplug_target: FAIL: " __VA_ARGS__); \
			printf("\n");                         \
			failures++;                           \
		}                                             \
	} while (0)

struct item {
	delayed_work dw;
	std::atomic<int> runs{0};
};

void item_fn(work_struct *w)
{
	auto *it = container_of(to_delayed_work(w), item, dw);
	if ((reinterpret_cast<uintptr_t>(it) >> 6) % 16 == 0)
		usleep(100); // some block: the pools start workers meanwhile
	it->runs.fetch_add(1);
}

struct probe {
	work_struct work;
	int ran_on = -1;
};

void probe_fn(work_struct *w) { container_of(w, probe, work)->ran_on = sched_getcpu(); }

double now_s()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

bool set_online(int cpu, bool on)
{
	std::string path = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/online";
	FILE *f = fopen(path.c_str(), "w");
	if (!f)
		return false;
	bool ok = fputs(on ? "1" : "0", f) >= 0;
	return fclose(f) == 0 && ok;
}

// The normal-priority per-CPU pool of cpu, from the snapshot.
bool percpu_pool(int cpu, cmwq::pool_info &out)
{
	for (auto &p : cmwq::snapshot().pools)
		if (p.cpu == cpu && !p.highpri && !(p.flags & cmwq::pool_flag_bh)) {
			out = p;
			return true;
		}
	return false;
}

bool wait_disassociated(int cpu, bool want, double limit_s)
{
	double end = now_s() + limit_s;
	cmwq::pool_info p;
	while (now_s() < end) {
		if (percpu_pool(cpu, p) && ((p.flags & cmwq::pool_flag_disassociated) != 0) == want)
			return true;
		usleep(10000);
	}
	return false;
}

// The affinity of each worker thread of cpu's normal per-CPU pool
// ("kworker/<cpu>:<id>").
std::vector<std::vector<int>> worker_affinities(int cpu)
{
	std::vector<std::vector<int>> out;
	std::string prefix = "kworker/" + std::to_string(cpu) + ":";
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return out;
	while (dirent *e = readdir(d)) {
		if (e->d_name[0] == '.')
			continue;
		char path[64], comm[32] = "";
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		if (FILE *f = fopen(path, "r")) {
			if (!fgets(comm, sizeof(comm), f))
				comm[0] = 0;
			fclose(f);
		}
		std::string c = comm;
		if (c.compare(0, prefix.size(), prefix) != 0 || c.find('H') != std::string::npos)
			continue;
		cpu_set_t set;
		CPU_ZERO(&set);
		std::vector<int> cpus;
		if (sched_getaffinity(atoi(e->d_name), sizeof(set), &set) == 0)
			for (int i = 0; i < CPU_SETSIZE; i++)
				if (CPU_ISSET(i, &set))
					cpus.push_back(i);
		out.push_back(cpus);
	}
	closedir(d);
	return out;
}

} // namespace

int main()
{
	if (!getenv("CMWQ_HOTPLUG_REAL")) {
		puts("hotplug_target: not run: it takes this machine's CPUs offline (set CMWQ_HOTPLUG_REAL=1, in a guest)");
		return 0;
	}
	std::vector<int> usable = cmwq::snapshot().usable;
	if (usable.size() < 4) {
		printf("hotplug_target: needs 4 usable CPUs, has %zu\n", usable.size());
		return 1;
	}
	// Never CPU 0 (often not hotpluggable); one early, one middle, the last.
	size_t n = usable.size();
	std::vector<int> victims = {usable[1], usable[n / 2], usable[n - 1]};
	auto *percpu = alloc_workqueue("hp_percpu", WQ_PERCPU, 0);
	auto *unbound = alloc_workqueue("hp_unbound", WQ_UNBOUND, 8);
	if (!percpu || !unbound)
		return 1;
	auto items = std::make_unique<item[]>(PRODUCERS * PER_PRODUCER);
	for (int i = 0; i < PRODUCERS * PER_PRODUCER; i++)
		INIT_DELAYED_WORK(&items[i].dw, item_fn);
	std::atomic<bool> refused{false};
	std::vector<std::thread> producers;
	for (int p = 0; p < PRODUCERS; p++)
		producers.emplace_back([&, p] {
			for (int i = 0; i < PER_PRODUCER; i++) {
				item &it = items[p * PER_PRODUCER + i];
				int cpu = usable[static_cast<size_t>(i) % n];
				bool ok = false;
				switch (i % 3) {
				case 0:
					ok = queue_work_on(cpu, percpu, &it.dw.work);
					break;
				case 1:
					ok = queue_delayed_work_on(cpu, percpu, &it.dw, 1);
					break;
				default:
					ok = queue_work(unbound, &it.dw.work);
				}
				if (!ok)
					refused = true;
				if (i % 16 == 15)
					usleep(2000); // spread the flow over the hotplug cycles
			}
		});

	int cycles = 0;
	for (int cpu : victims) {
		if (!set_online(cpu, false)) {
			printf("hotplug_target: FAIL: cannot take CPU %d offline: %s\n", cpu, strerror(errno));
			failures++;
			continue;
		}
		CHECK(wait_disassociated(cpu, true, 30), "CPU %d offline: its pool not disassociated within 30 s", cpu);
		probe pr;
		INIT_WORK(&pr.work, probe_fn);
		CHECK(queue_work_on(cpu, percpu, &pr.work), "CPU %d offline: queue_work_on refused", cpu);
		flush_work(&pr.work);
		CHECK(pr.ran_on >= 0 && pr.ran_on != cpu, "CPU %d offline: its item ran on CPU %d", cpu, pr.ran_on);
		for (auto &a : worker_affinities(cpu))
			CHECK(std::find(a.begin(), a.end(), cpu) == a.end(), "CPU %d offline: a worker may still run there", cpu);
		for (auto &wi : cmwq::snapshot().workqueues)
			if (wi.name == "hp_unbound")
				for (int id : wi.cpu_pool)
					for (auto &p : cmwq::snapshot().pools)
						if (p.id == id)
							CHECK(std::find(p.pod_cpus.begin(), p.pod_cpus.end(), cpu) == p.pod_cpus.end(),
							      "CPU %d offline: an unbound pod still holds it", cpu);
		usleep(300000); // items flow to the disassociated pool a while

		if (!set_online(cpu, true)) {
			printf("hotplug_target: FAIL: cannot bring CPU %d back: %s\n", cpu, strerror(errno));
			failures++;
			continue;
		}
		CHECK(wait_disassociated(cpu, false, 30), "CPU %d back: its pool still disassociated after 30 s", cpu);
		INIT_WORK(&pr.work, probe_fn);
		queue_work_on(cpu, percpu, &pr.work);
		flush_work(&pr.work);
		CHECK(pr.ran_on == cpu, "CPU %d back: its item ran on CPU %d", cpu, pr.ran_on);
		auto aff = worker_affinities(cpu);
		CHECK(!aff.empty(), "CPU %d back: no worker of its pool found", cpu);
		for (auto &a : aff)
			CHECK(a == std::vector<int>{cpu}, "CPU %d back: a worker is not bound to it again (it may run on %s)",
			      cpu, cmwq::format_cpulist(a).c_str());
		cycles++;
	}
	for (auto &t : producers)
		t.join();
	for (int i = 0; i < PRODUCERS * PER_PRODUCER; i++)
		flush_delayed_work(&items[i].dw);
	flush_workqueue(percpu);
	flush_workqueue(unbound);
	int lost = 0, doubled = 0;
	for (int i = 0; i < PRODUCERS * PER_PRODUCER; i++) {
		lost += items[i].runs == 0;
		doubled += items[i].runs > 1;
	}
	CHECK(!refused, "an item was refused (still pending from an earlier queue)");
	CHECK(lost == 0 && doubled == 0, "%d lost, %d run twice", lost, doubled);
	destroy_workqueue(percpu);
	destroy_workqueue(unbound);
	printf("hotplug_target: %d of %zu CPUs offline and back under load; %d items: %d lost, %d doubled; %s\n",
	       cycles, victims.size(), PRODUCERS * PER_PRODUCER, lost, doubled,
	       failures ? "FAILED" : "every check passed");
	return failures ? 1 : 0;
}
