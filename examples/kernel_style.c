/*
 * kernel_style.c - kernel workqueue code, unchanged, in a C11 program.
 *
 * A driver-shaped example: work items embedded in the objects they process
 * (recovered with container_of), a self-rearming delayed work that polls,
 * flush_workqueue as the barrier, cancel_delayed_work_sync to stop the
 * poller for good. Nothing here is cmwq-specific except the include paths.
 *
 *   cc -std=c11 -Wall -Wextra -Werror kernel_style.c $(pkg-config --cflags --libs cmwq)
 */
#include <stdatomic.h>
#include <stdio.h>

#include <cmwq/linux/delay.h>
#include <cmwq/linux/workqueue.h>

#define NR_REQUESTS 64

struct request {
	struct work_struct work;
	int id;
	long result;
};

static atomic_int nr_done;

static void request_fn(struct work_struct *work)
{
	struct request *rq = container_of(work, struct request, work);
	long sum = 0;

	for (int i = 0; i <= rq->id; i++)
		sum += i;
	rq->result = sum;
	atomic_fetch_add_explicit(&nr_done, 1, memory_order_relaxed);
}

struct poller {
	struct delayed_work dwork;
	struct workqueue_struct *wq;
	atomic_int ticks;
};

/* Re-arms itself every 2 ms until cancel_delayed_work_sync() stops it. */
static void poll_fn(struct work_struct *work)
{
	struct poller *p = container_of(to_delayed_work(work), struct poller, dwork);

	atomic_fetch_add_explicit(&p->ticks, 1, memory_order_relaxed);
	queue_delayed_work(p->wq, &p->dwork, msecs_to_jiffies(2));
}

int main(void)
{
	static struct request requests[NR_REQUESTS];
	static struct poller poller;
	struct workqueue_struct *wq;
	int bad = 0;

	wq = alloc_workqueue("kernel_style", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	if (!wq) {
		fprintf(stderr, "kernel_style: alloc_workqueue failed\n");
		return 1;
	}

	/* Fan out, then wait for everything queued so far. */
	for (int i = 0; i < NR_REQUESTS; i++) {
		requests[i].id = i;
		INIT_WORK(&requests[i].work, request_fn);
		if (!queue_work(wq, &requests[i].work))
			bad++; /* a freshly initialised item is never pending */
	}
	flush_workqueue(wq);
	for (int i = 0; i < NR_REQUESTS; i++)
		if (requests[i].result != (long)i * (i + 1) / 2)
			bad++;
	printf("kernel_style: %d requests done\n", atomic_load(&nr_done));

	/* A poller that re-arms itself; cancel_delayed_work_sync stops it. */
	poller.wq = wq;
	INIT_DELAYED_WORK(&poller.dwork, poll_fn);
	queue_delayed_work(wq, &poller.dwork, msecs_to_jiffies(2));
	msleep(30);
	cancel_delayed_work_sync(&poller.dwork);
	int ticks = atomic_load(&poller.ticks);
	msleep(10);
	if (atomic_load(&poller.ticks) != ticks || delayed_work_pending(&poller.dwork))
		bad++; /* it ran or was re-armed after cancel_delayed_work_sync */
	printf("kernel_style: poller ticked %d times, then stopped\n", ticks);

	destroy_workqueue(wq);
	if (bad || atomic_load(&nr_done) != NR_REQUESTS) {
		fprintf(stderr, "kernel_style: %d unexpected results\n", bad);
		return 1;
	}
	return 0;
}
