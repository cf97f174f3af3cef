/*
 * perfetto_trace_fields.h — owns the protobuf field numbers and enum values
 * of Perfetto's native trace format (`perfetto.protos.Trace`) that mstrace
 * writes (wire/perfetto_trace_encode.c, for `mstrace forward`) and reads
 * (analyze/read_pftrace.c, for `mstrace analyze`). Nothing else in the
 * project spells these numbers.
 *
 * The numbers are those of Perfetto's published protos
 * (protos/perfetto/trace/trace.proto, trace_packet.proto,
 * clock_snapshot.proto, track_event/track_event.proto,
 * track_descriptor.proto, process_descriptor.proto, thread_descriptor.proto,
 * debug_annotation.proto, interned_data.proto). Each line names, in its
 * comment, the proto field or enum value it stands for, as
 * `Message.field` or `Message.Enum.VALUE`; tests/python/test_perfetto_fields.py
 * checks every line against perfetto_trace_pb2 of the PyPI `perfetto`
 * package, and fails on a line without that comment.
 *
 * The names are short (message initials + field name) because they are the
 * working vocabulary of the files that lay out or read Perfetto bytes;
 * include this header only from such files (and perfetto_trace_encode.h).
 */
#ifndef MST_WIRE_PERFETTO_TRACE_FIELDS_H
#define MST_WIRE_PERFETTO_TRACE_FIELDS_H

/* Trace */
#define TRACE_PACKET 1                    /* Trace.packet */

/* TracePacket */
#define PKT_CLOCK_SNAPSHOT 6              /* TracePacket.clock_snapshot */
#define PKT_TIMESTAMP 8                   /* TracePacket.timestamp */
#define PKT_SEQUENCE_ID 10                /* TracePacket.trusted_packet_sequence_id */
#define PKT_TRACK_EVENT 11                /* TracePacket.track_event */
#define PKT_INTERNED_DATA 12              /* TracePacket.interned_data */
#define PKT_SEQUENCE_FLAGS 13             /* TracePacket.sequence_flags */
#define PKT_TRACK_DESCRIPTOR 60           /* TracePacket.track_descriptor */
#define PKT_FIRST_ON_SEQUENCE 87          /* TracePacket.first_packet_on_sequence */
#define SEQ_INCREMENTAL_STATE_CLEARED 1   /* TracePacket.SequenceFlags.SEQ_INCREMENTAL_STATE_CLEARED */
#define SEQ_NEEDS_INCREMENTAL_STATE 2     /* TracePacket.SequenceFlags.SEQ_NEEDS_INCREMENTAL_STATE */

/* ClockSnapshot / ClockSnapshot.Clock / BuiltinClock */
#define CLK_CLOCKS 1                      /* ClockSnapshot.clocks */
#define CLK_PRIMARY_TRACE_CLOCK 2         /* ClockSnapshot.primary_trace_clock */
#define CLOCK_ID 1                        /* ClockSnapshot.Clock.clock_id */
#define CLOCK_TIMESTAMP 2                 /* ClockSnapshot.Clock.timestamp */
#define BUILTIN_CLOCK_REALTIME 1          /* BuiltinClock.BUILTIN_CLOCK_REALTIME */
#define BUILTIN_CLOCK_BOOTTIME 6          /* BuiltinClock.BUILTIN_CLOCK_BOOTTIME */

/* TrackDescriptor */
#define TD_UUID 1                         /* TrackDescriptor.uuid */
#define TD_NAME 2                         /* TrackDescriptor.name */
#define TD_PROCESS 3                      /* TrackDescriptor.process */
#define TD_THREAD 4                       /* TrackDescriptor.thread */
#define TD_PARENT_UUID 5                  /* TrackDescriptor.parent_uuid */
#define TD_COUNTER 8                      /* TrackDescriptor.counter */
#define TD_CHILD_ORDERING 11              /* TrackDescriptor.child_ordering */
#define TD_SIBLING_ORDER_RANK 12          /* TrackDescriptor.sibling_order_rank */
#define CHILD_ORDERING_CHRONOLOGICAL 2    /* TrackDescriptor.ChildTracksOrdering.CHRONOLOGICAL */
#define TD_THREAD_ORDERING 20             /* TrackDescriptor.thread_ordering */
#define THREAD_ORDERING_EXPLICIT 1        /* TrackDescriptor.ThreadOrdering.THREAD_ORDERING_EXPLICIT */

/* ProcessDescriptor / ThreadDescriptor */
#define PD_PID 1                          /* ProcessDescriptor.pid */
#define PD_PROCESS_NAME 6                 /* ProcessDescriptor.process_name */
#define THD_PID 1                         /* ThreadDescriptor.pid */
#define THD_TID 2                         /* ThreadDescriptor.tid */
#define THD_THREAD_NAME 5                 /* ThreadDescriptor.thread_name */

/* TrackEvent */
#define TE_CATEGORY_IIDS 3                /* TrackEvent.category_iids */
#define TE_DEBUG_ANNOTATIONS 4            /* TrackEvent.debug_annotations */
#define TE_TYPE 9                         /* TrackEvent.type */
#define TE_NAME_IID 10                    /* TrackEvent.name_iid */
#define TE_TRACK_UUID 11                  /* TrackEvent.track_uuid */
#define TE_NAME 23                        /* TrackEvent.name */
#define TE_COUNTER_VALUE 30               /* TrackEvent.counter_value */
#define TE_FLOW_IDS_OLD 36                /* TrackEvent.flow_ids_old */
#define TE_DOUBLE_COUNTER_VALUE 44        /* TrackEvent.double_counter_value */
#define TE_FLOW_IDS 47                    /* TrackEvent.flow_ids */
#define TE_TERMINATING_FLOW_IDS 48        /* TrackEvent.terminating_flow_ids */
#define TYPE_SLICE_BEGIN 1                /* TrackEvent.Type.TYPE_SLICE_BEGIN */
#define TYPE_SLICE_END 2                  /* TrackEvent.Type.TYPE_SLICE_END */
#define TYPE_INSTANT 3                    /* TrackEvent.Type.TYPE_INSTANT */
#define TYPE_COUNTER 4                    /* TrackEvent.Type.TYPE_COUNTER */

/* InternedData: which table an entry belongs to */
#define IN_EVENT_CATEGORIES 1             /* InternedData.event_categories */
#define IN_EVENT_NAMES 2                  /* InternedData.event_names */
#define IN_ANNOTATION_NAMES 3             /* InternedData.debug_annotation_names */
#define IN_STRING_VALUES 29               /* InternedData.debug_annotation_string_values */
/* ... and an entry of any of them: EventCategory, EventName,
 * DebugAnnotationName and InternedString all number iid 1 and the text 2. */
#define IE_IID 1                          /* EventName.iid */
#define IE_NAME 2                         /* EventName.name */

/* DebugAnnotation */
#define DA_NAME_IID 1                     /* DebugAnnotation.name_iid */
#define DA_BOOL 2                         /* DebugAnnotation.bool_value */
#define DA_UINT 3                         /* DebugAnnotation.uint_value */
#define DA_INT 4                          /* DebugAnnotation.int_value */
#define DA_DOUBLE 5                       /* DebugAnnotation.double_value */
#define DA_STRING 6                       /* DebugAnnotation.string_value */
#define DA_LEGACY_JSON 9                  /* DebugAnnotation.legacy_json_value */
#define DA_ARRAY_VALUES 12                /* DebugAnnotation.array_values */
#define DA_NAME 10                        /* DebugAnnotation.name */
#define DA_STRING_IID 17                  /* DebugAnnotation.string_value_iid */

#endif /* MST_WIRE_PERFETTO_TRACE_FIELDS_H */
