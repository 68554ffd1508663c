// Fan-out with results: checksum 8 shards in parallel, one of which fails.
// Each task carries its value or its exception to get(). Exits 0 when
// exactly the missing shard failed.
//
//   c++ -std=c++20 cxx_fanout.cpp $(pkg-config --cflags --libs cmwq)
#include <cmwq/workqueue.hpp>

#include <cstdio>
#include <stdexcept>
#include <vector>

static long checksum(int shard)
{
	if (shard == 5)
		throw std::runtime_error("shard 5: no such file");
	long sum = 0;
	for (int i = 0; i < 100000; i++)
		sum += (i * 31 + shard) % 7;
	return sum;
}

int main()
{
	cmwq::workqueue wq("fanout", WQ_UNBOUND);
	std::vector<cmwq::task<long>> parts;
	for (int s = 0; s < 8; s++)
		parts.push_back(cmwq::submit(wq, "checksum", [s] { return checksum(s); }));
	long total = 0;
	int failed = 0;
	for (int s = 0; s < 8; s++) {
		try {
			total += parts[s].get();
		} catch (const std::exception &e) {
			std::printf("shard %d failed: %s\n", s, e.what());
			failed++;
		}
	}
	std::printf("cxx_fanout: total %ld, %d failed\n", total, failed);
	return failed == 1 ? 0 : 1;
}
