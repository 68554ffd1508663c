/*
 * c_check.h - the checks of the plain C11 test programs (c_api.c,
 * kernel_timers.c): no framework, so they also build as installed-package
 * consumers. Each program prints nr_passed/nr_failed and exits non-zero on
 * any failure.
 */
#ifndef CMWQ_TESTS_C_CHECK_H
#define CMWQ_TESTS_C_CHECK_H

#include <stdio.h>

#include <cmwq/linux/delay.h>

static int nr_passed, nr_failed;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (cond) {                                                    \
			nr_passed++;                                           \
		} else {                                                       \
			nr_failed++;                                           \
			fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n",       \
				__FILE__, __LINE__, __func__, #cond);          \
		}                                                              \
	} while (0)

/* Polls cond for up to 10 s (sanitizer builds are slow), then checks it. */
#define CHECK_SOON(cond)                                                       \
	do {                                                                   \
		for (int waited_ = 0; !(cond) && waited_ < 10000; waited_++)   \
			msleep(1);                                             \
		CHECK(cond);                                                   \
	} while (0)

#endif /* CMWQ_TESTS_C_CHECK_H */
