// <cmwq/log.h> and <cmwq/version.h>: with a handler every message goes to it,
// one call per line, and nothing to stderr; NULL restores stderr. The
// version macros and the run-time version agree.
#include <cmwq/linux/delay.h>
#include <cmwq/linux/timer.h>
#include <cmwq/linux/workqueue.h>
#include <cmwq/log.h>
#include <cmwq/params.h>
#include <cmwq/version.h>
#include <gtest/gtest.h>

#include <syslog.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <mutex>
#include <string>
#include <vector>

namespace {
struct captured {
	std::mutex lock;
	std::vector<std::pair<int, std::string>> lines;
};
void handler(int level, const char *msg, void *arg)
{
	auto *c = static_cast<captured *>(arg);
	std::lock_guard lk(c->lock);
	c->lines.emplace_back(level, msg);
}
bool has(captured &c, const std::string &needle, int level = -1)
{
	std::lock_guard lk(c.lock);
	for (auto &[l, m] : c.lines)
		if (m.find(needle) != std::string::npos && (level < 0 || l == level))
			return true;
	return false;
}
} // namespace

TEST(log, a_handler_gets_every_message_and_stderr_gets_none)
{
	captured c;
	workqueue_struct *wq = alloc_workqueue("log_percpu", WQ_PERCPU, 0);
	ASSERT_NE(wq, nullptr);
	workqueue_attrs *attrs = alloc_workqueue_attrs();
	testing::internal::CaptureStderr();
	cmwq_set_log_handler(handler, &c);
	EXPECT_NE(apply_workqueue_attrs(wq, attrs), 0);    // a warning
	EXPECT_EQ(cmwq_param_set("cmwq.block_detect", "perf-ish"), -EINVAL);
	show_all_workqueues();                              // a dump, line by line
	cmwq_set_log_handler(nullptr, nullptr);
	std::string err = testing::internal::GetCapturedStderr();
	EXPECT_EQ(err, "") << "with a handler nothing goes to stderr";
	EXPECT_TRUE(has(c, "apply_workqueue_attrs() needs a WQ_UNBOUND workqueue", LOG_WARNING));
	EXPECT_TRUE(has(c, "Showing busy workqueues and worker pools:", LOG_INFO)) << "the dump, through the handler";
	{
		std::lock_guard lk(c.lock);
		for (auto &[l, m] : c.lines)
			EXPECT_EQ(m.find('\n'), std::string::npos) << "one call per line: " << m;
	}
	// NULL restores stderr.
	testing::internal::CaptureStderr();
	EXPECT_NE(apply_workqueue_attrs(wq, attrs), 0);
	err = testing::internal::GetCapturedStderr();
	EXPECT_NE(err.find("needs a WQ_UNBOUND workqueue"), std::string::npos) << err;
	free_workqueue_attrs(attrs);
	destroy_workqueue(wq);
}

// Exported, so the report can name it (dladdr).
extern "C" {
std::atomic<int> log_slow_timer_done{0};
void log_slow_user_timer(struct timer_list *)
{
	msleep(25);
	log_slow_timer_done = 1;
}
}

// A user's timer callback past cmwq.timer_callback_warn_us is reported by
// name (the engine's own idle, mayday and delayed-work callbacks are not:
// they are slow only on an overloaded machine).
TEST(log, a_slow_timer_callback_is_reported_by_name)
{
	captured c;
	cmwq_set_log_handler(handler, &c);
	ASSERT_EQ(cmwq_param_set("cmwq.timer_callback_warn_us", "10000"), 0);
	struct timer_list t;
	timer_setup(&t, log_slow_user_timer, 0);
	mod_timer(&t, jiffies + 1);
	for (int i = 0; i < 2000 && !log_slow_timer_done.load(); i++)
		std::this_thread::sleep_for(std::chrono::milliseconds(5));
	ASSERT_EQ(log_slow_timer_done.load(), 1);
	timer_delete_sync(&t);
	bool seen = false;
	for (int i = 0; i < 200 && !seen; i++) {
		seen = has(c, "timer callback log_slow_user_timer ran for");
		if (!seen)
			std::this_thread::sleep_for(std::chrono::milliseconds(5));
	}
	cmwq_set_log_handler(nullptr, nullptr);
	EXPECT_TRUE(seen) << "no report naming the slow callback";
}

TEST(version, macros_and_run_time_version_agree)
{
	char expect[32];
	snprintf(expect, sizeof(expect), "%d.%d.%d", CMWQ_VERSION_MAJOR, CMWQ_VERSION_MINOR, CMWQ_VERSION_PATCH);
	EXPECT_STREQ(CMWQ_VERSION_STRING, expect);
	EXPECT_STREQ(cmwq_version(), CMWQ_VERSION_STRING);
	EXPECT_EQ(CMWQ_VERSION, CMWQ_VERSION_OF(CMWQ_VERSION_MAJOR, CMWQ_VERSION_MINOR, CMWQ_VERSION_PATCH));
	EXPECT_GT(CMWQ_VERSION, CMWQ_VERSION_OF(0, 0, 0));
}

// The kernel's 6.17+ migration warnings (a workqueue with neither WQ_PERCPU
// nor WQ_UNBOUND, a deprecated system workqueue) are off unless
// cmwq.warn_migration asks for them: a ported program cannot change every
// alloc_workqueue call, and its own tests may expect an empty stderr.
TEST(log, migration_warnings_are_off_unless_cmwq_warn_migration_asks)
{
	static std::atomic<int> ran{0};
	static work_struct w;
	auto fn = [](work_struct *) { ran++; };
	captured c;
	cmwq_set_log_handler(handler, &c);
	char name[32];
	snprintf(name, sizeof(name), "log_quiet_%d", ran.load());
	workqueue_struct *quiet = alloc_workqueue("%s", 0, 0, name);
	ASSERT_NE(quiet, nullptr);
	INIT_WORK(&w, fn);
	ASSERT_TRUE(queue_work(system_unbound_wq, &w));
	flush_work(&w);
	EXPECT_FALSE(has(c, "is using neither WQ_PERCPU or WQ_UNBOUND")) << "off by default";
	EXPECT_FALSE(has(c, "is deprecated")) << "off by default";

	ASSERT_EQ(cmwq_param_set("cmwq.warn_migration", "1"), 0);
	char value[8];
	ASSERT_EQ(cmwq_param_get("cmwq.warn_migration", value, sizeof(value)), 0);
	EXPECT_STREQ(value, "Y");
	snprintf(name, sizeof(name), "log_loud_%d", ran.load());
	workqueue_struct *loud = alloc_workqueue("%s", 0, 0, name);
	ASSERT_NE(loud, nullptr);
	ASSERT_TRUE(queue_work(system_unbound_wq, &w));
	flush_work(&w);
	EXPECT_TRUE(has(c, std::string(name) + " is using neither WQ_PERCPU or WQ_UNBOUND. Setting WQ_PERCPU."));
	static bool first_run = true; // the deprecation message is once per workqueue and process
	if (first_run) {
		EXPECT_TRUE(has(c, "events_unbound is deprecated"));
	}
	first_run = false;
	ASSERT_EQ(cmwq_param_set("cmwq.warn_migration", "0"), 0);
	cmwq_set_log_handler(nullptr, nullptr);
	destroy_workqueue(quiet);
	destroy_workqueue(loud);
}
