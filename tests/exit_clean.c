/*
 * exit_clean.c - a C program that returns from main with idle workers,
 * items still queued and running, and armed delayed work. It must exit with
 * status 0 promptly: no crash, no hang, no sanitizer report.
 */
#include <cmwq/linux/delay.h>
#include <cmwq/linux/workqueue.h>

#include <stdio.h>

static void slow_fn(struct work_struct *w)
{
	(void)w;
	msleep(20);
}

static void quick_fn(struct work_struct *w) { (void)w; }

static struct work_struct items[64];
static DECLARE_DELAYED_WORK(later, quick_fn);

int main(void)
{
	struct workqueue_struct *wq = alloc_workqueue("exit_clean", WQ_UNBOUND, 4);
	if (!wq)
		return 1;
	DECLARE_WORK(idle_maker, quick_fn);
	queue_work(system_percpu_wq, &idle_maker);
	flush_work(&idle_maker); /* leaves idle workers behind */
	for (int i = 0; i < 64; i++) {
		INIT_WORK(&items[i], i % 2 ? slow_fn : quick_fn);
		queue_work(wq, &items[i]);
	}
	queue_delayed_work(system_dfl_wq, &later, 60000);
	printf("returning from main with work queued\n");
	return 0;
}
