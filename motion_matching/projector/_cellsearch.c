/* Compiled inner loop of the ``cells`` search (see search_cells_compiled.py): exact nearest rows.

The rows are stored cell by cell, each cell's rows sorted by their distance to its centre c. For a
query q, with t = q - c and an upper bound u on the nearest distance (the query's source row, then
the nearest centre's cell scanned first), a cell is skipped when a lower bound exceeds u:
  - the ball bound   |q - c| - r_c  (r_c: the cell's radius), from |q - c|^2 = |q'|^2 + |c'|^2 - 2 q'.c'
    with q' and c' less the mean and the dot products from one float32 GEMM per block of queries;
  - the principal-axis box  sum_j dist(V_j.t, [lo_j, hi_j])^2 + ((|t|^2 - |V t|^2)^1/2 - rr)_+^2
    (V: the cell's eight principal axes, rr: its rows' largest distance from their span);
and a row x of a visited cell (s = x - c) is skipped when
  - the triangle inequality rules it out: | |t| - |s| | > u (a contiguous range of the sorted rows), or
  - its sketch does: sum_j (V_j.t - V_j.s)^2 + (|t - P t| - |s - P s|)^2 > u^2, with j over the first
    seven axes and P the projection on them;
the other rows are compared directly.
Arithmetic is float32 on float32 data (the frames, the queries, the centres and the axes are float32
values); every bound is loosened by more than its float32 error bound (the *_SLACK constants), and a
row whose float32 distance (direct differences: relative error below (n + 2) 2^-24) comes within
RANK_SLACK of the best is compared again in float64, so the answer is the float64 minimum.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LANES 8 /* axes per cell (zero axes pad fewer), sketch length; features padded to a multiple */
#define ROUNDOFF 5.9604645e-8 /* 2^-24 */
#define RANK_SLACK 1e-5       /* > 2 (n + 2) 2^-24 for n <= 64: float32 distances, relative */
#define BOUND_SLACK 1e-4      /* relative loosening of the float32 ball, axis and range bounds */
#define SKETCH_SLACK 1e-5     /* sketch margins, relative to |q - c| + r_c (> (n + 1) 2^-24 + rounding) */
#define RESIDUAL_SLACK 1e-4   /* error of |t|^2 - |p|^2 in float32, relative to |t|^2 (> ~ 8 (n + 1) 2^-24) */

#if defined(__GNUC__) || defined(__clang__)
typedef float Lanes __attribute__((vector_size(32))); /* eight floats: one AVX register, or two SSE ones */
typedef int32_t Bits __attribute__((vector_size(32)));
#define HAVE_LANES 1
#endif
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__)
#define HAVE_AVX2_COPY 1 /* search_one is compiled twice: for AVX2 with FMA, chosen at run time, and plain */
#define INLINE inline __attribute__((always_inline))
#else
#define INLINE inline
#endif

typedef struct {
    Py_ssize_t nfeatures, width, ncells;
    const float *mean;           /* (width,) float32 */
    const float *centre_squares; /* (C',): |c - mean|^2, C' = C rounded up to 8 */
    const float *centroids;      /* (C, width) */
    const double *radii;         /* (C,) */
    const float *axes;           /* (C, width, 8): each cell's principal axes, by feature */
    const float *low, *high;     /* (C, 8): intervals of V_j.(x - c) over the cell's rows */
    const float *residual;       /* (C,): largest |(x - c) - V^T V (x - c)|, rounded up */
    const int64_t *starts;       /* (C + 1,) */
    const float *rows;           /* (F, width) in cell order */
    const double *rows64;        /* (F, width) the same in float64 */
    const double *lengths;       /* (F,) |x - c|, ascending within each cell */
    const float *sketches;       /* (F, 8): V_j.(x - c) for the cell's first 7 axes, then |rest| */
} Index;

typedef struct {
    double distance; /* float64 squared distance of the best row so far */
    int64_t row;
} Best;

#ifdef HAVE_LANES
static INLINE Lanes load_lanes(const float *values)
{
    Lanes lanes;
    memcpy(&lanes, values, sizeof(lanes));
    return lanes;
}

static INLINE float lane_sum(Lanes lanes)
{
    return ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
}
#endif

static INLINE float squared_distance(const float *a, const float *b, Py_ssize_t width)
{
#ifdef HAVE_LANES
    Lanes even = {0.0f}, odd = {0.0f};
    Py_ssize_t i = 0;
    for (; i + 2 * LANES <= width; i += 2 * LANES) {
        Lanes d = load_lanes(a + i) - load_lanes(b + i), e = load_lanes(a + i + LANES) - load_lanes(b + i + LANES);
        even += d * d;
        odd += e * e;
    }
    if (i < width) {
        Lanes d = load_lanes(a + i) - load_lanes(b + i);
        even += d * d;
    }
    return lane_sum(even + odd);
#else
    float sum = 0.0f;
    for (Py_ssize_t i = 0; i < width; i++)
        sum += (a[i] - b[i]) * (a[i] - b[i]);
    return sum;
#endif
}

static INLINE double squared_distance64(const float *a, const double *b, Py_ssize_t n)
{
    double sum = 0.0;
    for (Py_ssize_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        sum += d * d;
    }
    return sum;
}

static INLINE void consider(const Index *index, const float *query, int64_t row, Best *best)
{
    double distance = squared_distance64(query, index->rows64 + row * index->width, index->nfeatures);
    if (distance < best->distance) {
        best->distance = distance;
        best->row = row;
    }
}

/* First position in lengths[start:stop] whose value is >= value. */
static INLINE int64_t lower_position(const double *lengths, int64_t start, int64_t stop, double value)
{
    while (start < stop) {
        int64_t middle = start + (stop - start) / 2;
        if (lengths[middle] < value)
            start = middle + 1;
        else
            stop = middle;
    }
    return start;
}

/* Lower bound on |q - x|^2 from the sketches: per lane max(|a_j - s_j| - e_j, 0)^2, summed. */
static INLINE float sketch_bound(const float *along, const float *errors, const float *sketch)
{
#ifdef HAVE_LANES
    const Bits magnitude = {0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff,
                            0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff};
    const Lanes zero = {0.0f};
    Lanes gap = (Lanes)((Bits)(load_lanes(along) - load_lanes(sketch)) & magnitude) - load_lanes(errors);
    gap = (Lanes)((Bits)gap & (gap > zero)); /* negative lanes to zero */
    return lane_sum(gap * gap);
#else
    float sum = 0.0f;
    for (int j = 0; j < LANES; j++) {
        float gap = fabsf(along[j] - sketch[j]) - errors[j];
        if (gap > 0.0f)
            sum += gap * gap;
    }
    return sum;
#endif
}

/* Compare the rows of ``cell`` that neither the triangle inequality (their length is within the best
   distance of |q - c|) nor their sketch rules out. ``along`` (8,): V_j.(q - c) for the cell's first
   seven axes, as computed by axis_bound, and ``offset_squared`` |q - c|^2. A row's sketch holds
   V_j.(x - c) for those axes and the length of the rest of x - c, so that
       |q - x|^2 >= sum_j (V_j.(q - x))^2 + (|rest of q - c| - |rest of x - c|)^2;
   the float32 errors of the query's side go into per-lane margins. */
static INLINE void scan_cell(const Index *index, const float *query, Py_ssize_t cell, const float *along,
                             float offset_squared, Best *best)
{
    const Py_ssize_t width = index->width;
    const double centre = sqrt((double)offset_squared);
    float point[LANES], errors[LANES], along_squared = 0.0f;
    const float margin = (float)(SKETCH_SLACK * (centre + index->radii[cell]));
    const float spread = (float)(RESIDUAL_SLACK * offset_squared);
    for (int j = 0; j < LANES - 1; j++) {
        point[j] = along[j];
        errors[j] = margin;
        along_squared += along[j] * along[j];
    }
    float rest = offset_squared - along_squared;
    float low = sqrtf(rest - spread > 0.0f ? rest - spread : 0.0f), high = sqrtf((rest > 0.0f ? rest : 0.0f) + spread);
    point[LANES - 1] = 0.5f * (low + high);
    errors[LANES - 1] = 0.5f * (high - low) + margin;
    double reach = sqrt(best->distance) + BOUND_SLACK * (sqrt(best->distance) + centre);
    double threshold = best->distance * (1.0 + RANK_SLACK);
    double prune = best->distance * (1.0 + BOUND_SLACK) + SKETCH_SLACK * offset_squared;
    int64_t stop = index->starts[cell + 1];
    int64_t row = lower_position(index->lengths, index->starts[cell], stop, centre - reach);
    for (; row < stop && index->lengths[row] <= centre + reach; row++) {
        if ((double)sketch_bound(point, errors, index->sketches + row * LANES) > prune)
            continue;
        float distance = squared_distance(query, index->rows + row * width, width);
        if (distance <= threshold) {
            consider(index, query, row, best);
            reach = sqrt(best->distance) + BOUND_SLACK * (sqrt(best->distance) + centre);
            threshold = best->distance * (1.0 + RANK_SLACK);
            prune = best->distance * (1.0 + BOUND_SLACK) + SKETCH_SLACK * offset_squared;
        }
    }
}

/* Lower bound on the squared distance from q to any row of ``cell`` by its principal axes; also
   writes V_j.(q - c) to ``along`` (8,) and |q - c|^2 to ``offset_squared``. */
static INLINE float axis_bound(const Index *index, const float *query, Py_ssize_t cell, float *along,
                               float *offset_squared)
{
    const Py_ssize_t width = index->width, n = index->nfeatures;
    const float *c = index->centroids + cell * width, *axes = index->axes + cell * width * LANES;
    float total = 0.0f;
#ifdef HAVE_LANES
    Lanes even = {0.0f}, odd = {0.0f};
    float total_odd = 0.0f;
    Py_ssize_t i = 0;
    for (; i + 1 < n; i += 2) {
        float t = query[i] - c[i], s = query[i + 1] - c[i + 1];
        total += t * t;
        total_odd += s * s;
        even += t * load_lanes(axes + i * LANES);
        odd += s * load_lanes(axes + (i + 1) * LANES);
    }
    if (i < n) {
        float t = query[i] - c[i];
        total += t * t;
        even += t * load_lanes(axes + i * LANES);
    }
    total += total_odd;
    even += odd;
    memcpy(along, &even, sizeof(even));
    const Lanes zero = {0.0f};
    Lanes below = load_lanes(index->low + cell * LANES) - even, above = even - load_lanes(index->high + cell * LANES);
    Bits larger = below > above;
    Lanes outside = (Lanes)(((Bits)below & larger) | ((Bits)above & ~larger));
    outside = (Lanes)((Bits)outside & (outside > zero));
    float inside = lane_sum(outside * outside), along_squared = lane_sum(even * even);
#else
    memset(along, 0, sizeof(float) * LANES);
    for (Py_ssize_t i = 0; i < n; i++) {
        float t = query[i] - c[i];
        total += t * t;
        for (int j = 0; j < LANES; j++)
            along[j] += t * axes[i * LANES + j];
    }
    const float *low = index->low + cell * LANES, *high = index->high + cell * LANES;
    float inside = 0.0f, along_squared = 0.0f;
    for (int j = 0; j < LANES; j++) {
        float below = low[j] - along[j], above = along[j] - high[j];
        float outside = below > above ? below : above;
        outside = outside > 0.0f ? outside : 0.0f;
        inside += outside * outside;
        along_squared += along[j] * along[j];
    }
#endif
    *offset_squared = total;
    /* ((a)^1/2 - rr)_+^2 is 1-Lipschitz in a, so the rounding of a = |t|^2 - |p|^2 passes through unamplified */
    float rest = total - along_squared;
    float across = (rest > 0.0f ? sqrtf(rest) : 0.0f) - index->residual[cell];
    if (across > 0.0f)
        inside += across * across;
    return inside;
}

/* Lower bounds (C,) on |q - c|^2 for every centre from the dot products ``dots`` (C,) of q' = q - mean
   with the centres less the mean (computed in float32 by BLAS): |q'|^2 + |c'|^2 - 2 q'.c' less its
   float32 error bound; the dot product's is n |q'| |c'| roundoffs whatever the order of its sum. */
static INLINE void centre_bounds(const Index *index, const float *query, const float *dots, float *lower)
{
    const Py_ssize_t n = index->nfeatures, ncells = index->ncells;
    float query_square = 0.0f;
    for (Py_ssize_t i = 0; i < n; i++) {
        float centred = query[i] - index->mean[i];
        query_square += centred * centred;
    }
    /* the dot product, the squares, the sums and the centring of q: well within 4 (n + 8) roundoffs */
    const float error_units = (float)(4.0 * (double)(n + 8) * ROUNDOFF);
    const float *squares = index->centre_squares;
    for (Py_ssize_t cell = 0; cell < ncells; cell++) {
        float size = query_square + squares[cell];
        lower[cell] = size - 2.0f * dots[cell] - error_units * size;
    }
}

static INLINE void search_body(const Index *index, const float *query, int64_t source, float *lower,
                               const float *dots, int64_t *candidates, int64_t *result)
{
    const Py_ssize_t ncells = index->ncells;
    Best best = {INFINITY, -1};
    centre_bounds(index, query, dots, lower);
    Py_ssize_t first = 0;
    for (Py_ssize_t cell = 1; cell < ncells; cell++)
        if (lower[cell] < lower[first])
            first = cell;
    if (source >= 0)
        consider(index, query, source, &best);
    float offset_squared, along[LANES];
    axis_bound(index, query, first, along, &offset_squared);
    scan_cell(index, query, first, along, offset_squared, &best);
    /* ball bound |q - c| - r > u, compared squared: |q - c|^2 > (u + r)^2; listed without branches */
    double upper = sqrt(best.distance) * (1.0 + BOUND_SLACK);
    Py_ssize_t count = 0;
    for (Py_ssize_t cell = 0; cell < ncells; cell++) {
        double reach = upper + index->radii[cell];
        candidates[count] = cell;
        count += (double)lower[cell] <= reach * reach;
    }
    for (Py_ssize_t k = 0; k < count; k++) {
        Py_ssize_t cell = candidates[k];
        double reach = sqrt(best.distance) * (1.0 + BOUND_SLACK) + index->radii[cell];
        if ((double)lower[cell] > reach * reach || cell == first)
            continue;
        float bound = axis_bound(index, query, cell, along, &offset_squared);
        if ((double)bound > best.distance * (1.0 + BOUND_SLACK) + BOUND_SLACK * (double)offset_squared)
            continue;
        scan_cell(index, query, cell, along, offset_squared, &best);
    }
    *result = best.row;
}

static void search_plain(const Index *index, const float *query, int64_t source, float *lower, const float *dots,
                         int64_t *candidates, int64_t *result)
{
    search_body(index, query, source, lower, dots, candidates, result);
}

#ifdef HAVE_AVX2_COPY
__attribute__((target("avx2,fma"))) static void search_avx2(const Index *index, const float *query, int64_t source,
                                                             float *lower, const float *dots, int64_t *candidates,
                                                             int64_t *result)
{
    search_body(index, query, source, lower, dots, candidates, result);
}
#endif

typedef void (*Searcher)(const Index *, const float *, int64_t, float *, const float *, int64_t *, int64_t *);

static Searcher choose_searcher(void)
{
#ifdef HAVE_AVX2_COPY
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return search_avx2;
#endif
    return search_plain;
}

typedef struct {
    Py_buffer buffer;
    int held;
} Held;

static int take(PyObject *object, Held *held, Py_ssize_t bytes, int writable, const char *name)
{
    if (PyObject_GetBuffer(object, &held->buffer, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    held->held = 1;
    if (held->buffer.len != bytes) {
        PyErr_Format(PyExc_ValueError, "%s has %zd bytes, expected %zd", name, held->buffer.len, bytes);
        return -1;
    }
    return 0;
}

static PyObject *nearest(PyObject *self, PyObject *args)
{
    (void)self;
    enum { COUNT = 17 };
    Py_ssize_t nfeatures, width, ncells, nrows, nqueries;
    PyObject *objects[COUNT];
    if (!PyArg_ParseTuple(args, "nnnnnOOOOOOOOOOOOOOOOO", &nfeatures, &width, &ncells, &nrows, &nqueries, &objects[0],
                          &objects[1], &objects[2], &objects[3], &objects[4], &objects[5], &objects[6],
                          &objects[7], &objects[8], &objects[9], &objects[10], &objects[11], &objects[12],
                          &objects[13], &objects[14], &objects[15], &objects[16]))
        return NULL;
    if (nfeatures <= 0 || width < nfeatures || width % LANES || ncells <= 0 || nrows <= 0 || nqueries < 0) {
        PyErr_SetString(PyExc_ValueError, "invalid sizes");
        return NULL;
    }
    const Py_ssize_t padded = (ncells + LANES - 1) / LANES * LANES;
    const char *names[COUNT] = {"mean", "dots", "centre_squares", "centroids", "radii", "axes",
                                "low", "high", "residual", "starts", "rows", "rows64", "lengths", "sketches",
                                "queries", "sources", "result"};
    const Py_ssize_t sizes[COUNT] = {width * 4, nqueries * padded * 4, padded * 4, ncells * width * 4,
                                     ncells * 8, ncells * width * LANES * 4, ncells * LANES * 4,
                                     ncells * LANES * 4, ncells * 4, (ncells + 1) * 8, nrows * width * 4,
                                     nrows * width * 8, nrows * 8, nrows * LANES * 4, nqueries * width * 4, nqueries * 8,
                                     nqueries * 8};
    Held held[COUNT];
    memset(held, 0, sizeof(held));
    PyObject *answer = NULL;
    for (int i = 0; i < COUNT; i++)
        if (take(objects[i], &held[i], sizes[i], i == 16, names[i]) < 0)
            goto done;
    Index index = {nfeatures, width, ncells, held[0].buffer.buf, held[2].buffer.buf,
                   held[3].buffer.buf, held[4].buffer.buf, held[5].buffer.buf, held[6].buffer.buf,
                   held[7].buffer.buf, held[8].buffer.buf, held[9].buffer.buf, held[10].buffer.buf,
                   held[11].buffer.buf, held[12].buffer.buf, held[13].buffer.buf};
    const int64_t *starts = index.starts, *sources = held[15].buffer.buf;
    if (starts[0] != 0 || starts[ncells] != nrows) {
        PyErr_SetString(PyExc_ValueError, "starts must run from 0 to the number of rows");
        goto done;
    }
    for (Py_ssize_t cell = 0; cell < ncells; cell++)
        if (starts[cell + 1] <= starts[cell]) {
            PyErr_SetString(PyExc_ValueError, "every cell must hold at least one row");
            goto done;
        }
    for (Py_ssize_t i = 0; i < nqueries; i++)
        if (sources[i] < -1 || sources[i] >= nrows) {
            PyErr_SetString(PyExc_ValueError, "sources must be row positions or -1");
            goto done;
        }
    float *scratch = malloc(sizeof(float) * (size_t)padded);
    int64_t *candidates = malloc(sizeof(int64_t) * (size_t)ncells);
    if (!scratch || !candidates) {
        free(scratch);
        free(candidates);
        PyErr_NoMemory();
        goto done;
    }
    const float *queries = held[14].buffer.buf, *dots = held[1].buffer.buf;
    int64_t *result = held[16].buffer.buf;
    Searcher search_one = choose_searcher();
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nqueries; i++)
        search_one(&index, queries + i * width, sources[i], scratch, dots + i * padded, candidates, result + i);
    Py_END_ALLOW_THREADS
    free(scratch);
    free(candidates);
    answer = Py_None;
    Py_INCREF(answer);
done:
    for (int i = 0; i < COUNT; i++)
        if (held[i].held)
            PyBuffer_Release(&held[i].buffer);
    return answer;
}

static PyMethodDef methods[] = {
    {"nearest", nearest, METH_VARARGS,
     "nearest(n, width, C, F, m, mean, dots, centre_squares, centroids, radii, axes, low, high, residual, "
     "starts, rows, rows64, lengths, sketches, queries, sources, result): exact nearest row positions of m queries, written to result (m,) int64."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cellsearch",
                                    "Compiled inner loop of the cells search.", -1, methods};

PyMODINIT_FUNC PyInit__cellsearch(void) { return PyModule_Create(&module); }
