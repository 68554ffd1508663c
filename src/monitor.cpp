// monitor.cpp - what the kernel's scheduler hooks and timers do for it:
// finding per-CPU workers that block without a hint, CPU hogs, maydays and
// rescuers, the lockup watchdog, and flush-dependency checks.
//
// Blocked workers are found by sampling, only while a per-CPU pool holds
// items back behind running workers: a worker whose item made no progress
// for cmwq.blocked_window_us is looked up in /proc/self/task/<tid>/stat, and
// if it is not runnable it is treated as sleeping (nr_running--, CM_WAKEUP).
// Pools that make progress cost nothing: the monitor sleeps until armed.
#include "internal.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>

namespace cmwq::detail {

int rescue_pwq(worker *r, pool_workqueue *pwq, int batch);
void deferred_create(worker_pool *pool);
void dump_all(FILE *f);

namespace {

struct monitor_state {
	std::mutex lock;
	std::condition_variable cv;
	bool armed = false;
	bool started = false;
	std::mutex hog_lock;
	std::map<work_func_t, uint64_t> hog_counts; // WCI_MAX_ENTS entries at most
	std::atomic<uint64_t> global_touch{0};
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
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
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

bool is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

void hog_report(work_func_t fn)
{
	auto &m = ms();
	unsigned thresh = params().cpu_intensive_warning_thresh.load();
	uint64_t cnt;
	{
		std::lock_guard lk(m.hog_lock);
		auto it = m.hog_counts.find(fn);
		if (it == m.hog_counts.end()) {
			if (m.hog_counts.size() >= 128)
				return;
			it = m.hog_counts.emplace(fn, 0).first;
		}
		cnt = ++it->second;
	}
	if (thresh && cnt >= thresh && is_pow2(cnt + 1 - thresh))
		fprintf(stderr, "cmwq: %s hogged CPU for >%luus %llu times, consider switching to WQ_UNBOUND\n",
			func_name(fn).c_str(), params().cpu_intensive_thresh_us.load(),
			static_cast<unsigned long long>(cnt));
}

struct candidate {
	worker *w;
	pid_t tid;
	uint64_t prog;
	bool check_blocked; // no progress for the window
	bool check_restore; // detected earlier: running again?
};

// One pass over a watched pool. Returns whether it still needs watching.
bool sample_pool(worker_pool *pool, uint64_t now)
{
	auto &p = params();
	uint64_t window = p.blocked_window_us.load() * 1000ull;
	uint64_t hog_ns = p.cpu_intensive_thresh_us.load() * 1000ull;
	std::vector<candidate> cands;
	std::vector<deferred> wakes;
	{
		std::lock_guard lk(pool->lock);
		if (list_empty(&pool->worklist) && pool->nr_running <= 1) {
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
			if (w->detected) {
				cands.push_back({w, w->tid, prog, false, true});
				continue;
			}
			if (w->sleeping || (w->flags & WORKER_NOT_RUNNING))
				continue;
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
				worker_set_flags_pub(w, WORKER_CPU_INTENSIVE);
				w->mon_since = now;
				if (w->current_pwq)
					PWQ_STAT_ADD(w->current_pwq, PWQ_STAT_CPU_INTENSIVE, 1);
				hog_report(w->current_func);
				deferred d;
				if (kick_pool_pub(pool, d) && w->current_pwq)
					PWQ_STAT_ADD(w->current_pwq, PWQ_STAT_CM_WAKEUP, 1);
				// Wakeups run after the lock is dropped below.
				wakes.push_back(d);
				continue;
			}
			if (stalled && !list_empty(&pool->worklist))
				cands.push_back({w, w->tid, prog, true, false});
		}
	}
	for (auto &d : wakes)
		d.run();
	for (auto &c : cands) {
		char st = task_state(c.tid);
		bool runnable = st == 'R';
		if (c.check_blocked && st && !runnable) {
			deferred d;
			{
				std::lock_guard lk(pool->lock);
				if (c.w->current_work && !c.w->sleeping && c.w->progress.load() == c.prog &&
				    !(c.w->flags & WORKER_NOT_RUNNING)) {
					c.w->detected = true;
					c.w->sleeping = true;
					c.w->slept_in_item = true;
					pool->nr_running--;
					if (kick_pool_pub(pool, d) && c.w->current_pwq)
						PWQ_STAT_ADD(c.w->current_pwq, PWQ_STAT_CM_WAKEUP, 1);
				}
			}
			d.run();
		} else if (c.check_restore && runnable) {
			std::lock_guard lk(pool->lock);
			if (c.w->detected && c.w->sleeping && c.w->hint_depth == 0) {
				c.w->detected = false;
				c.w->sleeping = false;
				if (!(c.w->flags & WORKER_NOT_RUNNING))
					pool->nr_running++;
			}
		}
	}
	return true;
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
		std::lock_guard gk(gl.pool_mutex);
		pools = gl.pools;
	}
	uint64_t touched = ms().global_touch.load();
	for (auto *pool : pools) {
		std::lock_guard lk(pool->lock);
		if (list_empty(&pool->worklist))
			continue;
		uint64_t ts = std::max(pool->last_progress_ns, touched);
		if (now <= ts + thresh * 1000000000ull)
			continue;
		lockup = true;
		fprintf(stderr, "BUG: workqueue lockup - pool cpus=%s", format_cpulist(pool->cpus).c_str());
		if (pool->node >= 0)
			fprintf(stderr, " node=%d", pool->node);
		fprintf(stderr, " flags=0x%x nice=%d stuck for %llus!\n", pool->flags, pool->nice,
			static_cast<unsigned long long>((now - ts) / 1000000000ull));
		pool->last_progress_ns = now; // report again only after another threshold
	}
	if (lockup)
		dump_all(stderr);
}

void monitor_thread()
{
	pthread_setname_np(pthread_self(), "cmwq/monitor");
	auto &m = ms();
	uint64_t next_watchdog = now_ns() + 1000000000ull;
	for (;;) {
		bool armed;
		{
			std::unique_lock lk(m.lock);
			unsigned sample = params().blocked_sample_us.load();
			if (m.armed && sample)
				m.cv.wait_for(lk, std::chrono::microseconds(std::max(50u, sample)));
			else
				m.cv.wait_for(lk, std::chrono::milliseconds(250));
			armed = m.armed;
			m.armed = false;
		}
		uint64_t now = now_ns();
		if (armed && !params().blocked_sample_us.load()) {
			// Sampling is off: forget the watch marks so turning it on
			// again starts from a clean state.
			std::lock_guard gk(g().pool_mutex);
			for (auto *pool : g().pools)
				pool->watch.store(false);
		}
		if (armed && params().blocked_sample_us.load()) {
			bool again = false;
			std::vector<worker_pool *> pools;
			{
				std::lock_guard gk(g().pool_mutex);
				pools = g().pools;
			}
			for (auto *pool : pools)
				if (pool->watch.load(std::memory_order_relaxed))
					again |= sample_pool(pool, now);
			if (again) {
				std::lock_guard lk(m.lock);
				m.armed = true;
			}
		}
		if (now >= next_watchdog) {
			watchdog_check(now);
			unsigned long t = params().watchdog_thresh.load();
			next_watchdog = now + std::clamp<uint64_t>(t * 1000000000ull / 4, 100000000ull, 1000000000ull);
		}
	}
}

void mayday_timer_fn(timer_list *t);

} // namespace

void monitor_start()
{
	auto &m = ms();
	std::lock_guard lk(m.lock);
	if (m.started)
		return;
	m.started = true;
	std::thread(monitor_thread).detach();
}

void monitor_watch(worker_pool *pool)
{
	// Called on every queue call while a worker runs: a plain load first
	// keeps the common case free of a locked instruction.
	if (pool->watch.load(std::memory_order_relaxed) || pool->watch.exchange(true, std::memory_order_relaxed))
		return;
	auto &m = ms();
	std::lock_guard lk(m.lock);
	if (!m.armed) {
		m.armed = true;
		m.cv.notify_one();
	}
}

void hog_account(worker *w, pool_workqueue *pwq, uint64_t cpu_ns, bool flagged)
{
	uint64_t thresh = params().cpu_intensive_thresh_us.load() * 1000ull;
	if (flagged || !thresh || cpu_ns < thresh || w->pool->cpu < 0 || (w->flags & WORKER_NOT_RUNNING))
		return;
	// Ran past the threshold without the monitor seeing it (nothing waited):
	// counted and reported as the kernel's tick would have.
	PWQ_STAT_ADD(pwq, PWQ_STAT_CPU_INTENSIVE, 1);
	hog_report(w->current_func);
}

// ---- mayday and rescuers -------------------------------------------------------

namespace {

void send_mayday(pool_workqueue *pwq)
{
	workqueue_struct *wq = pwq->wq;
	if (!wq->rescuer)
		return;
	std::lock_guard lk(wq->mayday_lock);
	if (pwq->on_mayday)
		return;
	pwq->on_mayday = true;
	wq->maydays.push_back(pwq);
	PWQ_STAT_ADD(pwq, PWQ_STAT_MAYDAY, 1);
	worker *r = wq->rescuer;
	if (r->wake.exchange(1) == 2)
		syscall(SYS_futex, reinterpret_cast<int *>(&r->wake), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

void mayday_timer_fn(timer_list *t)
{
	worker_pool *pool = container_of(t, worker_pool, mayday_timer);
	bool need;
	{
		std::lock_guard lk(pool->lock);
		need = need_to_create_worker(pool->counts());
		if (need)
			for (list_head *e = pool->worklist.next; e != &pool->worklist; e = e->next) {
				unsigned long data = work_data(entry_work(e));
				if (data & WORK_STRUCT_PWQ)
					send_mayday(reinterpret_cast<pool_workqueue *>(data & ~255UL));
			}
	}
	if (!need)
		return;
	deferred_create(pool); // retried once the 1 s cooldown has passed
	timer_add(&pool->mayday_timer, now_ns() + 100000000ull, mayday_timer_fn); // MAYDAY_INTERVAL
}

void rescuer_thread(worker *r)
{
	workqueue_struct *wq = r->rescue_wq;
	tl_worker = r;
	r->thread = pthread_self(); // published by the tid store below
	r->cpu_clock_last = thread_cpu_ns(0);
	__atomic_store_n(&r->tid, static_cast<pid_t>(syscall(SYS_gettid)), __ATOMIC_RELEASE);
	char name[16];
	snprintf(name, sizeof(name), "kworker/R-%.5s", wq->name.c_str());
	pthread_setname_np(pthread_self(), name);
	for (;;) {
		pool_workqueue *pwq = nullptr;
		bool stop;
		{
			std::lock_guard lk(wq->mayday_lock);
			stop = r->flags & WORKER_DIE;
			if (!wq->maydays.empty()) {
				pwq = wq->maydays.front();
				wq->maydays.erase(wq->maydays.begin());
			}
			if (!pwq) {
				if (stop)
					break;
				r->wake.store(0);
			}
		}
		if (!pwq) {
			int expected = 0;
			if (r->wake.compare_exchange_strong(expected, 2))
				while (r->wake.load() == 2)
					syscall(SYS_futex, reinterpret_cast<int *>(&r->wake), FUTEX_WAIT_PRIVATE, 2, nullptr,
						nullptr, 0);
			continue;
		}
		int n = rescue_pwq(r, pwq, 16); // RESCUER_BATCH
		bool more;
		{
			std::lock_guard lk(pwq->pool->lock);
			more = n == 16 && need_to_create_worker(pwq->pool->counts());
		}
		std::lock_guard lk(wq->mayday_lock);
		if (more)
			wq->maydays.push_back(pwq); // round robin
		else
			pwq->on_mayday = false;
	}
	r->pins.fetch_sub(1);
}

} // namespace

void mayday_arm(worker_pool *pool)
{
	timer_add_if_idle(&pool->mayday_timer, now_ns() + 10000000ull, mayday_timer_fn); // MAYDAY_INITIAL_TIMEOUT
}

void rescuer_start(workqueue_struct *wq)
{
	auto *r = new worker;
	INIT_LIST_HEAD(&r->entry);
	INIT_LIST_HEAD(&r->scheduled);
	r->rescuer = true;
	r->rescue_wq = wq;
	r->flags = WORKER_PREP | WORKER_UNBOUND;
	r->pins.store(1); // dropped when the thread exits
	wq->rescuer = r;
	std::thread(rescuer_thread, r).detach();
}

void rescuer_stop(workqueue_struct *wq)
{
	worker *r = wq->rescuer;
	if (!r)
		return;
	{
		std::lock_guard lk(wq->mayday_lock);
		r->flags |= WORKER_DIE;
	}
	if (r->wake.exchange(1) == 2)
		syscall(SYS_futex, reinterpret_cast<int *>(&r->wake), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
	while (r->pins.load())
		sched_yield();
	wq->rescuer = nullptr;
	delete r;
}

// ---- flush dependency (spec 8.1) --------------------------------------------------

void check_flush_dependency(workqueue_struct *target, work_struct *target_work)
{
	worker *w = tl_worker;
	if (!w || !w->current_pwq)
		return;
	workqueue_struct *cur = w->current_pwq->wq;
	std::string what = target_work ? func_name(target_work->func) : std::string("(all)");
	if (!target_work && cur == target)
		warn_once_msg("self-wq-flush-" + target->name,
			      "cmwq: " + func_name(w->current_func) + " on workqueue " + cur->name +
				      " flushes its own workqueue; it waits for itself and deadlocks");
	if (target->flags & WQ_MEM_RECLAIM)
		return;
	if ((cur->flags & (WQ_MEM_RECLAIM | __WQ_LEGACY)) == WQ_MEM_RECLAIM)
		warn_once_msg("reclaim-flush-" + cur->name + target->name,
			      "workqueue: WQ_MEM_RECLAIM " + cur->name + ":" + func_name(w->current_func) +
				      " is flushing !WQ_MEM_RECLAIM " + target->name + ":" + what);
}

void watchdog_touch(int cpu)
{
	(void)cpu;
	ms().global_touch.store(now_ns());
}

} // namespace cmwq::detail
