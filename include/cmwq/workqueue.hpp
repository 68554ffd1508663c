// cmwq/workqueue.hpp - the C++ API: RAII workqueues and named work items
// (<cmwq/work.hpp>), tasks with results and exceptions, and coroutines
// (<cmwq/task.hpp>). Include this, or the one of the two you use.
#pragma once

#include <cmwq/work.hpp>
#include <cmwq/task.hpp>
