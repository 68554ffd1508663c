// fuzz_control.cpp - libFuzzer target for the control endpoint's request
// language: line splitting, parsing, dispatch and reply framing
// (src/control/control_proto.cpp), over a fake backend whose failures the input picks.
//
// Input: byte 0 selects backend misbehaviour, byte 1 seeds the sizes of the
// chunks the rest is fed in (as reads from a socket would cut it). Every
// reply must keep the framing of docs/control.md: data lines start with a
// space and hold no control character but tab, the last line is the status.
#include "control/control_proto.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <map>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include <cmwq/linux/workqueue.h>

namespace ctl = cmwq::control;

namespace {

enum : unsigned {
	erange_always = 1u << 0,  // sysfs_get never fits: the growth must stop
	throw_snapshot = 1u << 1, // snapshot throws
	evil_text = 1u << 2,      // dump/list/values carry newlines and fake status lines
	odd_errno = 1u << 3,      // unknown errno numbers
	set_fails = 1u << 4,      // sysfs_set fails with the input's errno
	bad_alloc = 1u << 5,      // snapshot throws std::bad_alloc
};

class fuzz_backend final : public ctl::backend {
public:
	fuzz_backend(unsigned mode, std::string name) : mode_(mode), name_(std::move(name))
	{
		attrs_["ub"] = {{"per_cpu", "0"}, {"max_active", "1024"}, {"nice", "0"},
				{"cpumask", "f"}, {"affinity_scope", "default (cache_shard)"},
				{"affinity_strict", "0"}};
		attrs_["pc"] = {{"per_cpu", "1"}, {"max_active", "8"}};
		if (mode_ & evil_text)
			attrs_["ok\nerror EINVAL x"] = {{"per_cpu", "1\n.\nok"}};
	}

	int sysfs_get(const char *wq, const char *attr, char *buf, std::size_t len) override
	{
		if (mode_ & erange_always)
			return -ERANGE;
		const std::string *v = find(wq, attr);
		if (!v)
			return (mode_ & odd_errno) ? -4242 : -ENOENT;
		if (v->size() + 1 > len)
			return -ERANGE;
		std::snprintf(buf, len, "%s", v->c_str());
		return 0;
	}
	int sysfs_set(const char *wq, const char *attr, const char *value) override
	{
		if (mode_ & set_fails)
			return -static_cast<int>((mode_ >> 8) % 140);
		std::string *v = find(wq, attr);
		if (!v)
			return -ENOENT;
		if (std::string(attr) == "per_cpu")
			return -EACCES;
		if (std::string(value).size() > 64)
			return -EINVAL;
		*v = value;
		return 0;
	}
	std::vector<std::string> sysfs_list() override
	{
		std::vector<std::string> n;
		for (auto &[k, _] : attrs_)
			n.push_back(k);
		return n;
	}
	int param_get(const char *name, char *buf, std::size_t len) override
	{
		if (mode_ & odd_errno)
			return -4242;
		auto it = params_.find(name);
		if (it == params_.end())
			return -ENOENT;
		if (it->second.size() + 1 > len)
			return -ERANGE;
		std::snprintf(buf, len, "%s", it->second.c_str());
		return 0;
	}
	int param_set(const char *name, const char *value) override
	{
		auto it = params_.find(name);
		if (it == params_.end())
			return -ENOENT;
		if (it->first == "workqueue.cache_shard_size")
			return -EPERM;
		if (std::string(value) == "default")
			return -EINVAL;
		it->second = value;
		return 0;
	}
	const char *param_name(unsigned i) override
	{
		if (i >= params_.size())
			return nullptr;
		auto it = params_.begin();
		std::advance(it, i);
		return it->first.c_str();
	}
	const char *param_accepted(const char *name) override
	{
		return std::string(name) == "workqueue.default_affinity_scope"
			       ? "cpu, smt, cache, cache_shard, numa, system"
			       : nullptr;
	}
	std::string dump() override
	{
		if (mode_ & evil_text)
			return "x\r\nok\nerror EIO y\n\n\x01" + name_;
		return "Showing busy workqueues and worker pools:\n";
	}
	cmwq::system_info snapshot() override
	{
		if (mode_ & throw_snapshot)
			throw std::runtime_error("snapshot failed");
		if (mode_ & bad_alloc)
			throw std::bad_alloc();
		cmwq::system_info si;
		cmwq::workqueue_info w;
		w.name = name_;
		w.flags = WQ_UNBOUND | WQ_MEM_RECLAIM;
		w.unbound = true;
		for (int i = 0; i < PWQ_NR_STATS; i++)
			w.stats[i] = static_cast<uint64_t>(mode_) * 1000003u * static_cast<uint64_t>(i + 1);
		si.workqueues = {w, w};
		cmwq::pool_info p;
		p.cpus = {3, 1, 2, 2, 7};
		si.pools = {p};
		return si;
	}

private:
	std::string *find(const char *wq, const char *attr)
	{
		if (!wq) {
			auto it = global_.find(attr);
			return it == global_.end() ? nullptr : &it->second;
		}
		auto w = attrs_.find(wq);
		if (w == attrs_.end())
			return nullptr;
		auto a = w->second.find(attr);
		return a == w->second.end() ? nullptr : &a->second;
	}

	unsigned mode_;
	std::string name_;
	std::map<std::string, std::map<std::string, std::string>> attrs_;
	std::map<std::string, std::string> global_{{"cpumask", "3"}, {"cpumask_isolated", "0"}};
	std::map<std::string, std::string> params_{{"workqueue.default_affinity_scope", "cache_shard"},
						   {"workqueue.cache_shard_size", "8"},
						   {"cmwq.control", "1"}};
};

[[noreturn]] void fail(const char *what, const std::string &text)
{
	std::fprintf(stderr, "fuzz_control: %s in reply:\n%s\n", what, text.c_str());
	__builtin_trap();
}

void check_reply(const ctl::reply &r)
{
	const std::string &t = r.text;
	if (t.empty() || t.back() != '\n')
		fail("no final newline", t);
	std::size_t pos = 0;
	for (;;) {
		std::size_t nl = t.find('\n', pos);
		std::string line = t.substr(pos, nl - pos);
		bool last = nl + 1 == t.size();
		for (char ch : line) {
			auto c = static_cast<unsigned char>(ch);
			if ((c < 0x20 && c != '\t') || c == 0x7f)
				fail("raw control character", t);
		}
		if (!last) {
			if (line.empty() || line[0] != ' ')
				fail("data line without its leading space", t);
		} else {
			bool ok = line == "ok" || line.rfind("ok ", 0) == 0;
			bool err = line.rfind("error E", 0) == 0 && line.find(' ', 7) != std::string::npos;
			if (!ok && !err)
				fail("bad status line", t);
			if (r.close && !ok && line.rfind("error E2BIG", 0) != 0 &&
			    line != "ok bye")
				fail("unexpected close", t);
			return;
		}
		pos = nl + 1;
	}
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, std::size_t size)
{
	if (size < 2)
		return 0;
	unsigned mode = data[0] | (static_cast<unsigned>(data[1]) << 8);
	unsigned seed = data[1] ? data[1] : 1;
	const char *p = reinterpret_cast<const char *>(data + 2);
	std::size_t n = size - 2;
	// The first line (up to 64 bytes, anything in it) names the fake
	// workqueue, so metrics and stats render hostile names.
	std::string name(p, std::min<std::size_t>(n, 64));
	fuzz_backend be(mode, name);

	ctl::line_reader in;
	std::size_t off = 0;
	int requests = 0;
	while (off < n && requests < 64) {
		std::size_t chunk = 1 + (seed = seed * 1103515245u + 12345u) % 700;
		chunk = std::min(chunk, n - off);
		in.feed(p + off, chunk);
		off += chunk;
		std::string line;
		for (;;) {
			auto st = in.next(line);
			if (st == ctl::line_reader::status::need_more)
				break;
			ctl::reply r = st == ctl::line_reader::status::too_long
					       ? ctl::too_long_reply()
					       : ctl::handle_request(line, be);
			check_reply(r);
			if (r.close)
				return 0;
			if (++requests >= 64)
				return 0;
		}
	}
	if (in.has_partial()) {
		std::string last = in.take_partial();
		if (last.size() <= ctl::max_request)
			check_reply(ctl::handle_request(last, be));
	}
	return 0;
}
