/* Compiled inner loop of the ``cells`` search (see compiled.py): exact nearest rows.

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
values); every bound is loosened by more than its float32 error bound (the *_SLACK constants of
cellsearch.h), and a
row whose float32 distance (direct differences: relative error below (n + 2) 2^-24) comes within
RANK_SLACK of the best is compared again in float64, so the answer is the float64 minimum.
*/
#include "cellsearch.h"

#include <math.h>
#include <string.h>

#define LANES CELLSEARCH_LANES
#define ROUNDOFF CELLSEARCH_ROUNDOFF
#define RANK_SLACK CELLSEARCH_RANK_SLACK
#define BOUND_SLACK CELLSEARCH_BOUND_SLACK
#define SKETCH_SLACK CELLSEARCH_SKETCH_SLACK
#define RESIDUAL_SLACK CELLSEARCH_RESIDUAL_SLACK
#define ROUND_UP CELLSEARCH_ROUND_UP

#if (defined(__GNUC__) || defined(__clang__)) && !defined(CELLSEARCH_PORTABLE) /* the latter for tests */
typedef float Lanes __attribute__((vector_size(32))); /* eight floats: one AVX register, or two SSE ones */
typedef int32_t Bits __attribute__((vector_size(32)));
typedef float Quad __attribute__((vector_size(16)));
#define HAVE_LANES 1
#endif
#if (defined(__GNUC__) || defined(__clang__)) && defined(__x86_64__) && !defined(CELLSEARCH_PORTABLE)
#define HAVE_AVX2_COPY 1 /* search_one is compiled twice: for AVX2 with FMA, chosen at run time, and plain */
#define INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define INLINE __inline /* MSVC's C mode before C11 */
#else
#define INLINE inline
#endif


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
    Quad low, high;
    memcpy(&low, &lanes, sizeof(low));
    memcpy(&high, (const char *)&lanes + sizeof(low), sizeof(high));
    low += high;
    return (low[0] + low[2]) + (low[1] + low[3]);
}
#endif

static INLINE float squared_distance(const float *a, const float *b, ptrdiff_t width)
{
#ifdef HAVE_LANES
    Lanes even = {0.0f}, odd = {0.0f};
    ptrdiff_t i = 0;
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
    for (ptrdiff_t i = 0; i < width; i++)
        sum += (a[i] - b[i]) * (a[i] - b[i]);
    return sum;
#endif
}

static INLINE double squared_distance64(const float *a, const float *b, ptrdiff_t n)
{
    double sum = 0.0;
    for (ptrdiff_t i = 0; i < n; i++) {
        double d = (double)a[i] - b[i];
        sum += d * d;
    }
    return sum;
}

static INLINE void consider(const CellIndex *index, const float *query, int64_t row, Best *best)
{
    double distance = squared_distance64(query, index->rows + row * index->width, index->nfeatures);
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

/* First position in lengths[start:stop] whose value is > value. */
static INLINE int64_t upper_position(const double *lengths, int64_t start, int64_t stop, double value)
{
    while (start < stop) {
        int64_t middle = start + (stop - start) / 2;
        if (lengths[middle] <= value)
            start = middle + 1;
        else
            stop = middle;
    }
    return start;
}

/* passes[k] = whether the sketch bound of row k of the eight at ``columns`` (lane j at j * stride)
   is at most ``prune``: sum_j max(|point_j - sketch_j| - errors_j, 0)^2 <= prune. */
static INLINE void sketch_tests(const float *point, const float *errors, const float *columns, ptrdiff_t stride,
                                float prune, int *passes)
{
#ifdef HAVE_LANES
    const Lanes zero = {0.0f};
    const Bits magnitude = {0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff,
                            0x7fffffff, 0x7fffffff, 0x7fffffff, 0x7fffffff};
    Lanes bound = {0.0f};
    for (int j = 0; j < LANES; j++) {
        Lanes gap = (Lanes)((Bits)(point[j] - load_lanes(columns + j * stride)) & magnitude) - errors[j];
        gap = (Lanes)((Bits)gap & (gap > zero)); /* negative lanes to zero */
        bound += gap * gap;
    }
    Bits pass = bound <= prune;
    for (int k = 0; k < LANES; k++)
        passes[k] = pass[k] != 0;
#else
    for (int k = 0; k < LANES; k++) {
        float bound = 0.0f;
        for (int j = 0; j < LANES; j++) {
            float gap = fabsf(point[j] - columns[j * stride + k]) - errors[j];
            if (gap > 0.0f)
                bound += gap * gap;
        }
        passes[k] = bound <= prune;
    }
#endif
}

/* Compare row ``row`` directly; returns 1 when the best changed. */
static INLINE int compare_row(const CellIndex *index, const float *query, int64_t row, double threshold, Best *best)
{
    if (squared_distance(query, index->rows + row * index->width, index->width) > threshold)
        return 0;
    int64_t before = best->row;
    consider(index, query, row, best);
    return best->row != before;
}

/* Compare the rows of ``cell`` that neither the triangle inequality (their length is within the best
   distance of |q - c|) nor their sketch rules out. ``along`` (8,): V_j.(q - c) for the cell's first
   seven axes, as computed by axis_bound, and ``offset_squared`` |q - c|^2. A row's sketch holds
   V_j.(x - c) for those axes and the length of the rest of x - c, so that
       |q - x|^2 >= sum_j (V_j.(q - x))^2 + (|rest of q - c| - |rest of x - c|)^2;
   the float32 errors of the query's side go into per-lane margins. Sketches are stored by lane
   (``sketch_columns`` (8, F + 8)), so eight rows are bounded at a time. */
static INLINE void scan_cell(const CellIndex *index, const float *query, ptrdiff_t cell, const float *along,
                             float offset_squared, Best *best)
{
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
    const double reach = sqrt(best->distance) + BOUND_SLACK * (sqrt(best->distance) + centre);
    double threshold = best->distance * (1.0 + RANK_SLACK);
    float prune = (float)((best->distance * (1.0 + BOUND_SLACK) + SKETCH_SLACK * offset_squared) * ROUND_UP);
    int64_t first = lower_position(index->lengths, index->starts[cell], index->starts[cell + 1], centre - reach);
    int64_t last = upper_position(index->lengths, first, index->starts[cell + 1], centre + reach);
    const ptrdiff_t stride = index->nrows + LANES;
    for (int64_t row = first; row < last; row += LANES) {
        int passes[LANES];
        sketch_tests(point, errors, index->sketch_columns + row, stride, prune, passes);
        for (int k = 0; k < LANES && row + k < last; k++)
            if (passes[k] && compare_row(index, query, row + k, threshold, best)) {
                threshold = best->distance * (1.0 + RANK_SLACK);
                prune = (float)((best->distance * (1.0 + BOUND_SLACK) + SKETCH_SLACK * offset_squared) * ROUND_UP);
            }
    }
}

/* Lower bound on the squared distance from q to any row of ``cell`` by its principal axes; also
   writes V_j.(q - c) to ``along`` (8,) and |q - c|^2 to ``offset_squared``. */
static INLINE float axis_bound(const CellIndex *index, const float *query, ptrdiff_t cell, float *along,
                               float *offset_squared)
{
    const ptrdiff_t width = index->width, n = index->nfeatures;
    const float *c = index->centroids + cell * width, *axes = index->axes + cell * width * LANES;
    float total = 0.0f;
#ifdef HAVE_LANES
    Lanes even = {0.0f}, odd = {0.0f};
    float total_odd = 0.0f;
    ptrdiff_t i = 0;
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
    for (ptrdiff_t i = 0; i < n; i++) {
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
   float32 error bound; the dot product's is n |q'| |c'| roundoffs whatever the order of its sum.
   Returns the cell with the smallest bound. */
static INLINE ptrdiff_t centre_bounds(const CellIndex *index, const float *query, const float *dots, float *lower)
{
    const ptrdiff_t n = index->nfeatures, ncells = index->ncells;
    float query_square = 0.0f;
    for (ptrdiff_t i = 0; i < n; i++) {
        float centred = query[i] - index->mean[i];
        query_square += centred * centred;
    }
    /* the dot product, the squares, the sums and the centring of q: well within 4 (n + 8) roundoffs */
    const float error_units = (float)(4.0 * (double)(n + 8) * ROUNDOFF);
    const float *squares = index->centre_squares;
    for (ptrdiff_t cell = 0; cell < ncells; cell++) {
        float size = query_square + squares[cell];
        lower[cell] = size - 2.0f * dots[cell] - error_units * size;
    }
    ptrdiff_t nearest = 0;
    for (ptrdiff_t cell = 1; cell < ncells; cell++)
        if (lower[cell] < lower[nearest])
            nearest = cell;
    return nearest;
}

static INLINE void search_body(const CellIndex *index, const float *query, int64_t source, float *lower,
                               const float *dots, int64_t *candidates, int64_t *result)
{
    const ptrdiff_t ncells = index->ncells;
    Best best = {INFINITY, -1};
    ptrdiff_t first = centre_bounds(index, query, dots, lower);
    if (source >= 0)
        consider(index, query, source, &best);
    float offset_squared, along[LANES];
    axis_bound(index, query, first, along, &offset_squared);
    scan_cell(index, query, first, along, offset_squared, &best);
    /* ball bound |q - c| - r > u, compared squared: |q - c|^2 > (u + r)^2; listed without branches */
    double upper = sqrt(best.distance) * (1.0 + BOUND_SLACK);
    ptrdiff_t count = 0;
    for (ptrdiff_t cell = 0; cell < ncells; cell++) {
        double reach = upper + index->radii[cell];
        candidates[count] = cell;
        count += (double)lower[cell] <= reach * reach;
    }
    for (ptrdiff_t k = 0; k < count; k++) {
        ptrdiff_t cell = candidates[k];
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

static void search_plain(const CellIndex *index, const float *query, int64_t source, float *lower, const float *dots,
                         int64_t *candidates, int64_t *result)
{
    search_body(index, query, source, lower, dots, candidates, result);
}

#ifdef HAVE_AVX2_COPY
__attribute__((target("avx2,fma"))) static void search_avx2(const CellIndex *index, const float *query, int64_t source,
                                                             float *lower, const float *dots, int64_t *candidates,
                                                             int64_t *result)
{
    search_body(index, query, source, lower, dots, candidates, result);
}
#endif

typedef void (*Searcher)(const CellIndex *, const float *, int64_t, float *, const float *, int64_t *, int64_t *);

static Searcher choose_searcher(void)
{
#ifdef HAVE_AVX2_COPY
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return search_avx2;
#endif
    return search_plain;
}

void cellsearch_nearest(const CellIndex *index, const float *queries, const int64_t *sources, const float *dots,
                        ptrdiff_t nqueries, float *lower, int64_t *candidates, int64_t *result)
{
    const ptrdiff_t padded = (index->ncells + LANES - 1) / LANES * LANES;
    Searcher search_one = choose_searcher();
    for (ptrdiff_t i = 0; i < nqueries; i++)
        search_one(index, queries + i * index->width, sources[i], lower, dots + i * padded, candidates, result + i);
}
