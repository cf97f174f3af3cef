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


#include "analyze/input_file.h"

/* The format for mst_an_read_file / mst_an_read_buffer (input_file.h):
 * reads the input (input index `source`), calling `fn` per span. */
extern const mst_an_format mst_an_chrome_format;

#endif /* MST_ANALYZE_READ_CHROME_H */
