// rcu_work.cpp - queue_rcu_work and flush_rcu_work over a grace-period
// function the program registers (liburcu's synchronize_rcu, usually).
//
// One ordered workqueue runs a grace-period item: it takes every rcu_work
// waiting, waits for one grace period, queues them all, and runs again if
// more arrived meanwhile. So concurrent callers share grace periods, and the
// engine itself never depends on an RCU library.
#include "engine/engine.h"

#include <utility>

using namespace cmwq::detail;

namespace {

struct rcu_state {
	mutex lock;
	rcu_work *waiting = nullptr;   // lock: queued since the running batch took its list
	rcu_work *batch = nullptr;     // lock: the list the running grace period serves
	rcu_work *releasing = nullptr; // lock: served, oldest first, being queued one by one
	bool in_release = false;       // lock: gp_fn is queueing `releasing` (flush_rcu_work waits)
	bool scheduled = false;        // lock: the grace-period item is queued or running
	std::atomic<void (*)(void)> sync{nullptr};
	workqueue_struct *wq = nullptr; // lock: created on first use
	work_struct gp;
};

rcu_state &rs()
{
	static rcu_state *s = [] {
		auto *st = new rcu_state; // never freed: items may wait while the program exits
		return st;
	}();
	return *s;
}

bool listed(rcu_work *head, const rcu_work *r)
{
	for (; head; head = head->cmwq_next)
		if (head == r)
			return true;
	return false;
}

void gp_fn(work_struct *)
{
	auto &s = rs();
	rcu_work *list;
	{
		lock_guard lk(s.lock);
		list = s.batch = s.waiting;
		s.waiting = nullptr;
	}
	if (auto sync = s.sync.load())
		sync();
	bool again;
	{
		// Under the lock: flush_rcu_work and a fork child walk the links.
		lock_guard lk(s.lock);
		rcu_work *rev = nullptr;
		while (list) { // oldest first: the list was pushed at the head
			rcu_work *n = list->cmwq_next;
			list->cmwq_next = rev;
			rev = list;
			list = n;
		}
		s.batch = nullptr;
		s.releasing = rev;
		s.in_release = true;
		again = s.waiting != nullptr;
		s.scheduled = again;
	}
	// Each item leaves the list under the lock, named in this thread's
	// transit slot until it is on its workqueue's list: a fork child finds
	// every served item in one place or the other.
	for (;;) {
		rcu_work *r;
		{
			lock_guard lk(s.lock);
			r = s.releasing;
			if (!r) {
				s.in_release = false;
				break;
			}
			s.releasing = r->cmwq_next;
			r->cmwq_next = nullptr;
			transit_begin(&r->work);
		}
		do_queue_work(WORK_CPU_UNBOUND, r->wq, &r->work);
	}
	if (again)
		(void)queue_work(s.wq, &s.gp);
}

} // namespace

void cmwq::detail::rcu_fork_lock() NO_THREAD_SAFETY_ANALYSIS { rs().lock.lock(); }

void cmwq::detail::rcu_fork_unlock(bool child) NO_THREAD_SAFETY_ANALYSIS
{
	auto &s = rs();
	if (child) {
		// The parent's grace period and its waiting items are the
		// parent's: idle here, so the child may queue them again.
		for (rcu_work *l : {s.waiting, s.batch, s.releasing})
			for (rcu_work *r = l; r;) {
				rcu_work *n = r->cmwq_next;
				r->cmwq_next = nullptr;
				forget_pending(&r->work);
				r = n;
			}
		s.waiting = s.batch = s.releasing = nullptr;
		s.in_release = false;
		s.scheduled = false;
	}
	s.lock.unlock();
}

extern "C" {

int cmwq_set_rcu_synchronize(void (*synchronize)(void))
{
	rs().sync.store(synchronize);
	return 0;
}

bool queue_rcu_work(workqueue_struct *wq, rcu_work *rwork)
{
	if (wq_refused(wq, "queue_rcu_work")) // NULL, destroyed or not a workqueue
		return false;
	if (!rwork && null_arg("queue_rcu_work", "rwork"))
		return false;
	if (!rwork->work.func) {
		warn_once_msg("rcu-nofunc", "cmwq: queue_rcu_work(): the rcu_work has no function (never "
					    "initialised with INIT_RCU_WORK?); not queued");
		return false;
	}
	transit_begin(&rwork->work); // until it is on a list (transit.cpp)
	if (test_and_set_pending(&rwork->work)) {
		transit_end(&rwork->work);
		return false;
	}
	rwork->wq = wq;
	auto &s = rs();
	if (!s.sync.load()) {
		warn_once_msg("rcu-none", "cmwq: queue_rcu_work() with no grace-period function registered "
					  "(cmwq_set_rcu_synchronize, or cmwq_use_urcu() from <cmwq/urcu.h>): there "
					  "are no RCU readers cmwq knows of, so it queues at once");
		do_queue_work(WORK_CPU_UNBOUND, wq, &rwork->work);
		return true;
	}
	// The grace-period workqueue is made on first use outside s.lock:
	// alloc_workqueue takes the engine's locks, which fork's prepare
	// handler holds when it takes s.lock (a leaf there). Made under it, a
	// fork during the first queue_rcu_work deadlocked the two threads.
	bool have;
	{
		lock_guard lk(s.lock);
		have = s.wq != nullptr;
	}
	workqueue_struct *made =
		have ? nullptr : alloc_workqueue("cmwq_rcu_gp", WQ_UNBOUND | __WQ_ORDERED | WQ_MEM_RECLAIM, 1);
	bool kick;
	workqueue_struct *gwq;
	{
		lock_guard lk(s.lock);
		if (!s.wq && made) {
			s.wq = std::exchange(made, nullptr);
			INIT_WORK(&s.gp, gp_fn);
			cmwq_set_work_name(&s.gp, "cmwq_rcu_grace_period");
		}
		if (!s.wq) {
			// Cannot wait here (we may be in a reader); queue now and say so.
			warn_once_msg("rcu-nowq", "cmwq: queue_rcu_work(): cannot create the grace-period "
						  "workqueue; queueing without waiting");
			gwq = nullptr;
			kick = false;
		} else {
			rwork->cmwq_next = s.waiting;
			s.waiting = rwork;
			transit_end(&rwork->work); // listed: a fork child finds it there
			kick = !s.scheduled;
			s.scheduled = true;
			gwq = s.wq;
		}
	}
	if (made)
		destroy_workqueue(made); // another thread's was installed first
	if (!gwq)
		do_queue_work(WORK_CPU_UNBOUND, wq, &rwork->work);
	else if (kick)
		(void)queue_work(gwq, &s.gp);
	return true;
}

bool flush_rcu_work(rcu_work *rwork)
{
	if (!rwork && null_arg("flush_rcu_work", "rwork"))
		return false;
	auto &s = rs();
	bool waited = false;
	for (;;) {
		bool in_gp, in_release;
		{
			lock_guard lk(s.lock);
			in_gp = listed(s.waiting, rwork) || listed(s.batch, rwork) || listed(s.releasing, rwork);
			in_release = s.in_release;
		}
		if (!in_gp) {
			// Served, and perhaps taken off the list but not queued yet:
			// the running grace-period item queues it before it returns.
			if (in_release && work_pending(&rwork->work)) {
				waited = true;
				(void)flush_work(&s.gp);
			}
			break;
		}
		waited = true;
		(void)flush_work(&s.gp);
	}
	return flush_work(&rwork->work) || waited;
}

} // extern "C"
