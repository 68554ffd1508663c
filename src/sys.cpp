// sys.cpp - the engine's platform layer: clocks, the futex wait and wake
// (the only place that issues the system call), the one way a sleeping
// worker is woken, CPU affinity and nice, function names and warnings.
// Kept apart from the policy so that a change of mechanism (how a worker
// sleeps and is woken) touches one file; the policy stays in pool.cpp.
#include "engine.h"

#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>

namespace cmwq::detail {

globals &g()
{
	static globals *gl = new globals; // never freed: workers may outlive main
	return *gl;
}

uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t thread_cpu_ns()
{
	timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void futex_wait(std::atomic<int> *a, int val)
{
	syscall(SYS_futex, reinterpret_cast<int *>(a), FUTEX_WAIT_PRIVATE, val, nullptr, nullptr, 0);
}
void futex_wake(std::atomic<int> *a, int n)
{
	syscall(SYS_futex, reinterpret_cast<int *>(a), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}

std::string func_name(work_func_t f)
{
	Dl_info info;
	char buf[64];
	if (f && dladdr(reinterpret_cast<void *>(f), &info) && info.dli_sname)
		return info.dli_sname;
	snprintf(buf, sizeof(buf), "%p", reinterpret_cast<void *>(f));
	return buf;
}

int spawn_thread(void *(*fn)(void *), void *arg)
{
	long f = params().fail_thread_creation.load();
	if (f == -1 || (f > 0 && params().fail_thread_creation.compare_exchange_strong(f, f - 1)))
		return EAGAIN; // injected by cmwq.fail_thread_creation
	// Asynchronous signals stay with the program's own threads: a library
	// thread blocks them from its first instruction (the mask is inherited).
	// Signals raised by a fault in the thread itself stay deliverable.
	sigset_t all, old;
	sigfillset(&all);
	for (int s : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT})
		sigdelset(&all, s);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_t t;
	int rc = pthread_create(&t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, nullptr);
	return rc;
}

void thread_start_failed(const char *what, int err, const char *then)
{
	char key[64];
	snprintf(key, sizeof(key), "spawn-%s-%d", what, err);
	warn_once_msg(key, std::string("cmwq: cannot start the ") + what + " thread: " + strerror(err) + "; " + then);
}

bool null_arg(const char *call, const char *arg)
{
	char key[96];
	snprintf(key, sizeof(key), "null-%s-%s", call, arg);
	warn_once_msg(key, std::string("cmwq: ") + call + "(): " + arg + " is NULL; nothing done");
	return true;
}

namespace {
struct warn_state {
	mutex lock;
	std::set<std::string> seen; // lock
};
warn_state &warns()
{
	static warn_state *w = new warn_state; // never freed: workers may outlive main
	return *w;
}
} // namespace

void warn_once_msg(const std::string &key, const std::string &msg)
{
	auto &w = warns();
	lock_guard lk(w.lock);
	if (w.seen.insert(key).second)
		fprintf(stderr, "%s\n", msg.c_str());
}

void warn_fork_lock() NO_THREAD_SAFETY_ANALYSIS { warns().lock.lock(); }
void warn_fork_unlock() NO_THREAD_SAFETY_ANALYSIS { warns().lock.unlock(); }

void spin_pause(int &n)
{
	if (++n < 64)
		cpu_relax();
	else
		sched_yield();
}

void worker_wake_word(worker *w)
{
	if (w->wake.exchange(1, std::memory_order_acq_rel) == 2)
		futex_wake(&w->wake, 1);
}

void worker_wait_word(worker *w)
{
	int expected = 0;
	if (w->wake.compare_exchange_strong(expected, 2, std::memory_order_acq_rel))
		while (w->wake.load(std::memory_order_acquire) == 2)
			futex_wait(&w->wake, 2);
}

void wake_worker(worker *w)
{
	worker_wake_word(w);
	w->pins.fetch_sub(1, std::memory_order_release);
}

void pin_self(const std::vector<int> &cpus)
{
	auto &gl = g();
	cpu_set_t set;
	CPU_ZERO(&set);
	int n = 0;
	for (int c : cpus)
		if (std::binary_search(gl.real_cpus.begin(), gl.real_cpus.end(), c) && c < CPU_SETSIZE) {
			CPU_SET(c, &set);
			n++;
		}
	if (n)
		sched_setaffinity(0, sizeof(set), &set);
}

void apply_nice(int nice)
{
	if (nice == 0)
		return;
	if (setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), nice) == 0)
		return;
	struct rlimit rl;
	int lowest = 0;
	if (getrlimit(RLIMIT_NICE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		lowest = 20 - static_cast<int>(rl.rlim_cur);
	lowest = std::max(lowest, nice);
	if (lowest < 0)
		setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), lowest);
	warn_once_msg("nice", "cmwq: cannot set nice " + std::to_string(nice) +
				      " for high-priority workers (needs CAP_SYS_NICE or RLIMIT_NICE); using " +
				      std::to_string(std::min(lowest, 0)));
}

} // namespace cmwq::detail
