/*
 * cmwq/linux/lockdep.h - lockdep's key and map types, for a program that
 * has none of its own. cmwq has no lockdep: the workqueue calls that take a
 * key or map (__INIT_WORK_KEY, alloc_workqueue_lockdep_map, ...) accept and
 * ignore it, so cmwq needs neither type itself.
 *
 * When the program has its own <linux/lockdep.h> (on the include path, or
 * _LINUX_LOCKDEP_H defined) this header defines nothing. See
 * <cmwq/linux/shims.h>.
 */
#ifdef CMWQ_PROBING_LINUX_LOCKDEP_H
#define CMWQ_WRAPPED_LINUX_LOCKDEP_H 1
#elif !defined(CMWQ_LINUX_LOCKDEP_H)
#define CMWQ_LINUX_LOCKDEP_H

#include <cmwq/linux/shims.h>

#if CMWQ_PROBE_SHIMS && !defined(_LINUX_LOCKDEP_H)
#if __has_include(<linux/lockdep.h>)
#define CMWQ_PROBING_LINUX_LOCKDEP_H
#include <linux/lockdep.h>
#undef CMWQ_PROBING_LINUX_LOCKDEP_H
#ifndef CMWQ_WRAPPED_LINUX_LOCKDEP_H
#define CMWQ_FOREIGN_LINUX_LOCKDEP_H 1
#endif
#endif
#endif

#if !defined(CMWQ_KERNEL_SHIMS_EXTERNAL) && !defined(CMWQ_FOREIGN_LINUX_LOCKDEP_H) && \
	!defined(_LINUX_LOCKDEP_H)
#define _LINUX_LOCKDEP_H
/* Accepted and ignored. */
struct lock_class_key {
	char cmwq_unused;
};
struct lockdep_map {
	const char *name;
};
#endif

#endif /* CMWQ_LINUX_LOCKDEP_H */
