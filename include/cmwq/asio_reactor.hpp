// cmwq/asio_reactor.hpp - Asio's reactor run by a workqueue's workers, so
// I/O completions run inline where epoll saw them (header-only, like
// <cmwq/asio.hpp>, whose executor it hands out). Define
// CMWQ_ASIO_STANDALONE before including it for standalone Asio.
//
//   cmwq::workqueue wq("net", WQ_UNBOUND);
//   cmwq::asio::reactor rx(wq);
//   tcp::acceptor acc(rx.get_executor(), endpoint);
#pragma once

#include <cmwq/asio.hpp>

#ifdef CMWQ_ASIO_STANDALONE
#include <asio/detail/scheduler.hpp>
#else
#include <boost/asio/detail/scheduler.hpp>
#endif

#include <chrono>

namespace cmwq::asio {

// Asio's reactor run by a workqueue's own workers. The executor of a
// plain basic_executor names one execution_context for every workqueue,
// whose reactor (epoll) Asio runs on a thread of its own: each I/O
// completion then hops from that thread to a worker. An executor from
// reactor::get_executor() names this context instead, whose reactor runs
// in `runners` items of the workqueue (one per CPU on a per-CPU
// workqueue, queued there); a completion is dispatched from the item that
// saw it, on the workqueue, so the handler runs inline: no hop, no wakeup,
// as io_context::run threads do. The items wait in epoll (or for another
// runner) up to 50 ms and run at most 256 handlers (or about 2 ms of
// handlers: the clock is read every fourth one) each, then queue
// themselves again, so a flush of the workqueue returns and no item
// counts as a CPU hog. Continuations deferred by a completion handler run
// in the same item, as for the executor's items.
//
// - Not on an ordered workqueue (its one item at a time would be a runner
//   waiting in epoll): std::invalid_argument.
// - Lifetime, as for io_context: I/O objects made on the executor go
//   first, then the reactor (it stops the runners and destroys the
//   handlers of operations still pending without running them), then the
//   workqueue. Not destroyed from an item of the workqueue.
// - A handler that throws: join() rethrows it, as for the executor.
class reactor : public net::execution_context {
public:
	// runners: items that run the reactor; 0: one per online CPU.
	explicit reactor(workqueue_struct *wq, int runners = 0, const char *name = "cmwq::asio")
		: st_(detail::state_ptr::make(wq, name))
	{
		unsigned flags = wq ? cmwq_workqueue_flags(wq) : 0;
		if (!wq || !flags)
			throw std::invalid_argument("cmwq::asio::reactor: no workqueue (NULL or destroyed)");
		if (flags & __WQ_ORDERED)
			throw std::invalid_argument("cmwq::asio::reactor: an ordered workqueue runs one item at a time; "
						    "use a strand over an unbound workqueue's reactor");
		st_->ctx = this;
		sched_ = &net::make_service<net::detail::scheduler>(*this, 0, false);
		sched_->work_started(); // runs never stop for want of work; ~reactor ends them
		int cpus = cmwq_num_online_cpus() > 0 ? cmwq_num_online_cpus() : 1;
		int n = runners > 0 ? runners : cpus;
		bool percpu = !(flags & WQ_UNBOUND);
		runners_.reset(new runner[static_cast<size_t>(n)]);
		live_.store(n, std::memory_order_relaxed);
		for (int i = 0; i < n; i++) {
			runner &r = runners_[static_cast<size_t>(i)];
			r.owner = this;
			r.cpu = percpu ? i % cpus : WORK_CPU_UNBOUND;
			INIT_WORK(&r.ws, &reactor::run_items);
			cmwq_set_work_name(&r.ws, name);
			if (!queue_work_on(r.cpu, wq, &r.ws))
				runner_done();
		}
	}
	explicit reactor(cmwq::workqueue &wq, int runners = 0, const char *name = "cmwq::asio")
		: reactor(wq.native(), runners, name)
	{
	}
	reactor(const reactor &) = delete;
	reactor &operator=(const reactor &) = delete;
	~reactor()
	{
		stopping_.store(true, std::memory_order_release);
		sched_->stop();
		cmwq_blocking_begin();
		for (;;) {
			std::uint32_t v = live_.load(std::memory_order_acquire);
			if (v == 0)
				break;
			cmwq_futex_wait(reinterpret_cast<const std::uint32_t *>(&live_), v);
		}
		cmwq_blocking_end();
		shutdown(); // pending operations' handlers are destroyed, not run
		destroy();
	}

	executor get_executor() const noexcept { return executor(st_.copy_for(false), std::allocator<void>(), 0); }
	// As basic_executor::join for every executor of this reactor.
	void join() const
	{
		detail::tl_chain.settle(st_.get());
		st_->join();
	}

private:
	struct runner {
		work_struct ws;
		reactor *owner;
		int cpu;
	};
	static constexpr long wait_usec = 50000; // the longest wait of one call
	static constexpr long item_usec = 2000;  // an item's share, well under the hog threshold
	static constexpr int handlers_per_item = 256;
	static constexpr int clock_every = 4; // calls of wait_one between readings of the clock when busy

	void runner_done() noexcept
	{
		live_.fetch_sub(1, std::memory_order_acq_rel);
		cmwq_futex_wake(reinterpret_cast<const std::uint32_t *>(&live_));
	}
	static void run_items(work_struct *w) noexcept
	{
		using clock = std::chrono::steady_clock;
		runner *r = cmwq_container_of(w, runner, ws);
		reactor *self = r->owner;
		detail::chain &c = detail::tl_chain;
		const clock::time_point start = clock::now();
		clock::time_point seen = start; // the clock's last reading
		for (int ran = 0, calls = 1; ran < handlers_per_item; calls++) {
			if (self->stopping_.load(std::memory_order_acquire))
				break;
			std::size_t n = 0;
			c.wq = self->st_->wq;
			c.cpu = r->cpu == WORK_CPU_UNBOUND ? -1 : r->cpu;
			try {
				error_code ec;
				n = self->sched_->wait_one(wait_usec, ec);
			} catch (...) {
				self->st_->keep(std::current_exception());
				n = 1;
			}
			detail::chain_run(c, false); // tracked counts back: join() may wait on them
			ran += static_cast<int>(n);
			// The clock is read after a wait that ran nothing, and every
			// clock_every calls: idle for most of a wait since the last
			// reading, or busy for the item's share, gives the worker back.
			if (n && calls % clock_every)
				continue;
			clock::time_point now = clock::now();
			if ((n == 0 && now - seen >= std::chrono::microseconds(wait_usec / 2)) ||
			    now - start >= std::chrono::microseconds(item_usec))
				break;
			seen = now;
		}
		c.settle(); // the references kept across the calls
		if (self->stopping_.load(std::memory_order_acquire) ||
		    !queue_work_on(r->cpu, self->st_->wq, &r->ws))
			self->runner_done();
	}

	detail::state_ptr st_;
	net::detail::scheduler *sched_ = nullptr;
	std::unique_ptr<runner[]> runners_;
	std::atomic<std::uint32_t> live_{0};
	std::atomic<bool> stopping_{false};
};

} // namespace cmwq::asio
