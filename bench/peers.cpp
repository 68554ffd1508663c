// bench/peers.cpp - the always-available peers: a naive mutex + condition
// variable pool, and the physical limits (one dedicated consumer per
// producer, sleeping on a futex on the producer's CPU or another one, or
// spinning), plus the registry of every peer.
//
// The limits hand over an item through a single-slot mailbox: the least
// any executor can do (one store, at most one futex wake). The registry
// names peers whose library was missing at build time so the run says so.
#include "executor.hpp"

#include <cstdlib>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <mutex>
#include <thread>

namespace wqb {

namespace {

class naive_pool final : public executor {
public:
	explicit naive_pool(int n)
	{
		for (int i = 0; i < n; i++)
			threads_.emplace_back([this] { worker(); });
	}
	~naive_pool() override
	{
		{
			std::lock_guard lk(lock_);
			stop_ = true;
		}
		cv_.notify_all();
		for (auto &t : threads_)
			t.join();
	}
	bool post(bench_item *it, int) override
	{
		{
			std::lock_guard lk(lock_);
			queue_.push_back(it);
		}
		cv_.notify_one();
		return true;
	}

private:
	void worker()
	{
		std::unique_lock lk(lock_);
		for (;;) {
			cv_.wait(lk, [this] { return stop_ || !queue_.empty(); });
			if (queue_.empty())
				return;
			bench_item *it = queue_.front();
			queue_.pop_front();
			lk.unlock();
			it->fn(it);
			lk.lock();
		}
	}
	std::mutex lock_;
	std::condition_variable cv_;
	std::deque<bench_item *> queue_; // L: lock_
	bool stop_ = false;              // L: lock_
	std::vector<std::thread> threads_;
};

// One consumer per producer; how it waits for the next item.
enum class consumer_wait { futex, spin };

class dedicated_consumers final : public executor {
public:
	dedicated_consumers(const peer_config &cfg, consumer_wait wait, bool same_cpu) : wait_(wait)
	{
		const auto &usable = cfg.usable;
		for (size_t p = 0; p < cfg.producer_cpus.size(); p++) {
			int cpu = cfg.producer_cpus[p];
			if (!same_cpu && usable.size() > 1) {
				auto pos = std::find(usable.begin(), usable.end(), cpu);
				size_t i = pos == usable.end() ? 0 : static_cast<size_t>(pos - usable.begin());
				cpu = usable[(i + 1) % usable.size()];
			}
			auto box = std::make_unique<mailbox>();
			box->thread = std::thread([this, b = box.get(), cpu] { consume(b, cpu); });
			boxes_.push_back(std::move(box));
		}
	}
	~dedicated_consumers() override
	{
		for (size_t p = 0; p < boxes_.size(); p++)
			post(nullptr, static_cast<int>(p));
		for (auto &b : boxes_)
			b->thread.join();
	}
	bool post(bench_item *it, int producer) override
	{
		mailbox *b = boxes_[static_cast<size_t>(producer) % boxes_.size()].get();
		b->item = it;
		if (b->state.exchange(1, std::memory_order_release) == 2)
			futex_wake(&b->state, 1);
		return true;
	}

private:
	struct alignas(64) mailbox {
		std::atomic<uint32_t> state{0}; // 0 empty, 1 item posted, 2 consumer asleep
		bench_item *item = nullptr;     // written by the producer before state = 1
		std::thread thread;
	};
	void consume(mailbox *b, int cpu)
	{
		if (!pin_self(cpu))
			std::fprintf(stderr, "wq_bench: cannot pin a consumer to CPU %d\n", cpu);
		for (;;) {
			uint32_t s = b->state.load(std::memory_order_acquire);
			while (s != 1) {
				if (wait_ == consumer_wait::spin) {
					cpu_relax();
					s = b->state.load(std::memory_order_acquire);
					continue;
				}
				if (s == 0 && !b->state.compare_exchange_weak(s, 2, std::memory_order_acquire))
					continue;
				futex_wait(&b->state, 2);
				s = b->state.load(std::memory_order_acquire);
			}
			bench_item *it = b->item;
			b->state.store(0, std::memory_order_relaxed);
			if (!it)
				return;
			it->fn(it);
		}
	}
	consumer_wait wait_;
	std::vector<std::unique_ptr<mailbox>> boxes_;
};

} // namespace

std::unique_ptr<executor> make_naive(const peer_config &cfg)
{
	return std::make_unique<naive_pool>(cfg.pool_threads);
}

std::unique_ptr<executor> make_futex_same_cpu(const peer_config &cfg)
{
	return std::make_unique<dedicated_consumers>(cfg, consumer_wait::futex, true);
}

std::unique_ptr<executor> make_futex_other_cpu(const peer_config &cfg)
{
	return std::make_unique<dedicated_consumers>(cfg, consumer_wait::futex, false);
}

std::unique_ptr<executor> make_spin(const peer_config &cfg)
{
	return std::make_unique<dedicated_consumers>(cfg, consumer_wait::spin, false);
}

namespace {
// Default sizes: oneTBB's arena and a GLib pool sized as its documentation's
// examples do (g_get_num_processors) take one thread per CPU; Boost.Asio's
// thread_pool() takes 2 per CPU; libuv's pool is UV_THREADPOOL_SIZE, 4
// unless set.
int one_per_cpu(int cpus) { return cpus; }
int two_per_cpu(int cpus) { return 2 * cpus; }
int libuv_size(int)
{
	const char *e = getenv("UV_THREADPOOL_SIZE");
	int n = e ? atoi(e) : 0;
	return n > 0 ? n : 4;
}
} // namespace

std::vector<peer_desc> available_peers()
{
	std::vector<peer_desc> v;
#ifdef WQB_HAVE_TBB
	v.push_back({"tbb", "oneTBB task_arena::enqueue", false, make_tbb, one_per_cpu});
#endif
#ifdef WQB_HAVE_ASIO
	v.push_back({"asio", "Boost.Asio thread_pool+post", false, make_asio, two_per_cpu});
#endif
#ifdef WQB_HAVE_LIBUV
	v.push_back({"libuv", "libuv uv_queue_work", false, make_libuv, libuv_size, false});
#endif
#ifdef WQB_HAVE_GLIB
	v.push_back({"glib", "GLib GThreadPool", false, make_glib, one_per_cpu});
#endif
	v.push_back({"naive", "naive mutex+condvar pool", false, make_naive, one_per_cpu});
	v.push_back({"futex_same_cpu", "limit: futex consumer, same CPU", true, make_futex_same_cpu});
	v.push_back({"futex_other_cpu", "limit: futex consumer, other CPU", true, make_futex_other_cpu});
	v.push_back({"spin", "limit: spinning consumer, other CPU", true, make_spin});
	return v;
}

std::vector<std::pair<std::string, std::string>> skipped_peers()
{
	std::vector<std::pair<std::string, std::string>> v;
#ifndef WQB_HAVE_TBB
	v.emplace_back("tbb", "oneTBB (libtbb-dev) was not found when wq_bench was built");
#endif
#ifndef WQB_HAVE_ASIO
	v.emplace_back("asio", "Boost.Asio (libboost-dev) was not found when wq_bench was built");
#endif
#ifndef WQB_HAVE_LIBUV
	v.emplace_back("libuv", "libuv (libuv1-dev) was not found when wq_bench was built");
#endif
#ifndef WQB_HAVE_GLIB
	v.emplace_back("glib", "GLib (libglib2.0-dev) was not found when wq_bench was built");
#endif
	return v;
}

} // namespace wqb
