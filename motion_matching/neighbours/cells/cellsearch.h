/* The compiled search over k-means cells (cellsearch.c), without Python: the index layout and the loop. */
#ifndef CELLSEARCH_H
#define CELLSEARCH_H

#include <float.h>
#include <stddef.h>
#include <stdint.h>

/* The loop's constants, also module constants of the Python binding (LANES, MAX_FEATURES, ROUNDOFF, ...). */
#define CELLSEARCH_LANES 8 /* axes per cell (zero axes pad fewer), sketch length; features padded to a multiple */
#define CELLSEARCH_MAX_FEATURES 64 /* the slacks below hold for sums of at most this many terms */
#define CELLSEARCH_ROUNDOFF (FLT_EPSILON / 2) /* the float32 unit roundoff, 2^-24 */
#define CELLSEARCH_RANK_SLACK 1e-5     /* > 2 (n + 2) 2^-24: float32 distances, relative */
#define CELLSEARCH_BOUND_SLACK 1e-4    /* relative loosening of the float32 ball, axis and range bounds */
#define CELLSEARCH_SKETCH_SLACK 1e-5   /* sketch margins, relative to |q - c| + r_c (> (n + 1) 2^-24 + rounding) */
#define CELLSEARCH_RESIDUAL_SLACK 1e-4 /* error of |t|^2 - |p|^2 in float32, relative to |t|^2 (> ~ 8 (n + 1) 2^-24) */
#define CELLSEARCH_ROUND_UP (1.0 + 1e-6) /* a factor above a float32 rounding (relative 2^-24) */

typedef struct {
    /* rows, centres and queries are padded with zeros to ``width`` = n rounded up to 8 features */
    ptrdiff_t nfeatures, width, ncells;
    const float *mean;           /* (width,) float32 */
    const float *centre_squares; /* (C',): |c - mean|^2, C' = C rounded up to 8 */
    const float *centroids;      /* (C, width) */
    const double *radii;         /* (C,) */
    const float *axes;           /* (C, width, 8): each cell's principal axes, by feature */
    const float *low, *high;     /* (C, 8): intervals of V_j.(x - c) over the cell's rows */
    const float *residual;       /* (C,): largest |(x - c) - V^T V (x - c)|, rounded up */
    const int64_t *starts;       /* (C + 1,) */
    const float *rows;           /* (F, width) in cell order */
    const double *lengths;       /* (F,) |x - c|, ascending within each cell */
    const float *sketch_columns; /* (8, F + 8): V_j.(x - c) for the cell's first 7 axes, then |rest| */
    ptrdiff_t nrows;
} CellIndex;

/* Writes to result[i] the position in ``rows`` of the nearest row to query i (m = ``nqueries`` queries
   (m, width) float32), exact in float64. sources (m,): a row each query was made from, or -1; dots
   (m, C'): the float32 dot products of the queries less the mean with the centres less the mean
   (C' = C rounded up to 8). Scratch: lower (C',) float32 and candidates (C,) int64. */
void cellsearch_nearest(const CellIndex *index, const float *queries, const int64_t *sources, const float *dots,
                        ptrdiff_t nqueries, float *lower, int64_t *candidates, int64_t *result);

#endif
