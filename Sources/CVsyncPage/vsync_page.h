// The timing page (protocol 5, docs/PROTOCOL.md § 10): its layout and its seqlock, in C so that
// the daemon (the one writer) and both client builds (DisplayLink's core and libvsync, the
// readers) use the same bytes and the same memory ordering. Swift has no atomics on memory it
// does not own (a shared mapping), so the loads and stores are the compiler's __atomic builtins.
// Header-only, libc only: libvsync links nothing more.
#ifndef VSYNC_PAGE_H
#define VSYNC_PAGE_H

#include <stddef.h>
#include <stdint.h>

#define VSYNC_PAGE_MAGIC 0x47505356u /* "VSPG" read as a little-endian u32 */
#define VSYNC_PAGE_LAYOUT 1u
#define VSYNC_PAGE_SIZE 4096u
#define VSYNC_PAGE_HEADER_SIZE 64u
#define VSYNC_PAGE_RECORD_SIZE 128u
#define VSYNC_PAGE_RECORDS 31u /* what fits after the header; a literal, so Swift imports it */
_Static_assert(VSYNC_PAGE_RECORDS == (VSYNC_PAGE_SIZE - VSYNC_PAGE_HEADER_SIZE) / VSYNC_PAGE_RECORD_SIZE, "records per page");

/// Record flags: the display record's (bits 0-3) and the page's own.
#define VSYNC_PAGE_ON 0x10000u        /* the display is lit; off, `last_*` is its last vblank before */
#define VSYNC_PAGE_CURRENT 0x20000u   /* events on and a vblank since: `last_*` is at most a frame old */

struct vsync_page_header {
    uint32_t magic;          /*  0 */
    uint16_t layout;         /*  4 */
    uint16_t header_size;    /*  6 */
    uint32_t page_size;      /*  8 */
    uint32_t record_offset;  /* 12 */
    uint32_t record_size;    /* 16 */
    uint32_t record_count;   /* 20 */
    uint32_t server_pid;     /* 24 */
    uint32_t reserved[9];    /* 28 */
};

struct vsync_page_record {
    uint32_t seq;               /*   0: seqlock; odd while the daemon writes */
    uint32_t display_id;        /*   4: 0 = slot unused */
    uint32_t generation;        /*   8 */
    uint32_t flags;             /*  12 */
    uint64_t last_sequence;     /*  16 */
    uint64_t last_timestamp_ns; /*  24 */
    uint64_t anchor_sequence;   /*  32 */
    uint64_t anchor_ns;         /*  40 */
    uint64_t period_ns;         /*  48: whole ns of the model's period */
    uint32_t period_frac;       /*  56: the period's fraction of a ns, in 2^-32 */
    uint32_t reserved0;         /*  60 */
    uint64_t refresh_mhz;       /*  64 */
    uint64_t min_interval_ns;   /*  72 */
    uint64_t max_interval_ns;   /*  80 */
    uint64_t updated_ns;        /*  88 */
    uint64_t reserved[4];       /*  96 */
};

_Static_assert(sizeof(struct vsync_page_header) == VSYNC_PAGE_HEADER_SIZE, "page header size");
_Static_assert(sizeof(struct vsync_page_record) == VSYNC_PAGE_RECORD_SIZE, "page record size");
_Static_assert(offsetof(struct vsync_page_record, period_frac) == 56, "page record layout");
_Static_assert(offsetof(struct vsync_page_record, updated_ns) == 88, "page record layout");

/// The record's fields without its lock word, as one read or write takes them.
struct vsync_page_values {
    uint32_t display_id, generation, flags;
    uint64_t last_sequence, last_timestamp_ns, anchor_sequence, anchor_ns, period_ns;
    uint32_t period_frac;
    uint64_t refresh_mhz, min_interval_ns, max_interval_ns, updated_ns;
};

#define VSYNC_PAGE_LOAD(p) __atomic_load_n(&(p), __ATOMIC_RELAXED)
#define VSYNC_PAGE_STORE(p, v) __atomic_store_n(&(p), (v), __ATOMIC_RELAXED)

static inline struct vsync_page_record *vsync_page_record_at(void *page, uint32_t index) {
    return (struct vsync_page_record *)((char *)page + VSYNC_PAGE_HEADER_SIZE + (size_t)index * VSYNC_PAGE_RECORD_SIZE);
}

/// The daemon's write of a whole record: the lock word goes odd, a release fence orders that
/// before the fields, and the release store of the next even value publishes them. Relaxed
/// atomics for the fields, so a reader that races the write reads old or new bytes, never
/// undefined behaviour, and throws them away when the lock word moved.
static inline void vsync_page_write(void *page, uint32_t index, const struct vsync_page_values *v) {
    struct vsync_page_record *r = vsync_page_record_at(page, index);
    uint32_t seq = VSYNC_PAGE_LOAD(r->seq);
    VSYNC_PAGE_STORE(r->seq, seq + 1);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    VSYNC_PAGE_STORE(r->display_id, v->display_id);
    VSYNC_PAGE_STORE(r->generation, v->generation);
    VSYNC_PAGE_STORE(r->flags, v->flags);
    VSYNC_PAGE_STORE(r->last_sequence, v->last_sequence);
    VSYNC_PAGE_STORE(r->last_timestamp_ns, v->last_timestamp_ns);
    VSYNC_PAGE_STORE(r->anchor_sequence, v->anchor_sequence);
    VSYNC_PAGE_STORE(r->anchor_ns, v->anchor_ns);
    VSYNC_PAGE_STORE(r->period_ns, v->period_ns);
    VSYNC_PAGE_STORE(r->period_frac, v->period_frac);
    VSYNC_PAGE_STORE(r->refresh_mhz, v->refresh_mhz);
    VSYNC_PAGE_STORE(r->min_interval_ns, v->min_interval_ns);
    VSYNC_PAGE_STORE(r->max_interval_ns, v->max_interval_ns);
    VSYNC_PAGE_STORE(r->updated_ns, v->updated_ns);
    __atomic_store_n(&r->seq, seq + 2, __ATOMIC_RELEASE);
}

/// The record's fields, each with a relaxed load: no lock taken (vsync_page_read takes it
/// around this; a test's control reads without it).
static inline void vsync_page_copy(const struct vsync_page_record *r, struct vsync_page_values *v) {
    v->display_id = VSYNC_PAGE_LOAD(r->display_id);
    v->generation = VSYNC_PAGE_LOAD(r->generation);
    v->flags = VSYNC_PAGE_LOAD(r->flags);
    v->last_sequence = VSYNC_PAGE_LOAD(r->last_sequence);
    v->last_timestamp_ns = VSYNC_PAGE_LOAD(r->last_timestamp_ns);
    v->anchor_sequence = VSYNC_PAGE_LOAD(r->anchor_sequence);
    v->anchor_ns = VSYNC_PAGE_LOAD(r->anchor_ns);
    v->period_ns = VSYNC_PAGE_LOAD(r->period_ns);
    v->period_frac = VSYNC_PAGE_LOAD(r->period_frac);
    v->refresh_mhz = VSYNC_PAGE_LOAD(r->refresh_mhz);
    v->min_interval_ns = VSYNC_PAGE_LOAD(r->min_interval_ns);
    v->max_interval_ns = VSYNC_PAGE_LOAD(r->max_interval_ns);
    v->updated_ns = VSYNC_PAGE_LOAD(r->updated_ns);
}

/// A reader's copy of record `index`, consistent: 0, or -EAGAIN if the lock word stayed odd or
/// kept moving for `tries` attempts (a daemon that died mid-write leaves it odd for ever).
static inline int vsync_page_read(const void *page, uint32_t index, struct vsync_page_values *v, int tries) {
    const struct vsync_page_record *r =
        (const struct vsync_page_record *)((const char *)page + VSYNC_PAGE_HEADER_SIZE + (size_t)index * VSYNC_PAGE_RECORD_SIZE);
    for (int i = 0; i < tries; i++) {
        uint32_t before = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
        if (before & 1u) continue;
        vsync_page_copy(r, v);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (VSYNC_PAGE_LOAD(r->seq) == before) return 0;
    }
    return -11; /* EAGAIN, without errno.h's macros in a header both builds import */
}

/// The slot that holds `display_id`, trying `hint` first (a reader caches it): its index, or -1.
/// Unlocked: the caller's locked read confirms the id.
static inline int vsync_page_find(const void *page, uint32_t display_id, int hint) {
    if (hint >= 0 && (uint32_t)hint < VSYNC_PAGE_RECORDS &&
        VSYNC_PAGE_LOAD(((struct vsync_page_record *)vsync_page_record_at((void *)page, (uint32_t)hint))->display_id) == display_id)
        return hint;
    for (uint32_t i = 0; i < VSYNC_PAGE_RECORDS; i++) {
        if (VSYNC_PAGE_LOAD(vsync_page_record_at((void *)page, i)->display_id) == display_id) return (int)i;
    }
    return -1;
}

/// Checks a mapped page's header before anything is read from it: 0, or -EPROTO (-71) when it
/// is not a layout this reader knows. `mapped` is the bytes the reader mapped.
static inline int vsync_page_check(const void *page, uint32_t mapped) {
    const struct vsync_page_header *h = (const struct vsync_page_header *)page;
    if (mapped < VSYNC_PAGE_SIZE) return -71;
    if (h->magic != VSYNC_PAGE_MAGIC || h->layout != VSYNC_PAGE_LAYOUT) return -71;
    if (h->header_size != VSYNC_PAGE_HEADER_SIZE || h->record_offset != VSYNC_PAGE_HEADER_SIZE) return -71;
    if (h->record_size != VSYNC_PAGE_RECORD_SIZE || h->record_count != VSYNC_PAGE_RECORDS) return -71;
    if (h->page_size != VSYNC_PAGE_SIZE || h->page_size > mapped) return -71;
    return 0;
}

#endif
