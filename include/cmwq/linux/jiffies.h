/*
 * cmwq/linux/jiffies.h - jiffies, HZ and their conversions, for a program
 * that has none of its own.
 *
 * cmwq counts jiffies at HZ = 1000 on CLOCK_MONOTONIC: one jiffy is a
 * millisecond of CLOCK_MONOTONIC since its origin, so cmwq_jiffies() is
 * CLOCK_MONOTONIC in ms. Delays (queue_delayed_work) and timer expiries
 * (mod_timer) are in these units.
 *
 * When the program has its own <linux/jiffies.h> (on the include path, or
 * _LINUX_JIFFIES_H defined), cmwq defines none of HZ, jiffies,
 * msecs_to_jiffies, usecs_to_jiffies, jiffies_to_msecs, jiffies_to_usecs;
 * the program's HZ must then be 1000 (checked at compile time) and, for
 * absolute timer expiries, its jiffies must count CLOCK_MONOTONIC (or
 * CLOCK_MONOTONIC_COARSE) milliseconds. Otherwise each name is defined
 * here unless the program already has it as a macro. See
 * <cmwq/linux/shims.h>.
 */
#ifdef CMWQ_PROBING_LINUX_JIFFIES_H
#define CMWQ_WRAPPED_LINUX_JIFFIES_H 1
#elif !defined(CMWQ_LINUX_JIFFIES_H)
#define CMWQ_LINUX_JIFFIES_H

#include <cmwq/linux/shims.h>
#include <cmwq/export.h>

#if CMWQ_PROBE_SHIMS && !defined(_LINUX_JIFFIES_H)
#if __has_include(<linux/jiffies.h>)
#define CMWQ_PROBING_LINUX_JIFFIES_H
#include <linux/jiffies.h>
#undef CMWQ_PROBING_LINUX_JIFFIES_H
#ifndef CMWQ_WRAPPED_LINUX_JIFFIES_H
#define CMWQ_FOREIGN_LINUX_JIFFIES_H 1
#endif
#endif
#endif

CMWQ_BEGIN_PUBLIC
#ifdef __cplusplus
extern "C" {
#endif
/* CLOCK_MONOTONIC in milliseconds: cmwq's jiffies. */
unsigned long cmwq_jiffies(void);
#ifdef __cplusplus
}
#endif
CMWQ_END_PUBLIC

#if !defined(CMWQ_KERNEL_SHIMS_EXTERNAL) && !defined(CMWQ_FOREIGN_LINUX_JIFFIES_H) && \
	!defined(_LINUX_JIFFIES_H)
#define _LINUX_JIFFIES_H
#ifndef HZ
#define HZ 1000
#endif
#ifndef jiffies
#define jiffies (cmwq_jiffies())
#endif
#ifndef msecs_to_jiffies
static inline unsigned long msecs_to_jiffies(unsigned int m) { return m; }
#endif
#ifndef usecs_to_jiffies
static inline unsigned long usecs_to_jiffies(unsigned int u) { return (u + 999u) / 1000u; }
#endif
#ifndef jiffies_to_msecs
static inline unsigned int jiffies_to_msecs(unsigned long j) { return (unsigned int)j; }
#endif
#ifndef jiffies_to_usecs
static inline unsigned int jiffies_to_usecs(unsigned long j) { return (unsigned int)(j * 1000u); }
#endif
#endif

/* A program's own HZ must be cmwq's: delays and expiries are milliseconds. */
#if defined(HZ)
CMWQ_STATIC_ASSERT(HZ == 1000, "cmwq counts jiffies in milliseconds: the program's HZ must be 1000");
#endif

#endif /* CMWQ_LINUX_JIFFIES_H */
