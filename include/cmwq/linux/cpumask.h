/*
 * cmwq/linux/cpumask.h - fixed-size CPU masks with the kernel's helper names.
 *
 * A cpumask is a plain bitmap of NR_CPUS bits (the kernel's
 * !CONFIG_CPUMASK_OFFSTACK layout), so cpumask_var_t needs no allocation.
 */
#ifndef CMWQ_LINUX_CPUMASK_H
#define CMWQ_LINUX_CPUMASK_H

#include <stdbool.h>
#include <string.h>

#include <cmwq/export.h>
CMWQ_BEGIN_PUBLIC

#ifdef __cplusplus
extern "C" {
#endif

/* The most CPUs cmwq handles; CPU numbers are 0 .. NR_CPUS-1. */
#ifndef NR_CPUS
#define NR_CPUS 1024
#endif
#define CMWQ_BITS_PER_LONG (8 * (int)sizeof(unsigned long))
#define CMWQ_CPUMASK_LONGS ((NR_CPUS + CMWQ_BITS_PER_LONG - 1) / CMWQ_BITS_PER_LONG)

struct cpumask {
	unsigned long bits[CMWQ_CPUMASK_LONGS];
};
typedef struct cpumask cpumask_t;
typedef struct cpumask cpumask_var_t[1];

static inline void cpumask_clear(struct cpumask *m) { memset(m, 0, sizeof(*m)); }
static inline void cpumask_setall(struct cpumask *m) { memset(m, 0xff, sizeof(*m)); }
static inline void cpumask_copy(struct cpumask *d, const struct cpumask *s) { *d = *s; }
static inline void cpumask_set_cpu(unsigned int cpu, struct cpumask *m)
{
	if (cpu < NR_CPUS)
		m->bits[cpu / CMWQ_BITS_PER_LONG] |= 1UL << (cpu % CMWQ_BITS_PER_LONG);
}
static inline void cpumask_clear_cpu(unsigned int cpu, struct cpumask *m)
{
	if (cpu < NR_CPUS)
		m->bits[cpu / CMWQ_BITS_PER_LONG] &= ~(1UL << (cpu % CMWQ_BITS_PER_LONG));
}
static inline bool cpumask_test_cpu(int cpu, const struct cpumask *m)
{
	return cpu >= 0 && cpu < NR_CPUS &&
	       ((m->bits[cpu / CMWQ_BITS_PER_LONG] >> (cpu % CMWQ_BITS_PER_LONG)) & 1UL);
}
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
	for (int c = n + 1; c < NR_CPUS; c++)
		if (cpumask_test_cpu(c, m))
			return c;
	return NR_CPUS;
}
static inline int cpumask_first(const struct cpumask *m) { return cpumask_next(-1, m); }
#define for_each_cpu(cpu, mask) \
	for ((cpu) = cpumask_next(-1, (mask)); (cpu) < NR_CPUS; (cpu) = cpumask_next((cpu), (mask)))

/* The CPUs this process may use (online CPUs in its affinity mask). */
const struct cpumask *cmwq_usable_cpumask(void);
#define cpu_online_mask cmwq_usable_cpumask()
#define cpu_possible_mask cmwq_usable_cpumask()
#define for_each_online_cpu(cpu) for_each_cpu((cpu), cpu_online_mask)
#define for_each_possible_cpu(cpu) for_each_cpu((cpu), cpu_possible_mask)
int cmwq_num_online_cpus(void);
#define num_online_cpus() cmwq_num_online_cpus()

#ifdef __cplusplus
}
#endif

CMWQ_END_PUBLIC

#endif /* CMWQ_LINUX_CPUMASK_H */
