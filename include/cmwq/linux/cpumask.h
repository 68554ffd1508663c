/*
 * cmwq/linux/cpumask.h - fixed-size CPU masks with the kernel's helper names.
 *
 * A cpumask is a plain bitmap of CMWQ_NR_CPUS (1024) bits (the kernel's
 * !CONFIG_CPUMASK_OFFSTACK layout), so cpumask_var_t needs no allocation.
 * cmwq's own type is struct cmwq_cpumask (workqueue_attrs' masks); where
 * cmwq provides the kernel's names it is struct cpumask.
 *
 * When the program has its own <linux/cpumask.h> (on the include path, or
 * _LINUX_CPUMASK_H defined), cmwq defines none of the kernel's names
 * (struct cpumask, cpumask_*, for_each_*cpu, num_online_cpus, ...) and
 * keeps struct cmwq_cpumask with the cmwq_cpumask_* helpers below. See
 * <cmwq/linux/shims.h>.
 */
#ifdef CMWQ_PROBING_LINUX_CPUMASK_H
#define CMWQ_WRAPPED_LINUX_CPUMASK_H 1
#elif !defined(CMWQ_LINUX_CPUMASK_H)
#define CMWQ_LINUX_CPUMASK_H

#include <stdbool.h>
#include <string.h>

#include <cmwq/linux/shims.h>

#if CMWQ_PROBE_SHIMS && !defined(_LINUX_CPUMASK_H)
#if __has_include(<linux/cpumask.h>)
#define CMWQ_PROBING_LINUX_CPUMASK_H
#include <linux/cpumask.h>
#undef CMWQ_PROBING_LINUX_CPUMASK_H
#ifndef CMWQ_WRAPPED_LINUX_CPUMASK_H
#define CMWQ_FOREIGN_LINUX_CPUMASK_H 1
#endif
#endif
#endif

#if !defined(CMWQ_KERNEL_SHIMS_EXTERNAL) && !defined(CMWQ_FOREIGN_LINUX_CPUMASK_H) && \
	!defined(_LINUX_CPUMASK_H)
#define _LINUX_CPUMASK_H
#define CMWQ_DEFINES_CPUMASK 1
/* cmwq's mask type is the kernel's struct cpumask. */
#define cmwq_cpumask cpumask
#endif

#include <cmwq/export.h>
CMWQ_BEGIN_PUBLIC

#ifdef __cplusplus
extern "C" {
#endif

/* The most CPUs cmwq handles; CPU numbers are 0 .. CMWQ_NR_CPUS-1. This is
 * part of the ABI (the size of a mask) and does not follow NR_CPUS. */
#define CMWQ_NR_CPUS 1024
#define CMWQ_BITS_PER_LONG (8 * (int)sizeof(unsigned long))
#define CMWQ_CPUMASK_LONGS ((CMWQ_NR_CPUS + CMWQ_BITS_PER_LONG - 1) / CMWQ_BITS_PER_LONG)

struct cmwq_cpumask {
	unsigned long bits[CMWQ_CPUMASK_LONGS];
};

static inline void cmwq_cpumask_clear(struct cmwq_cpumask *m) { memset(m, 0, sizeof(*m)); }
static inline void cmwq_cpumask_set_cpu(unsigned int cpu, struct cmwq_cpumask *m)
{
	if (cpu < CMWQ_NR_CPUS)
		m->bits[cpu / CMWQ_BITS_PER_LONG] |= 1UL << (cpu % CMWQ_BITS_PER_LONG);
}
static inline bool cmwq_cpumask_test_cpu(int cpu, const struct cmwq_cpumask *m)
{
	return cpu >= 0 && cpu < CMWQ_NR_CPUS &&
	       ((m->bits[cpu / CMWQ_BITS_PER_LONG] >> (cpu % CMWQ_BITS_PER_LONG)) & 1UL);
}
/* The CPUs this process may use (online CPUs in its affinity mask). */
const struct cmwq_cpumask *cmwq_usable_cpumask(void);
int cmwq_num_online_cpus(void);

#ifdef CMWQ_DEFINES_CPUMASK
#ifndef NR_CPUS
#define NR_CPUS CMWQ_NR_CPUS
#endif
typedef struct cpumask cpumask_t;
typedef struct cpumask cpumask_var_t[1];

static inline void cpumask_clear(struct cpumask *m) { memset(m, 0, sizeof(*m)); }
static inline void cpumask_setall(struct cpumask *m) { memset(m, 0xff, sizeof(*m)); }
static inline void cpumask_copy(struct cpumask *d, const struct cpumask *s) { *d = *s; }
static inline void cpumask_set_cpu(unsigned int cpu, struct cpumask *m) { cmwq_cpumask_set_cpu(cpu, m); }
static inline void cpumask_clear_cpu(unsigned int cpu, struct cpumask *m)
{
	if (cpu < CMWQ_NR_CPUS)
		m->bits[cpu / CMWQ_BITS_PER_LONG] &= ~(1UL << (cpu % CMWQ_BITS_PER_LONG));
}
static inline bool cpumask_test_cpu(int cpu, const struct cpumask *m) { return cmwq_cpumask_test_cpu(cpu, m); }
static inline bool cpumask_empty(const struct cpumask *m)
{
	for (int i = 0; i < CMWQ_CPUMASK_LONGS; i++)
		if (m->bits[i])
			return false;
	return true;
}
static inline unsigned int cpumask_weight(const struct cpumask *m)
{
	unsigned int n = 0;
	for (int i = 0; i < CMWQ_CPUMASK_LONGS; i++)
		n += (unsigned int)__builtin_popcountl(m->bits[i]);
	return n;
}
static inline bool cpumask_equal(const struct cpumask *a, const struct cpumask *b)
{
	return memcmp(a, b, sizeof(*a)) == 0;
}
static inline bool cpumask_and(struct cpumask *d, const struct cpumask *a, const struct cpumask *b)
{
	bool any = false;
	for (int i = 0; i < CMWQ_CPUMASK_LONGS; i++) {
		d->bits[i] = a->bits[i] & b->bits[i];
		any = any || d->bits[i];
	}
	return any;
}
static inline void cpumask_or(struct cpumask *d, const struct cpumask *a, const struct cpumask *b)
{
	for (int i = 0; i < CMWQ_CPUMASK_LONGS; i++)
		d->bits[i] = a->bits[i] | b->bits[i];
}
/* Next set CPU after n (n = -1 for the first), or NR_CPUS. */
static inline int cpumask_next(int n, const struct cpumask *m)
{
	for (int c = n + 1; c < CMWQ_NR_CPUS; c++)
		if (cpumask_test_cpu(c, m))
			return c;
	return CMWQ_NR_CPUS;
}
static inline int cpumask_first(const struct cpumask *m) { return cpumask_next(-1, m); }
#ifndef for_each_cpu
#define for_each_cpu(cpu, mask) \
	for ((cpu) = cpumask_next(-1, (mask)); (cpu) < CMWQ_NR_CPUS; (cpu) = cpumask_next((cpu), (mask)))
#endif
#ifndef cpu_online_mask
#define cpu_online_mask cmwq_usable_cpumask()
#endif
#ifndef cpu_possible_mask
#define cpu_possible_mask cmwq_usable_cpumask()
#endif
#ifndef for_each_online_cpu
#define for_each_online_cpu(cpu) for_each_cpu((cpu), cpu_online_mask)
#endif
#ifndef for_each_possible_cpu
#define for_each_possible_cpu(cpu) for_each_cpu((cpu), cpu_possible_mask)
#endif
#ifndef num_online_cpus
#define num_online_cpus() cmwq_num_online_cpus()
#endif
#endif /* CMWQ_DEFINES_CPUMASK */

#ifdef __cplusplus
}
#endif

CMWQ_END_PUBLIC

#endif /* CMWQ_LINUX_CPUMASK_H */
