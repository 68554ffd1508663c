/*
 * cmwq/export.h - what the shared library exports.
 *
 * The library is built with hidden visibility: only what the public headers
 * declare between CMWQ_BEGIN_PUBLIC and CMWQ_END_PUBLIC (every public
 * header wraps its declarations in them) is exported; the engine's
 * internals are not part of the ABI. CMWQ_API marks a single declaration.
 */
#ifndef CMWQ_EXPORT_H
#define CMWQ_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define CMWQ_API __attribute__((visibility("default")))
#define CMWQ_BEGIN_PUBLIC _Pragma("GCC visibility push(default)")
#define CMWQ_END_PUBLIC _Pragma("GCC visibility pop")
#else
#define CMWQ_API
#define CMWQ_BEGIN_PUBLIC
#define CMWQ_END_PUBLIC
#endif

#endif
