// bench/peer_glib.cpp - GLib peer: a shared (non-exclusive) GThreadPool of
// at most N threads, items pushed as the task data pointer.
//
// Non-exclusive is GLib's common use; an exclusive pool would pin N threads
// up front and was rejected as the less typical configuration.
#include "executor.hpp"

#include <cstdio>

#include <glib.h>

namespace wqb {

namespace {
class glib_peer final : public executor {
public:
	explicit glib_peer(int n)
	{
		GError *err = nullptr;
		pool_ = g_thread_pool_new(&glib_peer::run, nullptr, n, FALSE, &err);
		if (!pool_) {
			std::fprintf(stderr, "wq_bench: g_thread_pool_new: %s\n",
				     err ? err->message : "failed");
			if (err)
				g_error_free(err);
		}
	}
	~glib_peer() override
	{
		if (pool_)
			g_thread_pool_free(pool_, FALSE, TRUE);
	}
	bool post(bench_item *it, int) override
	{
		return pool_ && g_thread_pool_push(pool_, it, nullptr);
	}

private:
	static void run(gpointer data, gpointer)
	{
		auto *it = static_cast<bench_item *>(data);
		it->fn(it);
	}
	GThreadPool *pool_ = nullptr;
};
} // namespace

std::unique_ptr<executor> make_glib(const peer_config &cfg)
{
	return std::make_unique<glib_peer>(cfg.pool_threads);
}

} // namespace wqb
