/*
 * native.h — what module.c uses of the other files of the extension, in one
 * include: each declaration lives in the header of the file that defines it
 * (native_types.h, state.h, log.h, tracer_life.h, context.h, reqtable.h,
 * adapters.h, pyattr.h, hook.h, trace_helpers.h). No other file includes it.
 */
#ifndef MST_NATIVE_H
#define MST_NATIVE_H

#include "native_types.h"
#include "state.h"
#include "log.h"
#include "tracer_life.h"
#include "context.h"
#include "reqtable.h"
#include "adapters.h"
#include "pyattr.h"
#include "hook.h"
#include "trace_helpers.h"

#endif /* MST_NATIVE_H */
