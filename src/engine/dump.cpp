// dump.cpp - the state dump of show_all_workqueues() (spec 7.6): busy
// workqueues with their pwqs, in-flight, pending and inactive items, then
// the pools that are not idle. Reads the data model under its locks and
// calls nothing else in the engine, so the watchdog and destroy_workqueue
// can print it from anywhere.
#include "engine.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <string>

namespace cmwq::detail {

static void print_pool_line(FILE *f, worker_pool *pool, uint64_t now) REQUIRES(pool->lock)
{
	fprintf(f, "pool %d: cpus=%s", pool->id, format_cpulist(pool->cpus).c_str());
	if (pool->node >= 0)
		fprintf(f, " node=%d", pool->node);
	fprintf(f, " flags=0x%x nice=%d", pool->flags, pool->nice);
	if (!list_empty(&pool->worklist))
		fprintf(f, " hung=%llus",
			static_cast<unsigned long long>(
				(now > pool->last_progress_ns ? now - pool->last_progress_ns : 0) / 1000000000ull));
	fprintf(f, " workers=%d", pool->nr_workers);
	if (pool->flags & POOL_MANAGER_ACTIVE)
		fprintf(f, " manager");
	if (pool->nr_idle) {
		fprintf(f, " idle:");
		for (list_head *e = pool->idle_list.next; e != &pool->idle_list; e = e->next)
			fprintf(f, " %d", __atomic_load_n(&container_of(e, worker, entry)->tid, __ATOMIC_ACQUIRE));
	}
	fprintf(f, "\n");
}

static void print_func_list(FILE *f, const char *label, std::vector<std::string> names)
{
	if (names.empty())
		return;
	fprintf(f, "    %s: ", label);
	for (size_t i = 0; i < names.size();) {
		size_t j = i;
		while (j < names.size() && names[j] == names[i])
			j++;
		if (i)
			fprintf(f, ", ");
		if (j - i > 1)
			fprintf(f, "%zu*%s", j - i, names[i].c_str());
		else
			fprintf(f, "%s", names[i].c_str());
		i = j;
	}
	fprintf(f, "\n");
}

// One workqueue's busy pwqs (spec 7.6). Takes each pool lock in turn.
void show_wq(FILE *f, workqueue_struct *wq, uint64_t now)
{
	bool header = false;
	for (list_head *e = wq->pwqs.next; e != &wq->pwqs; e = e->next) {
		auto *pwq = container_of(e, pool_workqueue, pwqs_node);
		worker_pool *pool = pwq->pool;
		lock_guard lk(pool->lock);
		if (!pwq->nr_in_flight && !pwq->nr_active && list_empty(&pwq->inactive_works))
			continue;
		if (!header) {
			fprintf(f, "workqueue %s: flags=0x%x\n", wq->name.c_str(), wq->flags);
			header = true;
		}
		fprintf(f, "  pwq %d: cpus=%s", pool->id, format_cpulist(pool->cpus).c_str());
		if (pool->node >= 0)
			fprintf(f, " node=%d", pool->node);
		fprintf(f, " flags=0x%x nice=%d active=%d refcnt=%d%s\n", pool->flags, pool->nice, pwq->nr_active,
			pwq->refcnt, pwq->on_mayday ? " MAYDAY" : "");
		std::string infl;
		for (worker *w : pool->workers) {
			if (w->current_pwq != pwq)
				continue;
			// The kernel's print_worker_info: the description a work
			// function set with set_worker_desc(), in parentheses.
			char buf[512];
			snprintf(buf, sizeof(buf), "%s%d%s:%s%s%s%s for %llus", infl.empty() ? "" : ", ",
				 __atomic_load_n(&w->tid, __ATOMIC_ACQUIRE), w->rescuer ? "(RESCUER)" : "",
				 current_item_name(w).c_str(), w->desc[0] ? " (" : "", w->desc,
				 w->desc[0] ? ")" : "",
				 // The start may be a counter-derived time a few ns ahead
				 // of this clock read (worker_clock_ns).
				 static_cast<unsigned long long>(
					 (now > w->current_start_ns ? now - w->current_start_ns : 0) / 1000000000ull));
			infl += buf;
		}
		if (!infl.empty())
			fprintf(f, "    in-flight: %s\n", infl.c_str());
		std::vector<std::string> pending, inactive;
		for (list_head *x = pool->worklist.next; x != &pool->worklist; x = x->next) {
			work_struct *w = entry_work(x);
			unsigned long d = work_data(w);
			if ((d & WORK_STRUCT_PWQ) && data_pwq(d) == pwq)
				pending.push_back(work_name(w));
		}
		for (list_head *x = pwq->inactive_works.next; x != &pwq->inactive_works; x = x->next)
			inactive.push_back(work_name(entry_work(x)));
		print_func_list(f, "pending", pending);
		print_func_list(f, "inactive", inactive);
	}
}

void dump_all(FILE *f)
{
	auto &gl = g();
	uint64_t now = now_ns();
	lock_guard gk(gl.pool_mutex);
	fprintf(f, "Showing busy workqueues and worker pools:\n");
	for (auto *wq : gl.workqueues) {
		lock_guard wk(wq->mutex);
		show_wq(f, wq, now);
	}
	for (auto *pool : gl.pools) {
		lock_guard lk(pool->lock);
		if (pool->nr_workers == pool->nr_idle && list_empty(&pool->worklist))
			continue;
		print_pool_line(f, pool, now);
	}
	fflush(f);
}

// What a pool worker whose thread is tid runs, copied under its pool lock.
struct worker_view {
	bool running = false; // an item: wq, item and desc are set
	std::string wq, item, desc;
};
static worker_view view_worker(pid_t tid)
{
	worker_view v;
	auto &gl = g();
	lock_guard gk(gl.pool_mutex);
	for (auto *pool : gl.pools) {
		lock_guard lk(pool->lock);
		for (worker *w : pool->workers) {
			if (__atomic_load_n(&w->tid, __ATOMIC_ACQUIRE) != tid)
				continue;
			if (w->current_pwq) {
				v.running = true;
				v.wq = w->current_pwq->wq->name;
				v.item = current_item_name(w);
				v.desc = w->desc;
			}
			return v;
		}
	}
	return v;
}

} // namespace cmwq::detail

using namespace cmwq::detail;

extern "C" {

void cmwq_dump(FILE *out) { dump_all(out); }
void show_all_workqueues(void)
{
	log_dump(LOG_INFO, [](FILE *f) { dump_all(f); });
}
void show_freezable_workqueues(void)
{
	log_dump(LOG_INFO, [](FILE *f) {
		auto &gl = g();
		uint64_t now = now_ns();
		lock_guard gk(gl.pool_mutex);
		fprintf(f, "Showing freezable workqueues that are still busy:\n");
		for (auto *wq : gl.workqueues) {
			if (!(wq->flags & WQ_FREEZABLE))
				continue;
			lock_guard wk(wq->mutex);
			show_wq(f, wq, now);
		}
	});
}

struct cmwq_task *cmwq_task_of(pid_t tid)
{
	return reinterpret_cast<struct cmwq_task *>(static_cast<uintptr_t>(tid));
}

struct cmwq_task *cmwq_current_task(void)
{
	return cmwq_task_of(static_cast<pid_t>(syscall(SYS_gettid)));
}

void wq_worker_comm(char *buf, size_t size, struct cmwq_task *task)
{
	if (!buf || !size)
		return;
	pid_t tid = static_cast<pid_t>(reinterpret_cast<uintptr_t>(task));
	std::string comm;
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
	if (FILE *f = fopen(path, "re")) {
		char line[64] = "";
		if (fgets(line, sizeof(line), f))
			comm = line;
		fclose(f);
		while (!comm.empty() && comm.back() == '\n')
			comm.pop_back();
	}
	// The kernel's form: "+desc" while it runs an item (the description,
	// else the workqueue's name).
	worker_view v = view_worker(tid);
	std::string suffix;
	if (v.running)
		suffix = "+" + (v.desc.empty() ? v.wq : v.desc);
	snprintf(buf, size, "%s%s", comm.c_str(), suffix.c_str());
}

void print_worker_info(const char *log_lvl, struct cmwq_task *task)
{
	pid_t tid = static_cast<pid_t>(reinterpret_cast<uintptr_t>(task));
	worker_view v = view_worker(tid);
	if (!v.running)
		return;
	std::string text = "Workqueue: " + v.wq + " " + v.item;
	if (!v.desc.empty())
		text += " (" + v.desc + ")";
	log_printf(LOG_INFO, "%s%s\n", log_lvl ? log_lvl : "", text.c_str());
}

void show_one_workqueue(struct workqueue_struct *wq)
{
	if (wq_refused(wq, "show_one_workqueue"))
		return;
	log_dump(LOG_INFO, [wq](FILE *f) {
		lock_guard wk(wq->mutex);
		show_wq(f, wq, now_ns());
	});
}

} // extern "C"
