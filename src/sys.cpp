// sys.cpp - the engine's platform layer: clocks, the futex wait and wake
// (the only place that issues the system call), the one way a sleeping
// worker is woken, CPU affinity and nice, the parameter values, function
// names and warnings. What the process may use (CPUs, topology, quota) is
// cpus.cpp's.
// Kept apart from the policy so that a change of mechanism (how a worker
// sleeps and is woken) touches one file; the policy stays in pool.cpp.
#include "engine/engine.h"

#include <cmwq/log.h>
#include <cmwq/version.h>

#include <cxxabi.h>
#include <mutex>
#include <dlfcn.h>
#include <stdarg.h>
#include <syslog.h>
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <semaphore.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <set>

namespace cmwq::detail {

globals &g()
{
	static globals *gl = new globals; // never freed: workers may outlive main
	return *gl;
}

// The values only; the table that names, parses and documents them is
// params.cpp's.
params_t &params()
{
	static params_t *p = new params_t;
	return *p;
}


uint64_t now_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {

// The cycle counter's rate, learnt from the workers' clock reads against
// the first one: ns per count in 32.32 fixed point, 0 until reads 20 ms
// apart give it, and 0 for good where the counter cannot be trusted (x86
// without an invariant TSC, or no counter at all).
struct counter_rate {
	std::atomic<uint64_t> mult{0};
	std::atomic<unsigned long long> window{0}; // counts in 200 us
	uint64_t ns0 = 0;                          // I after the once
	unsigned long long c0 = 0;                 // I
	bool usable = false;                       // I
	std::once_flag once;
};

counter_rate &rate()
{
	static counter_rate r;
	return r;
}

bool counter_trusted()
{
#if defined(__x86_64__) || defined(__i386__)
	// Constant rate and not stopped in idle states: the two flags the
	// kernel itself needs before it uses the TSC as a clock.
	FILE *f = fopen("/proc/cpuinfo", "r");
	if (!f)
		return false;
	char line[4096];
	bool constant = false, nonstop = false;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "flags", 5) != 0)
			continue;
		constant = strstr(line, " constant_tsc") != nullptr;
		nonstop = strstr(line, " nonstop_tsc") != nullptr;
		break;
	}
	fclose(f);
	return constant && nonstop;
#elif defined(__aarch64__)
	return true; // the architected counter has a fixed frequency
#else
	return false;
#endif
}

// A clock read paired with the counter, read on both sides of it: the pair
// is only as good as nothing (a preemption, an emulator) came between the
// two. Returns the bracket's width in counts.
unsigned long long paired_read(uint64_t &ns, unsigned long long &c)
{
	unsigned long long a = cycle_counter();
	ns = now_ns();
	unsigned long long b = cycle_counter();
	c = a + (b - a) / 2;
	return b - a;
}

void rate_learn(uint64_t ns, unsigned long long c, unsigned long long width)
{
	auto &r = rate();
	std::call_once(r.once, [&r] {
		// The base pair: the tightest of a few.
		unsigned long long best = ~0ull;
		for (int i = 0; i < 5; i++) {
			uint64_t n;
			unsigned long long k;
			unsigned long long wd = paired_read(n, k);
			if (wd < best) {
				best = wd;
				r.ns0 = n;
				r.c0 = k;
			}
		}
		r.usable = counter_trusted() && r.c0 != 0;
	});
	// At least 10 ms apart, and this pair's bracket under 0.1% of the
	// interval: a preempted read would skew the rate. Until a rate is
	// known every item end reads the clock, so the first pair comes early
	// (at 100 ms, a process's first million-item fan-out read the clock
	// some 30,000 times); each later pair, further from the base, refines it.
	if (!r.usable || ns - r.ns0 < 10000000ull || c <= r.c0 || width * 1000 > c - r.c0)
		return;
	auto m = static_cast<uint64_t>((static_cast<unsigned __int128>(ns - r.ns0) << 32) / (c - r.c0));
	if (!m)
		return;
	r.window.store(static_cast<unsigned long long>((static_cast<unsigned __int128>(200000) << 32) / m),
		       std::memory_order_relaxed);
	r.mult.store(m, std::memory_order_relaxed);
}

} // namespace

uint64_t worker_clock_anchor(worker *w)
{
	uint64_t ns;
	unsigned long long c;
	unsigned long long width = paired_read(ns, c);
	rate_learn(ns, c, width);
	// A loose pair (over 10 us: preempted between the reads) anchors
	// nothing: the next item end reads the clock again.
	unsigned long long limit = rate().window.load(std::memory_order_relaxed) / 20;
	bool tight = !limit || width <= limit;
	w->anchor_ns = tight ? ns : 0;
	w->anchor_cycles = c;
	return ns > w->clock_ns ? ns : w->clock_ns;
}

uint64_t worker_clock_ns(worker *w)
{
	auto &r = rate();
	uint64_t m = r.mult.load(std::memory_order_relaxed);
	if (m && w->anchor_ns) {
		unsigned long long c = cycle_counter();
		unsigned long long d = c - w->anchor_cycles;
		if (c >= w->anchor_cycles && d < r.window.load(std::memory_order_relaxed)) {
			uint64_t ns = w->anchor_ns + static_cast<uint64_t>((static_cast<unsigned __int128>(d) * m) >> 32);
			return ns > w->clock_ns ? ns : w->clock_ns;
		}
	}
	return worker_clock_anchor(w);
}

uint64_t thread_cpu_ns()
{
	timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// pool_mutex's slow paths. Spin first: a holder on another CPU lets go
// within a few hundred nanoseconds; one that was preempted does not, and a
// waiter then marks the word contended and sleeps until unlock wakes it.
void pool_mutex::lock_contended() NO_THREAD_SAFETY_ANALYSIS
{
	for (int i = 0; i < 128; i++) {
		cpu_relax();
		int c = state_.load(std::memory_order_relaxed);
		if (c == 0 && state_.compare_exchange_weak(c, 1, std::memory_order_acquire, std::memory_order_relaxed))
			return;
	}
	// Taking it as 2 keeps the unlock's wake for those who may still sleep.
	while (state_.exchange(2, std::memory_order_acquire) != 0)
		futex_wait(&state_, 2);
}

void pool_mutex::wake_one() { futex_wake(&state_, 1); }

void futex_wait(std::atomic<int> *a, int val)
{
	syscall(SYS_futex, reinterpret_cast<int *>(a), FUTEX_WAIT_PRIVATE, val, nullptr, nullptr, 0);
}
void futex_wait_for(std::atomic<int> *a, int val, uint64_t ns)
{
	timespec ts{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
	syscall(SYS_futex, reinterpret_cast<int *>(a), FUTEX_WAIT_PRIVATE, val, &ts, nullptr, 0);
}
void futex_wake(std::atomic<int> *a, int n)
{
	syscall(SYS_futex, reinterpret_cast<int *>(a), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}

} // namespace cmwq::detail

// The task state word's wait and wake (<cmwq/task.hpp>, public).
extern "C" void cmwq_futex_wait(const uint32_t *word, uint32_t expected)
{
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

extern "C" void cmwq_futex_wake(const uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
}

namespace cmwq::detail {

std::string func_name(work_func_t f)
{
	Dl_info info;
	char buf[64];
	if (f && dladdr(reinterpret_cast<void *>(f), &info) && info.dli_sname) {
		int st = 0;
		char *dm = abi::__cxa_demangle(info.dli_sname, nullptr, nullptr, &st);
		if (!dm)
			return info.dli_sname;
		std::string s(dm);
		free(dm);
		return s;
	}
	// Static, or the program was linked without -rdynamic: its symbol table.
	if (std::string s = code_address_name(reinterpret_cast<void *>(f)); !s.empty())
		return s;
	snprintf(buf, sizeof(buf), "%p", reinterpret_cast<void *>(f));
	return buf;
}

std::string work_name(const work_struct *w)
{
	return w->name ? std::string(w->name) : func_name(w->func);
}

std::string current_item_name(const worker *w)
{
	return w->current_name[0] ? std::string(w->current_name) : func_name(w->current_func);
}

namespace {
// The program's thread hooks (<cmwq/threads.h>): read by each new library
// thread at its start, under hooks_lock (thread starts are rare).
mutex hooks_lock;
cmwq_thread_hooks hooks_now{};     // hooks_lock
std::atomic<int> hooked_threads{0}; // library threads running now

struct thread_start {
	cmwq_thread_kind kind;
	void *(*fn)(void *);
	void *arg;
	sem_t ready; // posted once the thread no longer needs this
};
} // namespace

void thread_hooks_start(cmwq_thread_kind kind, cmwq_thread_hooks &mine)
{
	hooked_threads.fetch_add(1);
	{
		std::lock_guard<mutex> lk(hooks_lock);
		mine = hooks_now;
	}
	if (mine.start)
		mine.start(kind, mine.arg);
}

void thread_hooks_stop(cmwq_thread_kind kind, const cmwq_thread_hooks &mine)
{
	if (mine.stop)
		mine.stop(kind, mine.arg);
	hooked_threads.fetch_sub(1);
}

// The monitor runs as SCHED_BATCH when it would run as SCHED_OTHER: a
// batch thread's wakeup never preempts the thread running on the CPU, so
// the monitor's wakeups for the switch records of workers that keep
// running (a preemption, a wait of moments) stop costing those workers a
// switch, whose records would wake it again. When a worker blocks, its CPU
// is free and the monitor runs there at once; behind a busy thread it
// waits for the scheduler's next pick, as long as a woken worker would.
// Set before the program's start hook, which may choose otherwise; the
// threads the monitor starts get SCHED_OTHER back (spawn_thread).
constinit thread_local bool tl_made_batch = false;

static void monitor_policy()
{
	if (sched_getscheduler(0) != SCHED_OTHER)
		return; // the program's choice, inherited: kept
	sched_param sp{};
	tl_made_batch = sched_setscheduler(0, SCHED_BATCH, &sp) == 0;
}

static void *thread_trampoline(void *p)
{
	auto *start = static_cast<thread_start *>(p);
	thread_start st{start->kind, start->fn, start->arg, {}};
	if (st.kind == CMWQ_THREAD_MONITOR)
		monitor_policy();
	// glibc attaches the thread's malloc arena at its first malloc and may
	// read /sys/devices/system/cpu/online then (one descriptor, for a
	// moment): done here, in the spare's slot its creator lent
	// (with_spare_lent), so it never takes the program's last descriptor.
	void *volatile first = malloc(16);
	free(first);
	sem_post(&start->ready);
	cmwq_thread_hooks mine;
	thread_hooks_start(st.kind, mine);
	void *ret = st.fn(st.arg);
	thread_hooks_stop(st.kind, mine);
	return ret;
}

int spawn_thread(cmwq_thread_kind kind, void *(*fn)(void *), void *arg)
{
	if (fault_injected(params().fail_thread_creation))
		return EAGAIN; // injected by cmwq.fail_thread_creation
	thread_start st{kind, fn, arg, {}};
	sem_init(&st.ready, 0, 0);
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
	if (tl_made_batch && sched_getscheduler(0) == SCHED_BATCH) {
		// Started by the monitor: the policy it had before it made
		// itself a batch thread, not the batch one.
		sched_param sp{};
		pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
		pthread_attr_setschedpolicy(&attr, SCHED_OTHER);
		pthread_attr_setschedparam(&attr, &sp);
	}
	// As the kernel's create_worker, the caller returns once the thread
	// runs; meanwhile the spare's slot is the new thread's.
	int rc = with_spare_lent([&] {
		pthread_t t;
		int err = pthread_create(&t, &attr, thread_trampoline, &st);
		if (!err)
			while (sem_wait(&st.ready) && errno == EINTR) {
			}
		return err;
	});
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, nullptr);
	sem_destroy(&st.ready);
	return rc;
}

std::string vformat_without_n(const char *call, const char *fmt, va_list ap)
{
	// %n writes through a pointer argument: a format built from untrusted
	// input would become a write primitive. The kernel's vsnprintf refuses
	// it and prints nothing for it. The format is walked one conversion at
	// a time and each argument fetched by the type its conversion names, so
	// a %n's pointer is consumed without being read or written and the
	// arguments after it stay in place. Positional arguments (%1$s) are not
	// supported (nor are they by the kernel's vsnprintf): the rest of the
	// format is kept literally.
	std::string out;
	bool refused = false, positional = false;
	char piece[64];
	char buf[512];
	const char *p = fmt;
	while (*p) {
		if (*p != '%') {
			out += *p++;
			continue;
		}
		const char *spec = p++;
		if (*p == '%') {
			out += '%';
			p++;
			continue;
		}
		int stars[2];
		int nstars = 0;
		auto digits = [&p] {
			while (*p >= '0' && *p <= '9')
				p++;
		};
		while (*p && strchr("-+ #0'", *p))
			p++;
		if (*p == '*') {
			stars[nstars++] = va_arg(ap, int);
			p++;
		}
		digits();
		if (*p == '$') {
			positional = true;
			out += spec;
			break;
		}
		if (*p == '.') {
			p++;
			if (*p == '*') {
				stars[nstars++] = va_arg(ap, int);
				p++;
			}
			digits();
		}
		int longs = 0;
		bool big = false, sized = false;
		while (*p && strchr("hlLqjzZt", *p)) {
			if (*p == 'l')
				longs++;
			else if (*p == 'q' || *p == 'L')
				longs = 2, big = true;
			else if (*p == 'h')
				; // promoted to int: fetched as int
			else
				sized = true; // j, z, Z, t: 64-bit on every supported ABI
			p++;
		}
		char conv = *p;
		if (!conv) {
			out += spec;
			break;
		}
		p++;
		size_t len = (size_t)(p - spec);
		if (len >= sizeof(piece)) { // a spec longer than any real one: kept literally
			out.append(spec, len);
			continue;
		}
		memcpy(piece, spec, len);
		piece[len] = 0;
		int n = 0;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#define CMWQ_PIECE(value)                                                                                   \
	(nstars == 2   ? snprintf(buf, sizeof(buf), piece, stars[0], stars[1], value)                         \
	 : nstars == 1 ? snprintf(buf, sizeof(buf), piece, stars[0], value)                                   \
		       : snprintf(buf, sizeof(buf), piece, value))
		switch (conv) {
		case 'n':
			(void)va_arg(ap, void *);
			refused = true;
			continue;
		case 'd':
		case 'i':
			if (longs || sized)
				n = CMWQ_PIECE(va_arg(ap, long long));
			else
				n = CMWQ_PIECE(va_arg(ap, int));
			break;
		case 'u':
		case 'o':
		case 'x':
		case 'X':
			if (longs || sized)
				n = CMWQ_PIECE(va_arg(ap, unsigned long long));
			else
				n = CMWQ_PIECE(va_arg(ap, unsigned int));
			break;
		case 'c':
			n = CMWQ_PIECE(va_arg(ap, int));
			break;
		case 's': {
			const char *str = va_arg(ap, const char *);
			n = CMWQ_PIECE(str ? str : "(null)");
			break;
		}
		case 'p':
			n = CMWQ_PIECE(va_arg(ap, void *));
			break;
		case 'f':
		case 'F':
		case 'e':
		case 'E':
		case 'g':
		case 'G':
		case 'a':
		case 'A':
			if (big)
				n = CMWQ_PIECE(va_arg(ap, long double));
			else
				n = CMWQ_PIECE(va_arg(ap, double));
			break;
		default: // not a conversion: kept as written, nothing consumed
			out.append(spec, len);
			continue;
		}
#undef CMWQ_PIECE
#pragma GCC diagnostic pop
		if (n > 0)
			out.append(buf, std::min((size_t)n, sizeof(buf) - 1));
	}
	if (refused || positional) {
		std::string shown; // the format, printable ASCII only
		for (const char *q = fmt; *q && shown.size() < 64; q++)
			shown += (*q >= 0x20 && *q < 0x7f) ? *q : '?';
		if (refused)
			warn_once_msg(std::string("format-n-") + call,
				      std::string("cmwq: ") + call +
					      "(): %n in the format is refused and printed as nothing (format \"" + shown +
					      "\")");
		if (positional)
			warn_once_msg(std::string("format-pos-") + call,
				      std::string("cmwq: ") + call +
					      "(): positional arguments (%N$) are not supported; the format is kept "
					      "literally from there (format \"" +
					      shown + "\")");
	}
	return out;
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
	bool first;
	{
		lock_guard lk(w.lock);
		first = w.seen.insert(key).second;
	}
	if (first)
		log_text(LOG_WARNING, msg);
}

bool warn_on_once(const char *func, const char *cond, const char *file, int line)
{
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	char key[160];
	snprintf(key, sizeof(key), "warn-on-%s:%d", base, line);
	warn_once_msg(key, std::string("cmwq: WARNING: ") + func + "(): " + cond + " (" + base + ":" +
				   std::to_string(line) + "); the engine's state is not what this code expects: "
				   "please report it with the state dump (cmwq_dump)");
	if (params().panic_on_warn.load(std::memory_order_relaxed)) {
		log_text(LOG_CRIT, "cmwq: cmwq.panic_on_warn=1: aborting");
		abort();
	}
	return true;
}

namespace {
struct log_state {
	mutex lock;                // taken with any engine lock held: a leaf
	cmwq_log_fn fn = nullptr;  // lock
	void *arg = nullptr;       // lock
};
log_state &logs()
{
	static log_state *l = new log_state;
	return *l;
}
} // namespace

void log_text(int level, const std::string &text)
{
	auto &l = logs();
	lock_guard lk(l.lock);
	size_t pos = 0;
	while (pos < text.size()) {
		size_t nl = text.find('\n', pos);
		std::string line = text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
		pos = nl == std::string::npos ? text.size() : nl + 1;
		if (l.fn)
			l.fn(level, line.c_str(), l.arg);
		else
			fprintf(stderr, "%s\n", line.c_str());
	}
}

void log_printf(int level, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	std::string text;
	if (static_cast<size_t>(n) < sizeof(buf)) {
		text.assign(buf, static_cast<size_t>(n));
	} else {
		text.resize(static_cast<size_t>(n) + 1);
		va_start(ap, fmt);
		vsnprintf(text.data(), text.size(), fmt, ap);
		va_end(ap);
		text.resize(static_cast<size_t>(n));
	}
	log_text(level, text);
}

void log_dump(int level, const std::function<void(FILE *)> &write)
{
	if (!logs_have_handler()) {
		write(stderr);
		return;
	}
	char *buf = nullptr;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	if (!f)
		return;
	write(f);
	fclose(f);
	log_text(level, std::string(buf, len));
	free(buf);
}

bool logs_have_handler()
{
	auto &l = logs();
	lock_guard lk(l.lock);
	return l.fn != nullptr;
}

void log_fork_lock() NO_THREAD_SAFETY_ANALYSIS { logs().lock.lock(); }
void log_fork_unlock() NO_THREAD_SAFETY_ANALYSIS { logs().lock.unlock(); }

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
	// Unbound: narrow or widen the sleeping worker's affinity as its kick
	// chose (kick_pool), only when that changes.
	int want = w->wake_cpu.load(std::memory_order_relaxed);
	if (w->pool->cpu < 0 && want != w->narrowed.load(std::memory_order_relaxed)) {
		cpu_set_t set;
		CPU_ZERO(&set);
		if (want >= 0 && want < CPU_SETSIZE) {
			CPU_SET(want, &set);
		} else {
			for (int c : w->pool->cpus)
				if (c < CPU_SETSIZE)
					CPU_SET(c, &set);
		}
		pid_t tid = __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE);
		if (tid > 0 && sched_setaffinity(tid, sizeof(set), &set) == 0)
			w->narrowed.store(want, std::memory_order_relaxed);
	}
	worker_wake_word(w);
	w->pins.fetch_sub(1, std::memory_order_release);
}

bool pin_thread(pid_t tid, const std::vector<int> &cpus)
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
	return n && sched_setaffinity(tid, sizeof(set), &set) == 0;
}

void pin_self(const std::vector<int> &cpus) { pin_thread(0, cpus); }

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

extern "C" void cmwq_set_log_handler(cmwq_log_fn fn, void *arg)
{
	auto &l = cmwq::detail::logs();
	cmwq::detail::lock_guard lk(l.lock);
	l.fn = fn;
	l.arg = arg;
}

extern "C" const char *cmwq_version(void) { return CMWQ_VERSION_STRING; }

extern "C" int cmwq_set_thread_hooks(const struct cmwq_thread_hooks *hooks)
{
	using namespace cmwq::detail;
	std::lock_guard<mutex> lk(hooks_lock);
	hooks_now = hooks ? *hooks : cmwq_thread_hooks{};
	return hooked_threads.load() > 0 ? -EBUSY : 0;
}
