// bench/executor.hpp - what wq_bench runs its protocols on: cmwq or a peer.
//
// One small virtual interface (post an intrusive item, it runs once on some
// thread) so every protocol is written once and measures cmwq and each peer
// with the same code; the virtual call costs ~1 ns against queue calls of
// hundreds. Peers that need a heap node per task (libuv, oneTBB, Asio)
// allocate it as their users would.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "harness.hpp"

namespace wqb {

class executor {
public:
	virtual ~executor() = default;
	// Called once per item before its first post (cmwq: INIT_WORK).
	virtual void prepare(bench_item *) {}
	// Runs it->fn(it) once on one of the executor's threads. `producer` is
	// the index of the calling producer thread. false: refused (counted as
	// a failure by the protocol).
	virtual bool post(bench_item *it, int producer) = 0;
};

struct peer_config {
	int pool_threads = 1;            // threads for pools that take a size
	std::vector<int> usable;         // usable CPUs, ascending
	std::vector<int> producer_cpus;  // CPU of each producer (kernel protocol)
};

struct peer_desc {
	const char *name;        // --peers name
	const char *label;       // what the table prints
	bool limit;              // a physical-limit reference (kernel protocol only)
	std::unique_ptr<executor> (*make)(const peer_config &);
	// The pool size a user gets by default for this many CPUs (what the
	// peer's documentation gives), or null for the limits (one consumer).
	int (*default_threads)(int cpus) = nullptr;
	// Whether the size can be chosen per pool in one process (libuv's is
	// read once from UV_THREADPOOL_SIZE).
	bool sizable = true;
};

// Peers compiled into this binary, in table order.
std::vector<peer_desc> available_peers();
// Peers left out at build time: {name, reason}.
std::vector<std::pair<std::string, std::string>> skipped_peers();

// Constructors, each in its own file (compiled only when its library is found).
std::unique_ptr<executor> make_naive(const peer_config &);
std::unique_ptr<executor> make_futex_same_cpu(const peer_config &);
std::unique_ptr<executor> make_futex_other_cpu(const peer_config &);
std::unique_ptr<executor> make_spin(const peer_config &);
std::unique_ptr<executor> make_tbb(const peer_config &);
std::unique_ptr<executor> make_asio(const peer_config &);
std::unique_ptr<executor> make_libuv(const peer_config &);
std::unique_ptr<executor> make_glib(const peer_config &);

} // namespace wqb
