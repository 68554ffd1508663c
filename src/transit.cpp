// transit.cpp - what each thread is moving, for a fork child to find.
//
// An item between its PENDING bit and a list (or its armed timer), or whose
// PENDING a canceller holds, is on no list: a fork child, which drops the
// parent's lists and timers, would not see it and it would stay pending
// there for ever. So each thread names, in a slot of its own, the item it
// owns PENDING of outside every list, from before it takes the bit until it
// hands the item over under the lock that publishes it (the pool lock that
// inserts it, the timer lock that arms it); and the timer thread names the
// engine timer whose callback it is about to run, from the moment it takes
// it off the heap under the timer lock. fork takes every one of those locks,
// so the child sees each item either on a list, armed, or in a slot, and
// never a slot naming an item handed over (which its owner may have freed).
#include "engine/engine.h"

#include <algorithm>

namespace cmwq::detail {

constinit thread_local transit_slot tl_transit;

namespace {

struct transit_registry {
	mutex lock; // a leaf
	std::vector<transit_slot *> slots GUARDED_BY(lock);
};

transit_registry &transits()
{
	static transit_registry *r = new transit_registry;
	return *r;
}

// Takes this thread's slot out of the registry when the thread exits (the
// slot's storage goes with it).
struct transit_leave {
	~transit_leave()
	{
		auto &r = transits();
		lock_guard lk(r.lock);
		std::erase(r.slots, &tl_transit);
	}
};

} // namespace

void transit_register()
{
	static thread_local transit_leave leave; // constructed here, destroyed at thread exit
	(void)leave;
	auto &r = transits();
	lock_guard lk(r.lock);
	r.slots.push_back(&tl_transit);
	tl_transit.registered = true;
}

void transit_fork_lock() NO_THREAD_SAFETY_ANALYSIS
{
	transits().lock.lock();
}

void transit_fork_unlock(void (*work_fn)(work_struct *), void (*timer_fn)(timer_list *)) NO_THREAD_SAFETY_ANALYSIS
{
	auto &r = transits();
	if (work_fn) {
		// A fork child: the other threads are gone; what their slots name
		// is handed to the callers' handlers, and the slots are forgotten.
		for (transit_slot *s : r.slots) {
			if (work_struct *w = s->work.load(std::memory_order_relaxed))
				work_fn(w);
			if (timer_list *t = s->timer.load(std::memory_order_relaxed))
				timer_fn(t);
			s->work.store(nullptr, std::memory_order_relaxed);
			s->timer.store(nullptr, std::memory_order_relaxed);
			if (s != &tl_transit)
				s->registered = false;
		}
		std::erase_if(r.slots, [](transit_slot *s) { return s != &tl_transit; });
	}
	r.lock.unlock();
}

} // namespace cmwq::detail
