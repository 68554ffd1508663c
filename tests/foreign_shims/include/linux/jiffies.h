/* The program's jiffies: its own clock read, HZ 1000. */
#ifndef PROGRAM_LINUX_JIFFIES_H
#define PROGRAM_LINUX_JIFFIES_H

#include <time.h>

#define HZ 1000

static inline unsigned long program_jiffies(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
	return (unsigned long)ts.tv_sec * 1000UL + (unsigned long)ts.tv_nsec / 1000000UL;
}
#define jiffies program_jiffies()

static inline unsigned long msecs_to_jiffies(const unsigned int m)
{
	return m;
}

static inline unsigned int jiffies_to_msecs(const unsigned long j)
{
	return (unsigned int)j;
}

#endif
