/*
 * visibility.h — MST_SHARED_INTERNAL marks the few internal functions that
 * libmstrace.so exports for libmstrace_otlp.so (the OTLP exporter encodes
 * with wire/otlp.h, buffers with wire/buf.h, logs with core/log.h, reads
 * the resource with core/resource.h, parses replies with
 * wire/otlp_response.h). Why exported rather than copied into
 * libmstrace_otlp.so: one logger (its level is set through libmstrace) and
 * one copy of the encoders. They are not API: no header under include/
 * declares them, and they may change in any release. Everything else
 * internal stays hidden (CMAKE_C_VISIBILITY_PRESET hidden).
 */
#ifndef MST_CORE_VISIBILITY_H
#define MST_CORE_VISIBILITY_H

#if defined(__GNUC__)
#define MST_SHARED_INTERNAL __attribute__((visibility("default")))
#else
#define MST_SHARED_INTERNAL
#endif

#endif /* MST_CORE_VISIBILITY_H */
