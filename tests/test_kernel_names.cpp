// Kernel names added for drivers moved to user space, and the
// flush-dependency checks that return with a warning where the kernel would
// deadlock (and report through lockdep).
#include <cmwq/linux/workqueue.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "test_util.hpp"

using namespace std::chrono_literals;

namespace {
struct holder {
	int value = 0;
	struct work_struct work;
	struct delayed_work dwork;
};
std::atomic<int> seen{0};
void from_work_fn(work_struct *w)
{
	holder *h = from_work(h, w, work);
	seen = h->value;
}
std::atomic<int> deferrable_ran{0};
void deferrable_fn(work_struct *) { deferrable_ran++; }
DECLARE_DEFERRABLE_WORK(static_deferrable, deferrable_fn);
long on_cpu_fn(void *arg) { return *static_cast<long *>(arg) + 1; }

workqueue_struct *ordered;
work_struct later;
std::atomic<bool> later_ran{false};
std::atomic<int> flush_result{-1};
} // namespace
// External and unmangled, so the warning can name them (dladdr).
extern "C" void later_fn(work_struct *) { later_ran = true; }
extern "C" void first_fn(work_struct *)
{
	// A later item of the same ordered queue can start only after this one.
	queue_work(ordered, &later);
	flush_result = flush_work(&later) ? 1 : 0;
}
namespace {
std::atomic<bool> own_flush_returned{false};
workqueue_struct *own;
void flushes_own_wq(work_struct *)
{
	flush_workqueue(own);
	own_flush_returned = true;
}
} // namespace

TEST(kernel_names, from_work_deferrable_work_on_cpu_safe_and_flush_scheduled_work)
{
	holder h;
	h.value = 42;
	INIT_WORK(&h.work, from_work_fn);
	schedule_work(&h.work); // system_percpu_wq, which flush_scheduled_work flushes
	flush_scheduled_work();
	EXPECT_EQ(seen.load(), 42);

	EXPECT_TRUE(schedule_delayed_work(&static_deferrable, 1));
	flush_delayed_work(&static_deferrable);
	EXPECT_EQ(deferrable_ran.load(), 1);
	struct delayed_work onstack;
	INIT_DEFERRABLE_WORK_ONSTACK(&onstack, deferrable_fn);
	EXPECT_TRUE(schedule_delayed_work(&onstack, 0));
	flush_delayed_work(&onstack);
	EXPECT_EQ(deferrable_ran.load(), 2);

	long arg = 41;
	EXPECT_EQ(work_on_cpu_safe(0, on_cpu_fn, &arg), 42);
	static int key;
	EXPECT_EQ(work_on_cpu_key(0, on_cpu_fn, &arg, &key), 42);
	EXPECT_EQ(WORKER_DESC_LEN, 32);
	int map = 0;
	workqueue_struct *wq = alloc_workqueue_lockdep_map("ldm_%d", WQ_UNBOUND, 0, &map, 1);
	ASSERT_NE(wq, nullptr);
	destroy_workqueue(wq);
	wq = alloc_ordered_workqueue_lockdep_map("ldm_ordered", 0, &map);
	ASSERT_NE(wq, nullptr);
	destroy_workqueue(wq);
}

TEST(flush_dependency, item_of_an_ordered_queue_flushing_a_later_item_warns_and_returns)
{
	ordered = alloc_ordered_workqueue("dep_ordered", 0);
	ASSERT_NE(ordered, nullptr);
	work_struct first;
	INIT_WORK(&first, first_fn);
	INIT_WORK(&later, later_fn);
	testing::internal::CaptureStderr();
	queue_work(ordered, &first);
	// Without the check this flush never returns (the item waits for itself).
	bool done = wait_until([] { return flush_result.load() >= 0; }, 20000ms);
	flush_workqueue(ordered);
	std::string err = testing::internal::GetCapturedStderr();
	ASSERT_TRUE(done);
	EXPECT_EQ(flush_result.load(), 0) << "flush_work returns false without waiting";
	EXPECT_TRUE(later_ran.load());
	EXPECT_NE(err.find("dep_ordered"), std::string::npos) << err;
	EXPECT_NE(err.find("first_fn"), std::string::npos) << err;
	EXPECT_NE(err.find("later_fn"), std::string::npos) << err;
	destroy_workqueue(ordered);
}

TEST(flush_dependency, item_flushing_its_own_workqueue_warns_and_returns)
{
	own = alloc_workqueue("dep_own", WQ_UNBOUND, 0);
	work_struct w;
	INIT_WORK(&w, flushes_own_wq);
	testing::internal::CaptureStderr();
	queue_work(own, &w);
	bool done = wait_until([] { return own_flush_returned.load(); }, 20000ms);
	std::string err = testing::internal::GetCapturedStderr();
	ASSERT_TRUE(done);
	EXPECT_NE(err.find("flushes its own workqueue"), std::string::npos) << err;
	EXPECT_NE(err.find("dep_own"), std::string::npos) << err;
	destroy_workqueue(own);
}
