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

} // namespace cmwq::detail
