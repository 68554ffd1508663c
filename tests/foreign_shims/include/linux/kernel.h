/* The program's kernel.h: its own container_of and helpers. */
#ifndef PROGRAM_LINUX_KERNEL_H
#define PROGRAM_LINUX_KERNEL_H

#include <stddef.h>

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define BUG_ON(c) do { if (c) __builtin_trap(); } while (0)

#endif
