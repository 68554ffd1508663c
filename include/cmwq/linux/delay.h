/*
 * cmwq/linux/delay.h - the kernel's sleep and busy-wait helpers.
 *
 * The sleeps tell the workqueue that the calling worker blocks (the
 * blocking hints of <cmwq/linux/workqueue.h>), so a per-CPU pool starts its
 * next item meanwhile; the busy waits do not, as in the kernel, where they
 * keep the CPU.
 */
#ifndef CMWQ_LINUX_DELAY_H
#define CMWQ_LINUX_DELAY_H

#include <cmwq/export.h>
CMWQ_BEGIN_PUBLIC

#ifdef __cplusplus
extern "C" {
#endif

void msleep(unsigned int msecs);
/* Returns the milliseconds left when interrupted by a signal, else 0. */
unsigned long msleep_interruptible(unsigned int msecs);
void ssleep(unsigned int seconds);
void usleep_range(unsigned long min_us, unsigned long max_us);
void udelay(unsigned long usecs);
void ndelay(unsigned long nsecs);
void mdelay(unsigned long msecs);

#ifdef __cplusplus
}
#endif

CMWQ_END_PUBLIC

#endif /* CMWQ_LINUX_DELAY_H */
