// bench/harness.cpp - clock, futex, pinning, percentiles, census, watchdog
// and JSON output for wq_bench.
//
// Everything here is independent of cmwq so the peers can be measured with
// the same instruments; the watchdog's state dump is a hook that wq_bench
// points at show_all_workqueues().
#include "harness.hpp"

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <fstream>
#include <mutex>
#include <thread>

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace wqb {

uint64_t now_ns() noexcept
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void futex_wait(std::atomic<uint32_t> *addr, uint32_t val) noexcept
{
	syscall(SYS_futex, reinterpret_cast<uint32_t *>(addr), FUTEX_WAIT_PRIVATE, val,
		nullptr, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t> *addr, int nr) noexcept
{
	syscall(SYS_futex, reinterpret_cast<uint32_t *>(addr), FUTEX_WAKE_PRIVATE, nr,
		nullptr, nullptr, 0);
}

void start_gate::arrive_and_wait() noexcept
{
	ready_.fetch_add(1, std::memory_order_acq_rel);
	while (go_.load(std::memory_order_acquire) == 0)
		futex_wait(&go_, 0);
}

void start_gate::wait_ready(int n) noexcept
{
	while (ready_.load(std::memory_order_acquire) < n)
		std::this_thread::sleep_for(std::chrono::microseconds(100));
	// Let the last arrivals reach their futex_wait.
	std::this_thread::sleep_for(std::chrono::milliseconds(2));
}

uint64_t start_gate::open() noexcept
{
	uint64_t t = now_ns();
	go_.store(1, std::memory_order_release);
	futex_wake(&go_, INT32_MAX);
	return t;
}

bool pin_self(int cpu) noexcept
{
	if (cpu < 0 || cpu >= CPU_SETSIZE) {
		errno = EINVAL;
		return false;
	}
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	int rc = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (rc != 0) {
		errno = rc;
		return false;
	}
	return true;
}

std::vector<int> process_cpus()
{
	std::vector<int> cpus;
	cpu_set_t set;
	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return cpus;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set))
			cpus.push_back(c);
	return cpus;
}

// The link count of /proc/self/task is 2 plus the number of threads: one
// stat() (about 2 us on the 2-vCPU VM) instead of generating and parsing
// /proc/self/status (about 20 us), since the blocking protocol samples this
// every 250 us while the items run.
int process_threads()
{
	struct stat st;
	if (stat("/proc/self/task", &st) == 0 && st.st_nlink > 2)
		return static_cast<int>(st.st_nlink) - 2;
	std::ifstream f("/proc/self/status");
	std::string line;
	while (std::getline(f, line))
		if (line.rfind("Threads:", 0) == 0)
			return std::atoi(line.c_str() + 8);
	return -1;
}

double process_cpu_s()
{
	rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	auto sec = [](const timeval &tv) { return static_cast<double>(tv.tv_sec) + tv.tv_usec / 1e6; };
	return sec(ru.ru_utime) + sec(ru.ru_stime);
}

machine_cpu machine_cpu_now()
{
	machine_cpu m;
	std::ifstream f("/proc/stat");
	std::string cpu;
	unsigned long long user = 0, nice = 0, sys = 0, idle = 0, iowait = 0, irq = 0, softirq = 0,
			   steal = 0;
	if (!(f >> cpu >> user >> nice >> sys >> idle >> iowait >> irq >> softirq >> steal) ||
	    cpu != "cpu")
		return m;
	double hz = static_cast<double>(sysconf(_SC_CLK_TCK));
	m.busy_s = static_cast<double>(user + nice + sys + irq + softirq) / hz;
	m.steal_s = static_cast<double>(steal) / hz;
	return m;
}

namespace census {
namespace {
std::atomic<unsigned> generation{1};
std::atomic<int> counted{0};
thread_local unsigned seen_generation = 0;
} // namespace

void begin() noexcept
{
	counted.store(0, std::memory_order_relaxed);
	generation.fetch_add(1, std::memory_order_acq_rel);
}

void note() noexcept
{
	unsigned g = generation.load(std::memory_order_relaxed);
	if (seen_generation != g) {
		seen_generation = g;
		counted.fetch_add(1, std::memory_order_relaxed);
	}
}

int count() noexcept { return counted.load(std::memory_order_acquire); }
} // namespace census

uint64_t percentile(std::vector<uint32_t> &v, double q)
{
	if (v.empty())
		return 0;
	size_t k = static_cast<size_t>(q * static_cast<double>(v.size()));
	if (k >= v.size())
		k = v.size() - 1;
	std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
	return v[k];
}

spread summarize(std::vector<double> v)
{
	spread s;
	if (v.empty())
		return s;
	std::sort(v.begin(), v.end());
	s.min = v.front();
	s.max = v.back();
	size_t n = v.size();
	s.median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	return s;
}

namespace {
struct watchdog_state {
	std::mutex lock;
	std::condition_variable cv;
	uint64_t deadline = 0; // 0: disarmed
	std::string what;
	unsigned epoch = 0;
	bool started = false;
	void (*dump)() = nullptr;
};

watchdog_state &wd()
{
	static watchdog_state *s = new watchdog_state; // never destroyed: outlives exit paths
	return *s;
}

void watchdog_thread()
{
	auto &s = wd();
	std::unique_lock lk(s.lock);
	for (;;) {
		if (s.deadline == 0) {
			s.cv.wait(lk);
			continue;
		}
		uint64_t now = now_ns();
		if (now < s.deadline) {
			s.cv.wait_for(lk, std::chrono::nanoseconds(s.deadline - now));
			continue;
		}
		std::fprintf(stderr,
			     "wq_bench: %s did not finish in time (a lost wakeup or a stuck "
			     "worker); state dump follows\n",
			     s.what.c_str());
		if (s.dump)
			s.dump();
		std::fflush(nullptr);
		_exit(3);
	}
}
} // namespace

void watchdog_set_dump(void (*dump)())
{
	std::lock_guard lk(wd().lock);
	wd().dump = dump;
}

void watchdog_arm(double seconds, const std::string &what)
{
	auto &s = wd();
	std::lock_guard lk(s.lock);
	if (!s.started) {
		std::thread(watchdog_thread).detach();
		s.started = true;
	}
	s.deadline = now_ns() + static_cast<uint64_t>(seconds * 1e9);
	s.what = what;
	s.cv.notify_all();
}

void watchdog_disarm()
{
	auto &s = wd();
	std::lock_guard lk(s.lock);
	s.deadline = 0;
	s.cv.notify_all();
}

void json_writer::sep(const char *key)
{
	if (!first_.back())
		std::fputc(',', out_);
	first_.back() = false;
	if (key)
		std::fprintf(out_, "\"%s\":", key);
}

json_writer &json_writer::begin_object(const char *key)
{
	sep(key);
	std::fputc('{', out_);
	first_.push_back(true);
	return *this;
}

json_writer &json_writer::end_object()
{
	first_.pop_back();
	std::fputc('}', out_);
	return *this;
}

json_writer &json_writer::begin_array(const char *key)
{
	sep(key);
	std::fputc('[', out_);
	first_.push_back(true);
	return *this;
}

json_writer &json_writer::end_array()
{
	first_.pop_back();
	std::fputc(']', out_);
	return *this;
}

json_writer &json_writer::value(const std::string &v)
{
	sep(nullptr);
	std::fputc('"', out_);
	for (char c : v) {
		if (c == '"' || c == '\\')
			std::fprintf(out_, "\\%c", c);
		else if (static_cast<unsigned char>(c) < 0x20)
			std::fprintf(out_, "\\u%04x", c);
		else
			std::fputc(c, out_);
	}
	std::fputc('"', out_);
	return *this;
}

json_writer &json_writer::kv(const char *key, const std::string &v)
{
	sep(key);
	first_.back() = true; // value() below must not add another comma
	return value(v);
}

json_writer &json_writer::value(double v)
{
	sep(nullptr);
	if (!std::isfinite(v))
		std::fputs("null", out_);
	else if (v == std::floor(v) && std::fabs(v) < 1e15)
		std::fprintf(out_, "%.0f", v);
	else
		std::fprintf(out_, "%.6g", v);
	return *this;
}

json_writer &json_writer::kv(const char *key, double v)
{
	sep(key);
	first_.back() = true;
	return value(v);
}

json_writer &json_writer::kv(const char *key, bool v)
{
	sep(key);
	std::fputs(v ? "true" : "false", out_);
	return *this;
}

void json_writer::finish() { std::fputc('\n', out_); }

} // namespace wqb
