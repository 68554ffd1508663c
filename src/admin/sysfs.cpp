// sysfs.cpp - the sysfs-like attributes of WQ_SYSFS workqueues and the
// global unbound cpumask, with the kernel's names, formats and errors.
// Attribute writes build a modified copy of the attrs and go through
// apply_workqueue_attrs(), so a refused value changes nothing.
#include "engine/engine.h"
#include "sysfs_attrs.h"

#include <errno.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace cmwq::detail {

std::string scope_attr(const workqueue_struct *wq) REQUIRES(wq->mutex)
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

// ---- per-workqueue attributes ------------------------------------------------
// One handler pair per attribute of sysfs_attrs.h (names, kinds and words
// live there). get runs under W; set gets a copy of the unbound attrs and
// applies it, so a refused value changes nothing.

struct attr_ops {
	const char *name;
	void (*get)(workqueue_struct *wq, std::string &out); // W held
	// Returns 0, -EINVAL, or 1 when `a` was changed and must be applied.
	int (*set)(workqueue_struct *wq, workqueue_attrs &a, const char *value);
};

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

constexpr attr_ops wq_attr_ops[] = {
	{"per_cpu", [](workqueue_struct *wq, std::string &out) REQUIRES(wq->mutex) { out.assign(1, (wq->flags & WQ_UNBOUND) ? '0' : '1'); },
	 nullptr},
	{"max_active", [](workqueue_struct *wq, std::string &out) REQUIRES(wq->mutex) { out = std::to_string(wq->saved_max_active); },
	 [](workqueue_struct *wq, workqueue_attrs &, const char *value) {
		 long v;
		 if (!parse_int(value, v) || v <= 0)
			 return -EINVAL;
		 workqueue_set_max_active(wq, static_cast<int>(std::min<long>(v, 1 << 30)));
		 return 0;
	 }},
	{"cpumask",
	 [](workqueue_struct *wq, std::string &out) REQUIRES(wq->mutex) {
		 out = cmwq::format_cpumask_hex(attrs_cpus(wq->unbound_attrs), g().topo.max_cpu() + 1);
	 },
	 [](workqueue_struct *, workqueue_attrs &a, const char *value) {
		 auto cpus = parse_cpumask_hex(trim_value(value));
		 if (!cpus)
			 return -EINVAL;
		 cpumask_clear(a.cpumask);
		 for (int c : *cpus)
			 if (c < NR_CPUS)
				 cpumask_set_cpu(static_cast<unsigned>(c), a.cpumask);
		 bool any = false;
		 for (int c : g().usable)
			 any = any || cpumask_test_cpu(c, a.cpumask);
		 return any ? 1 : -EINVAL;
	 }},
	{"nice", [](workqueue_struct *wq, std::string &out) REQUIRES(wq->mutex) { out = std::to_string(wq->unbound_attrs.nice); },
	 [](workqueue_struct *, workqueue_attrs &a, const char *value) {
		 long v;
		 if (!parse_int(value, v) || v < -20 || v > 19)
			 return -EINVAL;
		 a.nice = static_cast<int>(v);
		 return 1;
	 }},
	{"affinity_scope", [](workqueue_struct *wq, std::string &out) REQUIRES(wq->mutex) { out = scope_attr(wq); },
	 [](workqueue_struct *, workqueue_attrs &a, const char *value) {
		 auto sc = parse_scope(trim_value(value));
		 if (!sc)
			 return -EINVAL;
		 a.affn_scope = static_cast<wq_affn_scope>(*sc);
		 return 1;
	 }},
	{"affinity_strict",
	 [](workqueue_struct *wq, std::string &out) REQUIRES(wq->mutex) { out.assign(1, wq->unbound_attrs.affn_strict ? '1' : '0'); },
	 [](workqueue_struct *, workqueue_attrs &a, const char *value) {
		 long v;
		 if (!parse_int(value, v))
			 return -EINVAL;
		 a.affn_strict = v != 0;
		 return 1;
	 }},
};

// The attribute as this workqueue has it: its handlers, or NULL when the
// name is unknown or not an attribute of this kind of workqueue.
static const attr_ops *wq_attr(workqueue_struct *wq, const std::string &attr)
{
	const sysfs_attr_desc *d = find_sysfs_attr(attr);
	unsigned kind = (wq->flags & WQ_UNBOUND) ? ATTR_UNBOUND : ATTR_PERCPU;
	if (!d || !(d->kinds & kind))
		return nullptr;
	for (const auto &op : wq_attr_ops)
		if (attr == op.name)
			return &op;
	return nullptr;
}

int wq_sysfs_get(workqueue_struct *wq, const std::string &attr, std::string &out)
{
	const attr_ops *op = wq_attr(wq, attr);
	if (!op)
		return -ENOENT;
	lock_guard wk(wq->mutex);
	op->get(wq, out);
	return 0;
}

static int wq_sysfs_set(workqueue_struct *wq, const std::string &attr, const char *value)
{
	const attr_ops *op = wq_attr(wq, attr);
	if (!op)
		return -ENOENT;
	if (!op->set || (attr == "max_active" && (wq->flags & (WQ_BH | __WQ_ORDERED))))
		return -EACCES;
	workqueue_attrs a;
	if (wq->flags & WQ_UNBOUND) {
		lock_guard wk(wq->mutex);
		a = wq->unbound_attrs;
	}
	int r = op->set(wq, a, value);
	return r == 1 ? apply_workqueue_attrs(wq, &a) : r;
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
