/*
 * hook_span.c — the span of one hooked call: where it starts (parent: the
 * current hook span, else the batch's single known request context, else a
 * new trace), the attributes every hook span carries (process.pid,
 * thread.id, process.role), and how it ends (the batch's attributes and
 * links, status OK or ERROR with the pending exception's "Type: message",
 * which stays pending, untouched). See hook_span.h.
 */
#include "hook_span.h"
#include "hook_capture.h"
#include "context.h"
#include "request_story.h"

#include <string.h>

/* "Type: message" of the pending exception into buf (≤ 1024 bytes, cut at a
 * UTF-8 boundary); the exception stays pending, untouched. */
static void exc_text(char *buf, size_t size) {
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    const char *tname = t && PyType_Check(t) ? ((PyTypeObject *)t)->tp_name : "Exception";
    const char *dot = strrchr(tname, '.');
    if (dot)
        tname = dot + 1;
    PyObject *s = v ? PyObject_Str(v) : NULL;
    const char *msg = s ? PyUnicode_AsUTF8(s) : NULL;
    if (!msg)
        PyErr_Clear(); /* str() of the exception failed: type name only */
    int n = msg && *msg ? snprintf(buf, size, "%s: %s", tname, msg) : snprintf(buf, size, "%s", tname);
    if (n >= (int)size) { /* snprintf cut it: back off to a char boundary */
        size_t end = size - 1;
        while (end > 0 && ((unsigned char)buf[end] & 0xC0) == 0x80)
            end--;
        buf[end] = '\0';
    }
    Py_XDECREF(s);
    PyErr_Restore(t, v, tb);
}

/* Starts the span of hook `r`: parent = the current hook span, else the
 * batch's single known request context (a synthetic one lends only its
 * trace id), else a root in a new trace. Returns false if nothing is
 * recorded (no tracer, or every request of the batch is unsampled). */
bool mstn_hook_span_begin(MstnHook *r, mstn_span_run *sr, const mstn_batch *b, uint64_t t0) {
    mst_tracer *tr = mstn_g.tracer;
    sr->span = NULL;
    sr->has_parent = false;
    sr->t0 = t0;
    if (!tr)
        return false;
    if (b && b->n_ids == 0 && b->n_unsampled > 0)
        return false;
    const mst_scope *scope = mstn_hook_scope(r);
    mstn_ctx lone;
    bool have_lone = false;
    if (mstn_current(&sr->parent)) {
        sr->has_parent = true;
    } else if (b && b->n_links == 1) {
        mstn_batch_link_ctx(b, 0, &lone);
        have_lone = true;
        if (!lone.synthetic) {
            sr->parent = lone;
            sr->has_parent = true;
        }
    }
    if (sr->has_parent) {
        mst_span_context pc;
        mstn_ctx_to_public(&sr->parent, &pc);
        sr->span = mst_span_start(tr, scope, r->name, r->kind, &pc, t0);
    } else if (have_lone) { /* synthetic context: a root inside its trace */
        mst_span_id sid = mst_span_id_random();
        sr->span = mst_span_start_with_ids(tr, scope, r->name, r->kind, NULL, &lone.trace_id, &sid, t0);
    } else {
        sr->span = mst_span_start(tr, scope, r->name, r->kind, NULL, t0);
    }
    if (!sr->span)
        return false;
    mstn_g.inflight++;
    mst_span_context own;
    if (mst_span_get_context(sr->span, &own)) {
        sr->ctx.trace_id = own.trace_id;
        sr->ctx.span_id = own.span_id;
        sr->ctx.flags = own.trace_flags;
    } else {
        memset(&sr->ctx, 0, sizeof sr->ctx);
    }
    sr->ctx.remote = false;
    sr->ctx.synthetic = false;
    mst_span_set_int_lit(sr->span, MST_LIT("process.pid"), mstn_g.pid);
    mst_span_set_int_lit(sr->span, MST_LIT("thread.id"), mstn_thread_id());
    if (mstn_g.role[0]) /* names the process track in Perfetto */
        mst_span_set_strn_lit(sr->span, MST_LIT("process.role"), mstn_g.role, strlen(mstn_g.role));
    return true;
}

/* Ends the span: batch attributes and links, status from `ok` (an exception
 * is pending when !ok and stays pending). */
void mstn_hook_span_finish(MstnHook *r, mstn_span_run *sr, const mstn_batch *b, bool ok) {
    mst_span *span = sr->span;
    char msg[MST_MAX_STATUS_MESSAGE_LEN + 1];
    msg[0] = '\0';
    if (b) {
        if (b->n_ids && b->block) /* the step's ids, read by every span of it */
            mst_span_set_str_list_block_lit(span, MST_LIT("request.ids"), b->block);
        else if (b->n_ids)
            mst_span_set_str_list_lit(span, MST_LIT("request.ids"), b->ids, b->id_lens, b->n_ids);
        if (b->request_count >= 0)
            mst_span_set_int_lit(span, MST_LIT("batch.request_count"), b->request_count);
        if (b->scheduled_tokens >= 0)
            mst_span_set_int_lit(span, MST_LIT("batch.scheduled_tokens"), b->scheduled_tokens);
        if (b->waiting >= 0)
            mst_span_set_int_lit(span, MST_LIT("scheduler.waiting"), b->waiting);
        if (b->running >= 0)
            mst_span_set_int_lit(span, MST_LIT("scheduler.running"), b->running);
        if (b->kv_usage >= 0.0)
            mst_span_set_double_lit(span, MST_LIT("kv_cache.usage"), b->kv_usage);
        if (b->step)
            mstn_step_apply(b->step, span, b->n_ids);
        if (b->step_index >= 0) /* a model span of the step (step_share.c) */
            mst_span_set_int_lit(span, MST_LIT("step.index"), b->step_index);
        /* every request of the batch: one copy here, links on the exporter thread */
        if (b->n_links && b->block)
            mst_span_add_link_block_shared(span, b->block, "request.id", "request.ids");
        else if (b->n_links)
            mst_span_add_link_block(span, b->link_at, b->n_links, "request.id", "request.ids");
        if (b->have_step_link) {
            mst_span_context lc;
            mstn_ctx_to_public(&b->step_link, &lc);
            mst_span_add_link(span, &lc, NULL, 0);
        }
    }
    if (ok) {
        mst_span_set_status(span, MST_STATUS_OK, NULL);
    } else {
        exc_text(msg, sizeof msg);
        mst_span_set_status(span, MST_STATUS_ERROR, msg);
    }
    uint64_t t1 = mst_clock_now_ns();
    if (mstn_g.capture) {
        PyObject *t, *v, *tb;
        PyErr_Fetch(&t, &v, &tb);
        mstn_capture_span(span, r->name, r->scope_name, r->kind, &sr->ctx,
                          sr->has_parent ? &sr->parent : NULL, sr->t0, t1, !ok, msg);
        PyErr_Restore(t, v, tb);
    }
    mst_span_end(span, t1);
    mstn_g.inflight--;
    sr->span = NULL;
    /* the requests' own stories (EngineCore: the schedule adapter's batch) */
    if (b && b->step)
        mstn_story_step(b, &sr->ctx, sr->t0, t1);
    else if (!b && strcmp(r->name, "vllm.scheduler.update_from_output") == 0)
        mstn_story_update_end(t1);
}
