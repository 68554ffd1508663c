// rescuer.cpp - forward progress for WQ_MEM_RECLAIM workqueues: the pool's
// mayday timer, send_mayday, the rescuer thread and rescue_pwq.
// As in the kernel, a pool that cannot get a worker arms a mayday timer;
// when it fires it calls the rescuers of the workqueues whose items wait,
// and each rescuer runs a batch of its own items on that pool.
#include "engine.h"

#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <thread>

namespace cmwq::detail {

namespace {

void send_mayday(pool_workqueue *pwq)
{
	workqueue_struct *wq = pwq->wq;
	if (!wq->rescuer)
		return;
	lock_guard lk(wq->mayday_lock);
	if (pwq->on_mayday)
		return;
	pwq->on_mayday = true;
	wq->maydays.push_back(pwq);
	PWQ_STAT_ADD(pwq, PWQ_STAT_MAYDAY, 1);
	worker_wake_word(wq->rescuer);
}

} // namespace

// The pool's mayday timer (kernel pool_mayday_timeout).
void pool_mayday_timeout(timer_list *t)
{
	worker_pool *pool = container_of(t, worker_pool, mayday_timer);
	bool need;
	{
		lock_guard lk(pool->lock);
		need = need_to_create_worker(pool->counts());
		pool->mayday_armed = need; // re-armed below while workers are short
		if (need)
			for (list_head *e = pool->worklist.next; e != &pool->worklist; e = e->next) {
				unsigned long data = work_data(entry_work(e));
				if (data & WORK_STRUCT_PWQ)
					send_mayday(data_pwq(data));
			}
	}
	if (!need)
		return;
	deferred_create(pool); // retried once the 1 s cooldown has passed
	timer_add(&pool->mayday_timer, now_ns() + MAYDAY_INTERVAL_NS, pool_mayday_timeout);
}

namespace {

// The rescuer runs up to `batch` items of pwq on pwq's pool (rescuer_thread).
// Returns the number run.
int rescue_pwq(worker *r, pool_workqueue *pwq, int batch)
{
	worker_pool *pool = pwq->pool;
	deferred d;
	int n = 0;
	r->clock_ns = now_ns();
	unique_lock lk(pool->lock);
	r->pool = pool;
	while (n < batch) {
		work_struct *found = nullptr;
		for (list_head *e = pool->worklist.next; e != &pool->worklist; e = e->next) {
			unsigned long data = work_data(entry_work(e));
			if ((data & WORK_STRUCT_PWQ) && data_pwq(data) == pwq) {
				found = entry_work(e);
				break;
			}
		}
		if (!found)
			break;
		PWQ_STAT_ADD(pwq, PWQ_STAT_RESCUED, 1);
		if (assign_work(found, r))
			process_scheduled_works(r, d);
		n++;
	}
	kick_pool(pool, d);
	lk.unlock();
	d.run();
	return n;
}

void *rescuer_thread(void *arg)
{
	auto *r = static_cast<worker *>(arg);
	workqueue_struct *wq = r->rescue_wq;
	tl_worker = r;
	r->thread = pthread_self(); // published by the tid store below
	r->cpu_clock_last = thread_cpu_ns();
	__atomic_store_n(&r->tid, static_cast<pid_t>(syscall(SYS_gettid)), __ATOMIC_RELEASE);
	char name[16];
	snprintf(name, sizeof(name), "kworker/R-%.5s", wq->name.c_str());
	pthread_setname_np(pthread_self(), name);
	for (;;) {
		pool_workqueue *pwq = nullptr;
		bool stop;
		{
			lock_guard lk(wq->mayday_lock);
			stop = r->rescue_stop;
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
			worker_wait_word(r);
			continue;
		}
		int n = rescue_pwq(r, pwq, RESCUER_BATCH);
		bool more;
		{
			lock_guard lk(pwq->pool->lock);
			more = n == RESCUER_BATCH && need_to_create_worker(pwq->pool->counts());
		}
		lock_guard lk(wq->mayday_lock);
		if (more)
			wq->maydays.push_back(pwq); // round robin
		else
			pwq->on_mayday = false;
	}
	r->pins.fetch_sub(1);
	return nullptr;
}

} // namespace

bool rescuer_start(workqueue_struct *wq)
{
	// The rescuer is summoned by its pools' mayday timer, which runs on the
	// timer thread: without it the rescuer would never be called, and the
	// forward-progress guarantee would be missing as surely as without the
	// rescuer. So the timer thread is started first, and its failure
	// refuses the workqueue as the rescuer's does.
	if (int err = timer_thread_start()) {
		// Per workqueue: the timer's own message may have been printed already.
		warn_once_msg("reclaim-timer-" + wq->name,
			      "cmwq: cannot start the timer thread: " + std::string(strerror(err)) + "; workqueue " +
				      wq->name + " (WQ_MEM_RECLAIM) is not created: its rescuer is summoned from there");
		return false;
	}
	auto *r = new worker;
	INIT_LIST_HEAD(&r->entry);
	INIT_LIST_HEAD(&r->scheduled);
	r->rescuer = true;
	r->rescue_wq = wq;
	worker_init_flags(r, WORKER_PREP | WORKER_UNBOUND);
	r->pins.store(1); // dropped when the thread exits
	wq->rescuer = r;
	if (int err = spawn_thread(CMWQ_THREAD_RESCUER, rescuer_thread, r)) {
		// As in the kernel, a WQ_MEM_RECLAIM workqueue without its rescuer
		// is not created: its forward-progress guarantee would be missing.
		wq->rescuer = nullptr;
		delete r;
		thread_start_failed("rescuer", err, ("workqueue " + wq->name + " (WQ_MEM_RECLAIM) is not created").c_str());
		return false;
	}
	return true;
}

void rescuer_fork_child(workqueue_struct *wq) NO_THREAD_SAFETY_ANALYSIS
{
	worker *r = wq->rescuer;
	// The parent's rescuer thread does not exist here: same worker, fresh state.
	INIT_LIST_HEAD(&r->entry);
	INIT_LIST_HEAD(&r->scheduled);
	r->pool = nullptr;
	r->current_work = nullptr;
	r->current_func = nullptr;
	r->current_pwq = nullptr;
	r->hnext = nullptr;
	r->flags = WORKER_PREP | WORKER_UNBOUND;
	r->sleeping = false;
	r->hint_depth.store(0, std::memory_order_relaxed);
	r->rescue_stop = false;
	r->tid = 0;
	r->wake.store(0);
	r->pins.store(1);
	if (int err = spawn_thread(CMWQ_THREAD_RESCUER, rescuer_thread, r)) {
		wq->rescuer = nullptr;
		delete r;
		thread_start_failed("rescuer", err,
				    ("workqueue " + wq->name + " has no rescuer in this fork child").c_str());
	}
}

void rescuer_stop(workqueue_struct *wq)
{
	worker *r = wq->rescuer;
	if (!r)
		return;
	{
		lock_guard lk(wq->mayday_lock);
		r->rescue_stop = true;
	}
	worker_wake_word(r);
	while (r->pins.load())
		sched_yield();
	wq->rescuer = nullptr;
	delete r;
}

} // namespace cmwq::detail
