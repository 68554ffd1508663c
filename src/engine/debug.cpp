// debug.cpp - cmwq.debug_objects=1, the kernel's CONFIG_DEBUG_OBJECTS_WORK:
// the library remembers the work items it has seen initialised or queued,
// so it can refuse a garbage (never initialised) item at queue time and
// keep INIT_WORK from clobbering an item that is still queued, each with a
// message naming the item's function and the call. Off by default: the
// registry is a set under one lock, touched on every queue while on.
// Destroyed workqueues are kept allocated while it is on, so every later
// use is caught (the always-on check reads a magic number).
#include "engine.h"

#include <cstdio>
#include <unordered_set>

extern "C" {
int cmwq_debug_objects = 0;
}

namespace cmwq::detail {
namespace {

struct registry {
	mutex lock;
	std::unordered_set<const work_struct *> known;  // lock: initialised or accepted
	std::unordered_set<const work_struct *> active; // lock: queued or timer armed
};

registry &reg()
{
	static registry *r = new registry; // never freed: workers may outlive main
	return *r;
}

} // namespace

bool debug_check_queue(work_struct *w, const char *call)
{
	auto &r = reg();
	{
		lock_guard lk(r.lock);
		if (r.known.count(w))
			return true;
		unsigned long data = work_data(w);
		// Pending already (queued before debugging was turned on, or a
		// garbage word with the bit set): the test-and-set refuses it
		// without touching anything else.
		bool looks_initialised = w->entry.next == &w->entry && w->entry.prev == &w->entry &&
					 !(data & WORK_STRUCT_PWQ) &&
					 (offq_pool(data) == WORK_OFFQ_POOL_NONE ||
					  offq_pool(data) < g().nr_pools.load(std::memory_order_acquire));
		if ((data & WORK_STRUCT_PENDING) || looks_initialised) {
			r.known.insert(w);
			return true;
		}
	}
	char key[64], addr[32];
	snprintf(key, sizeof(key), "debug-uninit-%p", static_cast<void *>(w));
	snprintf(addr, sizeof(addr), "%p", static_cast<void *>(w));
	// func_name, not work_name: a never-initialised item's name pointer is garbage.
	warn_once_msg(key, std::string("cmwq: ") + call + "(): work item " + func_name(w->func) + " at " + addr +
				   " was never initialised (INIT_WORK); not queued");
	return false;
}

void debug_work_active(work_struct *w)
{
	auto &r = reg();
	lock_guard lk(r.lock);
	r.known.insert(w);
	r.active.insert(w);
}

void debug_work_idle(work_struct *w)
{
	auto &r = reg();
	lock_guard lk(r.lock);
	r.active.erase(w);
}

bool wq_refused_slow(const workqueue_struct *wq, const char *call)
{
	if (!wq)
		return null_arg(call, "wq");
	uint32_t m = wq->magic.load(std::memory_order_acquire);
	if (m == WQ_MAGIC_LIVE)
		return false;
	char key[96], addr[32];
	snprintf(addr, sizeof(addr), "%p", static_cast<const void *>(wq));
	snprintf(key, sizeof(key), "dead-wq-%s-%s", call, addr);
	warn_once_msg(key, std::string("cmwq: ") + call + "(): workqueue " + addr +
				   (m == WQ_MAGIC_DEAD ? (" (" + wq->name + ") was destroyed") : std::string(" is not a workqueue")) +
				   "; nothing done");
	return true;
}

} // namespace cmwq::detail

using namespace cmwq::detail;

extern "C" bool cmwq_debug_init_work(struct work_struct *w)
{
	if (!w)
		return false;
	auto &r = reg();
	std::string where;
	{
		lock_guard lk(r.lock);
		if (!r.active.count(w) || !work_pending(w)) {
			r.known.insert(w);
			return false;
		}
		unsigned long data = work_data(w);
		where = (data & WORK_STRUCT_PWQ) ? "queued on workqueue " + data_pwq(data)->wq->name
						 : std::string("waiting for its timer or being cancelled");
	}
	warn_once_msg("debug-init-pending-" + work_name(w),
		      "cmwq: INIT_WORK on work item " + work_name(w) + " while it is " + where +
			      "; left as it is (the kernel's debug objects report this too)");
	return true;
}
