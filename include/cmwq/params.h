/*
 * cmwq/params.h - run-time parameters.
 *
 * The kernel's workqueue module parameters keep their names
 * (workqueue.default_affinity_scope, workqueue.cache_shard_size, ...); cmwq's
 * own are prefixed "cmwq.". Initial values come from the environment variable
 * CMWQ_PARAMS (whitespace-separated name=value, read once when the library
 * starts); a bad entry prints one line naming the parameter and the accepted
 * values, and the default stays. Values read back in the kernel's format.
 * Callable from any thread, including work functions; may sleep (a scope
 * change re-pods workqueues).
 */
#ifndef CMWQ_PARAMS_H
#define CMWQ_PARAMS_H

#include <stddef.h>

#include <cmwq/export.h>
CMWQ_BEGIN_PUBLIC

#ifdef __cplusplus
extern "C" {
#endif

/* 0, or -ENOENT (unknown name), -EINVAL (bad value), -EPERM (read-only now). */
int cmwq_param_set(const char *name, const char *value);
/* 0 with a NUL-terminated value in buf, -ENOENT, or -ERANGE if len is too small. */
int cmwq_param_get(const char *name, char *buf, size_t len);
/*
 * Iterate the parameter names: returns the name of parameter `index`, or NULL
 * past the last one. Names are static strings.
 */
const char *cmwq_param_name(unsigned int index);

#ifdef __cplusplus
}
#endif

CMWQ_END_PUBLIC

#endif /* CMWQ_PARAMS_H */
