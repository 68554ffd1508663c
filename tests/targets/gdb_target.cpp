// A program for the gdb helper's test: a named C++ item on an unbound
// workqueue sets a description and calls cmwq_gdb_stop_here(), where the
// test's breakpoint stops it.
#include <cmwq/workqueue.hpp>

extern "C" __attribute__((noinline)) void cmwq_gdb_stop_here()
{
	asm volatile("" ::: "memory");
}

int main()
{
	cmwq::workqueue wq("gdb_target_wq", WQ_UNBOUND, 1);
	auto t = cmwq::submit(wq, "replay_journal", [] {
		set_worker_desc("segment %d", 12);
		cmwq_gdb_stop_here();
		return 0;
	});
	return t.get();
}
