/*
 * cmwq/stats.h - counters and run-time attributes, for programs and tools.
 * The control endpoint is in <cmwq/control.h>; until 0.2 this header
 * includes it, so a program that declared cmwq_control_start() through
 * stats.h still builds (deprecated: include <cmwq/control.h>).
 *
 * Counters mirror the kernel's enum pool_workqueue_stats and are kept per
 * pool_workqueue, always on. Attributes mirror
 * /sys/devices/virtual/workqueue/<name>/ of WQ_SYSFS workqueues and the global
 * files beside them, with the kernel's names, formats and errors.
 */
#ifndef CMWQ_STATS_H
#define CMWQ_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmwq/control.h> /* deprecated here; see above */
#include <cmwq/export.h>
CMWQ_BEGIN_PUBLIC

#ifdef __cplusplus
extern "C" {
#endif

struct workqueue_struct;

enum pool_workqueue_stats {
	PWQ_STAT_STARTED,       /* work items started execution */
	PWQ_STAT_COMPLETED,     /* work items completed execution */
	PWQ_STAT_CPU_TIME,      /* total CPU time consumed, in microseconds */
	PWQ_STAT_CPU_INTENSIVE, /* wq_cpu_intensive_thresh_us violations */
	PWQ_STAT_CM_WAKEUP,     /* concurrency-management worker wakeups */
	PWQ_STAT_REPATRIATED,   /* unbound workers brought back into scope */
	PWQ_STAT_MAYDAY,        /* maydays to rescuer */
	PWQ_STAT_RESCUED,       /* linked work items executed by rescuer */
	PWQ_NR_STATS,
};

/*
 * Each counter described once: its key in the control protocol's stats
 * lines and the tools' JSON ("started"), the words above, and its unit when
 * it has one. In enum order. Any context.
 */
struct pwq_stat_desc {
	const char *key;
	const char *help;
	const char *unit; /* NULL for counts */
};
static inline const struct pwq_stat_desc *pwq_stat_desc(int stat)
{
	static const struct pwq_stat_desc table[PWQ_NR_STATS] = {
		{"started", "work items started execution", 0},
		{"completed", "work items completed execution", 0},
		{"cpu_time", "total CPU time consumed", "microseconds"},
		{"cpu_intensive", "wq_cpu_intensive_thresh_us violations", 0},
		{"cm_wakeup", "concurrency-management worker wakeups", 0},
		{"repatriated", "unbound workers brought back into scope", 0},
		{"mayday", "maydays to rescuer", 0},
		{"rescued", "linked work items executed by rescuer", 0},
	};
	return stat >= 0 && stat < PWQ_NR_STATS ? &table[stat] : 0;
}

/* Sum of the counters over the workqueue's pwqs. Any context. */
void cmwq_workqueue_stats(struct workqueue_struct *wq, uint64_t stats[PWQ_NR_STATS]);

/*
 * Attributes of a WQ_SYSFS workqueue by name, as the sysfs files read and
 * accept them: per_cpu, max_active, and for unbound workqueues cpumask, nice,
 * affinity_scope, affinity_strict. Global attributes use wq = NULL: cpumask,
 * cpumask_requested, cpumask_isolated.
 * get: 0, -ENOENT (no such WQ_SYSFS workqueue or attribute), -ERANGE (buf).
 * set: 0, -ENOENT, -EACCES (read-only attribute), -EINVAL (bad value; nothing
 * changed). May sleep.
 */
int cmwq_sysfs_get(const char *wq, const char *attr, char *buf, size_t len);
int cmwq_sysfs_set(const char *wq, const char *attr, const char *value);
/*
 * Calls fn for each WQ_SYSFS workqueue name (under a lock: fn must not call
 * cmwq). Returns the number of names.
 */
int cmwq_sysfs_list(void (*fn)(const char *name, void *arg), void *arg);

/* show_all_workqueues() written to `out` instead of stderr. */
void cmwq_dump(FILE *out);

#ifdef __cplusplus
}
#endif

CMWQ_END_PUBLIC

#endif /* CMWQ_STATS_H */
