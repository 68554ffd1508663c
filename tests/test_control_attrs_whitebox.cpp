// test_control_attrs_whitebox.cpp - the real control endpoint against the
// library in-process, continued from test_control_server_whitebox.cpp: every
// workqueue attribute, global attribute and parameter over the wire (read,
// written, refused with the value unchanged), the dumps and metrics, and the
// parameter that starts and stops the endpoint.
#include "control_endpoint_fixture.hpp"

namespace fs = std::filesystem;
using namespace control_test;

TEST_F(control_attrs, lists_sysfs_workqueues)
{
	conn c(path_);
	ASSERT_TRUE(c.ok());
	auto r = c.ask("ls");
	ASSERT_EQ(r.status, "ok");
	EXPECT_NE(std::find(r.data.begin(), r.data.end(), "ctl_test_unbound"), r.data.end());
	EXPECT_NE(std::find(r.data.begin(), r.data.end(), "ctl_test_percpu"), r.data.end());
}

TEST_F(control_attrs, unbound_attributes_round_trip)
{
	conn c(path_);
	ASSERT_TRUE(c.ok());
	const std::string wq = "ctl_test_unbound";
	EXPECT_EQ(get(c, wq, "per_cpu"), "0");

	EXPECT_EQ(get(c, wq, "max_active"), std::to_string(WQ_DFL_ACTIVE));
	set_ok(c, wq, "max_active", "16");
	EXPECT_EQ(get(c, wq, "max_active"), "16");
	set_ok(c, wq, "max_active", "100000"); // clamped, as the kernel does
	EXPECT_EQ(get(c, wq, "max_active"), std::to_string(WQ_MAX_ACTIVE));

	EXPECT_EQ(get(c, wq, "nice"), "0");
	for (const char *n : {"-20", "19", "5", "0"}) {
		set_ok(c, wq, "nice", n);
		EXPECT_EQ(get(c, wq, "nice"), n);
	}

	std::string mask = get(c, wq, "cpumask");
	std::set<int> all = mask_cpus(mask);
	ASSERT_TRUE(all.count(0)) << mask;
	set_ok(c, wq, "cpumask", "1");
	EXPECT_EQ(mask_cpus(get(c, wq, "cpumask")), std::set<int>{0});
	set_ok(c, wq, "cpumask", mask);
	EXPECT_EQ(mask_cpus(get(c, wq, "cpumask")), all);

	EXPECT_TRUE(starts_with(get(c, wq, "affinity_scope"), "default (")) << "a fresh workqueue";
	for (const char *s : {"cpu", "smt", "cache", "cache_shard", "numa", "system"}) {
		set_ok(c, wq, "affinity_scope", s);
		EXPECT_EQ(get(c, wq, "affinity_scope"), s);
	}
	set_ok(c, wq, "affinity_scope", "default");
	std::string dfl = get(c, wq, "affinity_scope");
	EXPECT_TRUE(starts_with(dfl, "default (") && dfl.back() == ')') << dfl;

	EXPECT_EQ(get(c, wq, "affinity_strict"), "0");
	set_ok(c, wq, "affinity_strict", "1");
	EXPECT_EQ(get(c, wq, "affinity_strict"), "1");
	set_ok(c, wq, "affinity_strict", "0");
	EXPECT_EQ(get(c, wq, "affinity_strict"), "0");

	// The workqueue still runs items after all that.
	items_run = 0;
	std::vector<work_struct> w(16);
	for (auto &x : w) {
		INIT_WORK(&x, count_item);
		queue_work(unbound_, &x);
	}
	flush_workqueue(unbound_);
	EXPECT_EQ(items_run.load(), 16);
}

TEST_F(control_attrs, percpu_attributes_round_trip)
{
	conn c(path_);
	ASSERT_TRUE(c.ok());
	const std::string wq = "ctl_test_percpu";
	EXPECT_EQ(get(c, wq, "per_cpu"), "1");
	set_ok(c, wq, "max_active", "4");
	EXPECT_EQ(get(c, wq, "max_active"), "4");
	for (const char *a : {"nice", "cpumask", "affinity_scope", "affinity_strict"}) {
		auto r = c.ask("get " + wq + " " + a);
		EXPECT_EQ(r.status, "error ENOENT " + wq + ": no attribute '" + a +
					    "'; attributes are per_cpu, max_active");
	}
}

TEST_F(control_attrs, invalid_values_are_refused_and_leave_the_value_unchanged)
{
	conn c(path_);
	ASSERT_TRUE(c.ok());
	const std::string u = "ctl_test_unbound", p = "ctl_test_percpu";
	for (const char *v : {"0", "-1", "abc", "12x"}) {
		set_refused(c, u, "max_active", v, "EINVAL");
		set_refused(c, p, "max_active", v, "EINVAL");
	}
	for (const char *v : {"20", "-21", "abc", "1.5"})
		set_refused(c, u, "nice", v, "EINVAL");
	for (const char *v : {"zz", "0x", "g1"})
		set_refused(c, u, "cpumask", v, "EINVAL");
	for (const char *v : {"cach", "caches", "DEFAULT", "bogus"})
		set_refused(c, u, "affinity_scope", v, "EINVAL");
	set_refused(c, u, "affinity_strict", "yes please", "EINVAL");
	set_refused(c, u, "per_cpu", "1", "EACCES");
	set_refused(c, p, "per_cpu", "0", "EACCES");

	auto r = c.ask("set " + u + " affinity_scope cach");
	EXPECT_EQ(r.status, "error EINVAL affinity_scope: accepted values are default, cpu, smt, "
			    "cache, cache_shard, numa, system (got 'cach')");
	r = c.ask("set no_such_wq nice 1");
	EXPECT_TRUE(starts_with(r.status, "error ENOENT no WQ_SYSFS workqueue 'no_such_wq'"));
}

TEST_F(control_attrs, ordered_workqueue_max_active_is_read_only)
{
	workqueue_struct *ord = alloc_ordered_workqueue("ctl_test_ordered", WQ_SYSFS);
	ASSERT_NE(ord, nullptr);
	{
		conn c(path_);
		ASSERT_TRUE(c.ok());
		EXPECT_EQ(get(c, "ctl_test_ordered", "max_active"), "1");
		set_refused(c, "ctl_test_ordered", "max_active", "4", "EACCES");
	}
	destroy_workqueue(ord);
}

TEST_F(control_attrs, global_attributes)
{
	conn c(path_);
	ASSERT_TRUE(c.ok());
	std::string mask = get(c, "-", "cpumask");
	EXPECT_FALSE(mask_cpus(mask).empty()) << mask;
	// Nothing restricted the unbound CPUs, and cmwq isolates none.
	EXPECT_EQ(mask_cpus(get(c, "-", "cpumask_requested")), mask_cpus(mask));
	EXPECT_TRUE(mask_cpus(get(c, "-", "cpumask_isolated")).empty());
	set_refused(c, "-", "cpumask_isolated", "1", "EACCES");
	set_refused(c, "-", "cpumask_requested", "1", "EACCES");
	auto w = c.ask("set - cpumask " + mask);
	EXPECT_EQ(w.status, "ok");
	EXPECT_EQ(mask_cpus(get(c, "-", "cpumask")), mask_cpus(mask));
	set_refused(c, "-", "cpumask", "zz", "EINVAL");
	set_refused(c, "-", "cpumask", "0", "EINVAL");
	EXPECT_EQ(mask_cpus(get(c, "-", "cpumask")), mask_cpus(mask));
	auto r = c.ask("get - nice");
	EXPECT_TRUE(starts_with(r.status, "error ENOENT no global attribute 'nice'")) << r.status;
}

TEST_F(control_attrs, params_and_param_round_trip)
{
	conn c(path_);
	ASSERT_TRUE(c.ok());
	auto r = c.ask("params");
	ASSERT_EQ(r.status, "ok");
	std::vector<std::string> names;
	for (unsigned i = 0; const char *n = cmwq_param_name(i); i++)
		names.emplace_back(n);
	ASSERT_EQ(r.data.size(), names.size());
	for (std::size_t i = 0; i < names.size(); i++)
		EXPECT_TRUE(starts_with(r.data[i], names[i] + "=")) << r.data[i];

	std::string scope_param;
	for (auto &n : names)
		if (n.find("default_affinity_scope") != std::string::npos)
			scope_param = n;
	ASSERT_FALSE(scope_param.empty());
	r = c.ask("param " + scope_param);
	ASSERT_EQ(r.status, "ok");
	ASSERT_EQ(r.data.size(), 1u);
	std::string before = r.data[0];
	EXPECT_EQ(c.ask("param " + scope_param + " numa").status, "ok");
	EXPECT_EQ(c.ask("param " + scope_param).data, (std::vector<std::string>{"numa"}));
	EXPECT_EQ(c.ask("param default_affinity_scope").data, (std::vector<std::string>{"numa"}))
		<< "the short name finds the same parameter";
	r = c.ask("param " + scope_param + " default");
	EXPECT_TRUE(starts_with(r.status, "error EINVAL " + scope_param + ": accepted values are"))
		<< r.status;
	EXPECT_EQ(c.ask("param " + scope_param + " " + before).status, "ok");
	EXPECT_EQ(c.ask("param " + scope_param).data, (std::vector<std::string>{before}));
	EXPECT_TRUE(starts_with(c.ask("param no.such.param").status, "error ENOENT"));
}

TEST_F(control_attrs, dump_metrics_and_stats_cover_the_workqueues)
{
	items_run = 0;
	std::vector<work_struct> w(32);
	for (auto &x : w) {
		INIT_WORK(&x, count_item);
		queue_work(unbound_, &x);
	}
	flush_workqueue(unbound_);
	ASSERT_EQ(items_run.load(), 32);

	conn c(path_);
	ASSERT_TRUE(c.ok());
	EXPECT_EQ(c.ask("dump").status, "ok");

	auto r = c.ask("stats");
	ASSERT_EQ(r.status, "ok");
	bool found = false;
	for (auto &l : r.data) {
		if (l.size() < 22 || l.substr(l.size() - 22) != " name=ctl_test_unbound")
			continue;
		found = true;
		EXPECT_TRUE(starts_with(l, "unbound=1 mem_reclaim=0 started=")) << l;
		unsigned long long started = 0, completed = 0;
		ASSERT_EQ(std::sscanf(l.c_str(), "unbound=1 mem_reclaim=0 started=%llu completed=%llu",
				      &started, &completed),
			  2)
			<< l;
		EXPECT_GE(started, 32u);
		EXPECT_GE(completed, 32u);
	}
	EXPECT_TRUE(found);

	r = c.ask("metrics");
	ASSERT_EQ(r.status, "ok");
	ASSERT_FALSE(r.data.empty());
	EXPECT_EQ(r.data.back(), "# EOF");
	bool sample = false;
	for (auto &l : r.data)
		if (starts_with(l, "cmwq_workqueue_completed_total{workqueue=\"ctl_test_unbound\"} "))
			sample = std::stoull(l.substr(l.rfind(' ') + 1)) >= 32;
	EXPECT_TRUE(sample);
}

TEST_F(control_attrs, control_parameter_starts_and_stops_the_endpoint)
{
	char buf[16];
	if (cmwq_param_get("cmwq.control", buf, sizeof(buf)) == -ENOENT)
		GTEST_SKIP() << "the engine has no cmwq.control parameter";
	std::string path = path_;
	{
		// Stopped through its own socket: the reply still arrives.
		conn c(path);
		ASSERT_TRUE(c.ok());
		EXPECT_EQ(c.ask("param cmwq.control 0").status, "ok");
		EXPECT_TRUE(c.at_eof());
	}
	EXPECT_EQ(cmwq_control_path(), nullptr);
	EXPECT_FALSE(fs::exists(fs::symlink_status(path)));
	ASSERT_EQ(cmwq_param_set("cmwq.control", "1"), 0);
	ASSERT_NE(cmwq_control_path(), nullptr);
	EXPECT_EQ(std::string(cmwq_control_path()), path);
	conn c(path);
	ASSERT_TRUE(c.ok());
	EXPECT_EQ(c.ask("ls").status, "ok");
	ASSERT_EQ(cmwq_param_set("cmwq.control", "0"), 0);
	EXPECT_EQ(cmwq_control_path(), nullptr);
}
