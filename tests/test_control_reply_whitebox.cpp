// test_control_reply_whitebox.cpp - the control protocol's replies: escaping, errno
// names, and every verb dispatched over the fake backend with the messages
// a user gets for missing, invalid and read-only attributes.
#include "control_test_util.hpp"

using namespace control_test;

// ---- replies -------------------------------------------------------------------

TEST(control_reply, data_lines_are_escaped_so_framing_holds)
{
	ctl::reply_builder b;
	b.line("ok");
	b.line("evil\nerror EINVAL x");
	b.data("a\nb\n");
	ctl::reply r = b.error(EINVAL, "bad\rthing\n");
	EXPECT_EQ(r.text, " ok\n evil\\x0aerror EINVAL x\n a\n b\nerror EINVAL bad\\x0dthing\\x0a\n");
	auto p = parse_reply(r.text);
	EXPECT_EQ(p.data.size(), 4u);
	EXPECT_EQ(p.status, "error EINVAL bad\\x0dthing\\x0a");
}

TEST(control_reply, errno_names_known_and_unknown)
{
	EXPECT_STREQ(ctl::errno_name(EINVAL), "EINVAL");
	EXPECT_STREQ(ctl::errno_name(-ENOENT), "ENOENT");
	EXPECT_STREQ(ctl::errno_name(E2BIG), "E2BIG");
	EXPECT_STREQ(ctl::errno_name(4242), "E4242");
}

TEST(control_reply, too_long_reply_is_e2big_and_closes)
{
	ctl::reply r = ctl::too_long_reply();
	EXPECT_EQ(r.text, "error E2BIG request too long\n");
	EXPECT_TRUE(r.close);
}

// ---- dispatch over the fake backend ---------------------------------------------

TEST(control_dispatch, ls_get_set_round_trip)
{
	fake_backend be;
	auto r = ask(be, "ls");
	EXPECT_EQ(r.status, "ok");
	EXPECT_EQ(r.data, (std::vector<std::string>{"ord", "pc", "ub"}));
	r = ask(be, "get ub affinity_scope");
	EXPECT_EQ(r.status, "ok");
	EXPECT_EQ(r.data, (std::vector<std::string>{"default (cache_shard)"}));
	EXPECT_EQ(ask(be, "set ub nice -5").status, "ok");
	EXPECT_EQ(ask(be, "get ub nice").data, (std::vector<std::string>{"-5"}));
	EXPECT_EQ(ask(be, "get - cpumask").data, (std::vector<std::string>{"f"}));
}

TEST(control_dispatch, missing_workqueue_or_attribute_says_what_exists)
{
	fake_backend be;
	auto r = ask(be, "get nope max_active");
	EXPECT_TRUE(starts_with(r.status, "error ENOENT no WQ_SYSFS workqueue 'nope'")) << r.status;
	r = ask(be, "get pc nice");
	EXPECT_EQ(r.status, "error ENOENT pc: no attribute 'nice'; attributes are per_cpu, max_active");
	r = ask(be, "set ub bogus 1");
	EXPECT_TRUE(starts_with(r.status, "error ENOENT ub: no attribute 'bogus'; attributes are "
					  "per_cpu, max_active, cpumask, nice, affinity_scope"))
		<< r.status;
	r = ask(be, "get - nice");
	EXPECT_TRUE(starts_with(r.status, "error ENOENT no global attribute 'nice'")) << r.status;
}

TEST(control_dispatch, invalid_value_names_attribute_and_accepted_values)
{
	fake_backend be;
	auto r = ask(be, "set ub affinity_scope cach");
	EXPECT_EQ(r.status, "error EINVAL affinity_scope: accepted values are default, cpu, smt, "
			    "cache, cache_shard, numa, system (got 'cach')");
	r = ask(be, "set ub nice 20");
	EXPECT_EQ(r.status, "error EINVAL nice: accepted values are integers from -20 to 19 (got '20')");
	EXPECT_EQ(ask(be, "get ub nice").data, (std::vector<std::string>{"0"}));
	std::string long_value(300, 'z');
	r = ask(be, "set ub max_active " + long_value);
	EXPECT_TRUE(starts_with(r.status, "error EINVAL max_active: accepted values are positive"));
	EXPECT_LT(r.status.size(), 250u) << "echoed value is cut";
}

TEST(control_dispatch, read_only_attribute_is_eacces)
{
	fake_backend be;
	EXPECT_EQ(ask(be, "set ub per_cpu 1").status, "error EACCES per_cpu is read-only");
	EXPECT_EQ(ask(be, "set ord max_active 4").status,
		  "error EACCES ord: max_active is read-only for ordered and BH workqueues");
	EXPECT_EQ(ask(be, "set - cpumask_isolated 1").status,
		  "error EACCES cpumask_isolated is read-only");
}

TEST(control_dispatch, params_and_param_short_names)
{
	fake_backend be;
	auto r = ask(be, "params");
	EXPECT_EQ(r.status, "ok");
	EXPECT_EQ(r.data, (std::vector<std::string>{"workqueue.default_affinity_scope=cache_shard",
						    "workqueue.cache_shard_size=8",
						    "cmwq.control=1"}));
	EXPECT_EQ(ask(be, "param default_affinity_scope").data,
		  (std::vector<std::string>{"cache_shard"}));
	EXPECT_EQ(ask(be, "param workqueue.default_affinity_scope numa").status, "ok");
	EXPECT_EQ(ask(be, "param default_affinity_scope").data, (std::vector<std::string>{"numa"}));
	EXPECT_EQ(ask(be, "param default_affinity_scope default").status,
		  "error EINVAL workqueue.default_affinity_scope: accepted values are cpu, smt, "
		  "cache, cache_shard, numa, system (got 'default')");
	EXPECT_EQ(ask(be, "param cache_shard_size 4").status,
		  "error EPERM workqueue.cache_shard_size is read-only at run time");
	EXPECT_EQ(ask(be, "param nope").status, "error ENOENT no parameter 'nope' (see 'params')");
}

TEST(control_dispatch, dump_help_quit)
{
	fake_backend be;
	auto r = ask(be, "dump");
	EXPECT_EQ(r.status, "ok");
	EXPECT_EQ(r.data, (std::vector<std::string>{"Showing busy workqueues and worker pools:"}));
	be.dump_text.clear();
	EXPECT_TRUE(ask(be, "dump").data.empty());
	EXPECT_GE(ask(be, "help").data.size(), 10u);
	ctl::reply q = ctl::handle_request("quit", be);
	EXPECT_TRUE(q.close);
	EXPECT_EQ(q.text, "ok bye\n");
}

TEST(control_dispatch, backend_exception_becomes_error_reply)
{
	fake_backend be;
	be.throw_on_snapshot = true;
	auto r = ask(be, "metrics");
	EXPECT_EQ(r.status, "error EIO internal error: snapshot failed");
}

