// arch.h - the only architecture-specific code of the library: the spin
// hint a waiting loop issues. x86-64 and aarch64 have their own branches;
// anything else gets a portable fallback (a compiler barrier). Everything
// else is C++ atomics and POSIX.
#pragma once

namespace cmwq::detail {

// One round of a busy-wait: lets the sibling hardware thread run and saves
// power while a value is polled. x86: PAUSE; arm64: YIELD (what the kernel's
// cpu_relax() issues on both).
inline void cpu_relax()
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

// A free-running counter for short intervals: x86's time-stamp counter,
// arm64's virtual counter; 0 where there is none (then the engine reads
// the clock instead). Neither read orders the instructions around it, which
// is fine for timing a work item within a microsecond.
inline unsigned long long cycle_counter()
{
#if defined(__x86_64__) || defined(__i386__)
	return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
	unsigned long long v;
	__asm__ __volatile__("mrs %0, cntvct_el0" : "=r"(v));
	return v;
#else
	return 0;
#endif
}

} // namespace cmwq::detail
