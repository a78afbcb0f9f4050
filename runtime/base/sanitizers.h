/*
 * sanitizers.h - which sanitizer this translation unit is built with, asked one way for
 * GCC (__SANITIZE_THREAD__, __SANITIZE_ADDRESS__) and Clang (__has_feature): GR_TSAN and
 * GR_ASAN are defined (to 1) when ThreadSanitizer or AddressSanitizer is on, else not. For
 * the code that talks to a sanitizer (sync.h's annotations, the host pool's poisoning) and
 * the tests that must know one is there.
 */
#ifndef GR_SANITIZERS_H
#define GR_SANITIZERS_H

#if defined(__SANITIZE_THREAD__)
#define GR_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GR_TSAN 1
#endif
#endif

#if defined(__SANITIZE_ADDRESS__)
#define GR_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GR_ASAN 1
#endif
#endif

#endif /* GR_SANITIZERS_H */
