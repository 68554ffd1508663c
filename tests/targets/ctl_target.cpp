// ctl_target - a small cmwq process for the wqctl / wq_monitor end-to-end
// tests (tests/ctl_tools_test.sh).
//
// Creates two WQ_SYSFS workqueues (unbound, and per-CPU with WQ_MEM_RECLAIM),
// starts the control endpoint, prints "ready <socket path>", then runs a
// batch of items on each every 50 ms until SIGTERM/SIGINT or the timeout
// (argument 1, seconds, default 60). It returns from main so the exit
// handler removes the socket, as in any program.
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

#include <cmwq/control.h>
#include <cmwq/linux/workqueue.h>
#include <cmwq/stats.h>

namespace {

std::atomic<long> items{0};

void item_fn(work_struct *) { items.fetch_add(1, std::memory_order_relaxed); }

void run_batch(workqueue_struct *wq, std::vector<work_struct> &w)
{
	for (auto &x : w)
		queue_work(wq, &x);
	flush_workqueue(wq);
}

} // namespace

int main(int argc, char **argv)
{
	double timeout_s = argc > 1 ? std::atof(argv[1]) : 60.0;
	if (!(timeout_s > 0))
		timeout_s = 60.0;

	// Before any cmwq call, so every library thread inherits the mask and
	// the signals reach sigtimedwait below.
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	pthread_sigmask(SIG_BLOCK, &stop, nullptr);

	workqueue_struct *ub = alloc_workqueue("ctl_target_unbound", WQ_UNBOUND | WQ_SYSFS, 0);
	workqueue_struct *pc =
		alloc_workqueue("ctl_target_percpu", WQ_PERCPU | WQ_SYSFS | WQ_MEM_RECLAIM, 0);
	// A name with a byte that is not UTF-8 and a line break: the tools' JSON
	// must stay valid.
	workqueue_struct *odd = alloc_workqueue("ctl_target_odd\xff\nx", WQ_UNBOUND, 0);
	if (!ub || !pc || !odd) {
		std::fprintf(stderr, "ctl_target: alloc_workqueue failed\n");
		return 1;
	}
	int rc = cmwq_control_start();
	if (rc != 0) {
		std::fprintf(stderr, "ctl_target: cmwq_control_start: %d\n", rc);
		return 1;
	}
	std::vector<work_struct> wu(20), wp(20);
	for (auto &x : wu)
		INIT_WORK(&x, item_fn);
	for (auto &x : wp)
		INIT_WORK(&x, item_fn);
	run_batch(ub, wu);
	run_batch(pc, wp);
	std::printf("ready %s\n", cmwq_control_path());
	std::fflush(stdout);

	timespec start{};
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;) {
		timespec tick{0, 50 * 1000 * 1000};
		int sig = sigtimedwait(&stop, nullptr, &tick);
		if (sig == SIGTERM || sig == SIGINT)
			break;
		timespec now{};
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (static_cast<double>(now.tv_sec - start.tv_sec) +
			    static_cast<double>(now.tv_nsec - start.tv_nsec) / 1e9 >
		    timeout_s) {
			std::fprintf(stderr, "ctl_target: timed out after %.0f s\n", timeout_s);
			break;
		}
		run_batch(ub, wu);
		run_batch(pc, wp);
	}
	destroy_workqueue(ub);
	destroy_workqueue(pc);
	std::printf("done %ld items\n", items.load());
	return 0;
}
