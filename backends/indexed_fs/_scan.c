/* The crash rebuild's walk of a segment and its resolution of the records found, in C.
 *
 * Why C: after a SIGKILL the open walks the records written since the last index snapshot and
 * hint file (up to a whole active segment).  In Python (even with numpy for runs of equal-size
 * records) that is one CRC call, several slices and a few Python objects per record, and the
 * resolution into the index is a dict entry and a tuple per key: together they dwarf the open
 * after a clean close, which maps the snapshot and parses nothing per entry.  Here:
 *
 *   - walk(data) is one pass of the walk: every record header and CRC-32C checked exactly as
 *     segment._raw_python does (same sanity bounds, same stop rules), columns back.  What needs
 *     context (resynchronising past damage, reserved zeros, crash gaps, a torn tail, notes)
 *     stays in Python, shared by both passes (segment._assemble), which calls this pass again
 *     from the next intact record after damage.
 *   - resolve(spans, seqs, flags) sorts the records' keys (radix sort on 8-byte big-endian
 *     words, deeper words only where a group still ties) and picks each key's winner (highest
 *     seq; equal seq: the later record in log order, the rule of segment.resolve).  The value
 *     winners come back as a sorted fixed-width key matrix, the same layout as a snapshot's
 *     key array, so the index searches it like the snapshot (index._Table).
 *   - join(...) matches those sorted keys against a snapshot's sorted keys in one forward pass
 *     (a gallop per batch of keys, then the batch's binary searches in lockstep, prefetched)
 *     and marks the losing side dead: a base entry superseded by a newer
 *     record, or a record older than the base entry (a compaction copy).
 *   - read_value(...) is the other side of the same record check, on the read path: one record
 *     read (pread, or a slice of a sealed segment's mapping), its lengths, flags, CRC and key
 *     checked, the value returned, in one call instead of a handful of Python steps per get.
 *
 * Nothing here trusts the data beyond what it checks: a record is reported only with its
 * header in bounds and its length inside the buffer; a CRC mismatch is reported (bad[i] = 1),
 * never dropped or kept silently, and the caller never indexes such a record.  resolve()
 * refuses (returns None) keys it cannot hold exactly in a NUL-padded fixed-width array (a NUL
 * byte, a byte >= 0x80, or wider than MAX_WIDTH): the caller then resolves in Python.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "_crc32c.h"

#define HEADER 21
#define MAX_KEY_LEN (1u << 16)
#define MAX_VALUE_LEN (1u << 31)
/* widest key resolve() puts in a fixed-width matrix (the numpy rebuild's limit too) */
#define MAX_WIDTH 256

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p) {
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* ------------------------------------------------------------------------------------- walk */
/* stop kinds: where and why the walk ended before the end of the buffer */
enum { STOP_NONE = 0, STOP_SHORT = 1, STOP_HEADER = 2 };

/* Pass 1 of walk(): the record boundaries (headers only).  Returns the number of records and
 * their total key bytes; *stop_at / *kind say where and why the walk stopped. */
static size_t bounds(const uint8_t *d, size_t end, size_t *key_bytes, long long *stop_at,
                     int *kind) {
    size_t pos = 0, n = 0, kb = 0;
    *stop_at = -1;
    *kind = STOP_NONE;
    while (pos < end) {
        if (end - pos < HEADER) {
            *stop_at = (long long)pos;
            *kind = STOP_SHORT;
            break;
        }
        const uint8_t *h = d + pos;
        uint32_t klen = le32(h + 12), vlen = le32(h + 16);
        if (klen == 0 || klen > MAX_KEY_LEN || vlen > MAX_VALUE_LEN || h[20] > 1) {
            *stop_at = (long long)pos;
            *kind = STOP_HEADER;
            break;
        }
        uint64_t size = (uint64_t)HEADER + klen + vlen;
        if (size > end - pos) {
            *stop_at = (long long)pos;
            *kind = STOP_SHORT;
            break;
        }
        n++;
        kb += klen;
        pos += (size_t)size;
    }
    *key_bytes = kb;
    return n;
}

/* walk(data) -> (start, klen, size, seq, flags, bad, key_at, keys, stop_at, stop_kind)
 *
 * The records from offset 0, as segment._raw_python phase 1 and 2 find them: a header that
 * cannot be real (klen 0 or > MAX_KEY_LEN, vlen > MAX_VALUE_LEN, flags > 1) ends the walk
 * (STOP_HEADER); so does a header or a record running past the end (STOP_SHORT); stop_at is
 * then its offset, else -1.  Every record before that is reported with bad = 1 if its CRC
 * does not match (it is skipped by its length, as the Python walk does).  Columns: int64
 * start and size, uint32 key length, uint64 seq, uint8 flags and bad; `keys` holds the keys
 * back to back (int64 key_at: where each starts), so the caller keeps no segment bytes.
 * Two passes (boundaries, then columns and CRCs) so that each column is allocated once, at
 * its size, as the bytes object returned. */
static PyObject *scan_walk(PyObject *mod, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *d = b.buf;
    size_t end = (size_t)b.len, n, kb;
    long long stop_at;
    int kind;
    Py_BEGIN_ALLOW_THREADS
    n = bounds(d, end, &kb, &stop_at, &kind);
    Py_END_ALLOW_THREADS
    static const size_t width[8] = {8, 4, 8, 8, 1, 1, 8, 0};
    PyObject *col[8] = {NULL};
    for (int j = 0; j < 8; j++) {
        col[j] = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(j == 7 ? kb : n * width[j]));
        if (!col[j]) {
            for (int i = 0; i < j; i++)
                Py_DECREF(col[i]);
            PyBuffer_Release(&b);
            return NULL;
        }
    }
    int64_t *start = (int64_t *)PyBytes_AS_STRING(col[0]), *size = (int64_t *)PyBytes_AS_STRING(col[2]);
    uint32_t *klens = (uint32_t *)PyBytes_AS_STRING(col[1]);
    uint64_t *seq = (uint64_t *)PyBytes_AS_STRING(col[3]);
    uint8_t *flags = (uint8_t *)PyBytes_AS_STRING(col[4]), *bad = (uint8_t *)PyBytes_AS_STRING(col[5]);
    int64_t *key_at = (int64_t *)PyBytes_AS_STRING(col[6]);
    uint8_t *keys = (uint8_t *)PyBytes_AS_STRING(col[7]);
    Py_BEGIN_ALLOW_THREADS
    size_t pos = 0, at = 0;
    for (size_t i = 0; i < n; i++) { /* pass 2: the n records pass 1 found in bounds */
        const uint8_t *h = d + pos;
        uint32_t klen = le32(h + 12);
        size_t sz = (size_t)HEADER + klen + le32(h + 16);
        start[i] = (int64_t)pos;
        size[i] = (int64_t)sz;
        seq[i] = le64(h + 4);
        klens[i] = klen;
        flags[i] = h[20];
        bad[i] = crc32c(h + 4, sz - 4) != le32(h);
        key_at[i] = (int64_t)at;
        memcpy(keys + at, h + HEADER, klen);
        at += klen;
        pos += sz;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return Py_BuildValue("(NNNNNNNNLi)", col[0], col[1], col[2], col[3], col[4], col[5], col[6],
                         col[7], stop_at, kind);
}

/* ---------------------------------------------------------------------------------- resolve */
/* a column as Py_BuildValue's y# wants it (NULL would make None of an empty column) */
static const char no_bytes[1];
#define B(p) ((p) ? (const char *)(p) : no_bytes)

typedef struct {
    const uint8_t *m; /* n keys, NUL-padded to w bytes, each row `stride` (w rounded up to 8) */
    size_t w, stride;
} keys;

/* One record in the sort: its key's first 16 bytes as two big-endian integers (integer order
 * = byte order), so that sorting and comparing rarely has to look at the key matrix, whose
 * rows lie scattered once the items move. */
typedef struct {
    uint64_t w0, w1;
    uint32_t idx;
} item;

/* 8 bytes as a big-endian integer */
static uint64_t be64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static uint64_t word_at(const keys *k, uint32_t idx, size_t depth) {
    return depth < k->stride ? be64(k->m + (size_t)idx * k->stride + depth) : 0;
}

static int row_cmp(const keys *k, uint32_t a, uint32_t b, size_t depth) {
    for (size_t d = depth; d < k->stride; d += 8) {
        uint64_t x = word_at(k, a, d), y = word_at(k, b, d);
        if (x != y)
            return x < y ? -1 : 1;
    }
    return 0;
}

/* whether any of the n bytes at p is NUL or >= 0x80 (a key resolve() cannot hold) */
static int unfit(const uint8_t *p, size_t n) {
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
        uint64_t v;
        memcpy(&v, p + j, 8);
        if ((v & highs) || ((v - ones) & ~v & highs))
            return 1;
    }
    for (; j < n; j++)
        if (p[j] == 0 || p[j] >= 0x80)
            return 1;
    return 0;
}

#define FIELD(x, f) ((f) ? (x).w1 : (x).w0)

/* Stable LSD radix sort of a[0..n) on field w0 (f = 0) or w1 (f = 1), one pass per byte that
 * is not the same in every item. */
static void radix(item *a, item *tmp, size_t n, int f) {
    size_t hist[8][256];
    memset(hist, 0, sizeof hist);
    for (size_t i = 0; i < n; i++) {
        uint64_t v = FIELD(a[i], f);
        for (int byte = 0; byte < 8; byte++)
            hist[byte][(v >> (8 * byte)) & 0xff]++;
    }
    item *src = a, *dst = tmp;
    for (int byte = 0; byte < 8; byte++) {
        size_t *h = hist[byte], sum = 0;
        if (h[(FIELD(src[0], f) >> (8 * byte)) & 0xff] == n)
            continue; /* every key has this byte: nothing to order by */
        for (int v = 0; v < 256; v++) {
            size_t c = h[v];
            h[v] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[h[(FIELD(src[i], f) >> (8 * byte)) & 0xff]++] = src[i];
        item *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, n * sizeof *a);
}

#define SMALL 48

/* Sort a[0..n), whose keys are equal before `depth` (>= 16), by the rest of the key, read
 * from the matrix 8 bytes at a time (w1 is scratch here, restored by the caller): insertion
 * sort for small groups, else radix on the word at `depth`, then deeper within ties. */
static void sort_deep(const keys *k, item *a, item *tmp, size_t n, size_t depth) {
    if (n <= 1 || depth >= k->stride)
        return;
    if (n <= SMALL) {
        for (size_t i = 1; i < n; i++) {
            item x = a[i];
            size_t j = i;
            while (j > 0 && row_cmp(k, a[j - 1].idx, x.idx, depth) > 0) {
                a[j] = a[j - 1];
                j--;
            }
            a[j] = x;
        }
        return;
    }
    for (size_t i = 0; i < n; i++)
        a[i].w1 = word_at(k, a[i].idx, depth);
    radix(a, tmp, n, 1);
    for (size_t s = 0; s < n;) {
        size_t e = s + 1;
        while (e < n && a[e].w1 == a[s].w1)
            e++;
        sort_deep(k, a + s, tmp + s, e - s, depth + 8);
        s = e;
    }
}

/* Within a group equal on w0 and w1, order by the bytes from 16 on (w1 restored after). */
static void sort_tied(const keys *k, item *a, item *tmp, size_t n) {
    if (n <= 1 || k->stride <= 16)
        return;
    uint64_t w1 = a[0].w1;
    sort_deep(k, a, tmp, n, 16);
    for (size_t i = 0; i < n; i++)
        a[i].w1 = w1;
}

/* Sort a[0..n) by key: radix on the first 8 bytes, then each group tied there by the next 8
 * (insertion sort on w1 for small groups, radix for large ones), then the rare ties on all 16
 * bytes by the rest of the key. */
static void sort_keys(const keys *k, item *a, item *tmp, size_t n) {
    radix(a, tmp, n, 0);
    for (size_t s = 0; s < n;) {
        size_t e = s + 1;
        while (e < n && a[e].w0 == a[s].w0)
            e++;
        size_t g = e - s;
        item *b = a + s;
        if (g > SMALL) {
            radix(b, tmp + s, g, 1);
        } else if (g > 1) {
            for (size_t i = 1; i < g; i++) { /* stable insertion sort on w1 */
                item x = b[i];
                size_t j = i;
                while (j > 0 && b[j - 1].w1 > x.w1) {
                    b[j] = b[j - 1];
                    j--;
                }
                b[j] = x;
            }
        }
        for (size_t i = 0; g > 1 && i < g;) { /* then each run of equal w1 on the rest */
            size_t j = i + 1;
            while (j < g && b[j].w1 == b[i].w1)
                j++;
            sort_tied(k, b + i, tmp + s + i, j - i);
            i = j;
        }
        s = e;
    }
}

/* whether sorted neighbours a and b hold the same key */
static int same_key(const keys *k, const item *a, const item *b) {
    return a->w0 == b->w0 && a->w1 == b->w1 && (k->stride <= 16 || row_cmp(k, a->idx, b->idx, 16) == 0);
}

/* resolve(spans, seq, flags) -> None | (width, value_keys, value_idx, tomb_idx)
 *
 * spans: a list of (blob, at, len): the keys of consecutive records (in log order) lie at
 * blob[at[i] : at[i] + len[i]] (at: int64, len: uint32 buffers).  seq (uint64) and flags
 * (uint8) are the records' columns in the same order.  Per distinct key the winner is the
 * record with the highest seq, the later one on equal seq.  value_keys: the value winners'
 * keys, sorted, as an m x width NUL-padded matrix; value_idx (int64): their record numbers in
 * the same order; tomb_idx (int64): the tombstone winners' record numbers, in key order. */
static PyObject *scan_resolve(PyObject *mod, PyObject *args) {
    PyObject *spans;
    Py_buffer seqb, flagb;
    if (!PyArg_ParseTuple(args, "O!y*y*", &PyList_Type, &spans, &seqb, &flagb))
        return NULL;
    Py_ssize_t nspans = PyList_GET_SIZE(spans);
    Py_buffer *bufs = calloc((size_t)nspans * 3 + 1, sizeof *bufs);
    int ok = bufs != NULL, got = 0;
    size_t n = (size_t)seqb.len / 8;
    if (!ok)
        PyErr_NoMemory();
    size_t total = 0;
    for (Py_ssize_t s = 0; ok && s < nspans; s++) {
        PyObject *t = PyList_GET_ITEM(spans, s);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 3) {
            PyErr_SetString(PyExc_TypeError, "resolve: spans are (blob, at, len) tuples");
            ok = 0;
            break;
        }
        for (int j = 0; j < 3 && ok; j++) {
            if (PyObject_GetBuffer(PyTuple_GET_ITEM(t, j), &bufs[3 * s + j], PyBUF_SIMPLE) < 0)
                ok = 0;
            else
                got++;
        }
        if (ok) {
            size_t m = (size_t)bufs[3 * s + 1].len / 8;
            if ((size_t)bufs[3 * s + 2].len / 4 != m) {
                PyErr_SetString(PyExc_ValueError, "resolve: at and len differ in length");
                ok = 0;
            }
            total += m;
        }
    }
    if (ok && (total != n || (size_t)flagb.len != n)) {
        PyErr_SetString(PyExc_ValueError, "resolve: spans, seq and flags differ in length");
        ok = 0;
    }
    uint8_t *mat = NULL;
    item *a = NULL, *tmp = NULL;
    int64_t *vidx = NULL, *tidx = NULL;
    size_t w = 0, nv = 0, nt = 0;
    int refused = 0, nomem = 0, range_err = 0;
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        /* the widest key, and every key checked: in bounds, ASCII without NUL */
        for (Py_ssize_t s = 0; s < nspans && !refused && !range_err; s++) {
            const uint8_t *blob = bufs[3 * s].buf;
            size_t blen = (size_t)bufs[3 * s].len, m = (size_t)bufs[3 * s + 1].len / 8;
            const int64_t *at = bufs[3 * s + 1].buf;
            const uint32_t *len = bufs[3 * s + 2].buf;
            for (size_t i = 0; i < m; i++) {
                if (at[i] < 0 || (uint64_t)at[i] + len[i] > blen) {
                    range_err = 1;
                    break;
                }
                if (len[i] > MAX_WIDTH || len[i] == 0 || unfit(blob + at[i], len[i])) {
                    refused = 1;
                    break;
                }
                if (len[i] > w)
                    w = len[i];
            }
        }
        size_t stride = (w + 7) & ~(size_t)7;
        if (!refused && !range_err && n) {
            mat = calloc(n, stride);
            a = malloc(n * sizeof *a);
            tmp = malloc(n * sizeof *tmp);
            vidx = malloc(n * sizeof *vidx);
            tidx = malloc(n * sizeof *tidx);
            nomem = !mat || !a || !tmp || !vidx || !tidx;
        }
        if (!refused && !range_err && !nomem && n) {
            size_t r = 0;
            for (Py_ssize_t s = 0; s < nspans; s++) {
                const uint8_t *blob = bufs[3 * s].buf;
                size_t m = (size_t)bufs[3 * s + 1].len / 8;
                const int64_t *at = bufs[3 * s + 1].buf;
                const uint32_t *len = bufs[3 * s + 2].buf;
                for (size_t i = 0; i < m; i++, r++)
                    memcpy(mat + r * stride, blob + at[i], len[i]);
            }
            keys k = {mat, w, stride};
            for (size_t i = 0; i < n; i++) {
                a[i].idx = (uint32_t)i;
                a[i].w0 = word_at(&k, (uint32_t)i, 0);
                a[i].w1 = word_at(&k, (uint32_t)i, 8);
            }
            sort_keys(&k, a, tmp, n);
            const uint64_t *seq = seqb.buf;
            const uint8_t *flags = flagb.buf;
            for (size_t s = 0; s < n;) {
                uint32_t best = a[s].idx;
                size_t e = s + 1;
                while (e < n && same_key(&k, &a[e], &a[s])) {
                    uint32_t i = a[e].idx;
                    if (seq[i] > seq[best] || (seq[i] == seq[best] && i > best))
                        best = i;
                    e++;
                }
                if (flags[best])
                    tidx[nt++] = best;
                else
                    vidx[nv++] = best;
                s = e;
            }
        }
        Py_END_ALLOW_THREADS
    }
    PyObject *out = NULL;
    if (ok && range_err)
        PyErr_SetString(PyExc_ValueError, "resolve: a key span lies outside its blob");
    else if (ok && nomem)
        PyErr_NoMemory();
    else if (ok && refused) {
        out = Py_None;
        Py_INCREF(out);
    } else if (ok) {
        PyObject *vk = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(nv * w));
        if (vk) {
            uint8_t *o = (uint8_t *)PyBytes_AS_STRING(vk);
            size_t stride = (w + 7) & ~(size_t)7;
            for (size_t j = 0; j < nv; j++) {
                if (j + 8 < nv) /* rows lie scattered: ask for the next ones early */
                    __builtin_prefetch(mat + (size_t)vidx[j + 8] * stride);
                memcpy(o + j * w, mat + (size_t)vidx[j] * stride, w);
            }
            out = Py_BuildValue("(nNy#y#)", (Py_ssize_t)w, vk, B(vidx), (Py_ssize_t)(nv * 8),
                                B(tidx), (Py_ssize_t)(nt * 8));
        }
    }
    free(mat);
    free(a);
    free(tmp);
    free(vidx);
    free(tidx);
    for (int j = 0; j < got; j++)
        PyBuffer_Release(&bufs[j]);
    free(bufs);
    PyBuffer_Release(&seqb);
    PyBuffer_Release(&flagb);
    return out;
}

/* ------------------------------------------------------------------------------------- join */
/* the n < 8 bytes at p as a big-endian integer, zero-padded on the right */
static inline uint64_t be64_part(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)p[i] << (56 - 8 * i);
    return v;
}

/* Compare NUL-padded keys of widths wa and wb (keys hold no NUL: padding sorts first). */
static inline int key_cmp(const uint8_t *a, size_t wa, const uint8_t *b, size_t wb) {
    size_t m = wa < wb ? wa : wb, j = 0;
    for (; j + 8 <= m; j += 8) { /* 8 bytes per integer compare */
        uint64_t x = be64(a + j), y = be64(b + j);
        if (x != y)
            return x < y ? -1 : 1;
    }
    if (j < m) {
        uint64_t x = be64_part(a + j, m - j), y = be64_part(b + j, m - j);
        if (x != y)
            return x < y ? -1 : 1;
    }
    for (size_t j = m; j < wa; j++)
        if (a[j])
            return 1;
    for (size_t j = m; j < wb; j++)
        if (b[j])
            return -1;
    return 0;
}

static uint64_t seq_at(const uint8_t *col, int itemsize, size_t i) {
    if (itemsize == 4) {
        uint32_t v;
        memcpy(&v, col + 4 * i, 4);
        return v;
    }
    uint64_t v;
    memcpy(&v, col + 8 * i, 8);
    return v;
}

/* delta keys whose searches run in lockstep in join() (see there) */
#define JOIN_BATCH 16

/* join(dkeys, dw, dseq, dalive, bkeys, bw, balive, bseq, bseq_itemsize) -> killed base rows
 *
 * dkeys: sorted m x dw matrix of distinct keys (resolve's value_keys), dseq (uint64) and
 * dalive (uint8, writable) its columns; bkeys: the base's sorted nb x bw matrix, balive
 * (uint8, writable) and bseq (uint32 or uint64) its columns.  For each delta key alive in
 * the base: the higher seq wins (equal: the delta, the later record); the loser's alive byte
 * is cleared.  Returns the base rows cleared (int64 bytes, ascending). */
static PyObject *scan_join(PyObject *mod, PyObject *args) {
    Py_buffer dk, ds, da, bk, ba, bs;
    Py_ssize_t dw, bw;
    int isz;
    if (!PyArg_ParseTuple(args, "y*ny*w*y*nw*y*i", &dk, &dw, &ds, &da, &bk, &bw, &ba, &bs, &isz))
        return NULL;
    PyObject *out = NULL;
    size_t m = dw > 0 ? (size_t)dk.len / (size_t)dw : 0;
    size_t nb = bw > 0 ? (size_t)bk.len / (size_t)bw : 0;
    int64_t *killed = NULL;
    size_t nk = 0;
    if ((isz != 4 && isz != 8) || dw <= 0 || bw <= 0 || (size_t)ds.len != 8 * m ||
        (size_t)da.len != m || (size_t)ba.len != nb || (size_t)bs.len != (size_t)isz * nb) {
        PyErr_SetString(PyExc_ValueError, "join: column lengths do not match the key matrices");
        goto done;
    }
    killed = malloc((m ? m : 1) * sizeof *killed);
    if (!killed) {
        PyErr_NoMemory();
        goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    const uint8_t *dkeys = dk.buf, *bkeys = bk.buf, *bseq = bs.buf;
    const uint64_t *dseq = ds.buf;
    uint8_t *dalive = da.buf, *balive = ba.buf;
    size_t lo = 0; /* every base key before lo sorts before the current batch's keys */
    /* the window of a batch is found by galloping for its last key from lo, the first probe
     * the mean distance between two delta keys' places times the batch ahead */
    size_t first = m ? nb / m : 1;
    if (first < 1)
        first = 1;
    size_t L[JOIN_BATCH], H[JOIN_BATCH];
    for (size_t j0 = 0; j0 < m && lo < nb; j0 += JOIN_BATCH) {
        size_t b = m - j0 < JOIN_BATCH ? m - j0 : JOIN_BATCH;
        const uint8_t *qs = dkeys + j0 * (size_t)dw, *last = qs + (b - 1) * (size_t)dw;
        size_t step = first * b, from = lo, hi = lo + step - 1;
        while (hi < nb && key_cmp(bkeys + hi * (size_t)bw, (size_t)bw, last, (size_t)dw) < 0) {
            from = hi + 1;
            step <<= 1;
            hi = from + step - 1;
        }
        if (hi > nb)
            hi = nb;
        /* the first row >= key k lies in [from or lo, hi]: from for the last key (the gallop
         * passed the rows before it), lo for the others.  L[k] is where key k's window
         * starts, H[k] its length, searched without a branch on the comparison (it goes either
         * way at random): the window halves, its start moving up past a lower row */
        for (size_t k = 0; k < b; k++) {
            L[k] = k == b - 1 ? from : lo;
            H[k] = hi - L[k];
        }
        /* the batch's binary searches in lockstep: each level's probes are prefetched before
         * any is compared, so their cache misses overlap instead of following each other */
        for (int more = 1; more;) {
            more = 0;
            for (size_t k = 0; k < b; k++)
                if (H[k] > 1)
                    __builtin_prefetch(bkeys + (L[k] + H[k] / 2 - 1) * (size_t)bw);
            for (size_t k = 0; k < b; k++) {
                size_t n = H[k];
                if (n <= 1)
                    continue;
                size_t half = n / 2, probe = L[k] + half - 1;
                int below = key_cmp(bkeys + probe * (size_t)bw, (size_t)bw, qs + k * (size_t)dw,
                                    (size_t)dw) < 0;
                L[k] += below ? half : 0;
                H[k] = n - half;
                more |= H[k] > 1;
            }
        }
        /* one row left in each window: the answer is it or the next */
        for (size_t k = 0; k < b; k++)
            if (H[k] == 1 && L[k] < nb &&
                key_cmp(bkeys + L[k] * (size_t)bw, (size_t)bw, qs + k * (size_t)dw,
                        (size_t)dw) < 0)
                L[k]++;
        for (size_t k = 0; k < b; k++) {
            size_t at = L[k], j = j0 + k;
            if (at < nb && balive[at] && dalive[j] &&
                key_cmp(bkeys + at * (size_t)bw, (size_t)bw, qs + k * (size_t)dw,
                        (size_t)dw) == 0) {
                if (dseq[j] >= seq_at(bseq, isz, at)) {
                    balive[at] = 0;
                    killed[nk++] = (int64_t)at;
                } else {
                    dalive[j] = 0;
                }
            }
        }
        lo = L[b - 1];
    }
    Py_END_ALLOW_THREADS
    out = PyBytes_FromStringAndSize((char *)killed, (Py_ssize_t)(nk * 8));
done:
    free(killed);
    PyBuffer_Release(&dk);
    PyBuffer_Release(&ds);
    PyBuffer_Release(&da);
    PyBuffer_Release(&bk);
    PyBuffer_Release(&ba);
    PyBuffer_Release(&bs);
    return out;
}

/* ------------------------------------------------------------------------------- read_value */
/* read_value(src, offset, size, key) -> bytes | None
 *
 * The value of the record of `key` (str) at [offset, offset + size) of a segment, read from
 * `src`: an int file descriptor (one pread) or a buffer (a sealed segment's read-only mapping).
 * Checked as segment.decode checks it, for a value: the header's lengths add up to `size`, no
 * flag is set (not a tombstone), the CRC over everything after it matches and the key is
 * `key`.  None when any check fails or the read comes back short: the caller then reads the
 * record again in Python, which names what is wrong; the bytes are never returned.  An
 * OSError when pread fails. */
/* The value of the record of key `k` (utf-8, `klen` bytes) at [off, off + size) of `src`, as
 * read_value() below returns it: bytes, None (a check failed or the read came back short), or
 * NULL with an OSError.  With a buffer `src`, `*beyond` (when given) is set if the record lies
 * past its end: a record of the active segment appended past its mapping, for the fd to read. */
static PyObject *read_checked_in(PyObject *src, unsigned long long off, Py_ssize_t size,
                                 const char *k, Py_ssize_t klen, int *beyond) {
    if (size < HEADER)
        Py_RETURN_NONE;
    uint8_t stackbuf[4096], *heap = NULL;
    const uint8_t *rec;
    uint32_t klen_rec, vlen;
    Py_buffer view;
    int have_view = 0;
    PyObject *out = NULL;
    if (PyLong_Check(src)) {
        int fd = (int)PyLong_AsLong(src);
        if (fd == -1 && PyErr_Occurred())
            return NULL;
        uint8_t *buf = stackbuf;
        if ((size_t)size > sizeof stackbuf) {
            buf = heap = malloc((size_t)size);
            if (!heap)
                return PyErr_NoMemory();
        }
        ssize_t got;
        Py_BEGIN_ALLOW_THREADS
        got = pread(fd, buf, (size_t)size, (off_t)off);
        Py_END_ALLOW_THREADS
        if (got < 0) {
            PyErr_SetFromErrno(PyExc_OSError);
            goto done;
        }
        if (got != size)
            goto none;
        rec = buf;
    } else {
        if (PyObject_GetBuffer(src, &view, PyBUF_SIMPLE) < 0)
            goto done;
        have_view = 1;
        if (off > (unsigned long long)view.len ||
            (unsigned long long)size > (unsigned long long)view.len - off) {
            if (beyond)
                *beyond = 1;
            goto none;
        }
        rec = (const uint8_t *)view.buf + off;
    }
    klen_rec = le32(rec + 12);
    vlen = le32(rec + 16);
    if (rec[20] != 0 || klen_rec != (uint64_t)klen ||
        (uint64_t)HEADER + klen_rec + vlen != (uint64_t)size ||
        memcmp(rec + HEADER, k, (size_t)klen) != 0 ||
        crc32c(rec + 4, (size_t)size - 4) != le32(rec))
        goto none;
    out = PyBytes_FromStringAndSize((const char *)rec + HEADER + klen, (Py_ssize_t)vlen);
    goto done;
none:
    out = Py_None;
    Py_INCREF(out);
done:
    if (have_view)
        PyBuffer_Release(&view);
    free(heap);
    return out;
}

static PyObject *read_checked(PyObject *src, unsigned long long off, Py_ssize_t size,
                              const char *k, Py_ssize_t klen) {
    return read_checked_in(src, off, size, k, klen, NULL);
}

static PyObject *scan_read_value(PyObject *mod, PyObject *args) {
    PyObject *src, *key;
    unsigned long long off;
    Py_ssize_t size;
    if (!PyArg_ParseTuple(args, "OKnU", &src, &off, &size, &key))
        return NULL;
    Py_ssize_t klen;
    const char *k = PyUnicode_AsUTF8AndSize(key, &klen);
    if (!k)
        return NULL;
    return read_checked(src, off, size, k, klen);
}

/* ------------------------------------------------------------------------------- the get path
 * Getter(store): an indexed_fs store's get and get_many as one call each, the reference path of
 * IndexedFSBackend.get / _get_many for keys written since the open (the keydir's overlay, a
 * dict): under the store's lock, the lookup, the segment (its read-only mapping if sealed,
 * else its fd: one pread, GIL released) and read_checked()'s check of the record.
 *
 * What it cannot answer exactly it hands back to Python, which then takes the reference path:
 * a key not in the overlay while array layers exist (a key of the snapshot or of a delta:
 * Layer.row's search), and a record that fails the check (Python reads it again and names
 * what is wrong; the bytes are never returned). */
typedef struct {
    PyObject_HEAD
    PyObject *store;
    PyObject *acquire, *release;  /* the store lock's bound methods, looked up once */
} Getter;

static PyObject *g_acquire, *g_release, *g_index, *g_d, *g_layers, *g_segments, *g_mapped,
    *g_fd;

static int getter_init(Getter *self, PyObject *args, PyObject *kw) {
    PyObject *store;
    if (!PyArg_ParseTuple(args, "O", &store))
        return -1;
    PyObject *lock = PyObject_GetAttrString(store, "_lock"), *acquire = NULL, *release = NULL;
    if (lock) {
        acquire = PyObject_GetAttr(lock, g_acquire);
        release = PyObject_GetAttr(lock, g_release);
        Py_DECREF(lock);
    }
    if (!acquire || !release) {
        Py_XDECREF(acquire);
        Py_XDECREF(release);
        return -1;
    }
    Py_INCREF(store);
    Py_XSETREF(self->store, store);
    Py_XSETREF(self->acquire, acquire);
    Py_XSETREF(self->release, release);
    return 0;
}

static void getter_dealloc(Getter *self) {
    Py_XDECREF(self->store);
    Py_XDECREF(self->acquire);
    Py_XDECREF(self->release);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* The lookup state of one call (store lock held). */
typedef struct {
    PyObject *d, *segments;
    int layers;   /* whether array layers exist below the overlay */
} lookup;

static int lookup_begin(Getter *self, lookup *lk) {
    lk->d = lk->segments = NULL;
    PyObject *index = PyObject_GetAttr(self->store, g_index), *layers = NULL;
    if (!index)
        return -1;
    lk->d = PyObject_GetAttr(index, g_d);
    layers = PyObject_GetAttr(index, g_layers);
    lk->segments = PyObject_GetAttr(self->store, g_segments);
    Py_DECREF(index);
    if (!lk->d || !layers || !lk->segments || !PyDict_Check(lk->d) ||
        !PyDict_Check(lk->segments)) {
        Py_XDECREF(layers);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_TypeError, "the keydir's overlay and segments are dicts");
        return -1;
    }
    lk->layers = PyObject_IsTrue(layers);
    Py_DECREF(layers);
    return lk->layers < 0 ? -1 : 0;
}

static void lookup_end(lookup *lk) {
    Py_XDECREF(lk->d);
    Py_XDECREF(lk->segments);
}

/* One key: a new reference to its value, Py_None (absent), `miss` (Python's to answer) or
 * NULL with an exception. */
static PyObject *lookup_one(lookup *lk, PyObject *key, PyObject *miss) {
    if (!PyUnicode_CheckExact(key))
        return Py_NewRef(miss);
    PyObject *e = PyDict_GetItemWithError(lk->d, key);
    if (!e) {
        if (PyErr_Occurred())
            return NULL;
        return Py_NewRef(lk->layers ? miss : Py_None);
    }
    if (!PyTuple_CheckExact(e) || PyTuple_GET_SIZE(e) != 4)
        return Py_NewRef(miss);
    PyObject *seg = PyDict_GetItemWithError(lk->segments, PyTuple_GET_ITEM(e, 0));
    if (!seg)
        return PyErr_Occurred() ? NULL : Py_NewRef(miss);
    unsigned long long off = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(e, 1));
    Py_ssize_t size = PyLong_AsSsize_t(PyTuple_GET_ITEM(e, 2));
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t klen;
    const char *k = PyUnicode_AsUTF8AndSize(key, &klen);
    if (!k) {
        PyErr_Clear();
        return Py_NewRef(miss);
    }
    PyObject *src = PyObject_GetAttr(seg, g_mapped), *v = NULL;
    int beyond = 0;
    if (!src)
        return NULL;
    if (src != Py_None) {  /* the mapping; a record past its end is the fd's to read */
        v = read_checked_in(src, off, size, k, klen, &beyond);
        if (!beyond) {
            Py_DECREF(src);
            goto read;
        }
        Py_DECREF(v);
    }
    Py_DECREF(src);
    src = PyObject_GetAttr(seg, g_fd);
    if (!src)
        return NULL;
    v = src == Py_None ? Py_NewRef(Py_None) : read_checked(src, off, size, k, klen);
    Py_DECREF(src);
read:
    if (v == Py_None) {  /* failed the check (or no fd): Python reads it again and names it */
        Py_DECREF(v);
        return Py_NewRef(miss);
    }
    return v;
}

static int lock_call(PyObject *method) {
    PyObject *r = PyObject_CallNoArgs(method);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* Release the store lock, keeping an exception already raised; -1 if the release failed (its
 * exception replaces the other). */
static int unlock(Getter *self) {
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb);
    if (lock_call(self->release) < 0) {
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(tb);
        return -1;
    }
    PyErr_Restore(et, ev, tb);
    return 0;
}

/* get(key, miss) -> bytes | None | miss */
static PyObject *getter_get(Getter *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "get(key, miss)");
        return NULL;
    }
    if (lock_call(self->acquire) < 0)
        return NULL;
    lookup lk;
    PyObject *out = lookup_begin(self, &lk) < 0 ? NULL : lookup_one(&lk, args[0], args[1]);
    lookup_end(&lk);
    if (unlock(self) < 0)
        Py_CLEAR(out);
    return out;
}

/* get_many(keys: list, miss) -> (found: dict, left: list): every key answered in one pass
 * under the lock; `left` holds the keys Python answers (see above), in order. */
static PyObject *getter_get_many(Getter *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_CheckExact(args[0])) {
        PyErr_SetString(PyExc_TypeError, "get_many(keys: list, miss)");
        return NULL;
    }
    PyObject *keys = args[0], *miss = args[1];
    PyObject *found = PyDict_New(), *left = PyList_New(0), *out = NULL;
    if (!found || !left || lock_call(self->acquire) < 0)
        goto fail;
    lookup lk;
    int ok = lookup_begin(self, &lk) == 0;
    Py_INCREF(keys);
    for (Py_ssize_t i = 0; ok && i < PyList_GET_SIZE(keys); i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        PyObject *v = lookup_one(&lk, key, miss);
        if (!v)
            ok = 0;
        else if (v == miss)
            ok = PyList_Append(left, key) == 0;
        else if (v != Py_None)
            ok = PyDict_SetItem(found, key, v) == 0;
        Py_XDECREF(v);
    }
    Py_DECREF(keys);
    lookup_end(&lk);
    if (unlock(self) < 0)
        goto fail;
    if (ok)
        out = PyTuple_Pack(2, found, left);
fail:
    Py_XDECREF(found);
    Py_XDECREF(left);
    return out;
}

static PyMethodDef getter_methods[] = {
    {"get", (PyCFunction)(void (*)(void))getter_get, METH_FASTCALL,
     "get(key, miss) -> bytes | None | miss: lookup, read and check in one call"},
    {"get_many", (PyCFunction)(void (*)(void))getter_get_many, METH_FASTCALL,
     "get_many(keys, miss) -> (found, left): the keys' values, and the keys left to Python"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject GetterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "backends.indexed_fs._scan.Getter",
    .tp_doc = "Getter(store): an indexed_fs store's get path in one C call.",
    .tp_basicsize = sizeof(Getter),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)getter_init,
    .tp_dealloc = (destructor)getter_dealloc,
    .tp_methods = getter_methods,
};

/* crc32c(data) -> int: the CRC this module checks records with (for tests against the
 * crc32c package). */
static PyObject *scan_crc32c(PyObject *mod, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    uint32_t c = crc32c(b.buf, (size_t)b.len);
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(c);
}

/* use_hw_crc(flag) -> previous: the CRC instruction on or off (tests: the tables agree) */
static PyObject *scan_use_hw_crc(PyObject *mod, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0)
        return NULL;
    int prev = crc_hw;
#ifdef HAVE_SSE42_PATH
    unsigned a, b, c, d;
    crc_hw = on && __get_cpuid(1, &a, &b, &c, &d) && (c & bit_SSE4_2);
#endif
    return PyBool_FromLong(prev);
}

static PyMethodDef module_methods[] = {
    {"walk", scan_walk, METH_O,
     "walk(data) -> (start, klen, size, seq, flags, bad, key_at, keys, stop_at, stop_kind): "
     "every record's "
     "header and CRC checked"},
    {"resolve", scan_resolve, METH_VARARGS,
     "resolve(spans, seq, flags) -> None | (width, value_keys, value_idx, tomb_idx)"},
    {"join", scan_join, METH_VARARGS,
     "join(dkeys, dw, dseq, dalive, bkeys, bw, balive, bseq, itemsize) -> killed base rows"},
    {"read_value", scan_read_value, METH_VARARGS,
     "read_value(src, offset, size, key) -> bytes | None: one record read and checked"},
    {"crc32c", scan_crc32c, METH_O, "crc32c(data) -> int"},
    {"use_hw_crc", scan_use_hw_crc, METH_O,
     "use_hw_crc(flag) -> previous: the CRC instruction on or off (tests)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_scan",
    "The crash rebuild's segment walk and record resolution, and the read path's record check, "
    "in C (see _scan.c).", -1,
    module_methods,
};

PyMODINIT_FUNC PyInit__scan(void) {
    crc_init();
#define NAME(var, text) if (!(var = PyUnicode_InternFromString(text))) return NULL;
    NAME(g_acquire, "acquire") NAME(g_release, "release") NAME(g_index, "_index") NAME(g_d, "d")
    NAME(g_layers, "_layers") NAME(g_segments, "_segments") NAME(g_mapped, "mapped")
    NAME(g_fd, "fd")
#undef NAME
    if (PyType_Ready(&GetterType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m) {
        Py_INCREF(&GetterType);
        if (PyModule_AddObject(m, "Getter", (PyObject *)&GetterType) < 0) {
            Py_DECREF(&GetterType);
            Py_DECREF(m);
            return NULL;
        }
    }
    if (m && PyModule_AddIntConstant(m, "HW_CRC", crc_hw) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
