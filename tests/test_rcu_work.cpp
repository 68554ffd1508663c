// rcu_work with liburcu readers: queue_rcu_work's item runs only after
// every reader that was inside a read-side critical section when it was
// queued has left it; grace periods are shared; flush_rcu_work waits for
// both; many writers and readers at once lose nothing.
#include <urcu.h> // the default (memb) flavour; before <cmwq/urcu.h>

#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>
#include <cmwq/urcu.h>
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"

namespace {

struct object {
	rcu_work rw;
	std::atomic<bool> *readers_done; // what the reclaim saw, or null
	std::atomic<int> *freed;
	bool heap = true; // reclaim deletes it (else the test owns it)
};

std::atomic<bool> saw{false};

void reclaim(work_struct *w)
{
	auto *o = container_of(to_rcu_work(w), object, rw);
	if (o->readers_done)
		saw = o->readers_done->load();
	bool heap = o->heap;
	o->freed->fetch_add(1);
	if (heap)
		delete o;
}

std::atomic<object *> shared{nullptr};

} // namespace

class rcu_work_test : public testing::Test {
protected:
	void SetUp() override { ASSERT_EQ(cmwq_use_urcu(), 0); }
	void TearDown() override { cmwq_set_rcu_synchronize(nullptr); }
};

TEST_F(rcu_work_test, runs_after_the_readers_of_its_grace_period)
{
	std::atomic<int> freed{0};
	std::atomic<bool> in_cs{false}, queued{false}, reader_left{false};
	std::thread reader([&] {
		rcu_register_thread();
		rcu_read_lock();
		in_cs = true;
		while (!queued.load())
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		reader_left = true; // before the unlock: the reclaim must see it
		rcu_read_unlock();
		rcu_unregister_thread();
	});
	ASSERT_TRUE(wait_until([&] { return in_cs.load(); }));
	// Owned here, so flush_rcu_work may look at it after it ran.
	object o{{}, &reader_left, &freed, false};
	INIT_RCU_WORK(&o.rw, reclaim);
	ASSERT_TRUE(queue_rcu_work(system_dfl_wq, &o.rw));
	queued = true;
	EXPECT_TRUE(flush_rcu_work(&o.rw));
	EXPECT_EQ(freed.load(), 1);
	EXPECT_TRUE(saw.load()) << "the item ran while a reader of its grace period was inside";
	reader.join();
}

TEST_F(rcu_work_test, pending_twice_is_refused)
{
	std::atomic<int> freed{0};
	std::atomic<bool> in_cs{false}, release{false};
	std::thread reader([&] {
		rcu_register_thread();
		rcu_read_lock();
		in_cs = true;
		while (!release.load())
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
		rcu_read_unlock();
		rcu_unregister_thread();
	});
	ASSERT_TRUE(wait_until([&] { return in_cs.load(); }));
	auto *o = new object{{}, nullptr, &freed};
	INIT_RCU_WORK(&o->rw, reclaim);
	ASSERT_TRUE(queue_rcu_work(system_dfl_wq, &o->rw));
	EXPECT_FALSE(queue_rcu_work(system_dfl_wq, &o->rw)) << "still waiting for its grace period";
	std::this_thread::sleep_for(std::chrono::milliseconds(20));
	EXPECT_EQ(freed.load(), 0) << "ran inside a reader's critical section";
	release = true;
	ASSERT_TRUE(wait_until([&] { return freed.load() == 1; }));
	reader.join();
}

TEST_F(rcu_work_test, many_writers_and_readers_lose_nothing)
{
	constexpr int writers = 4, per_writer = 500;
	std::atomic<int> freed{0};
	std::atomic<bool> stop{false};
	std::vector<std::thread> readers;
	std::atomic<long> reads{0};
	auto *first = new object{{}, nullptr, &freed};
	INIT_RCU_WORK(&first->rw, reclaim);
	shared = first;
	for (int r = 0; r < 2; r++)
		readers.emplace_back([&] {
			rcu_register_thread();
			while (!stop.load()) {
				rcu_read_lock();
				object *p = rcu_dereference(shared.load());
				if (p)
					reads += p->freed != nullptr; // touches the object: ASan sees a use after free
				rcu_read_unlock();
			}
			rcu_unregister_thread();
		});
	ASSERT_TRUE(wait_until([&] { return reads.load() > 0; })); // readers are in
	std::vector<std::thread> ws;
	for (int w = 0; w < writers; w++)
		ws.emplace_back([&] {
			for (int i = 0; i < per_writer; i++) {
				auto *o = new object{{}, nullptr, &freed};
				INIT_RCU_WORK(&o->rw, reclaim);
				object *old = shared.exchange(o);
				if (old) {
					ASSERT_TRUE(queue_rcu_work(system_dfl_wq, &old->rw));
				}
			}
		});
	for (auto &t : ws)
		t.join();
	object *last = shared.exchange(nullptr);
	INIT_RCU_WORK(&last->rw, reclaim);
	ASSERT_TRUE(queue_rcu_work(system_dfl_wq, &last->rw));
	ASSERT_TRUE(wait_until([&] { return freed.load() == writers * per_writer + 1; },
			       std::chrono::milliseconds(60000)));
	stop = true;
	for (auto &t : readers)
		t.join();
}

// queue_rcu_work refuses a destroyed workqueue (with a message) instead of
// keeping it for the grace period's end, when the item would read it.
// cmwq.debug_objects keeps the destroyed workqueue's memory for the check.
TEST(rcu_work, a_destroyed_workqueue_is_refused)
{
	static std::atomic<int> ran{0};
	workqueue_struct *wq = alloc_workqueue("rcu_dead", WQ_UNBOUND, 0);
	ASSERT_NE(wq, nullptr);
	ASSERT_EQ(cmwq_param_set("cmwq.debug_objects", "1"), 0);
	destroy_workqueue(wq);
	static rcu_work rw;
	INIT_RCU_WORK(&rw, [](work_struct *) { ran++; });
	testing::internal::CaptureStderr();
	EXPECT_FALSE(queue_rcu_work(wq, &rw));
	std::string err = testing::internal::GetCapturedStderr();
	cmwq_param_set("cmwq.debug_objects", "0");
	EXPECT_NE(err.find("queue_rcu_work(): workqueue"), std::string::npos) << err;
	EXPECT_NE(err.find("was destroyed"), std::string::npos) << err;
	EXPECT_FALSE(work_pending(&rw.work)) << "nothing taken: it can be queued elsewhere";
	EXPECT_FALSE(queue_rcu_work(nullptr, &rw));
	EXPECT_EQ(ran.load(), 0);
}
