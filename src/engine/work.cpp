// work.cpp - one work item: queueing (on a CPU, a node, after a delay),
// the CPU choice, grabbing PENDING for cancel/disable/enable, flush
// barriers and flush_work, work_busy, and flush-dependency checks.
// PENDING is the item's ownership token, taken with one atomic
// test-and-set outside any lock (the kernel's rule); everything after it
// happens under the target pool's lock.
#include "engine.h"

#include <errno.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>

namespace cmwq::detail {

int current_cpu()
{
	auto &gl = g();
	int cpu = sched_getcpu();
	if (cpu >= 0 && cpu < static_cast<int>(gl.cpu_index.size()) && gl.cpu_index[cpu] >= 0)
		return cpu;
	if (cpu < 0)
		cpu = 0;
	return gl.usable[static_cast<size_t>(cpu) % gl.usable.size()];
}

static int wq_select_unbound_cpu(int cpu)
{
	auto &gl = g();
	if (!params().debug_force_rr_cpu.load(std::memory_order_relaxed))
		return cpu;
	warn_once_msg("rr", "workqueue: round-robin CPU selection forced, expect performance impact");
	thread_local size_t rr = 0;
	rr = (rr + 1) % gl.usable.size();
	return gl.usable[rr];
}

static bool cpu_usable(int cpu)
{
	auto &gl = g();
	return cpu >= 0 && cpu < static_cast<int>(gl.cpu_index.size()) && gl.cpu_index[cpu] >= 0;
}

static bool is_chained_work(workqueue_struct *wq)
{
	worker *w = tl_worker;
	return w && w->current_pwq && w->current_pwq->wq == wq;
}

// kernel: __queue_work. Which pool's lock it holds is decided at run time
// (the pool the item still runs on, else the target's), which the
// analysis cannot follow; the locked part is checked by hand.
bool do_queue_work(int req_cpu, workqueue_struct *wq, work_struct *work) NO_THREAD_SAFETY_ANALYSIS
{
	unsigned wqf = wq->aflags.load(std::memory_order_acquire);
	if ((wqf & (__WQ_DESTROYING | __WQ_DRAINING)) && !is_chained_work(wq)) {
		warn_once_msg("cannot-queue-" + wq->name, "workqueue: cannot queue " + work_name(work) +
								    " on wq " + wq->name);
		clear_pending_keep_offq(work);
		transit_end(work);
		return false;
	}
	if ((wqf & __WQ_DEPRECATED) && params().warn_migration.load(std::memory_order_relaxed)) [[unlikely]]
		warn_once_msg("deprecated-" + wq->name,
			      "workqueue: " + wq->name + " is deprecated; use system_percpu_wq or system_dfl_wq");
	deferred d;
	for (int tries = 0;; tries++) {
		int cpu = req_cpu;
		if (cpu == WORK_CPU_UNBOUND || !cpu_usable(cpu)) {
			if (cpu != WORK_CPU_UNBOUND)
				warn_once_msg("bad-cpu", "cmwq: queue_work_on: CPU " + std::to_string(cpu) +
								 " is not usable (not online or outside the process affinity mask); "
								 "using the current CPU");
			cpu = current_cpu();
			if (wqf & WQ_UNBOUND)
				cpu = wq_select_unbound_cpu(cpu);
		}
		pool_workqueue *pwq = wq->cpu_pwq[static_cast<size_t>(cpu)].load(std::memory_order_acquire);
		worker_pool *pool = pwq_pool(pwq);
		worker_pool *last_pool = (wqf & __WQ_ORDERED) ? nullptr : get_work_pool(work);
		if (last_pool && last_pool != pool) {
			last_pool->lock.lock();
			worker *w = find_worker_executing_work(last_pool, work);
			if (w && w->current_pwq->wq == wq) {
				pwq = w->current_pwq;
				pool = last_pool;
			} else {
				last_pool->lock.unlock();
				pool->lock.lock();
			}
		} else {
			pool->lock.lock();
		}
		// Released (and perhaps reused elsewhere) since the slot was read:
		// look again.
		if (pwq_pool(pwq) != pool || pwq->refcnt == 0 || pwq->released) {
			pool->lock.unlock();
			int n = 0;
			spin_pause(n);
			continue;
		}
		CMWQ_PROBE5(workqueue_queue_work, work, work->func, wq->name.c_str(), req_cpu, pool->cpu);
		// Read under pool->lock: a flusher that moves work_color on scans
		// this pwq under the same lock afterwards, so it either sees this
		// item counted in the old color or this load sees the new color.
		int color = wq->work_color.load(std::memory_order_relaxed);
		pwq->nr_in_flight_color[color]++;
		pwq->nr_in_flight++;
		unsigned long cflags = static_cast<unsigned long>(color) << WORK_STRUCT_COLOR_SHIFT;
		if (list_empty(&pwq->inactive_works) && pwq_tryinc_nr_active(pwq, false)) {
			if (list_empty(&pool->worklist))
				pool->last_progress_ns = now_ns();
			insert_work(pwq, work, &pool->worklist, cflags);
			CMWQ_PROBE2(workqueue_activate_work, work, work->func);
			if (!kick_pool(pool, d) && pool->nr_running > 0 && pool->managed)
				monitor_watch(pool);
		} else {
			insert_work(pwq, work, &pwq->inactive_works, cflags | WORK_STRUCT_INACTIVE);
		}
		transit_end(work); // on a list, under the lock a fork takes
		pool->lock.unlock();
		break;
	}
	d.run();
	return true;
}

// delayed_work_timer_fn (below, with the C API) queues dw->work when its
// timer fires.
static void delayed_work_fire(timer_list *t)
{
	auto *dw = container_of(t, delayed_work, timer);
	// The timer thread named the timer; the item takes its place until it
	// is on a list.
	transit_begin(&dw->work);
	tl_transit.timer.store(nullptr, std::memory_order_relaxed);
	do_queue_work(dw->cpu, dw->wq, &dw->work);
}

void forget_delayed_work_timer(timer_list *t)
{
	if (t->function != delayed_work_timer_fn)
		return;
	forget_pending(&container_of(t, delayed_work, timer)->work);
}

void forget_pending(work_struct *w)
{
	unsigned long data = work_data(w);
	__atomic_store_n(&w->data, make_offq(offq_pool(data), offq_depth(data), data & (1UL << WORK_OFFQ_BH_BIT)),
			 __ATOMIC_RELEASE);
}

static void do_queue_delayed_work(int cpu, workqueue_struct *wq, delayed_work *dw, unsigned long delay)
{
	if (!delay) {
		do_queue_work(cpu, wq, &dw->work);
		return;
	}
	dw->wq = wq;
	dw->cpu = cpu;
	if (debug_objects_on())
		debug_work_active(&dw->work);
	// Capped at the kernel's wheel reach (about 12 days): no product wraps.
	uint64_t ms = std::min<uint64_t>(delay, CMWQ_TIMER_MAX_DELTA);
	timer_add(&dw->timer, now_ns() + ms * 1000000ull, delayed_work_timer_fn, &dw->work);
}

enum { WORK_CANCEL_DELAYED = 1, WORK_CANCEL_DISABLE = 2 };

static int try_to_grab_pending(work_struct *work, unsigned cflags)
{
	if (cflags & WORK_CANCEL_DELAYED) {
		delayed_work *dw = to_delayed_work(work);
		if (timer_remove(&dw->timer))
			return 1;
	}
	if (!test_and_set_pending(work))
		return 0;
	worker_pool *pool = get_work_pool(work);
	if (!pool)
		return -EAGAIN;
	deferred d;
	{
		lock_guard lk(pool->lock);
		unsigned long data = work_data(work);
		if (!(data & WORK_STRUCT_PWQ))
			return -EAGAIN;
		pool_workqueue *pwq = data_pwq(data);
		if (pwq_pool(pwq) != pool)
			return -EAGAIN;
		// Barriers linked behind an inactive item go to the worklist with
		// it; the item itself keeps INACTIVE so it gives back no slot.
		if (data & WORK_STRUCT_INACTIVE) {
			if (list_empty(&pool->worklist))
				pool->last_progress_ns = now_ns();
			move_linked_works(pool, work, &pool->worklist);
		}
		list_del_init(&work->entry);
		__atomic_store_n(&work->data,
				 make_offq(static_cast<unsigned long>(pool->id), 0, pool->flags & POOL_BH) |
					 WORK_STRUCT_PENDING,
				 __ATOMIC_RELEASE);
		pwq_dec_nr_in_flight(pwq, data, d);
		// A barrier moved to the worklist needs a worker: the pool may
		// have none running (or none at all, after an attribute change).
		if (!list_empty(&pool->worklist))
			kick_pool(pool, d);
	}
	d.run();
	return 1;
}

static int work_grab_pending(work_struct *work, unsigned cflags)
{
	int n = 0;
	for (;;) {
		int ret = try_to_grab_pending(work, cflags);
		if (ret >= 0)
			return ret;
		spin_pause(n);
	}
}

// kernel: __cancel_work
static bool do_cancel_work(work_struct *work, unsigned cflags)
{
	if (!work && null_arg("cancel_work", "work"))
		return false;
	transit_begin(work);
	int ret = work_grab_pending(work, cflags);
	unsigned long data = work_data(work);
	unsigned long depth = offq_depth(data);
	if (cflags & WORK_CANCEL_DISABLE) {
		if (depth == (1UL << WORK_OFFQ_DISABLE_BITS) - 1)
			warn_once_msg("disable-overflow", "workqueue: work disable count overflowed");
		else
			depth++;
	}
	__atomic_store_n(&work->data, make_offq(offq_pool(data), depth, data & (1UL << WORK_OFFQ_BH_BIT)),
			 __ATOMIC_RELEASE);
	transit_end(work);
	if (ret && debug_objects_on())
		debug_work_idle(work);
	return ret != 0;
}

struct wq_barrier {
	work_struct work;
	std::atomic<int> done{0};
	pid_t task = 0;
};

static void wq_barrier_func(work_struct *w)
{
	auto *b = container_of(w, wq_barrier, work);
	b->done.store(1, std::memory_order_release);
	futex_wake(&b->done, 1);
}

static void insert_wq_barrier(pool_workqueue *pwq, wq_barrier *barr, work_struct *target, worker *w)
	REQUIRES(pwq->pool->lock)
{
	INIT_WORK(&barr->work, wq_barrier_func);
	barr->task = static_cast<pid_t>(syscall(SYS_gettid));
	unsigned long flags = WORK_STRUCT_INACTIVE;
	list_head *head;
	int color;
	if (w) {
		head = w->scheduled.next;
		color = w->current_color;
	} else {
		unsigned long tdata = work_data(target);
		head = target->entry.next;
		flags |= tdata & WORK_STRUCT_LINKED;
		color = work_color(tdata);
		__atomic_fetch_or(&target->data, WORK_STRUCT_LINKED, __ATOMIC_RELEASE);
	}
	pwq->nr_in_flight_color[color]++;
	pwq->nr_in_flight++;
	insert_work(pwq, &barr->work, head, flags | (static_cast<unsigned long>(color) << WORK_STRUCT_COLOR_SHIFT));
}

static void wait_barrier(wq_barrier *b)
{
	cmwq_blocking_begin();
	while (!b->done.load(std::memory_order_acquire))
		futex_wait(&b->done, 0);
	cmwq_blocking_end();
}

// Returns true when the wait would deadlock (a work item flushing its own
// workqueue): the caller then returns without waiting.
bool check_flush_dependency(workqueue_struct *target, work_struct *target_work)
{
	worker *w = tl_worker;
	if (!w || !w->current_pwq)
		return false;
	workqueue_struct *cur = w->current_pwq->wq;
	std::string what = target_work ? work_name(target_work) : std::string("(all)");
	if (!target_work && cur == target) {
		warn_once_msg("self-wq-flush-" + target->name,
			      "cmwq: " + current_item_name(w) + " on workqueue " + cur->name +
				      " flushes its own workqueue; it would wait for itself and deadlock, "
				      "returning without waiting");
		return true;
	}
	if (target->flags & WQ_MEM_RECLAIM)
		return false;
	if ((cur->flags & (WQ_MEM_RECLAIM | __WQ_LEGACY)) == WQ_MEM_RECLAIM)
		warn_once_msg("reclaim-flush-" + cur->name + target->name,
			      "workqueue: WQ_MEM_RECLAIM " + cur->name + ":" + current_item_name(w) +
				      " is flushing !WQ_MEM_RECLAIM " + target->name + ":" + what);
	return false;
}

// Whether the calling work item, by waiting for work (queued on pwq, or run
// by worker w), would wait for itself: work is the caller's own item, or a
// queued item of the caller's workqueue that can start only after the
// caller's item ends (a later item of an ordered workqueue, or one held back
// by max_active 1). Then one warning; the caller returns without waiting.
static bool wait_deadlocks(work_struct *work, unsigned long data, pool_workqueue *pwq, worker *w,
			   const char *verb) REQUIRES(pwq->pool->lock)
{
	worker *me = tl_worker;
	if (!me || !me->current_pwq)
		return false;
	if (me->current_work == work && w == me) {
		warn_once_msg("self-flush-" + work_name(work), "cmwq: " + work_name(work) + " on workqueue " +
								       pwq->wq->name + " " + verb +
								       " itself; that would deadlock, returning without waiting");
		return true;
	}
	if (!w && me->current_pwq->wq == pwq->wq &&
	    ((pwq->wq->flags & __WQ_ORDERED) ||
	     ((data & WORK_STRUCT_INACTIVE) && pwq->wq->max_active.load(std::memory_order_relaxed) <= 1))) {
		warn_once_msg("order-flush-" + pwq->wq->name + current_item_name(me) + work_name(work),
			      "cmwq: " + current_item_name(me) + " on workqueue " + pwq->wq->name + " " + verb + " " +
				      work_name(work) +
				      ", which can start only after it ends (ordered or max_active 1); "
				      "that would deadlock, returning without waiting");
		return true;
	}
	return false;
}

// Under pool->lock: whom a wait for work waits on - the pwq it is queued on
// (w stays null), or the worker running it. false when it is neither queued
// on pool nor running there (idle: nothing to wait for).
static bool flush_target(worker_pool *pool, work_struct *work, unsigned long data, pool_workqueue *&pwq,
			 worker *&w) REQUIRES(pool->lock)
{
	w = nullptr;
	if ((data & WORK_STRUCT_PWQ) && pwq_pool(data_pwq(data)) == pool) {
		pwq = data_pwq(data);
		return true;
	}
	w = find_worker_executing_work(pool, work);
	if (!w)
		return false;
	pwq = w->current_pwq;
	return true;
}

// kernel: __flush_work
static bool do_flush_work(work_struct *work, bool from_cancel)
{
	if (!work->func) {
		warn_once_msg("flush-null", "cmwq: flush_work() on a work item with no function");
		return false;
	}
	worker_pool *pool = get_work_pool(work);
	if (!pool)
		return false;
	wq_barrier barr;
	{
		lock_guard lk(pool->lock);
		unsigned long data = work_data(work);
		pool_workqueue *pwq;
		worker *w;
		if (!flush_target(pool, work, data, pwq, w))
			return false;
		if (wait_deadlocks(work, data, pwq, w, from_cancel ? "cancels-and-waits for" : "flushes"))
			return false;
		if (!from_cancel)
			check_flush_dependency(pwq->wq, work);
		insert_wq_barrier(pwq, &barr, work, w);
	}
	wait_barrier(&barr);
	return true;
}

// For cmwq_wait_would_deadlock: the same checks as a flush, on work's
// current state.
static bool task_wait_deadlocks(work_struct *work, const char *verb)
{
	if (!tl_worker || !work || !work->func)
		return false;
	worker_pool *pool = get_work_pool(work);
	if (!pool)
		return false;
	lock_guard lk(pool->lock);
	unsigned long data = work_data(work);
	pool_workqueue *pwq;
	worker *w;
	return flush_target(pool, work, data, pwq, w) && wait_deadlocks(work, data, pwq, w, verb);
}

} // namespace cmwq::detail

using namespace cmwq::detail;

extern "C" void delayed_work_timer_fn(struct timer_list *t)
{
	delayed_work_fire(t);
}

extern "C" bool cmwq_wait_would_deadlock(struct work_struct *work, const char *verb)
{
	return task_wait_deadlocks(work, verb ? verb : "waits for");
}

namespace {
// Whether a queue call must refuse work: NULL, without a function (a zeroed,
// never initialised item would crash the worker), or under
// cmwq.debug_objects an item that was never initialised.
bool work_refused_slow(work_struct *work, const char *call)
{
	if (!work)
		return null_arg(call, "work");
	if (!work->func) {
		char key[80], addr[32];
		snprintf(addr, sizeof(addr), "%p", static_cast<void *>(work));
		snprintf(key, sizeof(key), "nofunc-%s-%s", call, addr);
		warn_once_msg(key, std::string("cmwq: ") + call + "(): work item " + addr +
					   " has no function (never initialised with INIT_WORK?); not queued");
		return true;
	}
	return debug_objects_on() && !debug_check_queue(work, call);
}

inline bool work_refused(work_struct *work, const char *call)
{
	if (work && work->func && !debug_objects_on()) [[likely]]
		return false;
	return work_refused_slow(work, call);
}
// What queue_work_on and cmwq_try_queue_work share. dropped: PENDING was
// taken but the workqueue drains or dies, so the item is idle again (the
// kernel's queue_work still returns true for it).
enum class queue_result { not_queued, dropped, queued };
queue_result queue_item(int cpu, workqueue_struct *wq, work_struct *work, const char *call)
{
	if (wq_refused(wq, call) || work_refused(work, call))
		return queue_result::not_queued;
	transit_begin(work);
	if (test_and_set_pending(work) || clear_pending_if_disabled(work)) {
		transit_end(work);
		return queue_result::not_queued;
	}
	// Ends the transit under the pool lock.
	return do_queue_work(cpu, wq, work) ? queue_result::queued : queue_result::dropped;
}
} // namespace

extern "C" {

bool queue_work_on(int cpu, workqueue_struct *wq, work_struct *work)
{
	return queue_item(cpu, wq, work, "queue_work_on") != queue_result::not_queued;
}

bool cmwq_try_queue_work(workqueue_struct *wq, work_struct *work)
{
	return queue_item(WORK_CPU_UNBOUND, wq, work, "cmwq_try_queue_work") == queue_result::queued;
}

bool cmwq_try_queue_work_on(int cpu, workqueue_struct *wq, work_struct *work)
{
	return queue_item(cpu, wq, work, "cmwq_try_queue_work_on") == queue_result::queued;
}

bool queue_work_node(int node, workqueue_struct *wq, work_struct *work)
{
	if (wq_refused(wq, "queue_work_node") || work_refused(work, "queue_work_node"))
		return false;
	if (!(wq->flags & WQ_UNBOUND))
		warn_once_msg("qwn-percpu", "cmwq: queue_work_node() on per-CPU workqueue " + wq->name +
						    " (only WQ_UNBOUND workqueues are meant for it)");
	int cpu = WORK_CPU_UNBOUND;
	auto &gl = g();
	if (node >= 0 && node < gl.nr_nodes) {
		int cur = current_cpu();
		if (gl.cpu_node[static_cast<size_t>(cur)] == node)
			cpu = cur;
		else
			for (int c : gl.usable)
				if (gl.cpu_node[static_cast<size_t>(c)] == node) {
					cpu = c;
					break;
				}
	}
	return queue_work_on(cpu, wq, work);
}

bool queue_delayed_work_on(int cpu, workqueue_struct *wq, delayed_work *dwork, unsigned long delay)
{
	if (!dwork && null_arg("queue_delayed_work_on", "dwork"))
		return false;
	if (wq_refused(wq, "queue_delayed_work_on") || work_refused(&dwork->work, "queue_delayed_work_on"))
		return false;
	transit_begin(&dwork->work);
	if (test_and_set_pending(&dwork->work) || clear_pending_if_disabled(&dwork->work)) {
		transit_end(&dwork->work);
		return false;
	}
	do_queue_delayed_work(cpu, wq, dwork, delay); // ends the transit under its lock
	return true;
}

bool mod_delayed_work_on(int cpu, workqueue_struct *wq, delayed_work *dwork, unsigned long delay)
{
	if (!dwork && null_arg("mod_delayed_work_on", "dwork"))
		return false;
	if (wq_refused(wq, "mod_delayed_work_on") || work_refused(&dwork->work, "mod_delayed_work_on"))
		return false;
	transit_begin(&dwork->work);
	int ret = work_grab_pending(&dwork->work, WORK_CANCEL_DELAYED);
	if (!clear_pending_if_disabled(&dwork->work))
		do_queue_delayed_work(cpu, wq, dwork, delay);
	transit_end(&dwork->work); // disabled: given back
	return ret != 0;
}

bool flush_work(work_struct *work)
{
	if (!work && null_arg("flush_work", "work"))
		return false;
	return do_flush_work(work, false);
}

bool flush_delayed_work(delayed_work *dwork)
{
	if (!dwork && null_arg("flush_delayed_work", "dwork"))
		return false;
	// As the kernel, with a synchronous delete: a timer callback that is
	// queueing the item right now finishes first, so flush_work finds the
	// item queued rather than "idle" in between.
	transit_begin(&dwork->work);
	if (ktimer_delete(&dwork->timer, !tl_in_timer, false))
		do_queue_work(dwork->cpu, dwork->wq, &dwork->work);
	transit_end(&dwork->work);
	return flush_work(&dwork->work);
}

bool cancel_work(work_struct *work) { return do_cancel_work(work, 0); }
bool cancel_delayed_work(delayed_work *dwork) { return do_cancel_work(&dwork->work, WORK_CANCEL_DELAYED); }

static bool do_cancel_work_sync(work_struct *work, unsigned cflags)
{
	if (!work && null_arg("cancel_work_sync", "work"))
		return false;
	bool ret = do_cancel_work(work, cflags | WORK_CANCEL_DISABLE);
	do_flush_work(work, true);
	if (!(cflags & WORK_CANCEL_DISABLE))
		enable_work(work);
	return ret;
}

bool cancel_work_sync(work_struct *work) { return do_cancel_work_sync(work, 0); }
bool cancel_delayed_work_sync(delayed_work *dwork)
{
	return do_cancel_work_sync(&dwork->work, WORK_CANCEL_DELAYED);
}
bool disable_work(work_struct *work) { return do_cancel_work(work, WORK_CANCEL_DISABLE); }
bool disable_work_sync(work_struct *work) { return do_cancel_work_sync(work, WORK_CANCEL_DISABLE); }
bool disable_delayed_work(delayed_work *dwork)
{
	return do_cancel_work(&dwork->work, WORK_CANCEL_DELAYED | WORK_CANCEL_DISABLE);
}
bool disable_delayed_work_sync(delayed_work *dwork)
{
	return do_cancel_work_sync(&dwork->work, WORK_CANCEL_DELAYED | WORK_CANCEL_DISABLE);
}

bool enable_work(work_struct *work)
{
	if (!work && null_arg("enable_work", "work"))
		return false;
	work_grab_pending(work, 0);
	unsigned long data = work_data(work);
	unsigned long depth = offq_depth(data);
	if (depth == 0)
		warn_once_msg("disable-underflow", "workqueue: work disable count underflowed");
	else
		depth--;
	__atomic_store_n(&work->data, make_offq(offq_pool(data), depth, data & (1UL << WORK_OFFQ_BH_BIT)),
			 __ATOMIC_RELEASE);
	return depth == 0;
}
bool enable_delayed_work(delayed_work *dwork) { return enable_work(&dwork->work); }

unsigned int work_busy(work_struct *work)
{
	if (!work && null_arg("work_busy", "work"))
		return 0;
	unsigned ret = 0;
	if (work_pending(work))
		ret |= WORK_BUSY_PENDING;
	worker_pool *pool = get_work_pool(work);
	if (pool) {
		lock_guard lk(pool->lock);
		if (find_worker_executing_work(pool, work))
			ret |= WORK_BUSY_RUNNING;
	}
	return ret;
}

} // extern "C"
