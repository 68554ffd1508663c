// test_fds.cpp - the program's file descriptors are the program's: while
// workers block and the library samples them or opens their events, the
// program's own open() never fails because of the library, a limit lowered
// after start is followed, and a blocked worker is still found when no
// descriptor is free. Its own program: it lowers RLIMIT_NOFILE.
#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>
#include <cmwq/topology.hpp>
#include <gtest/gtest.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"

using namespace std::chrono_literals;

namespace {

using saved_params = saved_detector_params;

// Read once, before any squeeze: cmwq::current_topology() reads /sys, and
// a call the program makes opens what it needs.
int test_cpu()
{
	static int cpu = cmwq::current_topology().usable.back();
	return cpu;
}

int open_fds()
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	while (dirent *e = readdir(d))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; // the directory itself
}

// Lowers the soft RLIMIT_NOFILE to what is open now plus `room`, then takes
// every free descriptor but `left`; undone on destruction.
struct fd_squeeze {
	rlimit saved{};
	std::vector<int> taken;
	fd_squeeze(int room, int left)
	{
		// glibc reads /sys/devices/system/cpu/online (one descriptor, for a
		// moment) once per process, when a thread's malloc makes the ninth
		// arena: have that happen now, not in a thread started later.
		{
			std::atomic<int> up{0};
			std::vector<std::thread> ts;
			for (int i = 0; i < 16; i++)
				ts.emplace_back([&up] {
					void *p = malloc(64);
					up++;
					while (up.load() < 16)
						std::this_thread::yield();
					free(p);
				});
			for (auto &t : ts)
				t.join();
		}
		getrlimit(RLIMIT_NOFILE, &saved);
		rlimit rl = saved;
		rl.rlim_cur = static_cast<rlim_t>(open_fds() + room);
		EXPECT_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
		for (;;) {
			int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
			if (fd < 0)
				break;
			taken.push_back(fd);
		}
		for (int i = 0; i < left && !taken.empty(); i++) {
			close(taken.back());
			taken.pop_back();
		}
	}
	~fd_squeeze()
	{
		for (int fd : taken)
			close(fd);
		setrlimit(RLIMIT_NOFILE, &saved);
	}
};

// A sleeps (no hint) until B, queued behind it on one CPU's pool, starts:
// B starts only if the library finds A blocked. A sleeps in 5 ms steps, so
// it takes seconds to use the CPU time of a hog (cmwq.cpu_intensive_thresh_us,
// 10 ms), which would also let B start.
std::atomic<bool> b_started, give_up;
void a_fn(work_struct *)
{
	while (!b_started.load() && !give_up.load()) {
		timespec ts{0, 5000000};
		nanosleep(&ts, nullptr);
	}
}
void b_fn(work_struct *) { b_started = true; }

bool b_starts_while_a_blocks(workqueue_struct *wq, std::chrono::milliseconds limit)
{
	b_started = give_up = false;
	work_struct a, b;
	INIT_WORK(&a, a_fn);
	INIT_WORK(&b, b_fn);
	queue_work_on(test_cpu(), wq, &a);
	queue_work_on(test_cpu(), wq, &b);
	bool ok = wait_until([] { return b_started.load(); }, limit);
	give_up = true;
	flush_workqueue(wq);
	return ok;
}

class fds : public testing::TestWithParam<const char *> {
protected:
	void SetUp() override
	{
		if (getenv("CMWQ_UNDER_EMULATION"))
			GTEST_SKIP() << "an emulator's /proc does not show its threads' states";
		if (cmwq_param_set("cmwq.block_detect", GetParam()) != 0)
			GTEST_SKIP() << "cmwq.block_detect=" << GetParam() << " is not available here";
		ASSERT_EQ(cmwq_param_set("cmwq.blocked_sample_us", "50"), 0);
		wq = alloc_workqueue("fds_%s", WQ_PERCPU, 0, GetParam());
		ASSERT_NE(wq, nullptr);
		// The pool's workers and the monitor exist before the squeeze.
		ASSERT_TRUE(b_starts_while_a_blocks(wq, 20000ms));
	}
	void TearDown() override
	{
		if (wq)
			destroy_workqueue(wq);
	}
	saved_params saved;
	workqueue_struct *wq = nullptr;
};

} // namespace

// One descriptor free, the limit lowered after start: workers block, are
// sampled and (perf) would open events, and every open() of the program's
// succeeds meanwhile.
TEST_P(fds, the_programs_opens_never_fail_while_workers_block_with_one_descriptor_free)
{
	// A pool of its own with its workers started before the squeeze, and
	// no event opened yet: (perf) they try to open theirs while one
	// descriptor is free. Workers the pool starts during the squeeze
	// (its next idle one) start in the library's spare slot.
	workqueue_struct *fresh = alloc_workqueue("fds_fresh_%s", WQ_PERCPU | WQ_HIGHPRI, 0, GetParam());
	ASSERT_NE(fresh, nullptr);
	{
		std::vector<work_struct> warm(4);
		for (auto &w : warm) {
			INIT_WORK(&w, b_fn);
			queue_work_on(test_cpu(), fresh, &w);
		}
		flush_workqueue(fresh);
	}
	// The test's own thread starts before the squeeze: its first malloc in
	// glibc may read /sys/devices/system/cpu/online (a descriptor, for a
	// moment), and the program's own threads are not the library's to guard.
	std::atomic<bool> go{false}, stop{false};
	std::atomic<int> rounds{0}, found{0};
	std::thread blocker([&] {
		while (!go.load())
			std::this_thread::sleep_for(1ms);
		while (!stop.load()) {
			found += b_starts_while_a_blocks(rounds.load() % 2 ? wq : fresh, 5000ms);
			rounds++;
		}
	});
	fd_squeeze squeeze(200, 1);
	go = true;
	long opens = 0, failed = 0;
	auto end = std::chrono::steady_clock::now() + 1500ms;
	while (std::chrono::steady_clock::now() < end || rounds.load() < 3) {
		int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
		opens++;
		if (fd < 0)
			failed++;
		else
			close(fd);
	}
	stop = true;
	blocker.join();
	destroy_workqueue(fresh);
	// None at all: a worker started meanwhile (the pool's next idle one)
	// opens a file in glibc at its first malloc, in the spare's slot its
	// creator lends it (fds.cpp).
	EXPECT_EQ(failed, 0) << failed << " of " << opens << " of the program's opens failed while "
			     << rounds.load() << " rounds of blocked workers ran";
	EXPECT_EQ(found.load(), rounds.load()) << "a blocked worker was not found";
}

// Every descriptor taken: a blocked worker is still found by sampling
// (through the descriptor the library kept from its start).
TEST_P(fds, a_blocked_worker_is_found_with_no_descriptor_free)
{
	fd_squeeze squeeze(200, 0);
	ASSERT_LT(open("/dev/null", O_RDONLY | O_CLOEXEC), 0) << "a descriptor was still free";
	for (int i = 0; i < 3; i++)
		EXPECT_TRUE(b_starts_while_a_blocks(wq, 3000ms)) << "round " << i;
}

INSTANTIATE_TEST_SUITE_P(block_detect, fds, testing::Values("sample", "perf"));

// The library started with no descriptor free, so its monitor could make
// no epoll set: once descriptors are free again, the workers' events are
// opened and read (sampling off, so nothing else could find the block).
// In a fresh process (a death-test child), where the library starts here.
TEST(fds_at_start, events_opened_after_a_start_with_no_descriptor_free_are_read)
{
	if (getenv("CMWQ_UNDER_EMULATION"))
		GTEST_SKIP() << "no context-switch events under an emulator";
	{
		saved_params saved;
		if (cmwq_param_set("cmwq.block_detect", "perf") != 0)
			GTEST_SKIP() << "context-switch events are not available here";
	}
	GTEST_FLAG_SET(death_test_style, "threadsafe");
	EXPECT_EXIT(
		{
			workqueue_struct *wq;
			{
				fd_squeeze squeeze(200, 0);
				wq = alloc_workqueue("fds_cold", WQ_PERCPU, 0);
				if (!wq)
					_exit(2);
				b_started = false;
				work_struct w;
				INIT_WORK(&w, b_fn);
				queue_work_on(test_cpu(), wq, &w); // the first worker starts the monitor
				if (!wait_until([] { return b_started.load(); }, 10000ms))
					_exit(3);
				flush_workqueue(wq);
			}
			if (cmwq_param_set("cmwq.block_detect", "perf") || cmwq_param_set("cmwq.blocked_sample_us", "0"))
				_exit(4);
			bool ok = b_starts_while_a_blocks(wq, 10000ms) && b_starts_while_a_blocks(wq, 10000ms);
			_exit(ok ? 0 : 1);
		},
		testing::ExitedWithCode(0), "");
}

// The spare is taken when the monitor starts, not on first use: a program
// that fills every descriptor after its first work item, before any worker
// blocked, still has a blocked worker found by sampling. A fresh process.
TEST(fds_at_start, the_spare_is_taken_before_the_program_fills_its_descriptors)
{
	if (getenv("CMWQ_UNDER_EMULATION"))
		GTEST_SKIP() << "an emulator's /proc does not show its threads' states";
	GTEST_FLAG_SET(death_test_style, "threadsafe");
	// A quota the program gives (so start-up reads no cgroup file, which
	// would leave a descriptor behind as the spare too).
	std::string params = getenv("CMWQ_PARAMS") ? getenv("CMWQ_PARAMS") : "";
	setenv("CMWQ_PARAMS", (params + " cmwq.cpu_quota=2").c_str(), 1);
	EXPECT_EXIT(
		{
			// No context-switch events (as under seccomp or an emulator):
			// the detector's probe then takes no descriptor either.
			if (cmwq_param_set("cmwq.fail_perf_open", "1") || cmwq_param_set("cmwq.block_detect", "sample") ||
			    cmwq_param_set("cmwq.blocked_sample_us", "200") ||
			    cmwq_param_set("workqueue.cpu_intensive_thresh_us", "60000000"))
				_exit(4);
			workqueue_struct *wq = alloc_workqueue("fds_spare", WQ_PERCPU, 0);
			if (!wq)
				_exit(2);
			b_started = false;
			work_struct w;
			INIT_WORK(&w, b_fn);
			queue_work_on(test_cpu(), wq, &w); // the first worker starts the monitor
			if (!wait_until([] { return b_started.load(); }, 10000ms))
				_exit(3);
			flush_workqueue(wq);
			std::this_thread::sleep_for(100ms); // the monitor is up
			fd_squeeze squeeze(200, 0);
			_exit(b_starts_while_a_blocks(wq, 10000ms) ? 0 : 1);
		},
		testing::ExitedWithCode(0), "");
	setenv("CMWQ_PARAMS", params.c_str(), 1);
}
