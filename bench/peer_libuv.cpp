// bench/peer_libuv.cpp - libuv peer: uv_queue_work() issued on a loop
// thread, as libuv requires; producers hand items to the loop through a
// locked vector and uv_async_send().
//
// The work runs on libuv's global thread pool (UV_THREADPOOL_SIZE, default
// 4, shared by every loop of the process); each request is a heap-allocated
// uv_work_t freed in the after-work callback, as libuv users write it.
#include "executor.hpp"

#include <mutex>
#include <thread>
#include <vector>

#include <uv.h>

namespace wqb {

namespace {
class libuv_peer final : public executor {
public:
	libuv_peer()
	{
		uv_loop_init(&loop_);
		async_.data = this;
		uv_async_init(&loop_, &async_, &libuv_peer::on_async);
		thread_ = std::thread([this] { uv_run(&loop_, UV_RUN_DEFAULT); });
	}
	~libuv_peer() override
	{
		{
			std::lock_guard lk(lock_);
			stop_ = true;
		}
		uv_async_send(&async_);
		thread_.join();
		uv_loop_close(&loop_);
	}
	bool post(bench_item *it, int) override
	{
		{
			std::lock_guard lk(lock_);
			pending_.push_back(it);
		}
		return uv_async_send(&async_) == 0;
	}

private:
	static void on_async(uv_async_t *h)
	{
		auto *self = static_cast<libuv_peer *>(h->data);
		bool stop;
		{
			std::lock_guard lk(self->lock_);
			self->batch_.swap(self->pending_);
			stop = self->stop_;
		}
		for (bench_item *it : self->batch_) {
			auto *req = new uv_work_t;
			req->data = it;
			uv_queue_work(&self->loop_, req, &libuv_peer::work, &libuv_peer::after_work);
		}
		self->batch_.clear();
		if (stop)
			uv_close(reinterpret_cast<uv_handle_t *>(&self->async_), nullptr);
	}
	static void work(uv_work_t *req)
	{
		auto *it = static_cast<bench_item *>(req->data);
		it->fn(it);
	}
	static void after_work(uv_work_t *req, int) { delete req; }

	uv_loop_t loop_;
	uv_async_t async_;
	std::thread thread_;
	std::mutex lock_;
	std::vector<bench_item *> pending_; // L: lock_
	std::vector<bench_item *> batch_;   // K: loop thread
	bool stop_ = false;                 // L: lock_
};
} // namespace

std::unique_ptr<executor> make_libuv(const peer_config &)
{
	return std::make_unique<libuv_peer>();
}

} // namespace wqb
