// test_thread_start.cpp - internal threads that cannot be created: no
// abort, a one-line message naming the thread and the error, the work kept
// and started once creation succeeds; a WQ_MEM_RECLAIM workqueue whose
// rescuer cannot start is not created. Failures are injected through
// cmwq.fail_thread_creation (a process under RLIMIT_NPROC sees EAGAIN the
// same way, but root ignores that limit). Each test runs in its own process
// (ctest), so the timer thread is not running yet when the test starts.
#include <gtest/gtest.h>

#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>

#include "test_util.hpp"

#include <atomic>
#include <chrono>
#include <string>

using namespace std::chrono_literals;

namespace {
std::atomic<int> ran{0};
void count_fn(work_struct *) { ran++; }
} // namespace

TEST(thread_start, delayed_work_is_kept_when_the_timer_thread_cannot_start)
{
	ASSERT_EQ(cmwq_param_set("cmwq.fail_thread_creation", "-1"), 0);
	static delayed_work dw;
	INIT_DELAYED_WORK(&dw, count_fn);
	testing::internal::CaptureStderr();
	EXPECT_TRUE(queue_delayed_work(system_dfl_wq, &dw, 5));
	std::this_thread::sleep_for(200ms);
	std::string err = testing::internal::GetCapturedStderr();
	EXPECT_NE(err.find("cmwq: cannot start the timer thread: "), std::string::npos) << err;
	EXPECT_EQ(ran.load(), 0);
	EXPECT_TRUE(delayed_work_pending(&dw));
	ASSERT_EQ(cmwq_param_set("cmwq.fail_thread_creation", "0"), 0);
	// Retried after the cooldown, by the monitor's tick or the next arming.
	EXPECT_TRUE(wait_until([] { return ran.load() == 1; }, 10000ms));
	flush_delayed_work(&dw);
}

TEST(thread_start, reclaim_workqueue_is_not_created_without_its_rescuer)
{
	ASSERT_EQ(cmwq_param_set("cmwq.fail_thread_creation", "1"), 0);
	testing::internal::CaptureStderr();
	workqueue_struct *wq = alloc_workqueue("t_norescuer", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	std::string err = testing::internal::GetCapturedStderr();
	EXPECT_EQ(wq, nullptr);
	EXPECT_NE(err.find("cannot start the rescuer thread"), std::string::npos) << err;
	EXPECT_NE(err.find("t_norescuer"), std::string::npos) << err;
	// The injection was used up: the next one is created and has a rescuer.
	wq = alloc_workqueue("t_rescuer", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	ASSERT_NE(wq, nullptr);
	work_struct w;
	INIT_WORK(&w, count_fn);
	int before = ran.load();
	queue_work(wq, &w);
	flush_work(&w);
	EXPECT_EQ(ran.load(), before + 1);
	destroy_workqueue(wq);
}

TEST(thread_start, worker_creation_failure_keeps_the_work_queued)
{
	ASSERT_EQ(cmwq_param_set("cmwq.fail_worker_creation", "-1"), 0);
	workqueue_struct *wq = alloc_workqueue("t_noworker", WQ_UNBOUND, 0);
	ASSERT_NE(wq, nullptr);
	workqueue_attrs *a = alloc_workqueue_attrs();
	a->nice = 9; // a fresh pool with no worker yet
	ASSERT_EQ(apply_workqueue_attrs(wq, a), 0);
	free_workqueue_attrs(a);
	work_struct w;
	INIT_WORK(&w, count_fn);
	int before = ran.load();
	EXPECT_TRUE(queue_work(wq, &w));
	std::this_thread::sleep_for(100ms);
	EXPECT_EQ(ran.load(), before);
	EXPECT_TRUE(work_pending(&w));
	ASSERT_EQ(cmwq_param_set("cmwq.fail_worker_creation", "0"), 0);
	EXPECT_TRUE(wait_until([&] { return ran.load() == before + 1; }, 10000ms));
	destroy_workqueue(wq);
}
