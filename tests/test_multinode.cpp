// test_multinode.cpp - the unbound max_active split over NUMA nodes, on the
// engine started over the two-nodes-16 snapshot (CMWQ_SYSFS_ROOT, set by
// tests/CMakeLists.txt for this program): two nodes of 8 CPUs each and a
// memory-only third. Each
// node's share is max_active in proportion to its CPUs, but never below
// min_active (the kernel's floor), and items queued on either node run.
#include <gtest/gtest.h>

#include <cmwq/introspect.hpp>
#include <cmwq/linux/workqueue.h>
#include <cmwq/topology.hpp>

#include "test_util.hpp"

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

const cmwq::workqueue_info *find(const cmwq::system_info &si, const std::string &name)
{
	for (const auto &w : si.workqueues)
		if (w.name == name)
			return &w;
	return nullptr;
}

std::atomic<int> node_runs{0};
void node_fn(work_struct *) { node_runs++; }

} // namespace

TEST(multinode, engine_runs_over_the_two_node_snapshot)
{
	const char *root = std::getenv("CMWQ_SYSFS_ROOT");
	ASSERT_NE(root, nullptr);
	auto topo = cmwq::current_topology();
	ASSERT_EQ(topo.nr_nodes, 3); // node 2 has memory and no CPUs
	ASSERT_EQ(topo.usable.size(), 16u);
}

// Bug caught: the min_active floor removed (a node's share could drop below
// min_active, here 2 instead of 4).
TEST(multinode, node_shares_follow_cpus_with_the_min_active_floor)
{
	struct want {
		int max_active, node0, node1, node2;
	};
	// share = ceil(max * 8 / 16), then clamped to [min_active, max_active];
	// min_active = min(max_active, WQ_DFL_MIN_ACTIVE = 8); node 2 has no
	// CPUs and gets the floor.
	for (want w : {want{4, 4, 4, 4}, want{32, 16, 16, 8}, want{1, 1, 1, 1}, want{12, 8, 8, 8}}) {
		std::string name = "t_nodes" + std::to_string(w.max_active);
		workqueue_struct *wq = alloc_workqueue("%s", WQ_UNBOUND, w.max_active, name.c_str());
		ASSERT_NE(wq, nullptr);
		auto si = cmwq::snapshot();
		const auto *wi = find(si, name);
		ASSERT_NE(wi, nullptr);
		ASSERT_EQ(wi->node_max.size(), 4u) << "three nodes plus the slot of pools that span nodes";
		EXPECT_EQ(wi->node_max[0], w.node0) << "max_active " << w.max_active;
		EXPECT_EQ(wi->node_max[1], w.node1) << "max_active " << w.max_active;
		EXPECT_EQ(wi->node_max[2], w.node2) << "max_active " << w.max_active;
		EXPECT_EQ(wi->node_max[3], w.max_active);
		destroy_workqueue(wq);
	}
}

// Bug caught: a node's items not activated when another node's slot frees.
TEST(multinode, items_queued_on_both_nodes_all_run_within_the_limits)
{
	workqueue_struct *wq = alloc_workqueue("t_nodes_run", WQ_UNBOUND, 2);
	ASSERT_NE(wq, nullptr);
	workqueue_attrs *a = alloc_workqueue_attrs();
	a->affn_scope = WQ_AFFN_NUMA;
	ASSERT_EQ(apply_workqueue_attrs(wq, a), 0);
	free_workqueue_attrs(a);
	std::vector<work_struct> ws(64);
	auto topo = cmwq::current_topology();
	for (size_t i = 0; i < ws.size(); i++) {
		INIT_WORK(&ws[i], node_fn);
		// Alternate the nodes' first CPUs (the pwq follows the CPU asked for).
		int cpu = topo.usable[(i % 2) ? topo.usable.size() - 1 : 0];
		ASSERT_TRUE(queue_work_on(cpu, wq, &ws[i]));
	}
	flush_workqueue(wq);
	EXPECT_EQ(node_runs.load(), 64);
	destroy_workqueue(wq);
}
