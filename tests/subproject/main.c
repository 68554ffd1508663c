#include <cmwq/linux/workqueue.h>
#include <cmwq/version.h>

#include <stdio.h>

static int ran;
static void fn(struct work_struct *w)
{
	(void)w;
	ran = 1;
}

int main(void)
{
	struct work_struct w;
	INIT_WORK(&w, fn);
	queue_work(system_wq, &w);
	flush_work(&w);
	printf("cmwq %s: %s\n", cmwq_version(), ran ? "ran" : "did not run");
	return ran ? 0 : 1;
}
