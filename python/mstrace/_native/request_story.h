/*
 * request_story.h — a request's story in its own trace (request_story.c):
 * in the process that schedules (EngineCore), each scheduled request whose
 * context is known gets child spans of that context for its phases —
 * `vllm.request.queued`, `vllm.request.prefill`, `vllm.request.decode`, a
 * prefill and a decode again after each preemption — each carrying one
 * `step` event per engine step it was in (step.index, step.tokens,
 * batch.request_count, step.trace_id / step.span_id of the step's schedule
 * span), and `preempted` / `resumed` events. Built from the step record the
 * schedule adapter already read (step_record.h): no Python object per step,
 * a bounded table of requests in flight (docs/reference/spans.md "Limits").
 */
#ifndef MST_NATIVE_REQUEST_STORY_H
#define MST_NATIVE_REQUEST_STORY_H

#include "adapters.h"

/* Requests followed at once; beyond, the oldest story is ended (flushed). */
#define MSTN_STORY_MAX 4096
/* `step` events kept per phase span (the span's own event limit); later
 * steps are counted in the span's `steps.dropped` attribute. */
#define MSTN_STORY_EVENTS 128

/* One schedule call (b->step is its record, b->link_ctx the contexts of
 * the scheduled requests that have one), whose span `step` ran from
 * start_ns to end_ns. Ends the phases this step closes. */
void mstn_story_step(const mstn_batch *b, const mstn_ctx *step, uint64_t start_ns, uint64_t end_ns);
/* The end of an update_from_output call: where a request's last decode
 * ends when the process stops before the next schedule names it finished. */
void mstn_story_update_end(uint64_t end_ns);
/* Ends every open story (at exit, before the last flush). */
void mstn_story_end_all(void);
/* _native.end_stories(): mstn_story_end_all, for the exit flush
 * (plugin.py) that runs before a multiprocessing child's os._exit. */
PyObject *mstn_py_end_stories(PyObject *m, PyObject *unused);
/* Forgets every story without ending it (fork child, tests). */
void mstn_story_clear(void);

#endif /* MST_NATIVE_REQUEST_STORY_H */
