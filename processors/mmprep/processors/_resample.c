/* The resize kernel of resize.py: torchvision's antialiased uint8 resize (horizontal pass,
 * rounded to uint8, then vertical pass), in integer arithmetic equal to PyTorch's to the
 * byte, with each output row written straight into the caller's tensor layout (patches,
 * tiles, or plain rows), through a per-channel lookup table where the tensor is not uint8.
 *
 * resize.py computes every table (taps, weights, precisions, runs, output offsets) in
 * numpy and caches them per size; this file only does the arithmetic. It takes buffers (no
 * numpy headers needed to build it) and releases the GIL while it works.
 *
 * A pass's output value j is (sum over taps k of in[col_k[j]] * w_k[j] + 2^(prec-1)) >> prec,
 * clamped to 0..255, in int32 (PyTorch's int16 weights; the sums cannot overflow). Where a
 * tap's source columns go up one by one over a stretch of outputs (nearly everywhere when
 * the size changes little), that stretch is read as a slice: the compiler vectorizes the
 * multiply-add over it, where a gather per value would not be.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* x86-64: an AVX2 copy of the hot loops beside the baseline one, picked when the module
 * loads by what the CPU has (GCC's function multiversioning), so one build runs anywhere. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__linux__)
#define HOT __attribute__((target_clones("avx2", "default")))
#else
#define HOT
#endif

/* One horizontal pass, the same for every channel: `width` output pixels per row. */
typedef struct {
    int taps, precision;
    Py_ssize_t width;
    const int32_t *weights;   /* taps x width: tap k's weight of each output pixel */
    const int32_t *columns;   /* taps x width: its source pixel */
    const int32_t *run_start; /* taps + 1: tap k's runs are runs[run_start[k] .. run_start[k+1]) */
    const int32_t *runs;      /* (first output pixel, end, first source pixel); none: gather */
} Horizontal;

/* One vertical pass: `rows` output rows, each the weighted sum of `taps` source rows. */
typedef struct {
    int taps, precision;
    Py_ssize_t rows;
    const int32_t *sources; /* rows x taps: the source row of each tap */
    const int32_t *weights; /* rows x taps */
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

/* A row's values are kept planar inside the kernel (each channel's pixels contiguous), so
 * every pass and every copy into the layout reads and writes contiguous memory. */

static inline uint8_t finish(int32_t sum, int precision) {
    int32_t value = sum >> precision;
    return (uint8_t)(value < 0 ? 0 : value > 255 ? 255 : value);
}

HOT static void planar(const uint8_t *restrict in, Py_ssize_t width, int channels, uint8_t *restrict out) {
    if (channels == 3) { /* RGB: the three planes in one pass, which the compiler vectorizes */
        uint8_t *restrict r = out, *restrict g = out + width, *restrict b = out + 2 * width;
        for (Py_ssize_t x = 0; x < width; x++) r[x] = in[3 * x], g[x] = in[3 * x + 1], b[x] = in[3 * x + 2];
        return;
    }
    for (int c = 0; c < channels; c++)
        for (Py_ssize_t x = 0; x < width; x++) out[c * width + x] = in[x * channels + c];
}

/* One channel's row of `in_width` pixels to h->width. */
HOT static void horizontal_row(const Horizontal *h, const uint8_t *restrict in, uint8_t *restrict out,
                               int32_t *restrict sums) {
    const int32_t bias = 1 << (h->precision - 1);
    const Py_ssize_t n = h->width;
    for (Py_ssize_t x = 0; x < n; x++) sums[x] = bias;
    for (int k = 0; k < h->taps; k++) {
        const int32_t *restrict weight = h->weights + (Py_ssize_t)k * n;
        int32_t first = h->run_start[k], last = h->run_start[k + 1];
        if (first == last) { /* no runs: each pixel gathered */
            const int32_t *column = h->columns + (Py_ssize_t)k * n;
            for (Py_ssize_t x = 0; x < n; x++) sums[x] += (int32_t)in[column[x]] * weight[x];
            continue;
        }
        for (int32_t r = first; r < last; r++) {
            const int32_t *run = h->runs + 3 * (Py_ssize_t)r;
            const Py_ssize_t from = run[0], to = run[1]; /* locals: the loop below then vectorizes */
            const uint8_t *restrict source = in + run[2] - from;
            for (Py_ssize_t x = from; x < to; x++) sums[x] += (int32_t)source[x] * weight[x];
        }
    }
    for (Py_ssize_t x = 0; x < n; x++) out[x] = finish(sums[x], h->precision);
}

HOT static void vertical_row(const Vertical *v, Py_ssize_t i, const uint8_t **window, Py_ssize_t n,
                             uint8_t *restrict out, int32_t *restrict sums) {
    const int32_t bias = 1 << (v->precision - 1);
    for (Py_ssize_t j = 0; j < n; j++) sums[j] = bias;
    for (int k = 0; k < v->taps; k++) {
        const uint8_t *restrict row = window[k];
        const int32_t weight = v->weights[i * v->taps + k];
        if (weight == 0) continue;
        for (Py_ssize_t j = 0; j < n; j++) sums[j] += (int32_t)row[j] * weight;
    }
    for (Py_ssize_t j = 0; j < n; j++) out[j] = finish(sums[j], v->precision);
}

static inline void copy_bytes(char *to, const uint8_t *from, Py_ssize_t count) {
    if (count >= 8 && count <= 16) { /* a patch's row: two overlapping 8-byte moves */
        uint64_t head, tail;
        memcpy(&head, from, 8), memcpy(&tail, from + count - 8, 8);
        memcpy(to, &head, 8), memcpy(to + count - 8, &tail, 8);
    } else {
        memcpy(to, from, (size_t)count);
    }
}

#define LOOKED_UP(TYPE)                                                                     \
    {                                                                                       \
        const TYPE *levels = (const TYPE *)s->table + 256 * c;                              \
        TYPE *to = (TYPE *)s->out + base;                                                   \
        for (Py_ssize_t p = 0; p < s->spans_count; p++) {                                   \
            const Py_ssize_t first = s->spans[3 * p], end = s->spans[3 * p + 1];            \
            const Py_ssize_t step = s->spans[3 * p + 2];                                    \
            TYPE *at = to + s->columns[first];                                              \
            for (Py_ssize_t x = first; x < end; x++) at[(x - first) * step] = levels[values[x]]; \
        }                                                                                   \
    }

/* Output row i, planar (channel by channel, `width` pixels each), into the layout. */
HOT static void scatter_row(const Scatter *s, Py_ssize_t i, const uint8_t *row) {
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

/* Source row r split into planes and resized across, into `out` (n values). */
static void across(const uint8_t *in, Py_ssize_t in_width, int channels, const Horizontal *h, Py_ssize_t r,
                   uint8_t *split, uint8_t *out, int32_t *sums) {
    const Py_ssize_t width = h != NULL ? h->width : in_width;
    planar(in + r * in_width * channels, in_width, channels, h != NULL ? split : out);
    if (h != NULL)
        for (int c = 0; c < channels; c++) horizontal_row(h, split + c * in_width, out + c * width, sums);
}

/* The whole resize of one (height, in_width x channels) image into the scatter's output.
 * A pass that is NULL leaves that axis as it is. The rows resized across wait for the
 * vertical pass in a ring of `ring` rows (its taps' span), not in a whole intermediate
 * image: each is made just before the output rows that read it, while it is in the cache.
 * A row the ring no longer holds is made again (never needed when, as here, each output
 * row reads a window of source rows that moves down). */
static int resample(const uint8_t *in, Py_ssize_t height, Py_ssize_t in_width, int channels, const Horizontal *h,
                    const Vertical *v, Scatter *s) {
    const Py_ssize_t width = s->width, n = width * channels, in_n = in_width * channels;
    const Py_ssize_t widest = n > in_n ? n : in_n;
    const Py_ssize_t ring = v != NULL ? v->taps + 2 : 1;
    int32_t *sums = malloc(sizeof(int32_t) * (size_t)widest);
    uint8_t *split = malloc((size_t)in_n), *row = malloc((size_t)n), *rows = malloc((size_t)(ring * n));
    Py_ssize_t *held = malloc(sizeof(Py_ssize_t) * (size_t)ring); /* the source row in each slot */
    const uint8_t **window = malloc(sizeof(uint8_t *) * (size_t)ring);
    s->spans = malloc(sizeof(Py_ssize_t) * 3 * (size_t)width);
    int failed = sums == NULL || split == NULL || row == NULL || rows == NULL || held == NULL || window == NULL ||
                 s->spans == NULL;
    if (!failed) {
        s->spans_count = find_spans(s->columns, width, s->spans);
        if (v == NULL) {
            for (Py_ssize_t i = 0; i < height; i++) {
                across(in, in_width, channels, h, i, split, row, sums);
                scatter_row(s, i, row);
            }
        } else {
            for (Py_ssize_t slot = 0; slot < ring; slot++) held[slot] = -1;
            for (Py_ssize_t i = 0; i < v->rows; i++) {
                for (int k = 0; k < v->taps; k++) {
                    const Py_ssize_t r = v->sources[i * v->taps + k], slot = r % ring;
                    if (held[slot] != r) {
                        across(in, in_width, channels, h, r, split, rows + slot * n, sums);
                        held[slot] = r;
                    }
                    window[k] = rows + slot * n;
                }
                vertical_row(v, i, window, n, row, sums);
                scatter_row(s, i, row);
            }
        }
    }
    free(sums), free(split), free(row), free(rows), free(held), free(window), free(s->spans);
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
 * ValueError, never a write or read out of bounds. */
static int check_tables(const Horizontal *h, const Vertical *v, const Scatter *s, Py_ssize_t height,
                        Py_ssize_t in_width, Py_ssize_t runs_count, Py_ssize_t out_items) {
    if (h != NULL) {
        if (check_int32(h->columns, h->taps * h->width, in_width, "horizontal columns") < 0) return -1;
        for (int k = 0; k <= h->taps; k++)
            if (h->run_start[k] < 0 || h->run_start[k] > runs_count || (k && h->run_start[k] < h->run_start[k - 1]))
                return out_of_range("run_start");
        for (Py_ssize_t r = 0; r < runs_count; r++) {
            const int32_t *run = h->runs + 3 * r;
            if (run[0] < 0 || run[1] > h->width || run[0] > run[1] || run[2] < 0 || run[2] + (run[1] - run[0]) > in_width)
                return out_of_range("runs");
        }
    }
    if (v != NULL && check_int32(v->sources, v->rows * v->taps, height, "vertical sources") < 0) return -1;
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
"scatter's output. `horizontal`: None (the width kept) or (out_width, taps, precision,\n"
"weights, columns, run_start, runs); `vertical`: None (the height kept) or (out_height,\n"
"taps, precision, sources, weights); `scatter`: (out, itemsize, rows, columns, places,\n"
"channel_of, table or None). Tables are C-contiguous int32 buffers, the scatter's offsets\n"
"int64 (elements of the output); resize.py makes them.");

static PyObject *py_resample(PyObject *self, PyObject *args) {
    PyObject *pixels, *hargs, *vargs, *sargs;
    PyObject *weights, *columns, *run_start, *runs, *sources, *vweights;
    PyObject *out, *rows, *out_columns, *places, *channel_of, *table;
    Py_ssize_t height, width, channels, out_width, runs_count = 0, out_items, places_count;
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
        if (!PyArg_ParseTuple(hargs, "niiOOOO", &out_width, &h_pass.taps, &h_pass.precision, &weights,
                              &columns, &run_start, &runs))
            goto fail;
        h_pass.width = out_width;
        if (out_width < 1 || h_pass.taps < 1 || h_pass.precision < 1 || h_pass.precision > 22) {
            PyErr_SetString(PyExc_ValueError, "horizontal: width, taps or precision out of range");
            goto fail;
        }
        if (take(&views, weights, 0, 4, h_pass.taps * h_pass.width, "weights", (void **)&h_pass.weights, NULL) < 0 ||
            take(&views, columns, 0, 4, h_pass.taps * h_pass.width, "columns", (void **)&h_pass.columns, NULL) < 0 ||
            take(&views, run_start, 0, 4, h_pass.taps + 1, "run_start", (void **)&h_pass.run_start, NULL) < 0 ||
            take(&views, runs, 0, 12, 0, "runs", (void **)&h_pass.runs, &runs_count) < 0)
            goto fail;
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
    if (check_tables(h, v, &s, height, width, runs_count, out_items) < 0) goto fail;
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

static PyMethodDef methods[] = {
    {"resample", py_resample, METH_VARARGS, resample_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_resample",
    "torchvision's antialiased uint8 resize, exact, written into a tensor layout (resize.py).",
    -1, methods,
};

PyMODINIT_FUNC PyInit__resample(void) { return PyModule_Create(&module); }
