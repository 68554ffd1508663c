/* detect_target - prints the block detector in effect and checks that an
 * item blocked in read() on a pipe (no hint) lets the item queued behind it
 * on the same per-CPU pool start. Under perf, sampling is turned off first,
 * so only the context-switch events can find the block. Exit 0 when the
 * second item started within 20 s. Run by tests/test_detect.cmake. */
#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int pipefd[2];
static atomic_int b_started;

static void a_fn(struct work_struct *w)
{
	char c;
	(void)w;
	(void)!read(pipefd[0], &c, 1);
}

static void b_fn(struct work_struct *w)
{
	(void)w;
	atomic_store(&b_started, 1);
	(void)!write(pipefd[1], "x", 1);
}

int main(void)
{
	char mode[32] = "";
	struct work_struct a, b;
	struct workqueue_struct *wq;
	int i;

	if (pipe(pipefd))
		return 2;
	wq = alloc_workqueue("detect_target", WQ_PERCPU, 0);
	if (!wq)
		return 2;
	INIT_WORK(&a, a_fn);
	INIT_WORK(&b, b_fn);
	/* A first item makes a worker start, which settles the detector. */
	queue_work_on(0, wq, &b);
	flush_workqueue(wq);
	atomic_store(&b_started, 0);
	if (cmwq_param_get("cmwq.block_detect", mode, sizeof(mode)))
		return 2;
	printf("detector: %s\n", mode);
	if (strcmp(mode, "perf") == 0)
		cmwq_param_set("cmwq.blocked_sample_us", "0");
	{
		char c;
		(void)!read(pipefd[0], &c, 1); /* the first B's byte */
	}
	queue_work_on(0, wq, &a);
	queue_work_on(0, wq, &b);
	for (i = 0; i < 20000 && !atomic_load(&b_started); i++) {
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
	}
	printf("second item %s\n", atomic_load(&b_started) ? "started" : "did not start");
	if (!atomic_load(&b_started))
		(void)!write(pipefd[1], "x", 1);
	flush_workqueue(wq);
	destroy_workqueue(wq);
	fflush(stdout);
	return atomic_load(&b_started) ? 0 : 1;
}
