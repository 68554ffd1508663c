// sysfs_attrs.h - the names of the WQ_SYSFS attributes and the values they
// accept, in words: one table that sysfs.cpp dispatches on and the control
// protocol quotes in its messages. Pure data, so the protocol (and its
// fuzzer) use it without the engine.
#pragma once

#include <cmwq/topology.hpp>

#include <array>
#include <string>
#include <string_view>

namespace cmwq::detail {

// Which files carry an attribute: those of a per-CPU or an unbound
// WQ_SYSFS workqueue, or the global ones beside them (wq "-" / NULL).
enum sysfs_attr_kind : unsigned { ATTR_PERCPU = 1, ATTR_UNBOUND = 2, ATTR_GLOBAL = 4 };

struct sysfs_attr_desc {
	const char *name;
	unsigned kinds;       // sysfs_attr_kind bits
	bool writable;
	const char *accepted; // the values a write takes, in words (writable only)
};

inline constexpr const char *cpumask_words =
	"hexadecimal CPU masks in comma-separated 32-bit groups (e.g. f or ff,ffffffff) "
	"that include a usable CPU";

// In the kernel's order of the files; affinity_scope's words come from the
// scope table (scope_names_list).
inline constexpr sysfs_attr_desc sysfs_attrs[] = {
	{"per_cpu", ATTR_PERCPU | ATTR_UNBOUND, false, nullptr},
	{"max_active", ATTR_PERCPU | ATTR_UNBOUND, true, "positive integers (values over 2048 are clamped)"},
	{"cpumask", ATTR_UNBOUND | ATTR_GLOBAL, true, cpumask_words},
	{"nice", ATTR_UNBOUND, true, "integers from -20 to 19"},
	{"affinity_scope", ATTR_UNBOUND, true, nullptr},
	{"affinity_strict", ATTR_UNBOUND, true, "integers (0 = off, non-zero = strict)"},
	{"cpumask_requested", ATTR_GLOBAL, false, nullptr},
	{"cpumask_isolated", ATTR_GLOBAL, false, nullptr},
};

inline const sysfs_attr_desc *find_sysfs_attr(std::string_view name) noexcept
{
	for (const auto &a : sysfs_attrs)
		if (name == a.name)
			return &a;
	return nullptr;
}

// The values attribute `name` accepts, in words, or nullptr (unknown or
// read-only).
inline const char *sysfs_attr_accepted(std::string_view name) noexcept
{
	const sysfs_attr_desc *a = find_sysfs_attr(name);
	if (!a || !a->writable)
		return nullptr;
	if (name == "affinity_scope")
		return scope_names_list(true);
	return a->accepted;
}

// "per_cpu, max_active, ..." for one kind, in table order. Valid forever.
inline const char *sysfs_attr_names(sysfs_attr_kind kind)
{
	static const std::array<std::string, 3> lists = [] {
		std::array<std::string, 3> l; // by bit: per-CPU, unbound, global
		for (const auto &a : sysfs_attrs)
			for (unsigned k = 0; k < 3; k++)
				if (a.kinds & (1u << k)) {
					if (!l[k].empty())
						l[k] += ", ";
					l[k] += a.name;
				}
		return l;
	}();
	unsigned k = kind == ATTR_PERCPU ? 0 : kind == ATTR_UNBOUND ? 1 : 2;
	return lists[k].c_str();
}

} // namespace cmwq::detail
