/* Switched from the program's own workqueue shim to cmwq. */
#include <cmwq/linux/workqueue.h>
