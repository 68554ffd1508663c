// compat.cpp - the rest of the kernel API that is built on the core: the
// <cmwq/linux/delay.h> sleeps and busy-waits (sleeps give the blocking
// hint), work_on_cpu, schedule_on_each_cpu, the schedule_* shorthands,
// wq_watchdog_touch and jiffies. Written against the public calls, as a
// driver would, plus the engine's clock (now_ns), warn_once_msg,
// watchdog_touch and the usable CPUs (engine.h).
#include "engine/engine.h"

#include <cmwq/linux/delay.h>

#include <errno.h>
#include <time.h>

#include <vector>

using namespace cmwq::detail;

extern "C" {

static void sleep_ns(uint64_t ns, bool hint)
{
	timespec ts{static_cast<time_t>(ns / 1000000000ull), static_cast<long>(ns % 1000000000ull)};
	if (hint)
		cmwq_blocking_begin();
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR) {
	}
	if (hint)
		cmwq_blocking_end();
}

void msleep(unsigned int msecs) { sleep_ns(static_cast<uint64_t>(msecs) * 1000000ull, true); }
void ssleep(unsigned int seconds) { sleep_ns(static_cast<uint64_t>(seconds) * 1000000000ull, true); }
void usleep_range(unsigned long min_us, unsigned long max_us)
{
	sleep_ns((min_us + (max_us > min_us ? (max_us - min_us) / 2 : 0)) * 1000ull, true);
}
unsigned long msleep_interruptible(unsigned int msecs)
{
	timespec ts{static_cast<time_t>(msecs / 1000), static_cast<long>(msecs % 1000) * 1000000L};
	cmwq_blocking_begin();
	int r = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts);
	cmwq_blocking_end();
	if (r == EINTR)
		return static_cast<unsigned long>(ts.tv_sec * 1000 + ts.tv_nsec / 1000000);
	return 0;
}
static void busy_ns(uint64_t ns)
{
	uint64_t until = now_ns() + ns;
	while (now_ns() < until)
		cpu_relax();
}
void udelay(unsigned long usecs) { busy_ns(usecs * 1000ull); }
void ndelay(unsigned long nsecs) { busy_ns(nsecs); }
void mdelay(unsigned long msecs) { busy_ns(msecs * 1000000ull); }

struct work_for_cpu {
	work_struct work;
	long (*fn)(void *);
	void *arg;
	long ret;
};

static void work_for_cpu_fn(work_struct *w)
{
	auto *wfc = container_of(w, work_for_cpu, work);
	wfc->ret = wfc->fn(wfc->arg);
}

long work_on_cpu(int cpu, long (*fn)(void *), void *arg)
{
	work_for_cpu wfc{};
	INIT_WORK(&wfc.work, work_for_cpu_fn);
	wfc.fn = fn;
	wfc.arg = arg;
	schedule_work_on(cpu, &wfc.work);
	flush_work(&wfc.work);
	return wfc.ret;
}

int schedule_on_each_cpu(work_func_t func)
{
	ensure_started();
	auto &usable = g().usable;
	std::vector<work_struct> works(usable.size());
	for (size_t i = 0; i < usable.size(); i++) {
		INIT_WORK(&works[i], func);
		schedule_work_on(usable[i], &works[i]);
	}
	for (auto &w : works)
		flush_work(&w);
	return 0;
}

void wq_watchdog_touch(int cpu)
{
	cmwq::detail::watchdog_touch(cpu);
}

unsigned long cmwq_jiffies(void) { return static_cast<unsigned long>(now_ns() / 1000000ull); }

// The system workqueue's shorthands.
bool schedule_work_on(int cpu, work_struct *work) { return queue_work_on(cpu, system_percpu_wq, work); }
bool schedule_work(work_struct *work) { return queue_work(system_percpu_wq, work); }
void cmwq_flush_scheduled_work(void)
{
	warn_once_msg("flush-scheduled-work",
		      "workqueue: flush_scheduled_work(): flushing system-wide workqueues will be prohibited in "
		      "near future; flush the work items or use a workqueue of your own");
	__flush_workqueue(system_percpu_wq);
}
bool schedule_delayed_work_on(int cpu, delayed_work *dw, unsigned long delay)
{
	return queue_delayed_work_on(cpu, system_percpu_wq, dw, delay);
}
bool schedule_delayed_work(delayed_work *dw, unsigned long delay)
{
	return queue_delayed_work(system_percpu_wq, dw, delay);
}

} // extern "C"
