// bench/peer_tbb.cpp - oneTBB peer: a task_arena of N worker slots (none
// reserved for external threads) fed by task_arena::enqueue.
//
// global_control lifts TBB's default of (CPUs - 1) workers so the arena
// really gets N workers; otherwise a 2-CPU machine would measure one.
#include "executor.hpp"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>

namespace wqb {

namespace {
class tbb_peer final : public executor {
public:
	explicit tbb_peer(int n)
		: control_(tbb::global_control::max_allowed_parallelism,
			   static_cast<size_t>(n) + 1),
		  arena_(n, 0)
	{
		arena_.initialize();
	}
	bool post(bench_item *it, int) override
	{
		arena_.enqueue([it] { it->fn(it); });
		return true;
	}

private:
	tbb::global_control control_;
	tbb::task_arena arena_;
};
} // namespace

std::unique_ptr<executor> make_tbb(const peer_config &cfg)
{
	return std::make_unique<tbb_peer>(cfg.pool_threads);
}

} // namespace wqb
