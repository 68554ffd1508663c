// bench/cmwq_executor.cpp - workqueue creation, scope switching and worker
// counts for wq_bench, through cmwq's public API only.
//
// Scopes are switched as the kernel benchmark does, with
// alloc_workqueue_attrs() + affn_scope + apply_workqueue_attrs() on an
// unbound workqueue, rather than by changing the global default scope,
// which would re-pod every workqueue of the process.
#include "cmwq_executor.hpp"

#include <cerrno>
#include <cstring>
#include <set>

namespace wqb {

namespace {
wq_affn_scope to_affn(cmwq::affinity_scope s)
{
	switch (s) {
	case cmwq::affinity_scope::dfl: return WQ_AFFN_DFL;
	case cmwq::affinity_scope::cpu: return WQ_AFFN_CPU;
	case cmwq::affinity_scope::smt: return WQ_AFFN_SMT;
	case cmwq::affinity_scope::cache: return WQ_AFFN_CACHE;
	case cmwq::affinity_scope::cache_shard: return WQ_AFFN_CACHE_SHARD;
	case cmwq::affinity_scope::numa: return WQ_AFFN_NUMA;
	case cmwq::affinity_scope::system: return WQ_AFFN_SYSTEM;
	}
	return WQ_AFFN_DFL;
}
} // namespace

workqueue_struct *make_unbound_wq(const char *name, int max_active, cmwq::affinity_scope scope,
				  std::string &err)
{
	workqueue_struct *wq = alloc_workqueue("%s", WQ_UNBOUND, max_active, name);
	if (!wq) {
		err = std::string("alloc_workqueue(") + name + ", WQ_UNBOUND) failed";
		return nullptr;
	}
	if (scope == cmwq::affinity_scope::dfl)
		return wq;
	workqueue_attrs *attrs = alloc_workqueue_attrs();
	if (!attrs) {
		destroy_workqueue(wq);
		err = "alloc_workqueue_attrs failed";
		return nullptr;
	}
	attrs->affn_scope = to_affn(scope);
	int rc = apply_workqueue_attrs(wq, attrs);
	free_workqueue_attrs(attrs);
	if (rc != 0) {
		destroy_workqueue(wq);
		err = std::string("apply_workqueue_attrs(affn_scope=") + cmwq::scope_name(scope) +
		      ") failed: " + std::strerror(-rc);
		return nullptr;
	}
	return wq;
}

int pool_workers(const std::string &name)
{
	cmwq::system_info si = cmwq::snapshot();
	for (const auto &wq : si.workqueues) {
		if (wq.name != name)
			continue;
		std::set<int> ids(wq.cpu_pool.begin(), wq.cpu_pool.end());
		if (wq.dfl_pool >= 0)
			ids.insert(wq.dfl_pool);
		int n = 0;
		for (const auto &p : si.pools)
			if (ids.count(p.id))
				n += p.nr_workers;
		return n;
	}
	return -1;
}

int cache_shard_pods()
{
	return cmwq::current_topology().scope(cmwq::affinity_scope::cache_shard).nr_pods();
}

bool set_param(const char *name, const std::string &value, std::string &err)
{
	int rc = cmwq_param_set(name, value.c_str());
	if (rc == 0)
		return true;
	err = std::string("cmwq_param_set(") + name + ", " + value + "): " +
	      (rc == -ENOENT  ? "no such parameter in this build of cmwq"
	       : rc == -EPERM ? "read-only now"
	       : rc == -EINVAL ? "value refused"
			       : std::strerror(-rc));
	return false;
}

std::string get_param(const char *name)
{
	char buf[256];
	if (cmwq_param_get(name, buf, sizeof(buf)) != 0)
		return {};
	return buf;
}

} // namespace wqb
