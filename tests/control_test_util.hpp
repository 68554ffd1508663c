// control_test_util.hpp - what the control tests share: a fake backend
// (the engine's contract on a small in-memory model) and the client side of
// the wire format.
#pragma once

#include "control/control_proto.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmwq/control.h>
#include <cmwq/introspect.hpp>
#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>
#include <cmwq/stats.h>


namespace ctl = cmwq::control;

namespace control_test {

// ---- a fake backend: the engine's contract on a small in-memory model ------

struct fake_wq {
	bool unbound;
	bool ordered = false;
	std::map<std::string, std::string> attrs;
};

class fake_backend : public ctl::backend {
public:
	std::map<std::string, fake_wq> wqs;
	std::map<std::string, std::string> global{{"cpumask", "f"},
						  {"cpumask_requested", "f"},
						  {"cpumask_isolated", "0"}};
	std::vector<std::pair<std::string, std::string>> params{
		{"workqueue.default_affinity_scope", "cache_shard"},
		{"workqueue.cache_shard_size", "8"},
		{"cmwq.control", "1"}};
	std::string dump_text = "Showing busy workqueues and worker pools:\n";
	cmwq::system_info si;
	bool throw_on_snapshot = false;

	fake_backend()
	{
		wqs["ub"] = {true, false,
			     {{"per_cpu", "0"}, {"max_active", "1024"}, {"nice", "0"},
			      {"cpumask", "f"}, {"affinity_scope", "default (cache_shard)"},
			      {"affinity_strict", "0"}}};
		wqs["pc"] = {false, false, {{"per_cpu", "1"}, {"max_active", "1024"}}};
		wqs["ord"] = {true, true,
			      {{"per_cpu", "0"}, {"max_active", "1"}, {"nice", "0"},
			       {"cpumask", "f"}, {"affinity_scope", "default (cache_shard)"},
			       {"affinity_strict", "0"}}};
	}

	std::string *find(const char *wq, const char *attr)
	{
		if (!wq) {
			auto it = global.find(attr);
			return it == global.end() ? nullptr : &it->second;
		}
		auto w = wqs.find(wq);
		if (w == wqs.end())
			return nullptr;
		auto a = w->second.attrs.find(attr);
		return a == w->second.attrs.end() ? nullptr : &a->second;
	}
	int sysfs_get(const char *wq, const char *attr, char *buf, std::size_t len) override
	{
		std::string *v = find(wq, attr);
		if (!v)
			return -ENOENT;
		if (v->size() + 2 > len)
			return -ERANGE;
		std::snprintf(buf, len, "%s\n", v->c_str());
		return 0;
	}
	int sysfs_set(const char *wq, const char *attr, const char *value) override
	{
		std::string *v = find(wq, attr);
		if (!v)
			return -ENOENT;
		std::string a = attr;
		if (a == "per_cpu" || a == "cpumask_requested" || a == "cpumask_isolated")
			return -EACCES;
		if (wq && a == "max_active" && wqs[wq].ordered)
			return -EACCES;
		if (a == "nice") {
			char *end;
			long n = std::strtol(value, &end, 10);
			if (*end || n < -20 || n > 19)
				return -EINVAL;
		} else if (a == "affinity_scope") {
			static const std::set<std::string> ok{"default", "cpu", "smt", "cache",
							      "cache_shard", "numa", "system"};
			if (!ok.count(value))
				return -EINVAL;
		} else if (a == "max_active") {
			char *end;
			long n = std::strtol(value, &end, 10);
			if (*end || n <= 0)
				return -EINVAL;
		}
		*v = value;
		return 0;
	}
	std::vector<std::string> sysfs_list() override
	{
		std::vector<std::string> n;
		for (auto &[k, _] : wqs)
			n.push_back(k);
		return n;
	}
	int param_get(const char *name, char *buf, std::size_t len) override
	{
		for (auto &[k, v] : params)
			if (k == name) {
				if (v.size() + 1 > len)
					return -ERANGE;
				std::snprintf(buf, len, "%s", v.c_str());
				return 0;
			}
		return -ENOENT;
	}
	int param_set(const char *name, const char *value) override
	{
		for (auto &[k, v] : params)
			if (k == name) {
				if (k == "workqueue.cache_shard_size")
					return -EPERM;
				if (k == "workqueue.default_affinity_scope" &&
				    std::string(value) == "default")
					return -EINVAL;
				v = value;
				return 0;
			}
		return -ENOENT;
	}
	const char *param_name(unsigned i) override
	{
		return i < params.size() ? params[i].first.c_str() : nullptr;
	}
	const char *param_accepted(const char *name) override
	{
		std::string n = name;
		if (n == "workqueue.default_affinity_scope")
			return "cpu, smt, cache, cache_shard, numa, system";
		if (n == "cmwq.control")
			return "0, 1";
		return nullptr;
	}
	std::string dump() override { return dump_text; }
	cmwq::system_info snapshot() override
	{
		if (throw_on_snapshot)
			throw std::runtime_error("snapshot failed");
		return si;
	}
};

struct parsed_reply {
	std::vector<std::string> data;
	std::string status;
};

// The client side of the wire format (docs/control.md).
inline parsed_reply parse_reply(const std::string &text)
{
	parsed_reply r;
	std::size_t pos = 0;
	while (pos < text.size()) {
		std::size_t nl = text.find('\n', pos);
		EXPECT_NE(nl, std::string::npos) << "reply not newline-terminated";
		if (nl == std::string::npos)
			break;
		std::string line = text.substr(pos, nl - pos);
		pos = nl + 1;
		if (!line.empty() && line[0] == ' ') {
			EXPECT_TRUE(r.status.empty()) << "data after the status line";
			r.data.push_back(line.substr(1));
		} else {
			EXPECT_TRUE(r.status.empty()) << "two status lines";
			r.status = line;
		}
	}
	return r;
}

inline parsed_reply ask(ctl::backend &be, const std::string &line)
{
	return parse_reply(ctl::handle_request(line, be).text);
}

inline bool starts_with(const std::string &s, const std::string &p) { return s.rfind(p, 0) == 0; }


} // namespace control_test
