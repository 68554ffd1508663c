// wq_detect_bench - how fast a per-CPU pool notices a worker that blocks
// without a hint, what the detection costs while stalled, and what it costs
// the queue/execute path when nothing blocks (detection on vs off).
//
//   wq_detect_bench [--rounds N] [--settings perf,perf/G,S:W,...] [--items N]
//
// Each round queues item A then item B on the same CPU; A records the time
// and blocks in a plain read() on a pipe (no hint); B records when it
// starts and writes the pipe. Latency = B.start - A.block. Settings are
// "perf" (cmwq.block_detect=perf with sampling off: the context-switch
// events alone, with the default cmwq.block_grace_us of 0), "perf/G" (the same
// with a grace of G us) or cmwq.blocked_sample_us:cmwq.blocked_window_us
// pairs (cmwq.block_detect=sample).
//
// Then a lock held for moments by a thread on another CPU: items on the
// pool's CPU take it again and again, and sleep on it for a few µs at a
// time. Under perf, each grace is measured: items/s, and the blocks counted
// (CM_WAKEUP: a second worker woken for a wait that ends in microseconds).
#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>
#include <cmwq/stats.h>
#include <cmwq/topology.hpp>

#include <pthread.h>

#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

double cpu_s()
{
	rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int pfd[2];
std::atomic<uint64_t> t_block{0}, t_start{0};

void blocker(work_struct *)
{
	t_block.store(now_ns());
	char c;
	(void)!read(pfd[0], &c, 1); // blocks, no hint
}

void releaser(work_struct *)
{
	t_start.store(now_ns());
	(void)!write(pfd[1], "x", 1);
}

void sleep_1s(work_struct *)
{
	timespec ts{1, 0};
	nanosleep(&ts, nullptr); // no hint
}

std::atomic<long> ran{0};
void tiny(work_struct *) { ran.fetch_add(1, std::memory_order_relaxed); }

void spin_ns(uint64_t ns)
{
	uint64_t end = now_ns() + ns;
	while (now_ns() < end) {
	}
}

pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
void lock_taker(work_struct *)
{
	for (int i = 0; i < 50; i++) {
		pthread_mutex_lock(&shared_lock);
		spin_ns(1000);
		pthread_mutex_unlock(&shared_lock);
		spin_ns(2000);
	}
	ran.fetch_add(1, std::memory_order_relaxed);
}

double pct(std::vector<double> v, double p)
{
	std::sort(v.begin(), v.end());
	return v[std::min(v.size() - 1, static_cast<size_t>(p * (v.size() - 1) + 0.5))];
}

} // namespace

int main(int argc, char **argv)
{
	int rounds = 200;
	long items = 300000;
	std::string settings = "perf,perf/50,100:200,200:500,500:1000,1000:2000";
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			rounds = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--items") && i + 1 < argc)
			items = atol(argv[++i]);
		else if (!strcmp(argv[i], "--settings") && i + 1 < argc)
			settings = argv[++i];
		else {
			fprintf(stderr, "usage: %s [--rounds N] [--items N] [--settings perf,perf/G,S:W,...]\n", argv[0]);
			return 2;
		}
	}
	if (pipe(pfd))
		return 1;
	int cpu = cmwq::current_topology().usable.back();
	auto *wq = alloc_workqueue("detect", WQ_PERCPU, 0);
	printf("# un-annotated blocking: latency from A blocking to B starting on CPU %d, %d rounds\n", cpu, rounds);
	printf("%-12s %-12s %10s %10s %10s %12s\n", "sample_us", "window_us", "p50_us", "p99_us", "max_us",
	       "cpu_%_stall");
	size_t pos = 0;
	while (pos < settings.size()) {
		size_t comma = settings.find(',', pos);
		std::string s = settings.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
		pos = comma == std::string::npos ? settings.size() : comma + 1;
		auto colon = s.find(':');
		std::string sample, window;
		if (s == "perf" || s.rfind("perf/", 0) == 0) {
			sample = "0";
			window = "500";
			if (cmwq_param_set("cmwq.block_grace_us", s == "perf" ? "0" : s.substr(5).c_str())) {
				fprintf(stderr, "bad grace in %s: perf/G takes G in microseconds, 0 to 1000000\n",
					s.c_str());
				return 2;
			}
			if (cmwq_param_set("cmwq.block_detect", "perf")) {
				fprintf(stderr, "perf: context-switch events are not available; skipped\n");
				continue;
			}
		} else if (colon != std::string::npos) {
			sample = s.substr(0, colon);
			window = s.substr(colon + 1);
			cmwq_param_set("cmwq.block_detect", "sample");
		} else {
			fprintf(stderr, "bad setting %s\n", s.c_str());
			return 2;
		}
		if (cmwq_param_set("cmwq.blocked_sample_us", sample.c_str()) ||
		    cmwq_param_set("cmwq.blocked_window_us", window.c_str())) {
			fprintf(stderr, "bad setting %s\n", s.c_str());
			return 2;
		}
		if (s.rfind("perf", 0) == 0)
			sample = s;
		std::vector<double> lat;
		for (int r = 0; r < rounds; r++) {
			work_struct a, b;
			INIT_WORK(&a, blocker);
			INIT_WORK(&b, releaser);
			queue_work_on(cpu, wq, &a);
			queue_work_on(cpu, wq, &b);
			flush_work(&a);
			flush_work(&b);
			lat.push_back((t_start.load() - t_block.load()) / 1e3);
		}
		// CPU cost while a pool stays stalled for 1 s (the monitor samples).
		work_struct a, b;
		INIT_WORK(&a, sleep_1s);
		INIT_WORK(&b, tiny);
		cmwq_param_set("cmwq.blocked_window_us", "2000000000"); // found blocked never: stays armed
		double c0 = cpu_s();
		uint64_t w0 = now_ns();
		queue_work_on(cpu, wq, &a);
		queue_work_on(cpu, wq, &b);
		flush_work(&b);
		flush_work(&a);
		double stall = 100.0 * (cpu_s() - c0) / ((now_ns() - w0) / 1e9);
		printf("%-12s %-12s %10.0f %10.0f %10.0f %12.2f\n", sample.c_str(), window.c_str(), pct(lat, 0.5),
		       pct(lat, 0.99), pct(lat, 1.0), stall);
	}
	cmwq_param_set("cmwq.blocked_sample_us", "200");
	cmwq_param_set("cmwq.blocked_window_us", "500");
	cmwq_param_set("cmwq.block_grace_us", "0");

	// A lock another CPU holds for moments (1 µs of 3, taken and given back
	// by a thread there); 400 items on the pool's CPU, each taking it 50
	// times. Graces alternated round by round, medians of 5.
	const std::vector<int> cpus = cmwq::current_topology().usable;
	if (cpus.size() >= 2 && cmwq_param_set("cmwq.block_detect", "perf") == 0) {
		int other = cpus.front() == cpu ? cpus.back() : cpus.front();
		std::atomic<bool> stop{false};
		pthread_t rival;
		struct rival_arg {
			int cpu;
			std::atomic<bool> *stop;
		} ra{other, &stop};
		pthread_create(&rival, nullptr,
			       [](void *p) -> void * {
				       auto *a = static_cast<rival_arg *>(p);
				       cpu_set_t set;
				       CPU_ZERO(&set);
				       CPU_SET(a->cpu, &set);
				       pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
				       while (!a->stop->load(std::memory_order_relaxed)) {
					       pthread_mutex_lock(&shared_lock);
					       spin_ns(1000);
					       pthread_mutex_unlock(&shared_lock);
					       spin_ns(2000);
				       }
				       return nullptr;
			       },
			       &ra);
		const char *graces[] = {"0", "50", "200"};
		std::vector<double> rate[3], counted[3];
		std::vector<work_struct> lw(400);
		for (int r = 0; r < 5; r++) {
			for (int g = 0; g < 3; g++) {
				cmwq_param_set("cmwq.block_grace_us", graces[g]);
				uint64_t st0[PWQ_NR_STATS], st1[PWQ_NR_STATS];
				cmwq_workqueue_stats(wq, st0);
				for (auto &w : lw)
					INIT_WORK(&w, lock_taker);
				ran = 0;
				uint64_t t0 = now_ns();
				for (auto &w : lw)
					queue_work_on(cpu, wq, &w);
				flush_workqueue(wq);
				rate[g].push_back(ran.load() / ((now_ns() - t0) / 1e9));
				cmwq_workqueue_stats(wq, st1);
				counted[g].push_back(static_cast<double>(st1[PWQ_STAT_CM_WAKEUP] - st0[PWQ_STAT_CM_WAKEUP]));
			}
		}
		stop = true;
		pthread_join(rival, nullptr);
		printf("\n# a lock held for moments by CPU %d: 400 items on CPU %d take it 50 times each; perf, "
		       "medians of 5 alternated rounds\n",
		       other, cpu);
		printf("%-14s %12s %8s %16s\n", "block_grace_us", "items/s", "vs 0", "blocks counted");
		for (int g = 0; g < 3; g++)
			printf("%-14s %12.0f %7.3fx %16.0f\n", graces[g], pct(rate[g], 0.5),
			       pct(rate[g], 0.5) / pct(rate[0], 0.5), pct(counted[g], 0.5));
		cmwq_param_set("cmwq.block_grace_us", "0");
		cmwq_param_set("cmwq.block_detect", "auto");
	}

	// What detection costs when nothing blocks: the producer pinned to the
	// pool's CPU (the wq_bench per-CPU protocols' arrangement), the
	// detectors alternated round by round so drift hits all alike.
	{
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	const char *modes[] = {"off", "sample", "perf"};
	std::vector<double> fan[3], one[3];
	std::vector<work_struct> ws(static_cast<size_t>(items));
	for (int r = 0; r < 7; r++) {
		for (int m = 0; m < 3; m++) {
			cmwq_param_set("cmwq.block_detect", modes[m]);
			for (auto &w : ws)
				INIT_WORK(&w, tiny);
			ran = 0;
			uint64_t t0 = now_ns();
			for (auto &w : ws)
				queue_work_on(cpu, wq, &w);
			flush_workqueue(wq);
			fan[m].push_back(ran.load() / ((now_ns() - t0) / 1e9));
			// One item in flight (the kernel protocol's shape): queue,
			// wait for it, again.
			int n = 20000;
			work_struct w;
			INIT_WORK(&w, tiny);
			t0 = now_ns();
			for (int i = 0; i < n; i++) {
				queue_work_on(cpu, wq, &w);
				flush_work(&w);
			}
			one[m].push_back(n / ((now_ns() - t0) / 1e9));
		}
	}
	printf("\n# nothing blocks: one CPU's pool, producer on CPU %d, medians of 7 alternated rounds\n", cpu);
	printf("%-10s %16s %8s %18s %8s\n", "detector", "fan-out items/s", "vs off", "one-in-flight /s", "vs off");
	for (int m = 0; m < 3; m++) {
		char eff[16] = "";
		cmwq_param_set("cmwq.block_detect", modes[m]);
		cmwq_param_get("cmwq.block_detect", eff, sizeof(eff));
		double f = pct(fan[m], 0.5), o = pct(one[m], 0.5);
		printf("%-10s %16.0f %7.3fx %18.0f %7.3fx\n", eff, f, f / pct(fan[0], 0.5), o, o / pct(one[0], 0.5));
	}
	cmwq_param_set("cmwq.block_detect", "auto");
	destroy_workqueue(wq);
	return 0;
}
