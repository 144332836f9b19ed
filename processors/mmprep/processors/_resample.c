/* The resize kernel of resize.py: torchvision's antialiased uint8 resize (horizontal pass,
 * rounded to uint8, then vertical pass), in integer arithmetic equal to PyTorch's to the
 * byte, with each output row written straight into the caller's tensor layout (patches,
 * tiles, or plain rows), through a per-channel lookup table where the tensor is not uint8.
 *
 * resize.py computes every table (windows, weights, precisions, runs, output offsets) in
 * numpy and caches them per size; this file only does the arithmetic. It takes buffers (no
 * numpy headers needed to build it) and releases the GIL while it works.
 *
 * A pass's output pixel is (sum over its taps k of in[start + k] * w[k] + 2^(precision-1))
 * >> precision, clamped to 0..255: each output reads a window of consecutive source pixels
 * (rows, for the vertical pass), with PyTorch's int16 weights and int32 sums (they cannot
 * overflow). Rows are kept planar inside (each channel's pixels contiguous). On x86-64 with
 * AVX2 the passes multiply two taps at once (vpmaddwd: uint8 pixels widened to int16, pairs
 * of int16 weights, int32 sums), the horizontal pass across 16 outputs at a time where the
 * windows slide by one pixel per output (`runs`: a size that changes little, 1280 -> 1288),
 * else output by output; elsewhere the same sums in plain C. Integer sums: every path gives
 * the same bytes (tests/processors compare them).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#define X86_AVX2 1
#include <immintrin.h>
#define AVX2 __attribute__((target("avx2")))
#endif
/* The plain loops that the compiler vectorizes itself (splitting a row into planes, the
 * copies into the layout): also built for AVX2, and the copy the CPU takes is picked when
 * the module loads (GCC's function multiversioning). */
#if defined(X86_AVX2) && !defined(__clang__)
#define CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CLONES
#endif

/* One horizontal pass, the same for every channel: `width` output pixels per row. */
typedef struct {
    int taps8, precision; /* taps8: each output's weights, zero-padded to a multiple of 8 */
    Py_ssize_t width;
    const int32_t *starts;  /* width: the first source pixel of each output's window */
    const int16_t *weights; /* width x taps8 */
    const int32_t *pairs;   /* with runs: (taps8 / 2) x width, two int16 weights an int32 */
    const int32_t *runs;    /* (first output, end): stretches whose windows slide by one */
    Py_ssize_t runs_count;  /* 0: every output's window on its own */
} Horizontal;

/* One vertical pass: `rows` output rows, each the weighted sum of `taps` source rows. */
typedef struct {
    int taps, precision;
    Py_ssize_t rows;
    const int32_t *sources; /* rows x taps: the source row of each tap */
    const int32_t *weights; /* rows x taps (int16 values) */
} Vertical;

/* Where output row i goes: pixel x of channel channel_of[e] is written, for each place e,
 * at element rows[i] + columns[x] + places[e] of the output (several places may take one
 * channel: an image's copies in its temporal block). `table`: the output value of each
 * uint8 level per channel (channels x 256 elements of `itemsize` bytes), or NULL to write
 * the uint8 levels themselves. `spans` (made here from `columns`): the stretches of pixels
 * whose columns go up by one step, each written as one copy where the step is 1 (a patch's
 * row: 14 pixels), else as one strided loop (pixels interleaved: a whole row). */
typedef struct {
    char *out;
    int itemsize, channels, places_count;
    Py_ssize_t width, spans_count;
    const int64_t *rows, *columns, *places;
    const int32_t *channel_of;
    const char *table;
    Py_ssize_t *spans; /* (first pixel, end, step) */
} Scatter;

static int simd = 1; /* AVX2 where the CPU has it; off: the plain C sums (tests compare both) */

static inline uint8_t finish(int32_t sum, int precision) {
    int32_t value = sum >> precision;
    return (uint8_t)(value < 0 ? 0 : value > 255 ? 255 : value);
}

CLONES static void planar(const uint8_t *restrict in, Py_ssize_t width, int channels, Py_ssize_t stride,
                   uint8_t *restrict out) {
    if (channels == 3) { /* RGB: the three planes in one pass */
        uint8_t *restrict r = out, *restrict g = out + stride, *restrict b = out + 2 * stride;
        for (Py_ssize_t x = 0; x < width; x++) r[x] = in[3 * x], g[x] = in[3 * x + 1], b[x] = in[3 * x + 2];
        return;
    }
    for (int c = 0; c < channels; c++)
        for (Py_ssize_t x = 0; x < width; x++) out[c * stride + x] = in[x * channels + c];
}

/* ---- the plain C sums ---- */

static void horizontal_outputs(const Horizontal *h, const uint8_t *in, uint8_t *out, Py_ssize_t from,
                               Py_ssize_t to) {
    const int32_t bias = 1 << (h->precision - 1);
    for (Py_ssize_t x = from; x < to; x++) {
        const uint8_t *window = in + h->starts[x];
        const int16_t *weight = h->weights + x * h->taps8;
        int32_t sum = bias;
        for (int k = 0; k < h->taps8; k++) sum += (int32_t)window[k] * weight[k];
        out[x] = finish(sum, h->precision);
    }
}

static void vertical_values(const Vertical *v, Py_ssize_t i, const uint8_t **window, uint8_t *out,
                            Py_ssize_t from, Py_ssize_t to) {
    const int32_t bias = 1 << (v->precision - 1);
    const int32_t *weight = v->weights + i * v->taps;
    for (Py_ssize_t j = from; j < to; j++) {
        int32_t sum = bias;
        for (int k = 0; k < v->taps; k++) sum += (int32_t)window[k][j] * weight[k];
        out[j] = finish(sum, v->precision);
    }
}

/* ---- AVX2: two taps per multiply ---- */

#ifdef X86_AVX2
/* 16 int32 sums (lo: outputs 0-7, hi: 8-15) shifted, clamped to 0..255, stored in order. */
AVX2 static inline void store16(__m256i lo, __m256i hi, int precision, uint8_t *out) {
    lo = _mm256_srai_epi32(lo, precision), hi = _mm256_srai_epi32(hi, precision);
    __m256i words = _mm256_permute4x64_epi64(_mm256_packs_epi32(lo, hi), 0xD8); /* 0-15 as int16 */
    __m128i bytes = _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
    _mm_storeu_si128((__m128i *)out, bytes);
}

/* Outputs [from, to) of a run: the windows slide by one, so each tap's pixels for 16
 * outputs are 16 consecutive bytes; taps go two by two against their paired weights. */
AVX2 static Py_ssize_t horizontal_run(const Horizontal *h, const uint8_t *in, uint8_t *out, Py_ssize_t from,
                                      Py_ssize_t to) {
    const __m256i bias = _mm256_set1_epi32(1 << (h->precision - 1));
    const uint8_t *base = in + h->starts[from] - from; /* pixel x's window starts at base + x */
    Py_ssize_t x = from;
    for (; x + 16 <= to; x += 16) {
        __m256i lo = bias, hi = bias;
        for (int p = 0; p < h->taps8 / 2; p++) {
            const __m128i a = _mm_loadu_si128((const __m128i *)(base + x + 2 * p));
            const __m128i b = _mm_loadu_si128((const __m128i *)(base + x + 2 * p + 1));
            const int32_t *pair = h->pairs + (Py_ssize_t)p * h->width + x;
            lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(a, b)),
                                                        _mm256_loadu_si256((const __m256i *)pair)));
            hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi8(a, b)),
                                                        _mm256_loadu_si256((const __m256i *)(pair + 8))));
        }
        store16(lo, hi, h->precision, out + x);
    }
    return x;
}

/* Outputs [from, to), each its own window: 8 taps a multiply, then the lanes summed. */
AVX2 static void horizontal_dots(const Horizontal *h, const uint8_t *in, uint8_t *out, Py_ssize_t from,
                                 Py_ssize_t to) {
    const int32_t bias = 1 << (h->precision - 1);
    for (Py_ssize_t x = from; x < to; x++) {
        const uint8_t *window = in + h->starts[x];
        const int16_t *weight = h->weights + x * h->taps8;
        __m128i sums = _mm_setzero_si128();
        for (int k = 0; k < h->taps8; k += 8) {
            __m128i pixels = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i *)(window + k)));
            sums = _mm_add_epi32(sums, _mm_madd_epi16(pixels, _mm_loadu_si128((const __m128i *)(weight + k))));
        }
        sums = _mm_add_epi32(sums, _mm_shuffle_epi32(sums, 0x4E));
        sums = _mm_add_epi32(sums, _mm_shuffle_epi32(sums, 0xB1));
        out[x] = finish(bias + _mm_cvtsi128_si32(sums), h->precision);
    }
}

AVX2 static void horizontal_row_avx2(const Horizontal *h, const uint8_t *in, uint8_t *out) {
    if (h->runs_count == 0) {
        horizontal_dots(h, in, out, 0, h->width);
        return;
    }
    for (Py_ssize_t r = 0; r < h->runs_count; r++) {
        const Py_ssize_t from = h->runs[2 * r], to = h->runs[2 * r + 1];
        horizontal_dots(h, in, out, horizontal_run(h, in, out, from, to), to);
    }
}

/* 32 values at a time; tap pairs as above, the pair's two rows' bytes interleaved. */
AVX2 static void vertical_row_avx2(const Vertical *v, Py_ssize_t i, const uint8_t **window, Py_ssize_t n,
                                   uint8_t *out) {
    const __m256i bias = _mm256_set1_epi32(1 << (v->precision - 1));
    const int32_t *weight = v->weights + i * v->taps;
    const __m128i zero = _mm_setzero_si128();
    Py_ssize_t j = 0;
    for (; j + 16 <= n; j += 16) {
        __m256i lo = bias, hi = bias;
        for (int k = 0; k < v->taps; k += 2) {
            const int has_next = k + 1 < v->taps;
            const __m128i a = _mm_loadu_si128((const __m128i *)(window[k] + j));
            const __m128i b = has_next ? _mm_loadu_si128((const __m128i *)(window[k + 1] + j)) : zero;
            const int32_t pair = (weight[k] & 0xFFFF) | (int32_t)((uint32_t)(has_next ? weight[k + 1] : 0) << 16);
            const __m256i weights = _mm256_set1_epi32(pair);
            lo = _mm256_add_epi32(lo, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpacklo_epi8(a, b)), weights));
            hi = _mm256_add_epi32(hi, _mm256_madd_epi16(_mm256_cvtepu8_epi16(_mm_unpackhi_epi8(a, b)), weights));
        }
        store16(lo, hi, v->precision, out + j);
    }
    vertical_values(v, i, window, out, j, n);
}

static int has_avx2(void) {
    static int known = -1;
    if (known < 0) known = __builtin_cpu_supports("avx2") ? 1 : 0;
    return known;
}
#endif

/* One channel's row of source pixels (padded: windows may read past its end, where their
 * weights are zero) to h->width outputs. */
static void horizontal_row(const Horizontal *h, const uint8_t *in, uint8_t *out) {
#ifdef X86_AVX2
    if (simd && has_avx2()) {
        horizontal_row_avx2(h, in, out);
        return;
    }
#endif
    horizontal_outputs(h, in, out, 0, h->width);
}

static void vertical_row(const Vertical *v, Py_ssize_t i, const uint8_t **window, Py_ssize_t n, uint8_t *out) {
#ifdef X86_AVX2
    if (simd && has_avx2()) {
        vertical_row_avx2(v, i, window, n, out);
        return;
    }
#endif
    vertical_values(v, i, window, out, 0, n);
}

/* ---- into the layout ---- */

static inline void copy_bytes(char *to, const uint8_t *from, Py_ssize_t count) {
    if (count >= 8 && count <= 16) { /* a patch's row: two overlapping 8-byte moves */
        uint64_t head, tail;
        memcpy(&head, from, 8), memcpy(&tail, from + count - 8, 8);
        memcpy(to, &head, 8), memcpy(to + count - 8, &tail, 8);
    } else {
        memcpy(to, from, (size_t)count);
    }
}

#define LOOKED_UP(TYPE)                                                                          \
    {                                                                                            \
        const TYPE *levels = (const TYPE *)s->table + 256 * c;                                   \
        TYPE *to = (TYPE *)s->out + base;                                                        \
        for (Py_ssize_t p = 0; p < s->spans_count; p++) {                                        \
            const Py_ssize_t first = s->spans[3 * p], end = s->spans[3 * p + 1];                 \
            const Py_ssize_t step = s->spans[3 * p + 2];                                         \
            TYPE *at = to + s->columns[first];                                                   \
            for (Py_ssize_t x = first; x < end; x++) at[(x - first) * step] = levels[values[x]]; \
        }                                                                                        \
    }

/* Output row i, planar (channel by channel, `width` pixels each), into the layout. */
CLONES static void scatter_row(const Scatter *s, Py_ssize_t i, const uint8_t *row) {
    for (int e = 0; e < s->places_count; e++) {
        const int c = s->channel_of[e];
        const uint8_t *values = row + c * s->width;
        const int64_t base = s->rows[i] + s->places[e];
        if (s->table == NULL) {
            char *to = s->out + base;
            for (Py_ssize_t p = 0; p < s->spans_count; p++) {
                const Py_ssize_t first = s->spans[3 * p], end = s->spans[3 * p + 1], step = s->spans[3 * p + 2];
                char *at = to + s->columns[first];
                if (step == 1) {
                    copy_bytes(at, values + first, end - first);
                } else {
                    for (Py_ssize_t x = first; x < end; x++) at[(x - first) * step] = (char)values[x];
                }
            }
        } else if (s->itemsize == 4) {
            LOOKED_UP(uint32_t)
        } else if (s->itemsize == 2) {
            LOOKED_UP(uint16_t)
        } else {
            LOOKED_UP(uint8_t)
        }
    }
}

/* The spans of `columns` (pixels whose columns go up by one step), as (first, end, step). */
static Py_ssize_t find_spans(const int64_t *columns, Py_ssize_t width, Py_ssize_t *spans) {
    Py_ssize_t count = 0, first = 0;
    while (first < width) {
        Py_ssize_t end = first + 1;
        const int64_t step = end < width ? columns[end] - columns[first] : 1;
        while (end < width && columns[end] - columns[end - 1] == step) end++;
        spans[3 * count] = first, spans[3 * count + 1] = end, spans[3 * count + 2] = (Py_ssize_t)step;
        count++, first = end;
    }
    return count;
}

/* ---- the whole resize ---- */

typedef struct {
    const uint8_t *in;
    Py_ssize_t height, in_width;
    int channels;
    Py_ssize_t split_stride; /* a source row's planes, each padded for the windows' reads */
    const Horizontal *h;
    uint8_t *split;
} Source;

/* Source row r split into planes and resized across, into `out` (width x channels values). */
static void across(const Source *source, Py_ssize_t r, uint8_t *out) {
    const Horizontal *h = source->h;
    const uint8_t *pixels = source->in + r * source->in_width * source->channels;
    if (h == NULL) {
        planar(pixels, source->in_width, source->channels, source->in_width, out);
        return;
    }
    planar(pixels, source->in_width, source->channels, source->split_stride, source->split);
    for (int c = 0; c < source->channels; c++)
        horizontal_row(h, source->split + c * source->split_stride, out + c * h->width);
}

/* The whole resize of one (height, in_width x channels) image into the scatter's output.
 * A pass that is NULL leaves that axis as it is. The rows resized across wait for the
 * vertical pass in a ring of `ring` rows (its taps' span), not in a whole intermediate
 * image: each is made just before the output rows that read it, while it is in the cache.
 * A row the ring no longer holds is made again (never needed when, as here, each output
 * row reads a window of source rows that moves down). */
static int resample(const uint8_t *in, Py_ssize_t height, Py_ssize_t in_width, int channels, const Horizontal *h,
                    const Vertical *v, Scatter *s) {
    const Py_ssize_t width = s->width, n = width * channels;
    const Py_ssize_t stride = h != NULL ? in_width + h->taps8 + 32 : in_width;
    const Py_ssize_t ring = v != NULL ? v->taps + 2 : 1;
    Source source = {in, height, in_width, channels, stride, h, NULL};
    uint8_t *row = malloc((size_t)n), *rows = malloc((size_t)(ring * n));
    source.split = calloc((size_t)(stride * channels), 1); /* its padding stays zero */
    Py_ssize_t *held = malloc(sizeof(Py_ssize_t) * (size_t)ring); /* the source row in each slot */
    const uint8_t **window = malloc(sizeof(uint8_t *) * (size_t)(v != NULL ? v->taps : 1));
    s->spans = malloc(sizeof(Py_ssize_t) * 3 * (size_t)width);
    int failed = row == NULL || rows == NULL || source.split == NULL || held == NULL || window == NULL ||
                 s->spans == NULL;
    if (!failed) {
        s->spans_count = find_spans(s->columns, width, s->spans);
        if (v == NULL) {
            for (Py_ssize_t i = 0; i < height; i++) {
                across(&source, i, row);
                scatter_row(s, i, row);
            }
        } else {
            for (Py_ssize_t slot = 0; slot < ring; slot++) held[slot] = -1;
            for (Py_ssize_t i = 0; i < v->rows; i++) {
                for (int k = 0; k < v->taps; k++) {
                    const Py_ssize_t r = v->sources[i * v->taps + k], slot = r % ring;
                    if (held[slot] != r) {
                        across(&source, r, rows + slot * n);
                        held[slot] = r;
                    }
                    window[k] = rows + slot * n;
                }
                vertical_row(v, i, window, n, row);
                scatter_row(s, i, row);
            }
        }
    }
    free(row), free(rows), free(source.split), free(held), free(window), free(s->spans);
    return failed ? -1 : 0;
}

/* ---- Python ---- */

typedef struct {
    Py_buffer views[16];
    int count;
} Views;

static void release(Views *views) {
    for (int i = 0; i < views->count; i++) PyBuffer_Release(&views->views[i]);
}

/* The buffer of `obj` as `itemsize`-byte elements (None: NULL, 0 elements), at least
 * `least` of them; their count in *count. */
static int take(Views *views, PyObject *obj, int writable, Py_ssize_t itemsize, Py_ssize_t least,
                const char *name, void **pointer, Py_ssize_t *count) {
    *pointer = NULL;
    if (count != NULL) *count = 0;
    if (obj == Py_None) return 0;
    Py_buffer *view = &views->views[views->count];
    if (PyObject_GetBuffer(obj, view, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS) < 0) return -1;
    views->count++;
    if (view->len / itemsize < least) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes, fewer than the %zd needed", name, view->len,
                     least * itemsize);
        return -1;
    }
    *pointer = view->buf;
    if (count != NULL) *count = view->len / itemsize;
    return 0;
}

static int out_of_range(const char *name) {
    PyErr_Format(PyExc_ValueError, "%s: an index out of range", name);
    return -1;
}

static int check_int32(const int32_t *values, Py_ssize_t count, int64_t end, const char *name) {
    for (Py_ssize_t i = 0; i < count; i++)
        if (values[i] < 0 || values[i] >= end) return out_of_range(name);
    return 0;
}

static int64_t largest(const int64_t *values, Py_ssize_t count, int64_t *smallest) {
    int64_t most = values[0], least = values[0];
    for (Py_ssize_t i = 1; i < count; i++) {
        if (values[i] > most) most = values[i];
        if (values[i] < least) least = values[i];
    }
    *smallest = least;
    return most;
}

/* Every index the tables hold inside the buffers it indexes: a wrong table is a
 * ValueError, never a write or read out of bounds. A window starts inside its row and
 * reads at most taps8 pixels (its row's padding holds that many, and a run's 16 more). */
static int check_tables(const Horizontal *h, const Vertical *v, const Scatter *s, Py_ssize_t height,
                        Py_ssize_t in_width, Py_ssize_t out_items) {
    if (h != NULL) {
        if (check_int32(h->starts, h->width, in_width, "window starts") < 0) return -1;
        for (Py_ssize_t r = 0; r < h->runs_count; r++) {
            const int32_t from = h->runs[2 * r], to = h->runs[2 * r + 1];
            if (from < 0 || to > h->width || from >= to) return out_of_range("runs");
            for (int32_t x = from + 1; x < to; x++)
                if (h->starts[x] != h->starts[x - 1] + 1) return out_of_range("runs");
        }
    }
    if (v != NULL) {
        if (check_int32(v->sources, v->rows * v->taps, height, "vertical sources") < 0) return -1;
        for (Py_ssize_t k = 0; k < v->rows * v->taps; k++)
            if (v->weights[k] < INT16_MIN || v->weights[k] > INT16_MAX) return out_of_range("vertical weights");
    }
    if (check_int32(s->channel_of, s->places_count, s->channels, "channel_of") < 0) return -1;
    int64_t low_row, low_column, low_place;
    int64_t high = largest(s->rows, v != NULL ? v->rows : height, &low_row) +
                   largest(s->columns, s->width, &low_column) + largest(s->places, s->places_count, &low_place);
    if (low_row < 0 || low_column < 0 || low_place < 0 || high >= out_items) return out_of_range("scatter");
    return 0;
}

PyDoc_STRVAR(resample_doc,
"resample(pixels, height, width, channels, horizontal, vertical, scatter)\n\n"
"Resize the uint8 (height, width, channels) `pixels` and write the result into the\n"
"scatter's output. `horizontal`: None (the width kept) or (out_width, taps8, precision,\n"
"starts, weights, pairs, runs); `vertical`: None (the height kept) or (out_height, taps,\n"
"precision, sources, weights); `scatter`: (out, itemsize, rows, columns, places,\n"
"channel_of, table or None). Tables are C-contiguous buffers: int32 (weights of the\n"
"horizontal pass int16, pairs and runs None where it has no runs), the scatter's offsets\n"
"int64 (elements of the output); resize.py makes them.");

static PyObject *py_resample(PyObject *self, PyObject *args) {
    PyObject *pixels, *hargs, *vargs, *sargs;
    PyObject *starts, *hweights, *pairs, *runs, *sources, *vweights;
    PyObject *out, *rows, *out_columns, *places, *channel_of, *table;
    Py_ssize_t height, width, channels, out_width, out_items, places_count;
    Views views = {.count = 0};
    Horizontal h_pass = {0}, *h = NULL;
    Vertical v_pass = {0}, *v = NULL;
    Scatter s = {0};
    const uint8_t *in;
    if (!PyArg_ParseTuple(args, "OnnnOOO", &pixels, &height, &width, &channels, &hargs, &vargs, &sargs))
        return NULL;
    if (height < 1 || width < 1 || channels < 1 || channels > 4) {
        PyErr_SetString(PyExc_ValueError, "pixels: 1 to 4 channels, at least 1x1");
        return NULL;
    }
    out_width = width;
    if (take(&views, pixels, 0, 1, height * width * channels, "pixels", (void **)&in, NULL) < 0) goto fail;
    if (hargs != Py_None) {
        Py_ssize_t runs_items;
        if (!PyArg_ParseTuple(hargs, "niiOOOO", &out_width, &h_pass.taps8, &h_pass.precision, &starts, &hweights,
                              &pairs, &runs))
            goto fail;
        h_pass.width = out_width;
        if (out_width < 1 || h_pass.taps8 < 8 || h_pass.taps8 % 8 || h_pass.precision < 1 || h_pass.precision > 22) {
            PyErr_SetString(PyExc_ValueError, "horizontal: width, taps or precision out of range");
            goto fail;
        }
        if (take(&views, starts, 0, 4, out_width, "starts", (void **)&h_pass.starts, NULL) < 0 ||
            take(&views, hweights, 0, 2, out_width * h_pass.taps8, "weights", (void **)&h_pass.weights, NULL) < 0 ||
            take(&views, pairs, 0, 4, runs == Py_None ? 0 : out_width * h_pass.taps8 / 2, "pairs",
                 (void **)&h_pass.pairs, NULL) < 0 ||
            take(&views, runs, 0, 8, 0, "runs", (void **)&h_pass.runs, &runs_items) < 0)
            goto fail;
        h_pass.runs_count = runs_items;
        if (h_pass.runs_count && h_pass.pairs == NULL) {
            PyErr_SetString(PyExc_ValueError, "horizontal: runs without their paired weights");
            goto fail;
        }
        h = &h_pass;
    }
    if (vargs != Py_None) {
        if (!PyArg_ParseTuple(vargs, "niiOO", &v_pass.rows, &v_pass.taps, &v_pass.precision, &sources, &vweights))
            goto fail;
        if (v_pass.rows < 1 || v_pass.taps < 1 || v_pass.precision < 1 || v_pass.precision > 22) {
            PyErr_SetString(PyExc_ValueError, "vertical: height, taps or precision out of range");
            goto fail;
        }
        Py_ssize_t count = v_pass.rows * v_pass.taps;
        if (take(&views, sources, 0, 4, count, "sources", (void **)&v_pass.sources, NULL) < 0 ||
            take(&views, vweights, 0, 4, count, "vertical weights", (void **)&v_pass.weights, NULL) < 0)
            goto fail;
        v = &v_pass;
    }
    if (!PyArg_ParseTuple(sargs, "OiOOOOO", &out, &s.itemsize, &rows, &out_columns, &places, &channel_of, &table))
        goto fail;
    if (s.itemsize != 1 && s.itemsize != 2 && s.itemsize != 4) {
        PyErr_Format(PyExc_ValueError, "itemsize %d: only 1, 2 or 4", s.itemsize);
        goto fail;
    }
    if (s.itemsize != 1 && table == Py_None) {
        PyErr_SetString(PyExc_ValueError, "an output wider than uint8 needs a table");
        goto fail;
    }
    s.channels = (int)channels;
    s.width = out_width;
    if (take(&views, out, 1, s.itemsize, 1, "out", (void **)&s.out, &out_items) < 0 ||
        take(&views, rows, 0, 8, v != NULL ? v->rows : height, "rows", (void **)&s.rows, NULL) < 0 ||
        take(&views, out_columns, 0, 8, out_width, "columns", (void **)&s.columns, NULL) < 0 ||
        take(&views, places, 0, 8, 1, "places", (void **)&s.places, &places_count) < 0 ||
        take(&views, channel_of, 0, 4, places_count, "channel_of", (void **)&s.channel_of, NULL) < 0 ||
        take(&views, table, 0, s.itemsize, 256 * channels, "table", (void **)&s.table, NULL) < 0)
        goto fail;
    s.places_count = (int)places_count;
    if (check_tables(h, v, &s, height, width, out_items) < 0) goto fail;
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = resample(in, height, width, (int)channels, h, v, &s);
    Py_END_ALLOW_THREADS
    release(&views);
    if (failed) return PyErr_NoMemory();
    Py_RETURN_NONE;
fail:
    release(&views);
    return NULL;
}

PyDoc_STRVAR(use_simd_doc,
"use_simd(on) -> bool\n\n"
"Whether the passes use the CPU's vector instructions (AVX2 on x86-64, where it has them),\n"
"or the same sums in plain C; returns the setting before. For tests, which compare the two.");

static PyObject *py_use_simd(PyObject *self, PyObject *arg) {
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
    int before = simd;
    simd = on;
    return PyBool_FromLong(before);
}

static PyMethodDef methods[] = {
    {"resample", py_resample, METH_VARARGS, resample_doc},
    {"use_simd", py_use_simd, METH_O, use_simd_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_resample",
    "torchvision's antialiased uint8 resize, exact, written into a tensor layout (resize.py).",
    -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__resample(void) { return PyModule_Create(&module); }
