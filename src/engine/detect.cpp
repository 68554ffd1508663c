// detect.cpp - the block detector's plumbing: a context-switch event per
// worker that has needed one (perf_event_open, PERF_COUNT_SW_DUMMY with
// context_switch, opened by the worker or the monitor on first need), its ring
// buffer, the registry that lets the monitor read it safely, and the epoll
// set the monitor waits on.
//
// The kernel learns of every block from the scheduler (wq_worker_sleeping,
// wq_worker_running). A thread's context-switch event is the same hook seen
// from user space: the kernel writes a PERF_RECORD_SWITCH into the thread's
// ring buffer on every switch out (with MISC_SWITCH_OUT_PREEMPT when it was
// preempted rather than blocked) and in, and wakes a poller. Pools that make
// progress pay nothing: an event is enabled only while its worker runs an
// item with more waiting behind it (the worker enables its own before the
// function runs; the monitor enables those of workers already running when
// items arrive later) and is disabled when the worker starts an item with
// nothing waiting behind it, or goes idle.
//
// What the monitor does with a switch is monitor.cpp's business; this file
// only says, under D, which worker switched and whether it now blocks.
#include "engine.h"

#include <linux/perf_event.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <functional>
#include <string>

namespace cmwq::detail {
namespace {

// File descriptors left to the program: a worker whose event would take one
// of the last FD_LEFT_TO_PROGRAM below RLIMIT_NOFILE (fds.cpp) is found by
// sampling.
constexpr uint64_t EFD_TOKEN = ~0ull;

struct slot {
	worker *w = nullptr;
	uint32_t gen = 1; // a token is never 0
	int fd = -1;                        // the worker's event, for a fork child to close
	perf_event_mmap_page *mm = nullptr; // its ring
};

struct detector {
	mutex lock; // D: see docs/locking.md; taken before any pool lock
	std::vector<slot> slots GUARDED_BY(lock);
	std::vector<uint32_t> free_slots GUARDED_BY(lock);
	int epfd GUARDED_BY(lock) = -1;
	int efd GUARDED_BY(lock) = -1;
	// Effective mode (block_mode) once probed; -1 before.
	std::atomic<int> mode{-1};
	std::string why GUARDED_BY(lock); // why the fallback is in effect
	size_t map_bytes = 0;             // D
};

detector &det()
{
	static detector *d = new detector;
	return *d;
}

// On the thread tid (0: the calling thread).
int open_event(int &err, pid_t tid = 0)
{
	if (fault_injected(params().fail_perf_open)) {
		err = -1; // injected (errno_why says so)
		return -1;
	}
	perf_event_attr attr;
	memset(&attr, 0, sizeof(attr));
	attr.size = sizeof(attr);
	attr.type = PERF_TYPE_SOFTWARE;
	attr.config = PERF_COUNT_SW_DUMMY;
	attr.disabled = 1;
	attr.context_switch = 1;
	attr.exclude_kernel = 1; // allowed at perf_event_paranoid 2
	attr.exclude_hv = 1;
	attr.watermark = 1;
	attr.wakeup_watermark = 1; // every record wakes the poller
	int fd = static_cast<int>(syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC));
	err = fd < 0 ? errno : 0;
	return fd;
}

std::string errno_why(const char *what, int err)
{
	if (err == -1)
		return std::string(what) + ": refused (injected by cmwq.fail_perf_open)";
	std::string s = std::string(what) + ": " + strerror(err);
	if (err == EACCES || err == EPERM)
		s += " (kernel.perf_event_paranoid is 3, or a seccomp profile refuses it)";
	else if (err == ENOSYS || err == ENOENT || err == EINVAL)
		s += " (this kernel, or an emulator such as qemu-user, has no context-switch events)";
	return s;
}

// Context: D held. Tries an event on the calling thread; the mode that
// results from the request, and why when it is not the requested one.
int probe_locked(int requested) REQUIRES(det().lock)
{
	auto &d = det();
	// The events are tried whatever the request, so that a later switch to
	// perf knows whether workers will be able to open theirs.
	// The probe's event is opened in the library's spare slot (fds.cpp), so
	// it never takes a descriptor the program could have had.
	int err = 0;
	void *mm = MAP_FAILED;
	long page = sysconf(_SC_PAGESIZE);
	d.map_bytes = static_cast<size_t>(2 * page); // the header page and one data page
	bool opened = with_spare_fd([&] { return open_event(err); },
				    [&](int fd) {
					    mm = mmap(nullptr, d.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
					    if (mm == MAP_FAILED)
						    err = errno;
				    },
				    false);
	if (!opened) {
		d.why = errno_why("perf_event_open", err);
		return requested == BLOCK_OFF ? BLOCK_OFF : BLOCK_SAMPLE;
	}
	if (mm == MAP_FAILED) {
		d.why = errno_why("mmap of the event's ring buffer", err);
		return requested == BLOCK_OFF ? BLOCK_OFF : BLOCK_SAMPLE;
	}
	munmap(mm, d.map_bytes);
	d.why.clear();
	return requested == BLOCK_OFF || requested == BLOCK_SAMPLE ? requested : BLOCK_PERF;
}

// Context: D held. The epoll set and its eventfd, once per process.
bool ensure_epoll_locked() REQUIRES(det().lock)
{
	auto &d = det();
	if (d.epfd >= 0)
		return true;
	if (!fds_to_spare(2))
		return false; // retried at the next event and the monitor's next pass
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return false;
	int ev = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ev < 0) {
		close(ep);
		return false;
	}
	epoll_event e{};
	e.events = EPOLLIN;
	e.data.u64 = EFD_TOKEN;
	if (epoll_ctl(ep, EPOLL_CTL_ADD, ev, &e)) {
		close(ev);
		close(ep);
		return false;
	}
	d.epfd = ep;
	d.efd = ev;
	return true;
}

void release_slot_locked(worker *w) REQUIRES(det().lock)
{
	auto &d = det();
	uint32_t idx = static_cast<uint32_t>(w->detect_token.load(std::memory_order_relaxed) & 0xffffffffu);
	int fd = w->perf_fd.load(std::memory_order_relaxed);
	if (d.epfd >= 0)
		epoll_ctl(d.epfd, EPOLL_CTL_DEL, fd, nullptr);
	munmap(d.slots[idx].mm, d.map_bytes);
	close(fd);
	w->perf_fd.store(-1, std::memory_order_relaxed);
	w->detect_token.store(0, std::memory_order_relaxed);
	d.slots[idx].w = nullptr;
	d.slots[idx].fd = -1;
	d.slots[idx].mm = nullptr;
	if (++d.slots[idx].gen == 0)
		d.slots[idx].gen = 1;
	d.free_slots.push_back(idx);
}

// The last switch in the ring since the previous read: 1 blocked (switched
// out, not preempted), 0 running (switched in, or preempted), -1 none.
int read_ring(perf_event_mmap_page *mm, size_t data_bytes)
{
	uint64_t head = __atomic_load_n(&mm->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = mm->data_tail;
	const char *data = reinterpret_cast<const char *>(mm) + (mm->data_offset ? mm->data_offset : data_bytes);
	uint64_t size = mm->data_size ? mm->data_size : data_bytes;
	int state = -1;
	while (tail < head) {
		perf_event_header h;
		uint64_t off = tail % size;
		if (off + sizeof(h) <= size) {
			memcpy(&h, data + off, sizeof(h));
		} else {
			size_t first = static_cast<size_t>(size - off);
			memcpy(&h, data + off, first);
			memcpy(reinterpret_cast<char *>(&h) + first, data, sizeof(h) - first);
		}
		if (h.size == 0)
			break; // torn: read again on the next wakeup
		if (h.type == PERF_RECORD_SWITCH) {
			bool out = h.misc & PERF_RECORD_MISC_SWITCH_OUT;
			bool preempt = h.misc & PERF_RECORD_MISC_SWITCH_OUT_PREEMPT;
			state = out && !preempt ? 1 : 0;
		}
		tail += h.size;
	}
	// The kernel's loads of the tail must not see it before our reads.
	__atomic_store_n(&mm->data_tail, head, __ATOMIC_RELEASE);
	return state;
}

// Context: no lock; the worker itself (tid 0), or the monitor for a worker
// it holds a pin on (tid its thread: alive until the pin is dropped). Opens
// and registers the worker's event; false if it cannot (it is then found by
// sampling). Whoever comes second, or after the worker's exit, closes its own.
bool open_worker_event(worker *w, pid_t tid = 0)
{
	if (!fds_to_spare(1)) {
		warn_once_msg("block-detect-fd", "cmwq: workers are found by sampling while fewer than " +
							 std::to_string(FD_LEFT_TO_PROGRAM + 1) + " descriptors are free below RLIMIT_NOFILE (" +
							 std::to_string(fd_limit()) + "): those are left to the program");
		return false;
	}
	int err;
	int fd = open_event(err, tid);
	if (fd < 0) {
		if (err == EMFILE || err == ENFILE)
			warn_once_msg("block-detect-fd", "cmwq: a worker could not open its context-switch event (" +
								 std::string(strerror(err)) +
								 "); workers without one are found by sampling");
		return false;
	}
	auto &d = det();
	lock_guard lk(d.lock);
	if (w->detect_gone || w->perf_fd.load(std::memory_order_relaxed) >= 0) {
		close(fd);
		return !w->detect_gone;
	}
	if (fd >= fd_limit() - FD_LEFT_TO_PROGRAM) {
		// Without /proc the count above says yes: the number the event got
		// is the check left.
		close(fd);
		warn_once_msg("block-detect-fd", "cmwq: workers near RLIMIT_NOFILE (" + std::to_string(fd_limit()) +
							 ") are found by sampling: the last " +
							 std::to_string(FD_LEFT_TO_PROGRAM) +
							 " descriptors are left to the program");
		return false;
	}
	void *mm = mmap(nullptr, d.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (mm == MAP_FAILED || !ensure_epoll_locked()) {
		int e = errno;
		if (mm != MAP_FAILED)
			munmap(mm, d.map_bytes);
		close(fd);
		warn_once_msg("block-detect-mmap", "cmwq: a worker's context-switch event could not be mapped (" +
							   std::string(strerror(e)) +
							   ", perf_event_mlock_kb or RLIMIT_MEMLOCK); workers without one are found by sampling");
		return false;
	}
	uint32_t idx;
	if (!d.free_slots.empty()) {
		idx = d.free_slots.back();
		d.free_slots.pop_back();
	} else {
		idx = static_cast<uint32_t>(d.slots.size());
		d.slots.push_back({});
	}
	d.slots[idx].w = w;
	d.slots[idx].fd = fd;
	d.slots[idx].mm = static_cast<perf_event_mmap_page *>(mm);
	uint64_t token = (static_cast<uint64_t>(d.slots[idx].gen) << 32) | idx;
	w->perf_fd.store(fd, std::memory_order_release);
	w->detect_token.store(token, std::memory_order_release);
	epoll_event e{};
	e.events = EPOLLIN;
	e.data.u64 = token;
	if (epoll_ctl(d.epfd, EPOLL_CTL_ADD, fd, &e)) {
		release_slot_locked(w);
		return false;
	}
	return true;
}

} // namespace

int detect_mode()
{
	auto &d = det();
	int m = d.mode.load(std::memory_order_acquire);
	if (m >= 0)
		return m;
	int req = params().block_detect.load();
	bool fallback;
	std::string why;
	{
		lock_guard lk(d.lock);
		m = d.mode.load();
		if (m >= 0)
			return m;
		m = probe_locked(req);
		d.mode.store(m, std::memory_order_release);
		fallback = req == BLOCK_AUTO && m == BLOCK_SAMPLE;
		why = d.why;
	}
	if (fallback)
		warn_once_msg("block-detect", "cmwq: blocked workers are found by sampling /proc, not by context-switch events: " + why);
	return m;
}

int detect_set_mode(int requested)
{
	auto &d = det();
	int m;
	std::string why;
	{
		lock_guard lk(d.lock);
		m = probe_locked(requested);
		if (requested == BLOCK_PERF && m != BLOCK_PERF) {
			why = d.why;
			m = -1;
		} else {
			d.mode.store(m, std::memory_order_release);
			params().block_detect.store(requested);
		}
	}
	if (m < 0) {
		log_printf(LOG_WARNING, "cmwq: cmwq.block_detect=perf: context-switch events are not available: %s\n", why.c_str());
		return -EOPNOTSUPP;
	}
	return 0;
}

const char *block_mode_name(int m)
{
	switch (m) {
	case BLOCK_PERF: return "perf";
	case BLOCK_SAMPLE: return "sample";
	case BLOCK_OFF: return "off";
	default: return "auto";
	}
}

void detect_worker_start(worker *)
{
	// The detector in effect is settled (probed) before the first item.
	// The worker's event is not opened here: an open event, enabled or
	// not, adds to every context switch of its thread (about 1.2 us of a
	// 7 us queue-and-wait round trip on a 2-vCPU VM), and most workers never
	// need one. It is opened on first need: by the worker when it starts
	// an item with others waiting behind it (detect_enable_self), or by the
	// monitor when items arrive behind one it is running (detect_open_for).
	(void)detect_mode();
}

void detect_worker_exit(worker *w)
{
	lock_guard lk(det().lock);
	w->detect_gone = true;
	if (w->perf_fd.load(std::memory_order_relaxed) >= 0)
		release_slot_locked(w);
}

void detect_enable_self(worker *w)
{
	if (w->perf_on.load(std::memory_order_relaxed) || det().mode.load(std::memory_order_relaxed) != BLOCK_PERF)
		return;
	if (w->perf_fd.load(std::memory_order_acquire) < 0) {
		if (w->perf_failed.load(std::memory_order_relaxed) || !open_worker_event(w)) {
			w->perf_failed.store(true, std::memory_order_relaxed);
			return;
		}
	}
	if (!w->perf_on.exchange(true))
		ioctl(w->perf_fd.load(std::memory_order_acquire), PERF_EVENT_IOC_ENABLE, 0);
}

bool detect_quiet_self(worker *w)
{
	if (!w->perf_on.load(std::memory_order_relaxed))
		return false;
	if (auto hook = detect_quiet_hook.load(std::memory_order_relaxed)) [[unlikely]]
		hook(w);
	// Under D, as detect_enable: the monitor may be enabling this event
	// for the item that just ended. Unlocked, its exchange and ioctl could
	// fall between this exchange and this ioctl, leaving perf_on set on a
	// disabled event: no worker or monitor would enable it again, and the
	// next block would go unseen.
	lock_guard lk(det().lock);
	if (!w->perf_on.exchange(false))
		return false;
	ioctl(w->perf_fd.load(std::memory_order_acquire), PERF_EVENT_IOC_DISABLE, 0);
	w->event_used = true; // it was needed in this busy period
	return true;
}

void detect_disable_self(worker *w)
{
	if (detect_quiet_self(w) || w->event_used) {
		w->event_used = false;
		w->event_unneeded = 0;
		return;
	}
	// Not enabled during this busy period. An event left open would cost
	// every switch of the thread; after cmwq.block_event_idle_runs such
	// periods in a row it is closed, and opened again on the next need.
	if (w->perf_fd.load(std::memory_order_relaxed) < 0)
		return;
	unsigned runs = params().block_event_idle_runs.load(std::memory_order_relaxed);
	if (!runs || static_cast<unsigned>(++w->event_unneeded) < runs)
		return;
	w->event_unneeded = 0;
	lock_guard lk(det().lock);
	// The monitor may have enabled it meanwhile (under D): keep it then.
	if (w->perf_fd.load(std::memory_order_relaxed) >= 0 && !w->perf_on.load(std::memory_order_relaxed))
		release_slot_locked(w);
}

std::atomic<void (*)(worker *)> detect_quiet_hook{nullptr};

uint64_t detect_open_for(worker *w, pid_t tid)
{
	if (w->perf_failed.load(std::memory_order_relaxed) || tid <= 0)
		return 0;
	if (!open_worker_event(w, tid)) {
		w->perf_failed.store(true, std::memory_order_relaxed);
		return 0;
	}
	return w->detect_token.load(std::memory_order_acquire);
}

int detect_enable(worker *w, uint64_t token)
{
	auto &d = det();
	lock_guard lk(d.lock);
	uint32_t idx = static_cast<uint32_t>(token & 0xffffffffu);
	if (!token || idx >= d.slots.size() || d.slots[idx].w != w || d.slots[idx].gen != token >> 32)
		return -1; // gone, or never had one
	if (w->perf_on.exchange(true))
		return 0;
	ioctl(w->perf_fd.load(std::memory_order_relaxed), PERF_EVENT_IOC_ENABLE, 0);
	return 1;
}

int detect_notify_fd()
{
	auto &d = det();
	lock_guard lk(d.lock);
	return ensure_epoll_locked() ? d.efd : -1;
}

int detect_wait(uint64_t timeout_ns, const std::function<void(worker *, bool)> &fn)
{
	auto &d = det();
	int ep;
	{
		lock_guard lk(d.lock);
		ep = d.epfd;
	}
	if (ep < 0)
		return -1;
	epoll_event evs[64];
	timespec ts{static_cast<time_t>(timeout_ns / 1000000000ull), static_cast<long>(timeout_ns % 1000000000ull)};
	int n = epoll_pwait2(ep, evs, 64, &ts, nullptr);
	if (n < 0 && errno == ENOSYS)
		n = epoll_wait(ep, evs, 64, static_cast<int>((timeout_ns + 999999) / 1000000));
	if (n <= 0)
		return 0;
	lock_guard lk(d.lock);
	if (d.epfd != ep)
		return 0; // a fork child closed the parent's set
	for (int i = 0; i < n; i++) {
		uint64_t token = evs[i].data.u64;
		if (token == EFD_TOKEN) {
			eventfd_t v;
			(void)eventfd_read(d.efd, &v);
			continue;
		}
		uint32_t idx = static_cast<uint32_t>(token & 0xffffffffu);
		if (idx >= d.slots.size() || d.slots[idx].gen != token >> 32 || !d.slots[idx].w)
			continue; // the worker exited since
		worker *w = d.slots[idx].w;
		int st = read_ring(d.slots[idx].mm, d.map_bytes / 2);
		if (st >= 0)
			fn(w, st == 1);
	}
	return n;
}

void detect_fork_lock() NO_THREAD_SAFETY_ANALYSIS
{
	det().lock.lock();
}

void detect_fork_unlock(bool child) NO_THREAD_SAFETY_ANALYSIS
{
	auto &d = det();
	if (child) {
		// The events and the epoll set are the parent's (an epoll set is
		// shared across fork): the child closes its copies and builds its
		// own as its workers start.
		for (auto &s : d.slots) {
			if (s.fd >= 0) {
				munmap(s.mm, d.map_bytes);
				close(s.fd);
			}
		}
		d.slots.clear();
		d.free_slots.clear();
		if (d.efd >= 0)
			close(d.efd);
		if (d.epfd >= 0)
			close(d.epfd);
		d.efd = d.epfd = -1;
	}
	d.lock.unlock();
}

} // namespace cmwq::detail
