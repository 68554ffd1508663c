/*
 * cmwq/log.h - where the library's messages go.
 *
 * Every message the library prints (warnings about bad input, threads that
 * could not start, CPU hogs, the lockup watchdog and its state dump,
 * show_all_workqueues) goes to the handler when one is set, one call per
 * line without the trailing newline, and nothing goes to stderr. Without a
 * handler, lines go to stderr as before. Levels are syslog's (<syslog.h>):
 * LOG_ERR 3, LOG_WARNING 4, LOG_NOTICE 5, LOG_INFO 6.
 *
 * The handler may be called from any thread, including the library's own,
 * possibly with engine locks held: it must not call back into cmwq and
 * should not block for long. It is called under an internal lock, so calls
 * do not interleave.
 */
#ifndef CMWQ_LOG_H
#define CMWQ_LOG_H

#include <cmwq/export.h>
CMWQ_BEGIN_PUBLIC

#ifdef __cplusplus
extern "C" {
#endif

typedef void (*cmwq_log_fn)(int level, const char *msg, void *arg);

/* Sets the handler (NULL restores stderr); arg is passed to every call. */
void cmwq_set_log_handler(cmwq_log_fn fn, void *arg);

#ifdef __cplusplus
}
#endif

CMWQ_END_PUBLIC

#endif
