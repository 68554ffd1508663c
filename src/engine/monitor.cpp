// monitor.cpp - what the kernel's scheduler hooks and timers do for it:
// finding workers of concurrency-managed pools that block without a hint,
// CPU hogs, and the lockup watchdog.
//
// Blocked workers are found, only while a managed pool holds items back
// behind running workers, by one of two detectors (cmwq.block_detect):
//  - perf: the workers' context-switch events (detect.cpp). A switch out
//    that is not a preemption is the kernel's wq_worker_sleeping
//    (nr_running--, wake or create a worker for the waiting items), the
//    next switch in is wq_worker_running. The monitor waits on the events.
//  - sample: a worker whose item made no progress for
//    cmwq.blocked_window_us is looked up in /proc/self/task/<tid>/stat, and
//    if it is not runnable it is treated as sleeping. Also used, under perf,
//    for a worker that could not open its event.
// Hogs are found by the same periodic pass in every mode. Pools that make
// progress cost nothing: the monitor sleeps until armed.
#include "engine.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

namespace cmwq::detail {

namespace {

// How long the monitor lets meaningless switches gather before it looks
// again (docs/benchmarks-history.md, "Block detection by context-switch events, and managed unbound pools"):
// 50 µs after 8 wakeups in a row that changed nothing, doubling with each
// further one up to 200 µs (the default sampling period). Each wakeup of
// the monitor preempts a worker, whose switch records wake it again: with
// a fixed 50 µs it ran about 8,000 times a second on a busy ring of strands
// (docs/benchmarks.md, "Reading the Asio rows").
constexpr long DETECT_HOLDOFF_NS = 50000;
constexpr long DETECT_HOLDOFF_MAX_NS = 200000;
constexpr int DETECT_HOLDOFF_AFTER = 8; // wakeups in a row that changed nothing

// The arming handshake (lock, cv, armed) is g().monitor, so pools arm the
// monitor without calling into this file.
struct monitor_state {
	mutex lock;
	bool started = false;                   // lock
	std::atomic<bool> up{false};            // A: started, for monitor_start's fast path
	uint64_t retry_ns = 0;                  // lock: no start attempt before this
	std::atomic<uint64_t> global_touch{0};  // A: wq_watchdog_touch
	std::atomic<uint64_t> wakeups{0};       // A: the monitor thread's passes (monitor_wakeups)
};

monitor_state &ms()
{
	static monitor_state *m = new monitor_state;
	return *m;
}

// 'R' running, 'S'/'D' sleeping, ... ; 0 when unreadable.
char task_state(pid_t tid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	// In the library's spare slot (fds.cpp): never the program's last descriptor.
	ssize_t n = 0;
	with_spare_fd([&] { return open(path, O_RDONLY | O_CLOEXEC); },
		      [&](int fd) { n = read(fd, buf, sizeof(buf) - 1); });
	if (n <= 0)
		return 0;
	buf[n] = 0;
	const char *p = strrchr(buf, ')');
	return p && p[1] == ' ' ? p[2] : 0;
}

uint64_t worker_cpu_ns(worker *w)
{
	clockid_t cid;
	timespec ts;
	if (pthread_getcpuclockid(w->thread, &cid) || clock_gettime(cid, &ts))
		return 0;
	return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

struct candidate {
	worker *w;
	pid_t tid;
	uint64_t prog;
	bool check_blocked; // no progress for the window
	bool check_restore; // detected earlier: running again?
	uint64_t token = 0; // enable the worker's event, then check it once
	bool recheck = false; // counted running again during this item (recheck_prog)
	bool open = false;  // open its event first (w is pinned, as every candidate: pins raised under L)
};

// Context: L. The worker is blocked: count it out and wake or create
// another for the waiting items (the kernel's wq_worker_sleeping).
void mark_blocked(worker_pool *pool, worker *w, deferred &d) REQUIRES(pool->lock)
{
	w->detected = true;
	w->marked.store(true, std::memory_order_relaxed);
	w->sleeping = true;
	w->slept_in_item = true;
	pool->nr_running--;
	if (kick_pool(pool, d) && w->current_pwq)
		PWQ_STAT_ADD(w->current_pwq, PWQ_STAT_CM_WAKEUP, 1);
}

bool may_mark_blocked(worker_pool *pool, worker *w) REQUIRES(pool->lock)
{
	return pool->managed && w->current_work && !w->sleeping && !(w->flags & WORKER_NOT_RUNNING);
}

// Context: L. A detected worker runs again (the kernel's wq_worker_running).
// Until its item ends the monitor also reads its state while items wait:
// a switch record can be the last one the worker's event delivers for that
// item (seen on Linux 6.18 under load: a switch in, then no record for the
// block that followed), and the items behind a worker whose block nobody
// reports would wait until it unblocks by itself.
void restore_running(worker_pool *pool, worker *w) REQUIRES(pool->lock)
{
	worker_set_running(w);
	if (!w->in_item.load(std::memory_order_relaxed))
		return;
	w->recheck_prog = w->progress.load(std::memory_order_relaxed);
	if (!list_empty(&pool->worklist))
		monitor_watch(pool);
}

// A switch out not counted yet (cmwq.block_grace_us): the worker, pinned
// until the monitor forgets it, and its item.
struct pending_out {
	worker *w;
	pid_t tid;
	uint64_t prog; // the item it switched out in
	uint64_t due;  // counted as a block at this time if still out
};

// Context: L, the monitor thread. Worker w, running an item, is out (a
// switch out, or seen sleeping when its event went on): counted as blocked
// at once if the item's time out has used up the grace, else remembered in
// outs until the grace runs out. Returns whether it was counted.
bool note_out(worker_pool *pool, worker *w, std::vector<pending_out> &outs, deferred &d) REQUIRES(pool->lock)
{
	uint64_t grace = params().block_grace_us.load(std::memory_order_relaxed) * 1000ull;
	uint64_t prog = w->progress.load(std::memory_order_relaxed);
	if (w->mon_out_prog != prog) {
		w->mon_out_prog = prog;
		w->mon_out_ns = 0;
	}
	if (w->mon_out_ns >= grace) {
		mark_blocked(pool, w, d);
		return true;
	}
	if (!w->mon_out) {
		// Pinned under L while it runs an item, so it cannot be
		// exiting; unpinned by settle_outs.
		w->pins.fetch_add(1, std::memory_order_relaxed);
		w->mon_out = true;
		w->mon_out_at = now_ns();
		outs.push_back({w, w->tid, prog, w->mon_out_at + grace - w->mon_out_ns});
	}
	return false;
}

// Context: D (detect_wait's callback). A switch of a worker with its event
// enabled; wakeups go to ds, run after D is dropped. Switches out in an item
// count as a block once the item's time out adds up to cmwq.block_grace_us:
// until then a switch out waits in outs, and a switch in forgets it. A
// user-space thread sleeps on a mutex held for a moment by another CPU,
// where the kernel's mutexes spin while the owner runs; counting each such
// sleep would wake a second worker for every short wait (docs/design.md,
// "Blocking"). Adding the times up bounds the delay of the items behind one
// that sleeps often and briefly (a polling loop) by the same grace.
int on_switch(worker *w, bool blocked, std::vector<deferred> &ds, std::vector<pending_out> &outs)
{
	if (detect_mode() != BLOCK_PERF)
		return 0;
	if (!blocked && w->mon_out) {
		w->mon_out = false; // back before its grace ran out
		w->mon_out_ns += now_ns() - w->mon_out_at;
		// As after a restore (restore_running): until its item ends the
		// monitor also reads its state while items wait. A record that
		// never comes must not strand the items behind a worker whose
		// block was seen once and forgotten.
		worker_pool *pool = w->pool;
		lock_guard lk(pool->lock);
		if (w->current_work && w->in_item.load(std::memory_order_relaxed)) {
			w->recheck_prog = w->progress.load(std::memory_order_relaxed);
			if (!list_empty(&pool->worklist))
				monitor_watch(pool);
		}
		return 0;
	}
	// Most switches need nothing: a switch out between items (waiting for
	// pool->lock is not the item blocking), a switch in of a worker not
	// counted out. Relaxed looks first, so those cost no pool lock; the
	// decision is taken again under L.
	if (blocked ? !w->in_item.load(std::memory_order_relaxed) || w->mon_out
		    : !w->marked.load(std::memory_order_relaxed))
		return 0;
	if (blocked && fault_injected(params().fail_switch_records))
		return 0; // the record is lost (tests)
	worker_pool *pool = w->pool;
	deferred d;
	int acted = 0;
	{
		lock_guard lk(pool->lock);
		if (blocked) {
			if (may_mark_blocked(pool, w) && w->in_item.load(std::memory_order_relaxed))
				acted = note_out(pool, w, outs, d);
		} else if (w->detected && w->sleeping && w->hint_depth.load(std::memory_order_relaxed) == 0) {
			restore_running(pool, w);
			acted = 1;
		}
	}
	if (d.nr_wake || d.create || d.nr_release || d.nr_activate)
		ds.push_back(d);
	return acted;
}

// Context: no lock (the monitor thread). Counts the switches out whose grace
// has run out as blocks, if their workers are still out in the same item,
// and forgets those that came back. The thread's state is read once more
// first: a switch in whose record was lost must not count as a block.
// Returns the earliest due time left, or 0.
uint64_t settle_outs(std::vector<pending_out> &outs, uint64_t now)
{
	uint64_t next = 0;
	size_t kept = 0;
	for (size_t i = 0; i < outs.size(); i++) {
		pending_out o = outs[i];
		if (o.w->mon_out && now < o.due) {
			outs[kept++] = o;
			next = next ? std::min(next, o.due) : o.due;
			continue;
		}
		if (o.w->mon_out) {
			o.w->mon_out = false;
			o.w->mon_out_ns += now - o.w->mon_out_at;
			if (task_state(o.tid) != 'R') {
				worker_pool *pool = o.w->pool;
				deferred d;
				{
					lock_guard lk(pool->lock);
					if (detect_mode() == BLOCK_PERF && may_mark_blocked(pool, o.w) &&
					    o.w->in_item.load(std::memory_order_relaxed) &&
					    o.w->progress.load(std::memory_order_relaxed) == o.prog)
						mark_blocked(pool, o.w, d);
				}
				d.run();
			}
		}
		o.w->pins.fetch_sub(1, std::memory_order_release);
	}
	outs.resize(kept);
	return next;
}

// A wait of at most cap ns that ends no later than due (settle_outs' earliest
// due time; 0: none).
uint64_t wait_until_due(uint64_t due, uint64_t cap)
{
	if (!due)
		return cap;
	uint64_t now = now_ns();
	return std::min(cap, due > now ? due - now : 0);
}

// One pass over a watched pool. Returns whether it still needs watching.
// enable_only: sampling is off (cmwq.blocked_sample_us=0); only the
// context-switch events of running workers are turned on.
bool sample_pool(worker_pool *pool, uint64_t now, std::vector<pending_out> &outs, bool enable_only = false)
{
	auto &p = params();
	uint64_t window = p.blocked_window_us.load() * 1000ull;
	uint64_t hog_ns = p.cpu_intensive_thresh_us.load() * 1000ull;
	int mode = detect_mode();
	std::vector<candidate> cands;
	std::vector<deferred> wakes;
	{
		lock_guard lk(pool->lock);
		if (list_empty(&pool->worklist) && pool->nr_running <= pool->concurrency) {
			bool any_detected = false;
			for (worker *w : pool->workers)
				any_detected = any_detected || w->detected;
			if (!any_detected) {
				pool->watch.store(false);
				return false;
			}
		}
		for (worker *w : pool->workers) {
			if (!w->current_work || __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE) == 0)
				continue;
			uint64_t prog = w->progress.load(std::memory_order_relaxed);
			// Under perf, a worker with its event on is judged by its
			// switches; one whose event is off gets it on now and is
			// looked at once (it may have blocked before).
			bool evented = mode == BLOCK_PERF && w->detect_token.load(std::memory_order_relaxed);
			bool event_on = evented && w->perf_on.load(std::memory_order_relaxed);
			// Under perf, a running worker that never needed its event
			// has none: the monitor opens it on the worker's thread (the
			// pin keeps the thread and the worker alive meanwhile).
			bool openable = mode == BLOCK_PERF && !evented && !w->perf_failed.load(std::memory_order_relaxed);
			auto open_cand = [&] {
				w->pins.fetch_add(1, std::memory_order_relaxed);
				candidate c{w, w->tid, prog, true, false};
				c.open = true;
				cands.push_back(c);
			};
			if (w->detected) {
				if (!event_on)
					cands.push_back({w, w->tid, prog, false, true});
				continue;
			}
			if (w->sleeping || (w->flags & WORKER_NOT_RUNNING))
				continue;
			// Counted running again during this item: its state is read
			// on every pass while items wait (restore_running).
			bool recheck = w->recheck_prog == prog;
			if (!recheck)
				w->recheck_prog = 0;
			if (enable_only) {
				if (evented && !event_on && !list_empty(&pool->worklist))
					cands.push_back({w, w->tid, prog, true, false, w->detect_token.load()});
				else if (openable && !list_empty(&pool->worklist))
					open_cand();
				else if (recheck && !list_empty(&pool->worklist))
					cands.push_back({w, w->tid, prog, true, false, 0, true});
				continue;
			}
			if (prog != w->mon_prog) {
				// First sight of this item: its hog timing starts here.
				w->mon_prog = prog;
				w->mon_since = now;
				w->current_at_cpu_ns = worker_cpu_ns(w);
				continue;
			}
			bool stalled = now - w->mon_since >= window;
			bool hog = hog_ns && worker_cpu_ns(w) - w->current_at_cpu_ns >= hog_ns;
			if (hog) {
				// CPU hog (kernel wq_worker_tick): stop counting it.
				worker_set_flags(w, WORKER_CPU_INTENSIVE);
				w->mon_since = now;
				if (w->current_pwq)
					PWQ_STAT_ADD(w->current_pwq, PWQ_STAT_CPU_INTENSIVE, 1);
				hog_report(w);
				deferred d;
				if (kick_pool(pool, d) && w->current_pwq)
					PWQ_STAT_ADD(w->current_pwq, PWQ_STAT_CM_WAKEUP, 1);
				// Wakeups run after the lock is dropped below.
				wakes.push_back(d);
				continue;
			}
			if (mode == BLOCK_OFF || list_empty(&pool->worklist))
				continue;
			// An item seen on two passes with others waiting: its
			// worker's event goes on (and the worker is looked at once).
			// Not on first sight: an item queued behind one that is about
			// to end would only cost the worker two ioctls.
			if (evented && !event_on)
				cands.push_back({w, w->tid, prog, true, false, w->detect_token.load()});
			else if (openable)
				open_cand();
			else if ((!evented && stalled) || recheck)
				cands.push_back({w, w->tid, prog, true, false, 0, recheck});
		}
		if (enable_only) {
			// Sampling is off: one look per arming. The mark is cleared
			// under L, so an item queued after this look (monitor_watch
			// runs under L) arms the monitor again.
			pool->watch.store(false);
		}
		// Every candidate is looked at after L is dropped, and its
		// worker may exit meanwhile: pinned here (the open ones already
		// are), an exiting worker waits for its pins before it is freed.
		for (auto &c : cands)
			if (!c.open)
				c.w->pins.fetch_add(1, std::memory_order_relaxed);
	}
	for (auto &d : wakes)
		d.run();
	bool look_again = false;
	for (auto &c : cands) {
		// Dropped when this candidate is done: the worker may then exit.
		struct unpin {
			worker *w;
			~unpin() { w->pins.fetch_sub(1, std::memory_order_release); }
		} pin{c.w};
		if (c.open) {
			c.token = detect_open_for(c.w, c.tid);
			// No event after all: the sampling below and on later
			// passes finds it (the worker is perf_failed now).
		}
		if (c.token && detect_enable(c.w, c.token) != 1)
			continue; // gone, or enabled by the worker itself meanwhile
		char st = task_state(c.tid);
		bool runnable = st == 'R';
		if (c.check_blocked && st && !runnable) {
			deferred d;
			{
				lock_guard lk(pool->lock);
				// A worker seen sleeping as its event went on (or
				// while counted running again) gets the grace a
				// switch out gets; one found by sampling has had
				// its window. The event went on for whatever the
				// worker runs now: if it has moved on to another
				// item and sleeps in it, the switch out may have
				// come before the enable took effect (the worker
				// found its event already marked on and did not
				// enable it itself), and no record will ever tell.
				// So it is noted for its current item; settle_outs
				// reads the state again before counting it.
				bool via_event = mode == BLOCK_PERF && c.w->perf_on.load(std::memory_order_relaxed) &&
						 c.w->in_item.load(std::memory_order_relaxed);
				bool same_item = c.w->progress.load() == c.prog;
				if (may_mark_blocked(pool, c.w) && (same_item || (via_event && c.token))) {
					if (via_event)
						note_out(pool, c.w, outs, d);
					else
						mark_blocked(pool, c.w, d);
				}
			}
			d.run();
		} else if (c.check_restore && runnable) {
			lock_guard lk(pool->lock);
			if (c.w->detected && c.w->sleeping && c.w->hint_depth.load(std::memory_order_relaxed) == 0)
				restore_running(pool, c.w);
		} else if (c.recheck) {
			look_again = true;
		}
	}
	if (enable_only && look_again) {
		// Sampling is off, but a worker counted running again still has
		// items behind it: look again after a window (the monitor's wait
		// is bounded by it while armed), until its item ends or it is
		// found blocked.
		pool->watch.store(true);
		auto &m = g().monitor;
		lock_guard lk(m.lock);
		m.armed = true;
	}
	return true;
}

// Whether anything may need the monitor soon: a pool with items waiting
// or a worker running one, or timers armed with no thread to run them.
// When nothing does, the monitor sleeps a whole watchdog period.
bool engine_busy()
{
	if (timer_retry_wanted())
		return true;
	std::vector<worker_pool *> pools;
	{
		lock_guard gk(g().pool_mutex);
		pools = g().pools;
	}
	for (auto *pool : pools) {
		lock_guard lk(pool->lock);
		if (!list_empty(&pool->worklist) || pool->nr_workers > pool->nr_idle)
			return true;
	}
	return false;
}

// The watchdog's period: the kernel's watchdog_thresh / 4 while the
// engine is idle (7.5 s by default, as the kernel's idle watchdog timer),
// at most 1 s while it has work, at least 0.1 s.
uint64_t watchdog_period_ns(bool busy)
{
	unsigned long t = params().watchdog_thresh.load();
	uint64_t quarter = t ? t * 1000000000ull / 4 : 30000000000ull;
	return std::clamp<uint64_t>(quarter, 100000000ull, busy ? 1000000000ull : 30000000000ull);
}

void watchdog_check(uint64_t now)
{
	unsigned long thresh = params().watchdog_thresh.load();
	if (!thresh)
		return;
	auto &gl = g();
	bool lockup = false;
	std::vector<worker_pool *> pools;
	{
		lock_guard gk(gl.pool_mutex);
		pools = gl.pools;
	}
	uint64_t touched = ms().global_touch.load();
	for (auto *pool : pools) {
		lock_guard lk(pool->lock);
		if (list_empty(&pool->worklist))
			continue;
		uint64_t ts = std::max(pool->last_progress_ns, touched);
		if (now <= ts + thresh * 1000000000ull)
			continue;
		lockup = true;
		char node[32] = "";
		if (pool->node >= 0)
			snprintf(node, sizeof(node), " node=%d", pool->node);
		log_printf(LOG_ERR, "BUG: workqueue lockup - pool cpus=%s%s flags=0x%x nice=%d stuck for %llus!\n",
			   format_cpulist(pool->cpus).c_str(), node, pool->flags, pool->nice,
			   static_cast<unsigned long long>((now - ts) / 1000000000ull));
		pool->last_progress_ns = now; // report again only after another threshold
	}
	if (lockup)
		log_dump(LOG_ERR, [](FILE *f) { dump_all(f); });
}

// The cgroups' CPU quota is read again this often (on the monitor's passes,
// which come at least every watchdog_thresh / 4 while idle): a container's
// limit changed at run time (docker update --cpus) is followed within that.
constexpr uint64_t QUOTA_REREAD_NS = 10'000'000'000ull;

// Context: no lock. Unless the program set cmwq.cpu_quota itself, a new
// quota replaces the old one and managed pools are sized again.
void follow_cpu_quota()
{
	auto &p = params();
	if (p.cpu_quota_set.load())
		return;
	unsigned q = read_cpu_quota("/proc/self/cgroup", "/sys/fs/cgroup");
	if (q == p.cpu_quota.load() || p.cpu_quota_set.load())
		return;
	p.cpu_quota.store(q);
	log_printf(LOG_INFO, "cmwq: the process's CPU quota is now %s; managed unbound pools follow it\n",
		   q ? (std::to_string(q) + " CPUs").c_str() : "none");
	set_unbound_concurrency(p.unbound_managed.load());
}

void *monitor_thread(void *)
{
	pthread_setname_np(pthread_self(), "cmwq/monitor");
	fd_spare_take(); // before the program can take the last descriptor
	auto &m = g().monitor;
	int efd = detect_notify_fd(); // -1: no epoll set (yet), wait on the cv
	{
		lock_guard lk(m.lock);
		m.efd = efd;
	}
	uint64_t next_watchdog = now_ns() + 1000000000ull;
	auto &state = ms();
	uint64_t next_sample = 0;
	std::vector<deferred> ds;
	std::vector<pending_out> outs; // switches out within their grace
	int idle_wakes = 0;
	uint64_t next_efd_try = 0;
	uint64_t next_quota_read = now_ns() + QUOTA_REREAD_NS;
	for (;;) {
		state.wakeups.fetch_add(1, std::memory_order_relaxed); // each pass follows a wakeup
		hotplug_poll(false); // at most once a second: CPUs gone offline or back
		if (now_ns() >= next_quota_read) {
			next_quota_read = now_ns() + QUOTA_REREAD_NS;
			follow_cpu_quota();
		}
		if (efd < 0 && detect_mode() == BLOCK_PERF && now_ns() >= next_efd_try) {
			// The set could not be had at start (no descriptor to spare):
			// the workers' events, once they can be opened, are read here.
			// Tried once a second at most (each try counts descriptors).
			next_efd_try = now_ns() + 1000000000ull;
			efd = detect_notify_fd();
			if (efd >= 0) {
				lock_guard lk(m.lock);
				m.efd = efd;
			}
		}
		bool armed;
		unsigned sample = params().blocked_sample_us.load();
		uint64_t period = std::max(50u, sample) * 1000ull;
		// Unarmed, the next thing due is the watchdog's check: sleep until
		// then (a whole period while the engine is idle), not on a tick.
		uint64_t until_watchdog = 0;
		if (uint64_t now = now_ns(); next_watchdog > now)
			until_watchdog = next_watchdog - now;
		if (hotplug_retry_pending())
			until_watchdog = std::min(until_watchdog, HOTPLUG_RETRY_NS);
		if (efd >= 0) {
			uint64_t timeout = until_watchdog;
			{
				lock_guard lk(m.lock);
				if (m.armed && sample) {
					uint64_t now = now_ns();
					if (!next_sample)
						next_sample = now + period;
					timeout = next_sample > now ? next_sample - now : 0;
				} else if (m.armed) {
					// Sampling off, armed again by a pass (restore_running).
					timeout = std::max<uint64_t>(50000ull, params().blocked_window_us.load() * 1000ull);
				}
			}
			timeout = wait_until_due(settle_outs(outs, now_ns()), timeout);
			int acted = 0;
			int n = detect_wait(timeout,
					    [&](worker *w, bool blocked) { acted += on_switch(w, blocked, ds, outs); });
			for (auto &d : ds)
				d.run();
			ds.clear();
			// A run of switches that meant nothing (preemptions, waits for
			// a pool lock between items): let them gather for a while
			// rather than waking for each, which on a busy machine would
			// take a CPU from the workers. A block that comes meanwhile
			// waits at most this long.
			idle_wakes = n > 0 && !acted ? idle_wakes + 1 : 0;
			if (idle_wakes >= DETECT_HOLDOFF_AFTER) {
				int doublings = std::min(idle_wakes - DETECT_HOLDOFF_AFTER, 8);
				long hold = std::min(DETECT_HOLDOFF_NS << doublings, DETECT_HOLDOFF_MAX_NS);
				// Not past a switch out whose grace ends sooner.
				hold = static_cast<long>(
					wait_until_due(settle_outs(outs, now_ns()), static_cast<uint64_t>(hold)));
				timespec ts{0, hold};
				if (hold > 0)
					nanosleep(&ts, nullptr);
			}
			uint64_t now = now_ns();
			sample = params().blocked_sample_us.load(); // it may have changed while waiting
			lock_guard lk(m.lock);
			if (m.armed && sample && now < next_sample)
				continue; // a switch or an arming, before the next pass is due
			armed = m.armed;
			m.armed = false;
			next_sample = 0;
		} else {
			// No epoll set: no records come, but switches out seen by a
			// pass (note_out) still wait for their grace.
			uint64_t due = settle_outs(outs, now_ns());
			unique_lock lk(m.lock);
			uint64_t wait_ns =
				wait_until_due(due, m.armed && sample ? std::max(50u, sample) * 1000ull : until_watchdog);
			m.cv.wait_for(lk, std::chrono::nanoseconds(wait_ns));
			armed = m.armed;
			m.armed = false;
			sample = params().blocked_sample_us.load();
		}
		uint64_t now = now_ns();
		if (armed && !sample) {
			// Sampling is off: the events of the workers already running
			// are turned on (the rest turn on their own), then the watch
			// marks are forgotten so turning sampling on again starts
			// from a clean state.
			std::vector<worker_pool *> pools;
			{
				lock_guard gk(g().pool_mutex);
				pools = g().pools;
			}
			bool perf = detect_mode() == BLOCK_PERF;
			for (auto *pool : pools) {
				if (perf && pool->watch.load(std::memory_order_relaxed))
					sample_pool(pool, now, outs, true); // clears the mark under L
				else
					pool->watch.store(false);
			}
		}
		if (armed && sample) {
			bool again = false;
			std::vector<worker_pool *> pools;
			{
				lock_guard gk(g().pool_mutex);
				pools = g().pools;
			}
			for (auto *pool : pools)
				if (pool->watch.load(std::memory_order_relaxed))
					again |= sample_pool(pool, now, outs);
			if (again) {
				lock_guard lk(m.lock);
				m.armed = true;
			}
		}
		timer_retry_start();
		if (now >= next_watchdog) {
			watchdog_check(now);
			next_watchdog = now + watchdog_period_ns(armed || engine_busy());
		}
	}
}

} // namespace

uint64_t monitor_wakeups() { return ms().wakeups.load(std::memory_order_relaxed); }

void monitor_start()
{
	auto &m = ms();
	if (m.up.load(std::memory_order_acquire))
		return;
	lock_guard lk(m.lock);
	if (m.started || now_ns() < m.retry_ns)
		return;
	if (int err = spawn_thread(CMWQ_THREAD_MONITOR, monitor_thread, nullptr)) {
		// Degraded: blocking without a hint and hogs go unseen, and the
		// watchdog is off, until a later worker's start retries it.
		m.retry_ns = now_ns() + CREATE_COOLDOWN_NS;
		thread_start_failed("monitor", err, "un-annotated blocking and the watchdog are off; retried when the next worker starts");
		return;
	}
	m.started = true;
	m.up.store(true, std::memory_order_release);
}

void monitor_fork_lock() NO_THREAD_SAFETY_ANALYSIS
{
	ms().lock.lock();
	g().monitor.lock.lock();
}

void monitor_fork_unlock(bool child) NO_THREAD_SAFETY_ANALYSIS
{
	if (child) {
		// The monitor thread is the parent's: the child starts its own.
		ms().started = false;
		ms().up.store(false, std::memory_order_relaxed);
		ms().retry_ns = 0;
		g().monitor.armed = false;
		g().monitor.efd = -1; // detect_fork_unlock closed it
	}
	g().monitor.lock.unlock();
	ms().lock.unlock();
}

void watchdog_touch(int cpu)
{
	(void)cpu;
	ms().global_touch.store(now_ns());
}

} // namespace cmwq::detail
