// test_control_metrics_whitebox.cpp - the OpenMetrics text and the stats lines
// rendered from a snapshot.
#include "control_test_util.hpp"

using namespace control_test;

namespace {
cmwq::system_info sample_info()
{
	cmwq::system_info si;
	cmwq::workqueue_info a;
	a.name = "events";
	a.stats = {10, 9, 2500000, 1, 3, 0, 0, 0};
	a.max_active = 1024;
	a.nr_active = 1;
	cmwq::workqueue_info b;
	b.name = "we\"ird\\name\nx";
	b.unbound = true;
	b.flags = WQ_UNBOUND | WQ_MEM_RECLAIM;
	b.stats = {1, 1, 7, 0, 0, 5, 2, 1};
	cmwq::workqueue_info c = a; // a duplicate name
	si.workqueues = {a, b, c};
	cmwq::pool_info p;
	p.id = 3;
	p.cpus = {0, 1, 2, 5};
	p.nr_workers = 4;
	p.nr_idle = 2;
	p.nr_running = 1;
	si.pools = {p};
	return si;
}
} // namespace

TEST(control_render, metrics_is_openmetrics_with_type_help_and_eof)
{
	std::string m = ctl::render_metrics(sample_info());
	ASSERT_GE(m.size(), 7u);
	EXPECT_EQ(m.substr(m.size() - 6), "# EOF\n");
	EXPECT_NE(m.find("# TYPE cmwq_workqueue_started counter\n# HELP cmwq_workqueue_started "
			 "work items started execution\n"),
		  std::string::npos);
	EXPECT_NE(m.find("cmwq_workqueue_started_total{workqueue=\"events\"} 10\n"), std::string::npos);
	EXPECT_NE(m.find("cmwq_workqueue_started_total{workqueue=\"events\",wq_instance=\"2\"} 10\n"),
		  std::string::npos);
	EXPECT_NE(m.find("# UNIT cmwq_workqueue_cpu_time_seconds seconds\n"), std::string::npos);
	EXPECT_NE(m.find("cmwq_workqueue_cpu_time_seconds_total{workqueue=\"events\"} 2.500000\n"),
		  std::string::npos);
	EXPECT_NE(m.find("cmwq_workqueue_mayday_total{workqueue=\"we\\\"ird\\\\name\\nx\"} 2\n"),
		  std::string::npos);
	EXPECT_NE(m.find("cmwq_pool_workers{pool=\"3\",cpus=\"0-2,5\",nice=\"0\"} 4\n"),
		  std::string::npos);
	EXPECT_NE(m.find("cmwq_pool_idle{"), std::string::npos);
	EXPECT_NE(m.find("cmwq_pool_running{"), std::string::npos);
	// Every family is declared once, before its samples.
	for (const char *fam : {"started", "completed", "cpu_time_seconds", "cpu_intensive",
				"cm_wakeup", "repatriated", "mayday", "rescued"}) {
		std::string t = std::string("# TYPE cmwq_workqueue_") + fam + " counter\n";
		auto first = m.find(t);
		ASSERT_NE(first, std::string::npos) << fam;
		EXPECT_EQ(m.find(t, first + 1), std::string::npos) << fam;
		EXPECT_LT(first, m.find(std::string("cmwq_workqueue_") + fam + "_total{")) << fam;
	}
	// Every line is a comment or a sample; no raw newline inside a label.
	std::size_t pos = 0;
	while (pos < m.size()) {
		std::size_t nl = m.find('\n', pos);
		std::string line = m.substr(pos, nl - pos);
		pos = nl + 1;
		EXPECT_TRUE(starts_with(line, "# ") || starts_with(line, "cmwq_")) << line;
	}
}

TEST(control_render, stats_line_has_every_counter_and_name_last)
{
	std::string s = ctl::render_stats(sample_info());
	EXPECT_NE(s.find("unbound=0 mem_reclaim=0 started=10 completed=9 cpu_time=2500000 "
			 "cpu_intensive=1 cm_wakeup=3 repatriated=0 mayday=0 rescued=0 name=events\n"),
		  std::string::npos);
	EXPECT_NE(s.find("unbound=1 mem_reclaim=1 started=1 completed=1 cpu_time=7 cpu_intensive=0 "
			 "cm_wakeup=0 repatriated=5 mayday=2 rescued=1 name=we\"ird\\name\\x0ax\n"),
		  std::string::npos);
	EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 3);
}


// The public rendering: what the endpoint serves, for this process, and
// valid UTF-8 whatever a workqueue is called.
TEST(metrics_text, public_function_renders_this_process_with_valid_utf8)
{
	// A name with an invalid byte, a quote, a backslash and a newline.
	workqueue_struct *wq = alloc_workqueue("bad\xff\"q\\\nname", WQ_UNBOUND, 0);
	ASSERT_NE(wq, nullptr);
	char *t = cmwq_metrics_text();
	ASSERT_NE(t, nullptr);
	std::string m(t);
	free(t);
	EXPECT_EQ(m.substr(m.size() - 6), "# EOF\n");
	EXPECT_NE(m.find("cmwq_workqueue_started_total{workqueue=\"events\"}"), std::string::npos);
	EXPECT_NE(m.find("workqueue=\"bad\xEF\xBF\xBD\\\"q\\\\\\nname\""), std::string::npos)
		<< "invalid byte replaced, quote, backslash and newline escaped";
	EXPECT_EQ(m.find('\xff'), std::string::npos);
	destroy_workqueue(wq);
}

// Label values are valid UTF-8 whatever the name holds: every byte of an
// overlong form, an encoded surrogate, a code point above U+10FFFF or a
// stray continuation byte becomes U+FFFD; valid sequences pass unchanged.
TEST(control_render, label_values_replace_overlong_and_surrogate_forms)
{
	const std::string fffd = "\xEF\xBF\xBD";
	struct form {
		const char *name, *bytes;
		bool valid;
	} forms[] = {
		{"overlong 3-byte NUL", "\xE0\x80\x80", false},
		{"overlong 2-byte slash", "\xC0\xAF", false},
		{"overlong 4-byte", "\xF0\x80\x80\x80", false},
		{"surrogate U+D800", "\xED\xA0\x80", false},
		{"above U+10FFFF", "\xF4\x90\x80\x80", false},
		{"stray continuation", "\x80", false},
		{"U+20AC", "\xE2\x82\xAC", true},
		{"U+D7FF (below the surrogates)", "\xED\x9F\xBF", true},
		{"U+10FFFF", "\xF4\x8F\xBF\xBF", true},
	};
	for (const auto &f : forms) {
		cmwq::system_info si;
		cmwq::workqueue_info w;
		w.name = std::string("a") + f.bytes + "b";
		si.workqueues = {w};
		std::string m = ctl::render_metrics(si);
		std::string want = f.valid ? w.name : "a" + fffd;
		if (!f.valid)
			for (size_t i = 1; i < std::strlen(f.bytes); i++)
				want += fffd;
		if (!f.valid)
			want += "b";
		EXPECT_NE(m.find("{workqueue=\"" + want + "\"}"), std::string::npos) << f.name << "\n" << m;
	}
}
