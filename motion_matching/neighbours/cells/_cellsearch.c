/* Python binding of the compiled cells search (cellsearch.c): one function, ``nearest``, that checks its
   buffers' sizes and runs the search without the GIL. Its module constants are those of cellsearch.h.
   Used by compiled.py. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#include "cellsearch.h"

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

enum { MEAN, DOTS, CENTRE_SQUARES, CENTROIDS, RADII, AXES, LOW, HIGH, RESIDUAL, STARTS, ROWS, LENGTHS,
       SKETCH_COLUMNS, QUERIES, SOURCES, RESULT, COUNT };

/* The byte size of each array of nearest()'s arguments. */
static void array_sizes(Py_ssize_t width, Py_ssize_t ncells, Py_ssize_t nrows, Py_ssize_t nqueries, Py_ssize_t *sizes)
{
    const Py_ssize_t padded = (ncells + CELLSEARCH_LANES - 1) / CELLSEARCH_LANES * CELLSEARCH_LANES;
    sizes[MEAN] = width * 4;
    sizes[DOTS] = nqueries * padded * 4;
    sizes[CENTRE_SQUARES] = padded * 4;
    sizes[CENTROIDS] = ncells * width * 4;
    sizes[RADII] = ncells * 8;
    sizes[AXES] = ncells * width * CELLSEARCH_LANES * 4;
    sizes[LOW] = sizes[HIGH] = ncells * CELLSEARCH_LANES * 4;
    sizes[RESIDUAL] = ncells * 4;
    sizes[STARTS] = (ncells + 1) * 8;
    sizes[ROWS] = nrows * width * 4;
    sizes[LENGTHS] = nrows * 8;
    sizes[SKETCH_COLUMNS] = (nrows + CELLSEARCH_LANES) * CELLSEARCH_LANES * 4;
    sizes[QUERIES] = nqueries * width * 4;
    sizes[SOURCES] = sizes[RESULT] = nqueries * 8;
}

/* Parses nearest()'s arguments into ``held`` buffers and ``index``; 0, or -1 with an exception set. */
static int read_arguments(PyObject *args, Held *held, CellIndex *index, Py_ssize_t *nqueries)
{
    static const char *names[COUNT] = {"mean", "dots", "centre_squares", "centroids", "radii", "axes", "low",
                                       "high", "residual", "starts", "rows", "lengths", "sketch_columns",
                                       "queries", "sources", "result"};
    Py_ssize_t nfeatures, width, ncells, nrows, sizes[COUNT];
    PyObject *objects[COUNT];
    if (!PyArg_ParseTuple(args, "nnnnnOOOOOOOOOOOOOOOO", &nfeatures, &width, &ncells, &nrows, nqueries,
                          &objects[0], &objects[1], &objects[2], &objects[3], &objects[4], &objects[5],
                          &objects[6], &objects[7], &objects[8], &objects[9], &objects[10], &objects[11],
                          &objects[12], &objects[13], &objects[14], &objects[15]))
        return -1;
    if (nfeatures <= 0 || nfeatures > CELLSEARCH_MAX_FEATURES || width < nfeatures || width % CELLSEARCH_LANES || ncells <= 0 || nrows <= 0 || *nqueries < 0) {
        PyErr_SetString(PyExc_ValueError, "invalid sizes");
        return -1;
    }
    array_sizes(width, ncells, nrows, *nqueries, sizes);
    for (int i = 0; i < COUNT; i++)
        if (take(objects[i], &held[i], sizes[i], i == RESULT, names[i]) < 0)
            return -1;
    CellIndex read = {nfeatures, width, ncells, held[MEAN].buffer.buf, held[CENTRE_SQUARES].buffer.buf,
                  held[CENTROIDS].buffer.buf, held[RADII].buffer.buf, held[AXES].buffer.buf,
                  held[LOW].buffer.buf, held[HIGH].buffer.buf, held[RESIDUAL].buffer.buf,
                  held[STARTS].buffer.buf, held[ROWS].buffer.buf, held[LENGTHS].buffer.buf,
                  held[SKETCH_COLUMNS].buffer.buf, nrows};
    *index = read;
    return 0;
}

/* 0 when the cells partition the rows and every source is a row or -1; else -1 with an exception set. */
static int check_positions(const CellIndex *index, const int64_t *sources, Py_ssize_t nqueries)
{
    const int64_t *starts = index->starts;
    int valid = starts[0] == 0 && starts[index->ncells] == index->nrows;
    for (Py_ssize_t cell = 0; cell < index->ncells; cell++)
        valid = valid && starts[cell + 1] > starts[cell];
    if (!valid) {
        PyErr_SetString(PyExc_ValueError, "starts must rise from 0 to the number of rows, every cell non-empty");
        return -1;
    }
    for (Py_ssize_t i = 0; i < nqueries; i++)
        if (sources[i] < -1 || sources[i] >= index->nrows) {
            PyErr_SetString(PyExc_ValueError, "sources must be row positions or -1");
            return -1;
        }
    return 0;
}

static PyObject *nearest(PyObject *self, PyObject *args)
{
    (void)self;
    Held held[COUNT];
    memset(held, 0, sizeof(held));
    CellIndex index;
    Py_ssize_t nqueries;
    PyObject *answer = NULL;
    if (read_arguments(args, held, &index, &nqueries) < 0)
        goto done;
    const int64_t *sources = held[SOURCES].buffer.buf;
    if (check_positions(&index, sources, nqueries) < 0)
        goto done;
    const Py_ssize_t padded = (index.ncells + CELLSEARCH_LANES - 1) / CELLSEARCH_LANES * CELLSEARCH_LANES;
    float *lower = malloc(sizeof(float) * (size_t)padded);
    int64_t *candidates = malloc(sizeof(int64_t) * (size_t)index.ncells);
    if (lower && candidates) {
        const float *queries = held[QUERIES].buffer.buf, *dots = held[DOTS].buffer.buf;
        int64_t *result = held[RESULT].buffer.buf;
        Py_BEGIN_ALLOW_THREADS
        cellsearch_nearest(&index, queries, sources, dots, nqueries, lower, candidates, result);
        Py_END_ALLOW_THREADS
        answer = Py_None;
        Py_INCREF(answer);
    } else {
        PyErr_NoMemory();
    }
    free(lower);
    free(candidates);
done:
    for (int i = 0; i < COUNT; i++)
        if (held[i].held)
            PyBuffer_Release(&held[i].buffer);
    return answer;
}

static PyMethodDef methods[] = {
    {"nearest", nearest, METH_VARARGS,
     "nearest(n, width, C, F, m, mean, dots, centre_squares, centroids, radii, axes, low, high, residual, "
     "starts, rows, lengths, sketch_columns, queries, sources, result): writes the exact nearest row "
     "positions of m queries to result (m,) int64."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cellsearch",
                                    "Compiled inner loop of the cells search.", -1, methods};

/* The constants of cellsearch.h as module constants; 0, or -1 with an exception set. */
static int add_constants(PyObject *target)
{
    static const struct {
        const char *name;
        double value;
    } floats[] = {{"ROUNDOFF", CELLSEARCH_ROUNDOFF},           {"RANK_SLACK", CELLSEARCH_RANK_SLACK},
                  {"BOUND_SLACK", CELLSEARCH_BOUND_SLACK},     {"SKETCH_SLACK", CELLSEARCH_SKETCH_SLACK},
                  {"RESIDUAL_SLACK", CELLSEARCH_RESIDUAL_SLACK}, {"ROUND_UP", CELLSEARCH_ROUND_UP}};
    if (PyModule_AddIntConstant(target, "LANES", CELLSEARCH_LANES) < 0 ||
        PyModule_AddIntConstant(target, "MAX_FEATURES", CELLSEARCH_MAX_FEATURES) < 0)
        return -1;
    for (size_t i = 0; i < sizeof(floats) / sizeof(floats[0]); i++) {
        PyObject *value = PyFloat_FromDouble(floats[i].value);
        if (value == NULL || PyModule_AddObject(target, floats[i].name, value) < 0) {
            Py_XDECREF(value);
            return -1;
        }
    }
    return 0;
}

PyMODINIT_FUNC PyInit__cellsearch(void)
{
    PyObject *created = PyModule_Create(&module);
    if (created != NULL && add_constants(created) < 0)
        Py_CLEAR(created);
    return created;
}
