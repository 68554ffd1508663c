// sync.h - the engine's locks and the clang thread-safety vocabulary: the
// annotation macros, pool_mutex (pool->lock), mutex (the other engine
// locks), the futex calls, cond_var and the scoped holders the analysis
// follows; and WQ_WARN_ON_ONCE, the kernel's sanity-check warning. Apart
// from the data model (internal.h) so the locks read as one piece, as the
// kernel keeps its spinlock and lockdep headers apart from workqueue.c.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>

// Clang thread-safety annotations (-Wthread-safety); empty elsewhere.
#if defined(__clang__)
#define CMWQ_TSA(x) __attribute__((x))
#else
#define CMWQ_TSA(x)
#endif
#define CAPABILITY(x) CMWQ_TSA(capability(x))
#define SCOPED_CAPABILITY CMWQ_TSA(scoped_lockable)
#define GUARDED_BY(x) CMWQ_TSA(guarded_by(x))
#define PT_GUARDED_BY(x) CMWQ_TSA(pt_guarded_by(x))
#define REQUIRES(...) CMWQ_TSA(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) CMWQ_TSA(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) CMWQ_TSA(acquire_capability(__VA_ARGS__))
#define RELEASE(...) CMWQ_TSA(release_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) CMWQ_TSA(try_acquire_capability(__VA_ARGS__))
#define ASSERT_CAPABILITY(x) CMWQ_TSA(assert_capability(x))
#define NO_THREAD_SAFETY_ANALYSIS CMWQ_TSA(no_thread_safety_analysis)

namespace cmwq::detail {

// Context: any. The first time it is reached from a call site: one message
// through the log handler naming the function, the condition and the site
// (cmwq.panic_on_warn=1 then aborts, as the kernel's panic_on_warn). Always
// returns true, so WQ_WARN_ON_ONCE can be tested as the kernel's is.
bool warn_on_once(const char *func, const char *cond, const char *file, int line);

// The kernel's WARN_ON_ONCE(cond): cond is evaluated once; when it is true
// a message is printed the first time (per site) and the value is true.
// Enabled in every build: the checks are a load and a branch.
#define WQ_WARN_ON_ONCE(cond)                                                                     \
	(__builtin_expect(!!(cond), 0) ? ::cmwq::detail::warn_on_once(__func__, #cond, __FILE__, __LINE__) \
				       : false)

// pool->lock: held for a few hundred nanoseconds at a time by queuers and
// workers on several CPUs (the kernel's is a spinlock). A futex word with
// three states (free, held, held with sleepers): taking a free lock is one
// compare-and-swap and releasing an uncontended one one exchange, both
// inline; a waiter spins briefly for a hold that ends a moment later before
// it sleeps in the kernel. Acquire and release orders make it a lock for
// ThreadSanitizer too.
class CAPABILITY("mutex") pool_mutex {
public:
	pool_mutex() = default;
	pool_mutex(const pool_mutex &) = delete;
	pool_mutex &operator=(const pool_mutex &) = delete;
	void lock() ACQUIRE()
	{
		int c = 0;
		if (!state_.compare_exchange_strong(c, 1, std::memory_order_acquire, std::memory_order_relaxed))
			[[unlikely]] lock_contended();
	}
	bool try_lock() TRY_ACQUIRE(true)
	{
		int c = 0;
		return state_.compare_exchange_strong(c, 1, std::memory_order_acquire, std::memory_order_relaxed);
	}
	void unlock() RELEASE()
	{
		if (state_.exchange(0, std::memory_order_release) == 2) [[unlikely]]
			wake_one();
	}
	// The kernel's lockdep_assert_held: tells the analysis the lock is held
	// and checks at run time that it is held (by some thread: no owner is
	// recorded, so taking it stays one compare-and-swap), with a one-time
	// WARN naming the caller when it is not. One relaxed load.
	void assert_held(const char *func = __builtin_FUNCTION()) const ASSERT_CAPABILITY(this)
	{
		if (state_.load(std::memory_order_relaxed) == 0) [[unlikely]]
			warn_on_once(func, "!pool_mutex::held()", __FILE__, __LINE__);
	}

private:
	void lock_contended() __attribute__((visibility("hidden"))); // sys.cpp
	void wake_one() __attribute__((visibility("hidden")));
	std::atomic<int> state_{0}; // 0 free, 1 held, 2 held and someone may sleep
};

// The other engine locks (G, W, N, F, the mayday and timer locks): a
// mutex the analysis knows as a capability.
class CAPABILITY("mutex") mutex {
public:
	void lock() ACQUIRE() { m_.lock(); }
	bool try_lock() TRY_ACQUIRE(true) { return m_.try_lock(); }
	void unlock() RELEASE() { m_.unlock(); }

private:
	std::mutex m_;
};

// Context: no lock; may sleep. Waits while *a == val (spurious returns
// allowed); futex_wait_for gives up after ns nanoseconds.
void futex_wait(std::atomic<int> *a, int val);
void futex_wait_for(std::atomic<int> *a, int val, uint64_t ns);
// Context: any. Wakes up to n waiters of a.
void futex_wake(std::atomic<int> *a, int n);

// A condition variable for the engine's own threads and waits: a sequence
// word that every notify advances and waiters sleep on. It keeps no record
// of who waits beyond a count that only saves a notify's system call, so a
// fork child inherits nothing it could wait on. (A glibc condition variable
// records its waiters' groups: in a child whose parent had a thread waiting
// on it, the first notify could wait forever for that thread to leave.)
// Waiters hold lk (any lock with lock and unlock) when they call wait and
// again when it returns; wakeups may be spurious.
class cond_var {
public:
	// The lock is dropped and retaken inside, as a condition variable's
	// wait does: the analysis sees it held throughout.
	template <class L>
	void wait(L &lk) NO_THREAD_SAFETY_ANALYSIS
	{
		int s = begin_wait();
		lk.unlock();
		futex_wait(&seq_, s);
		lk.lock();
		waiters_.fetch_sub(1, std::memory_order_relaxed);
	}
	template <class L, class P>
	void wait(L &lk, P ready) NO_THREAD_SAFETY_ANALYSIS
	{
		while (!ready())
			wait(lk);
	}
	template <class L, class R, class Per>
	void wait_for(L &lk, std::chrono::duration<R, Per> d) NO_THREAD_SAFETY_ANALYSIS
	{
		auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
		int s = begin_wait();
		lk.unlock();
		futex_wait_for(&seq_, s, ns > 0 ? static_cast<uint64_t>(ns) : 0);
		lk.lock();
		waiters_.fetch_sub(1, std::memory_order_relaxed);
	}
	void notify_one() { notify(1); }
	void notify_all() { notify(INT32_MAX); }

private:
	// The count goes up before the sequence is read and the notifier reads
	// it after advancing the sequence (both sequentially consistent): a
	// notifier that sees no waiter advanced the sequence before any later
	// waiter read it, so that waiter's futex wait returns at once.
	int begin_wait()
	{
		waiters_.fetch_add(1, std::memory_order_seq_cst);
		return seq_.load(std::memory_order_seq_cst);
	}
	void notify(int n)
	{
		seq_.fetch_add(1, std::memory_order_seq_cst);
		if (waiters_.load(std::memory_order_seq_cst) > 0)
			futex_wake(&seq_, n);
	}
	std::atomic<int> seq_{0};
	std::atomic<int> waiters_{0};
};

// Scoped holders the analysis follows (lock_guard and std::unique_lock
// carry no annotations). unique_lock may be dropped and retaken; waits on a
// cond_var use it as their lock.
template <class M>
class SCOPED_CAPABILITY lock_guard {
public:
	explicit lock_guard(M &m) ACQUIRE(m) : m_(m) { m_.lock(); }
	~lock_guard() RELEASE() { m_.unlock(); }
	lock_guard(const lock_guard &) = delete;
	lock_guard &operator=(const lock_guard &) = delete;

private:
	M &m_;
};

template <class M>
class SCOPED_CAPABILITY unique_lock {
public:
	explicit unique_lock(M &m) ACQUIRE(m) : m_(m) { m_.lock(); }
	~unique_lock() RELEASE()
	{
		if (owns_)
			m_.unlock();
	}
	unique_lock(const unique_lock &) = delete;
	unique_lock &operator=(const unique_lock &) = delete;
	void lock() ACQUIRE()
	{
		m_.lock();
		owns_ = true;
	}
	void unlock() RELEASE()
	{
		owns_ = false;
		m_.unlock();
	}

private:
	M &m_;
	bool owns_ = true;
};

} // namespace cmwq::detail
