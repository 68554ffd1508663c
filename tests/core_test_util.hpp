// core_test_util.hpp - the work items test_core_whitebox.cpp and
// test_core_limits_whitebox.cpp share: one that counts its runs and how many
// of it ran at once (held by a gate or a sleep when asked), and a plain one.
#pragma once

#include <cmwq/linux/delay.h>
#include <cmwq/linux/workqueue.h>

#include <atomic>

struct counted {
	work_struct work;
	std::atomic<int> runs{0};
	std::atomic<int> inside{0};
	std::atomic<int> max_inside{0};
	std::atomic<bool> *gate = nullptr;
	int sleep_ms = 0;
};

inline void counted_fn(work_struct *w)
{
	auto *c = container_of(w, counted, work);
	int in = ++c->inside;
	int m = c->max_inside.load();
	while (in > m && !c->max_inside.compare_exchange_weak(m, in)) {
	}
	if (c->gate)
		while (!c->gate->load())
			msleep(1);
	if (c->sleep_ms)
		msleep(static_cast<unsigned>(c->sleep_ms));
	c->inside--;
	c->runs++;
}

inline std::atomic<int> plain_runs{0};
inline void plain_fn(work_struct *) { plain_runs++; }
