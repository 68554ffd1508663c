/*
 * cmwq/control.h - the control endpoint of this process (docs/control.md):
 * a Unix-domain socket private to the user, under
 * $XDG_RUNTIME_DIR/cmwq/<pid>.sock (fallback /tmp/cmwq-<uid>/<pid>.sock),
 * which wqctl, wq_monitor and scrapers talk to. Also started by the
 * parameter cmwq.control=1.
 */
#ifndef CMWQ_CONTROL_H
#define CMWQ_CONTROL_H

#include <cmwq/export.h>
CMWQ_BEGIN_PUBLIC

#ifdef __cplusplus
extern "C" {
#endif

/* Starts the endpoint: 0 or a negative errno; idempotent. May sleep. */
int cmwq_control_start(void);
/* Stops it and removes the socket. May sleep. */
void cmwq_control_stop(void);
/* The socket path while running, else NULL. */
const char *cmwq_control_path(void);
/*
 * Removes this user's sockets of processes that no longer exist (a process
 * killed, or one that ended with _exit, leaves its socket behind; exit and
 * quick_exit remove it). A socket whose process exists or that accepts a
 * connection is left alone. Returns how many were removed, or a negative
 * errno. cmwq_control_start does this too; `wqctl` does it before listing.
 */
int cmwq_control_remove_stale(void);
/*
 * The OpenMetrics text of this process's workqueue counters and gauges,
 * exactly what the endpoint's `metrics` request serves, without the
 * protocol's framing (ends with "# EOF\n"); valid UTF-8 whatever the
 * workqueue names. malloc'd: the caller frees it. NULL if out of memory.
 * Needs no running endpoint.
 */
char *cmwq_metrics_text(void);

#ifdef __cplusplus
}
#endif

CMWQ_END_PUBLIC

#endif /* CMWQ_CONTROL_H */
