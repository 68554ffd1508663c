/* Switched from the program's own timer shim to cmwq. */
#include <cmwq/linux/timer.h>
