/*
 * cmwq/linux/shims.h - how cmwq's kernel headers share kernel names with a
 * program that carries its own kernel shims.
 *
 * cmwq's kernel-style headers need a few kernel primitives: struct
 * list_head, jiffies and HZ, struct lock_class_key, the cpumask helpers,
 * struct timer_list. Programs that run kernel code in user space usually
 * bring their own (include/linux/list.h over liburcu, a jiffies macro, ...).
 * The rule: a primitive that the program has is the program's, and cmwq
 * defines none of its names.
 *
 *  - Each of <cmwq/linux/list.h>, <cmwq/linux/jiffies.h>,
 *    <cmwq/linux/lockdep.h>, <cmwq/linux/cpumask.h> and the timer types
 *    first includes the program's <linux/X.h> when the include path has one
 *    (__has_include), so the program's version is in effect whichever order
 *    its files include them in. A <linux/X.h> that only includes cmwq's
 *    header (a two-line wrapper) does not count as the program's own.
 *  - The kernel's include guard (_LINUX_LIST_H, _LINUX_JIFFIES_H, ...)
 *    already defined counts as the program's header too; where cmwq defines
 *    the names it defines that guard, so a kernel-guarded header of the
 *    program's that is included later stands aside.
 *  - Single macros are defined only where the program has not (#ifndef).
 *  - cmwq's own structures depend on a primitive's layout, not its name:
 *    a work item's list node is the program's struct list_head (checked at
 *    compile time to be two pointers, next then prev), and delayed work
 *    embeds a timer of cmwq's own type when the program keeps its own
 *    struct timer_list.
 *
 * Define CMWQ_KERNEL_SHIMS_EXTERNAL before the first cmwq header (or with
 * -D) for cmwq to look for nothing and define no kernel primitive at all;
 * the program must then provide struct list_head (next, prev) before it
 * includes <cmwq/linux/workqueue.h>. Define CMWQ_TIMER_LIST_EXTERNAL (set
 * automatically when the program's own <linux/timer.h> is found) for cmwq
 * to keep its timer API to itself: delayed work still works, on cmwq's
 * timer thread. docs/porting.md lists the names per header.
 */
#ifndef CMWQ_LINUX_SHIMS_H
#define CMWQ_LINUX_SHIMS_H

#include <stddef.h>

/* Whether cmwq looks for the program's own <linux/X.h> headers. */
#if !defined(CMWQ_KERNEL_SHIMS_EXTERNAL) && defined(__has_include)
#define CMWQ_PROBE_SHIMS 1
#else
#define CMWQ_PROBE_SHIMS 0
#endif

/* cmwq's headers use their own container_of; the kernel's name is the
 * program's when its <linux/kernel.h> (looked at first) has it. */
#define cmwq_container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#if CMWQ_PROBE_SHIMS
#if __has_include(<linux/kernel.h>)
#include <linux/kernel.h>
#endif
#endif
#if !defined(CMWQ_KERNEL_SHIMS_EXTERNAL) && !defined(container_of)
#define container_of(ptr, type, member) cmwq_container_of(ptr, type, member)
#endif

#ifdef __cplusplus
#define CMWQ_STATIC_ASSERT(cond, msg) static_assert(cond, msg)
#else
#define CMWQ_STATIC_ASSERT(cond, msg) _Static_assert(cond, msg)
#endif

#endif /* CMWQ_LINUX_SHIMS_H */
