// bench/peer_asio.cpp - Boost.Asio peer: boost::asio::thread_pool of N
// threads, items handed over with boost::asio::post.
//
// Header-only Asio; the pool's destructor joins after the protocol has
// already waited for every item, so nothing is abandoned.
#include "executor.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>

namespace wqb {

namespace {
class asio_peer final : public executor {
public:
	explicit asio_peer(int n) : pool_(static_cast<std::size_t>(n)) {}
	~asio_peer() override { pool_.join(); }
	bool post(bench_item *it, int) override
	{
		boost::asio::post(pool_, [it] { it->fn(it); });
		return true;
	}

private:
	boost::asio::thread_pool pool_;
};
} // namespace

std::unique_ptr<executor> make_asio(const peer_config &cfg)
{
	return std::make_unique<asio_peer>(cfg.pool_threads);
}

} // namespace wqb
