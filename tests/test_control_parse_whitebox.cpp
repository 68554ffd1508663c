// test_control_parse_whitebox.cpp - the control protocol's line reader and request
// parser: framing, limits, arities, values, refused input.
#include "control_test_util.hpp"

using namespace control_test;

// ---- line_reader ---------------------------------------------------------------

TEST(control_line_reader, splits_lines_and_strips_carriage_return)
{
	ctl::line_reader r;
	std::string l;
	r.feed("ls\r\nget a", 9);
	ASSERT_EQ(r.next(l), ctl::line_reader::status::line);
	EXPECT_EQ(l, "ls");
	EXPECT_EQ(r.next(l), ctl::line_reader::status::need_more);
	r.feed(" b\n", 3);
	ASSERT_EQ(r.next(l), ctl::line_reader::status::line);
	EXPECT_EQ(l, "get a b");
	EXPECT_FALSE(r.has_partial());
}

TEST(control_line_reader, accepts_exactly_max_request_bytes)
{
	ctl::line_reader r;
	std::string l, big(ctl::max_request, 'x');
	r.feed(big.data(), big.size());
	EXPECT_EQ(r.next(l), ctl::line_reader::status::need_more);
	r.feed("\r\n", 2);
	ASSERT_EQ(r.next(l), ctl::line_reader::status::line);
	EXPECT_EQ(l.size(), ctl::max_request);
}

TEST(control_line_reader, reports_too_long_with_or_without_newline)
{
	ctl::line_reader a, b;
	std::string l, big(ctl::max_request + 2, 'x');
	a.feed(big.data(), big.size());
	EXPECT_EQ(a.next(l), ctl::line_reader::status::too_long);
	std::string big_nl(ctl::max_request + 1, 'x');
	big_nl += '\n';
	b.feed(big_nl.data(), big_nl.size());
	EXPECT_EQ(b.next(l), ctl::line_reader::status::too_long);
}

TEST(control_line_reader, partial_line_is_kept_for_eof)
{
	ctl::line_reader r;
	std::string l;
	r.feed("a\nparam x", 9);
	ASSERT_EQ(r.next(l), ctl::line_reader::status::line);
	EXPECT_EQ(r.next(l), ctl::line_reader::status::need_more);
	ASSERT_TRUE(r.has_partial());
	EXPECT_EQ(r.take_partial(), "param x");
	EXPECT_FALSE(r.has_partial());
}

// ---- parse_request ------------------------------------------------------------

TEST(control_parse, every_verb_with_its_arity)
{
	ctl::request q;
	EXPECT_EQ(ctl::parse_request("ls", q), "");
	EXPECT_EQ(ctl::parse_request("  get\tevents  max_active ", q), "");
	EXPECT_EQ(q.verb, "get");
	EXPECT_EQ(q.args, (std::vector<std::string>{"events", "max_active"}));
	EXPECT_EQ(ctl::parse_request("param a", q), "");
	EXPECT_EQ(q.args.size(), 1u);
	for (const char *v : {"params", "dump", "metrics", "stats", "help", "quit"})
		EXPECT_EQ(ctl::parse_request(v, q), "") << v;
}

TEST(control_parse, set_and_param_value_is_rest_of_line_trimmed)
{
	ctl::request q;
	ASSERT_EQ(ctl::parse_request("set wq cpumask  ff, 0f  ", q), "");
	EXPECT_EQ(q.args, (std::vector<std::string>{"wq", "cpumask", "ff, 0f"}));
	ASSERT_EQ(ctl::parse_request("param x a b", q), "");
	EXPECT_EQ(q.args, (std::vector<std::string>{"x", "a b"}));
}

TEST(control_parse, rejects_unknown_empty_wrong_arity_and_control_characters)
{
	ctl::request q;
	EXPECT_NE(ctl::parse_request("", q).find("empty request"), std::string::npos);
	EXPECT_NE(ctl::parse_request(" \t ", q).find("empty request"), std::string::npos);
	EXPECT_NE(ctl::parse_request("frob", q).find("unknown request 'frob'"), std::string::npos);
	EXPECT_NE(ctl::parse_request("LS", q).find("unknown request"), std::string::npos);
	EXPECT_NE(ctl::parse_request("get wq", q).find("usage: get"), std::string::npos);
	EXPECT_NE(ctl::parse_request("get a b c", q).find("too many"), std::string::npos);
	EXPECT_NE(ctl::parse_request("ls x", q).find("too many"), std::string::npos);
	EXPECT_NE(ctl::parse_request("set a b", q).find("usage: set"), std::string::npos);
	EXPECT_NE(ctl::parse_request("set a b   ", q).find("usage: set"), std::string::npos);
	EXPECT_NE(ctl::parse_request(std::string("ls\0x", 4), q).find("control"), std::string::npos);
	EXPECT_NE(ctl::parse_request("ls\x1b[2J", q).find("control"), std::string::npos);
}

