// sysfs.cpp - the sysfs-like attributes of WQ_SYSFS workqueues and the
// global unbound cpumask, with the kernel's names, formats and errors.
// Attribute writes build a modified copy of the attrs and go through
// apply_workqueue_attrs(), so a refused value changes nothing.
#include "engine.h"

#include <errno.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace cmwq::detail {

std::string scope_attr(const workqueue_struct *wq)
{
	auto s = wq->unbound_attrs.affn_scope;
	if (s == WQ_AFFN_DFL)
		return std::string("default (") + scope_name(g().default_scope) + ")";
	return scope_name(static_cast<affinity_scope>(s));
}

std::vector<int> attrs_cpus(const workqueue_attrs &a)
{
	std::vector<int> out;
	for (int c = 0; c < NR_CPUS; c++)
		if (cpumask_test_cpu(c, a.cpumask))
			out.push_back(c);
	return out;
}

static workqueue_struct *find_sysfs_wq(const char *name)
{
	for (auto *wq : g().workqueues)
		if (wq->sysfs && wq->name == name)
			return wq;
	return nullptr;
}

int wq_sysfs_get(workqueue_struct *wq, const std::string &attr, std::string &out)
{
	bool unbound = wq->flags & WQ_UNBOUND;
	lock_guard wk(wq->mutex);
	if (attr == "per_cpu")
		out = unbound ? "0" : "1";
	else if (attr == "max_active")
		out = std::to_string(wq->saved_max_active);
	else if (unbound && attr == "nice")
		out = std::to_string(wq->unbound_attrs.nice);
	else if (unbound && attr == "cpumask")
		out = cmwq::format_cpumask_hex(attrs_cpus(wq->unbound_attrs), g().topo.max_cpu() + 1);
	else if (unbound && attr == "affinity_scope")
		out = scope_attr(wq);
	else if (unbound && attr == "affinity_strict")
		out = wq->unbound_attrs.affn_strict ? "1" : "0";
	else
		return -ENOENT;
	return 0;
}

// A sysfs write may end in a newline (echo); the value is what precedes it.
static std::string trim_value(const char *value)
{
	std::string s(value);
	while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
		s.pop_back();
	return s;
}

static bool parse_int(const char *s, long &out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	while (*end == '\n' || *end == ' ')
		end++;
	if (errno || end == s || *end)
		return false;
	out = v;
	return true;
}

static int wq_sysfs_set(workqueue_struct *wq, const std::string &attr, const char *value)
{
	bool unbound = wq->flags & WQ_UNBOUND;
	bool fixed_max = wq->flags & (WQ_BH | __WQ_ORDERED);
	long v = 0;
	if (attr == "per_cpu")
		return -EACCES;
	if (attr == "max_active") {
		if (fixed_max)
			return -EACCES;
		if (!parse_int(value, v) || v <= 0)
			return -EINVAL;
		workqueue_set_max_active(wq, static_cast<int>(std::min<long>(v, 1 << 30)));
		return 0;
	}
	if (!unbound)
		return -ENOENT;
	workqueue_attrs a;
	{
		lock_guard wk(wq->mutex);
		a = wq->unbound_attrs;
	}
	if (attr == "nice") {
		if (!parse_int(value, v) || v < -20 || v > 19)
			return -EINVAL;
		a.nice = static_cast<int>(v);
	} else if (attr == "cpumask") {
		std::string s = trim_value(value);
		auto cpus = parse_cpumask_hex(s);
		if (!cpus)
			return -EINVAL;
		cpumask_clear(a.cpumask);
		for (int c : *cpus)
			if (c < NR_CPUS)
				cpumask_set_cpu(static_cast<unsigned>(c), a.cpumask);
		bool any = false;
		for (int c : g().usable)
			any = any || cpumask_test_cpu(c, a.cpumask);
		if (!any)
			return -EINVAL;
	} else if (attr == "affinity_scope") {
		std::string s = trim_value(value);
		auto sc = parse_scope(s);
		if (!sc)
			return -EINVAL;
		a.affn_scope = static_cast<wq_affn_scope>(*sc);
	} else if (attr == "affinity_strict") {
		if (!parse_int(value, v))
			return -EINVAL;
		a.affn_strict = v != 0;
	} else {
		return -ENOENT;
	}
	return apply_workqueue_attrs(wq, &a);
}

} // namespace cmwq::detail

using namespace cmwq::detail;

extern "C" {

int cmwq_sysfs_get(const char *wq_name, const char *attr, char *buf, size_t len)
{
	ensure_started();
	std::string out;
	auto &gl = g();
	lock_guard gk(gl.pool_mutex);
	if (!wq_name) {
		std::vector<int> isolated;
		if (!strcmp(attr, "cpumask"))
			out = cmwq::format_cpumask_hex(gl.unbound_cpus, gl.topo.max_cpu() + 1);
		else if (!strcmp(attr, "cpumask_requested"))
			out = cmwq::format_cpumask_hex(gl.requested_unbound, gl.topo.max_cpu() + 1);
		else if (!strcmp(attr, "cpumask_isolated"))
			out = cmwq::format_cpumask_hex(isolated, gl.topo.max_cpu() + 1);
		else
			return -ENOENT;
	} else {
		workqueue_struct *wq = find_sysfs_wq(wq_name);
		if (!wq)
			return -ENOENT;
		if (int err = wq_sysfs_get(wq, attr, out))
			return err;
	}
	if (out.size() + 1 > len)
		return -ERANGE;
	memcpy(buf, out.c_str(), out.size() + 1);
	return 0;
}

int cmwq_sysfs_set(const char *wq_name, const char *attr, const char *value)
{
	ensure_started();
	if (!value)
		return -EINVAL;
	if (!wq_name) {
		if (!strcmp(attr, "cpumask_requested") || !strcmp(attr, "cpumask_isolated"))
			return -EACCES;
		if (strcmp(attr, "cpumask"))
			return -ENOENT;
		// The global unbound cpumask: parsed, limited to the usable CPUs,
		// empty refused; every unbound workqueue is re-podded onto it.
		auto cpus = cmwq::parse_cpumask_hex(trim_value(value));
		if (!cpus)
			return -EINVAL;
		return set_unbound_cpumask(*cpus);
	}
	workqueue_struct *wq;
	{
		lock_guard gk(g().pool_mutex);
		wq = find_sysfs_wq(wq_name);
		if (!wq)
			return -ENOENT;
	}
	return wq_sysfs_set(wq, attr, value);
}

int cmwq_sysfs_list(void (*fn)(const char *name, void *arg), void *arg)
{
	ensure_started();
	lock_guard gk(g().pool_mutex);
	int n = 0;
	for (auto *wq : g().workqueues)
		if (wq->sysfs) {
			fn(wq->name.c_str(), arg);
			n++;
		}
	return n;
}

} // extern "C"
