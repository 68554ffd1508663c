/*
 * cmwq/linux/list.h - struct list_head, the kernel's list node, for a
 * program that has none of its own.
 *
 * Work items link through a struct list_head. When the program has its own
 * <linux/list.h> (found on the include path, or its guard _LINUX_LIST_H
 * defined, or list_head defined as a macro, as liburcu-based shims do with
 * `#define list_head cds_list_head`) that one is used; its node must be two
 * pointers, next then prev (the kernel's layout), which
 * <cmwq/linux/workqueue.h> checks at compile time. Otherwise this header
 * defines struct list_head and nothing else (cmwq does not provide the
 * kernel's list functions). See <cmwq/linux/shims.h>.
 */
#ifdef CMWQ_PROBING_LINUX_LIST_H
#define CMWQ_WRAPPED_LINUX_LIST_H 1
#elif !defined(CMWQ_LINUX_LIST_H)
#define CMWQ_LINUX_LIST_H

#include <cmwq/linux/shims.h>

#if CMWQ_PROBE_SHIMS && !defined(_LINUX_LIST_H) && !defined(list_head)
#if __has_include(<linux/list.h>)
#define CMWQ_PROBING_LINUX_LIST_H
#include <linux/list.h>
#undef CMWQ_PROBING_LINUX_LIST_H
#ifndef CMWQ_WRAPPED_LINUX_LIST_H
#define CMWQ_FOREIGN_LINUX_LIST_H 1
#endif
#endif
#endif

#if !defined(CMWQ_KERNEL_SHIMS_EXTERNAL) && !defined(CMWQ_FOREIGN_LINUX_LIST_H) && \
	!defined(_LINUX_LIST_H) && !defined(list_head)
#define _LINUX_LIST_H
#define CMWQ_DEFINES_LIST_HEAD 1
struct list_head {
	struct list_head *next, *prev;
};
#endif

#endif /* CMWQ_LINUX_LIST_H */
