// bench/cmwq_executor.hpp - cmwq as a wq_bench executor: the item's
// embedded work_struct is queued with queue_work(), so the queue path
// allocates nothing, as for any embedded kernel work item.
//
// Only the public API is used (the style guide keeps benchmarks outside the
// library); helpers here create the workqueues the protocols need and read
// worker counts back from cmwq::snapshot().
#pragma once

#include <string>

#include <cmwq/introspect.hpp>
#include <cmwq/linux/workqueue.h>
#include <cmwq/params.h>
#include <cmwq/topology.hpp>

#include "executor.hpp"

namespace wqb {

class cmwq_executor final : public executor {
public:
	explicit cmwq_executor(workqueue_struct *wq) : wq_(wq) {}
	void prepare(bench_item *it) override { INIT_WORK(&it->work, &cmwq_executor::trampoline); }
	bool post(bench_item *it, int) override { return queue_work(wq_, &it->work); }

private:
	static void trampoline(work_struct *w)
	{
		auto *it = container_of(w, bench_item, work);
		it->fn(it);
	}
	workqueue_struct *wq_;
};

// An unbound workqueue with the given scope (dfl: the global default);
// nullptr with `err` set on failure.
workqueue_struct *make_unbound_wq(const char *name, int max_active, cmwq::affinity_scope scope,
				  std::string &err);
// Worker threads of the pools that serve the workqueue called `name`
// (cmwq::snapshot()); -1 when it is not found.
int pool_workers(const std::string &name);
// Pods of the cache_shard scope in the library's current topology.
int cache_shard_pods();
// cmwq_param_set with an error line on failure; true on success.
bool set_param(const char *name, const std::string &value, std::string &err);
std::string get_param(const char *name);

} // namespace wqb
