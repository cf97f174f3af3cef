/*
 * read_chrome.h — streamed reader of the forwarder's Chrome Trace Event JSON
 * (docs/forwarder.md "Output"): a top-level array of X (span), M (process /
 * thread name) and s/f (flow) events. Each X event becomes one mst_an_span
 * handed to the sink; M events name the process (the role of its spans);
 * flows are counted. The file is read in fixed chunks, never whole: memory
 * is the chunk plus the largest single event.
 *
 * Bad input: a file that cannot be opened, is empty, or does not start
 * with a JSON array is an error (MST_ERR_PARSE / MST_ERR_IO with one
 * sentence in err). A file that ends without its closing ']' (cut by a
 * SIGKILL while being written) or whose JSON breaks mid-way is read up to
 * the last complete event, with info->truncated and a warning. An event
 * that is JSON but not a usable span (no name, bad numbers) is skipped and
 * counted (info->skipped).
 */
#ifndef MST_ANALYZE_READ_CHROME_H
#define MST_ANALYZE_READ_CHROME_H

#include <stddef.h>
#include <stdint.h>

#include "analyze/input_info.h"
#include "analyze/record.h"

/* Called every few MiB with the bytes read so far and the file size (0
 * when unknown), for a progress line. */
typedef void (*mst_an_progress_fn)(void *ctx, uint64_t done, uint64_t total);

/* Reads `path` (input index `source`), calling `fn` per span. `info` is
 * initialised here and filled (the caller frees it, also on error). */
mst_status mst_an_read_chrome_file(const char *path, uint32_t source, mst_an_span_fn fn,
                                   void *ctx, mst_an_progress_fn progress, void *progress_ctx,
                                   mst_an_input_info *info, char *err, size_t err_size);

/* The same over a buffer (tests and the fuzz target); `name` labels it. */
mst_status mst_an_read_chrome_buffer(const void *data, size_t len, const char *name,
                                     uint32_t source, mst_an_span_fn fn, void *ctx,
                                     mst_an_input_info *info, char *err, size_t err_size);

#endif /* MST_ANALYZE_READ_CHROME_H */
