/*
 * nnet_eval: a reference evaluator for networks in the Motion-Matching runtime's .bin layout.
 * Plain C99 plus POSIX clock_gettime; no dependencies beyond libc and libm.
 *
 *   nnet_eval eval    NETWORK.bin INPUT.bin OUTPUT.bin [REPEATS]
 *   nnet_eval nearest DATABASE.bin QUERIES.bin OUTPUT.bin [REPEATS]
 *
 * Matrix files are [u32 rows, u32 cols, rows*cols f32] little-endian (the toolkit's array2d layout;
 * features.bin and latent.bin start this way). `eval` writes the network's outputs for each input row
 * in that layout. `nearest` reads the first matrix of DATABASE (bytes after it, like the offset and
 * scale of features.bin, are ignored) and writes [u32 n, n i32]: for each query the first frame at the
 * minimum squared L2 distance, by brute force. OUTPUT "-" writes nothing. With REPEATS the whole batch
 * is computed REPEATS times and one line "pass <i> seconds <s> per_query_us <us>" is printed per pass,
 * timing computation only (no file I/O).
 *
 * Evaluation follows the runtime's nnet_evaluate: x = (x - mean_in) / std_in; for each layer
 * y = bias + sum_i x_i W(i, :) (skipping x_i == 0, as the runtime does), ReLU on all but the last layer;
 * then y * std_out + mean_out. Every count is checked against the bytes left in the file before any
 * allocation, so damaged files end with "nnet_eval: <path>: <problem>" on stderr and exit status 2.
 */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct { uint32_t rows, cols; float *data; } matrix;

typedef struct {
    matrix mean_in, std_in, mean_out, std_out;
    uint32_t nlayers;
    matrix *weights; /* (in, out) */
    matrix *biases;  /* (1, out) */
    uint32_t widest;
} network;

typedef struct { const char *path; FILE *file; uint64_t size, offset; } reader;

static void fail(const char *path, const char *format, ...)
{
    va_list args;
    fprintf(stderr, "nnet_eval: %s: ", path);
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    fputc('\n', stderr);
    exit(2);
}

static void *allocate(const char *path, uint64_t bytes)
{
    void *memory = malloc(bytes > 0 ? (size_t)bytes : 1);
    if (memory == NULL) fail(path, "out of memory allocating %llu bytes", (unsigned long long)bytes);
    return memory;
}

static reader reader_open(const char *path)
{
    reader r;
    long size;
    r.path = path;
    r.offset = 0;
    r.file = fopen(path, "rb");
    if (r.file == NULL) fail(path, "cannot open for reading");
    if (fseek(r.file, 0, SEEK_END) != 0 || (size = ftell(r.file)) < 0 || fseek(r.file, 0, SEEK_SET) != 0)
        fail(path, "cannot determine the file size");
    r.size = (uint64_t)size;
    return r;
}

/* Stop unless `bytes` more bytes exist: called before every read and every allocation. */
static void reader_require(reader *r, uint64_t bytes, const char *field)
{
    if (bytes > r->size - r->offset)
        fail(r->path, "truncated in %s at byte %llu: needs %llu bytes, %llu left", field,
             (unsigned long long)r->offset, (unsigned long long)bytes,
             (unsigned long long)(r->size - r->offset));
}

static void reader_bytes(reader *r, void *out, uint64_t bytes, const char *field)
{
    reader_require(r, bytes, field);
    if (bytes > 0 && fread(out, 1, (size_t)bytes, r->file) != (size_t)bytes)
        fail(r->path, "read error in %s at byte %llu", field, (unsigned long long)r->offset);
    r->offset += bytes;
}

/* The layout is little-endian: assemble counts byte by byte so the host's order does not matter. */
static uint32_t reader_u32(reader *r, const char *field)
{
    unsigned char b[4];
    reader_bytes(r, b, 4, field);
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static int host_is_little_endian(void)
{
    const uint32_t one = 1;
    return *(const unsigned char *)&one == 1;
}

static void reader_floats(reader *r, float *out, uint64_t count, const char *field)
{
    reader_bytes(r, out, count * 4, field);
    if (!host_is_little_endian()) {
        uint64_t i;
        for (i = 0; i < count; i++) {
            unsigned char *b = (unsigned char *)&out[i], t;
            t = b[0]; b[0] = b[3]; b[3] = t; t = b[1]; b[1] = b[2]; b[2] = t;
        }
    }
}

/* [u32 rows, u32 cols, rows*cols f32] when `two_d`, else [u32 n, n f32] read as (1, n). */
static matrix reader_matrix(reader *r, int two_d, const char *field)
{
    matrix m;
    uint64_t count;
    m.rows = two_d ? reader_u32(r, field) : 1;
    m.cols = reader_u32(r, field);
    count = (uint64_t)m.rows * m.cols; /* < 2^64: both factors < 2^32; count * 4 may not be */
    if (count > (r->size - r->offset) / 4)
        fail(r->path, "truncated in %s at byte %llu: needs %llu floats, %llu bytes left", field,
             (unsigned long long)r->offset, (unsigned long long)count,
             (unsigned long long)(r->size - r->offset));
    m.data = allocate(r->path, count * 4);
    reader_floats(r, m.data, count, field);
    return m;
}

static void reader_finish(reader *r)
{
    if (r->offset != r->size)
        fail(r->path, "%llu trailing bytes after byte %llu", (unsigned long long)(r->size - r->offset),
             (unsigned long long)r->offset);
    fclose(r->file);
}

static void check_finite(const char *path, const matrix *m, const char *field)
{
    uint64_t i, count = (uint64_t)m->rows * m->cols;
    for (i = 0; i < count; i++)
        if (!isfinite(m->data[i])) fail(path, "%s holds NaN or Inf (first at element %llu)", field,
                                        (unsigned long long)i);
}

static void network_check(const char *path, const network *nn)
{
    uint32_t i, width = nn->mean_in.cols;
    if (width == 0) fail(path, "network has no inputs");
    if (nn->std_in.cols != width || nn->std_out.cols != nn->mean_out.cols)
        fail(path, "mean and std vectors differ in length");
    for (i = 0; i < nn->nlayers; i++) {
        if (nn->weights[i].rows != width)
            fail(path, "layer %u takes %u inputs but receives %u", i, nn->weights[i].rows, width);
        if (nn->biases[i].cols != nn->weights[i].cols)
            fail(path, "layer %u has %u outputs but %u biases", i, nn->weights[i].cols, nn->biases[i].cols);
        width = nn->weights[i].cols;
        if (width == 0) fail(path, "layer %u has no outputs", i);
    }
    if (width != nn->mean_out.cols)
        fail(path, "network outputs %u values but mean_out has %u", width, nn->mean_out.cols);
}

/* Load a network as the runtime's nnet_load does, but refusing anything that breaks the layout. */
static network network_load(const char *path)
{
    network nn;
    uint32_t i;
    char field[64];
    reader r = reader_open(path);
    nn.mean_in = reader_matrix(&r, 0, "mean_in");
    nn.std_in = reader_matrix(&r, 0, "std_in");
    nn.mean_out = reader_matrix(&r, 0, "mean_out");
    nn.std_out = reader_matrix(&r, 0, "std_out");
    nn.nlayers = reader_u32(&r, "layer count");
    if (nn.nlayers == 0) fail(path, "network has no layers");
    reader_require(&r, (uint64_t)nn.nlayers * 12, "layer headers"); /* each layer needs >= 12 bytes */
    nn.weights = allocate(path, (uint64_t)nn.nlayers * sizeof(matrix));
    nn.biases = allocate(path, (uint64_t)nn.nlayers * sizeof(matrix));
    nn.widest = nn.mean_in.cols;
    for (i = 0; i < nn.nlayers; i++) {
        sprintf(field, "layer %u weights", i);
        nn.weights[i] = reader_matrix(&r, 1, field);
        check_finite(path, &nn.weights[i], field);
        sprintf(field, "layer %u bias", i);
        nn.biases[i] = reader_matrix(&r, 0, field);
        check_finite(path, &nn.biases[i], field);
        if (nn.weights[i].cols > nn.widest) nn.widest = nn.weights[i].cols;
    }
    reader_finish(&r);
    check_finite(path, &nn.mean_in, "mean_in");
    check_finite(path, &nn.std_in, "std_in");
    check_finite(path, &nn.mean_out, "mean_out");
    check_finite(path, &nn.std_out, "std_out");
    network_check(path, &nn);
    return nn;
}

static void network_free(network *nn)
{
    uint32_t i;
    for (i = 0; i < nn->nlayers; i++) {
        free(nn->weights[i].data);
        free(nn->biases[i].data);
    }
    free(nn->weights);
    free(nn->biases);
    free(nn->mean_in.data);
    free(nn->std_in.data);
    free(nn->mean_out.data);
    free(nn->std_out.data);
}

static void layer_linear(float *restrict out, const float *restrict in, const matrix *weights,
                         const float *restrict bias)
{
    uint32_t i, j, nin = weights->rows, nout = weights->cols;
    for (j = 0; j < nout; j++) out[j] = bias[j];
    for (i = 0; i < nin; i++) {
        const float x = in[i];
        const float *restrict row = weights->data + (size_t)i * nout;
        if (x == 0.0f) continue; /* ReLU zeros many activations: the runtime skips them too */
        for (j = 0; j < nout; j++) out[j] += x * row[j];
    }
}

/* One query through the network; `a` and `b` are scratch buffers of nn->widest floats. */
static void network_evaluate(const network *nn, const float *query, float *result, float *a, float *b)
{
    uint32_t i, j, n = nn->mean_in.cols;
    for (j = 0; j < n; j++) a[j] = (query[j] - nn->mean_in.data[j]) / nn->std_in.data[j];
    for (i = 0; i < nn->nlayers; i++) {
        float *swap;
        layer_linear(b, a, &nn->weights[i], nn->biases[i].data);
        n = nn->weights[i].cols;
        if (i + 1 < nn->nlayers)
            for (j = 0; j < n; j++) b[j] = b[j] > 0.0f ? b[j] : 0.0f;
        swap = a; a = b; b = swap;
    }
    for (j = 0; j < n; j++) result[j] = a[j] * nn->std_out.data[j] + nn->mean_out.data[j];
}

/* Index of the first frame at the minimum squared L2 distance from `query`. `columns` holds the
 * database feature-major (n x nframes) so the inner loop runs over frames and vectorises without
 * reordering any sum: each frame's distance still adds its features in order 0..n-1. */
static int32_t nearest_frame(const float *columns, uint32_t nframes, uint32_t n, const float *query,
                             float *restrict distances)
{
    uint32_t f, j;
    int32_t best = 0;
    for (f = 0; f < nframes; f++) distances[f] = 0.0f;
    for (j = 0; j < n; j++) {
        const float q = query[j];
        const float *restrict column = columns + (size_t)j * nframes;
        for (f = 0; f < nframes; f++) distances[f] += (q - column[f]) * (q - column[f]);
    }
    for (f = 1; f < nframes; f++)
        if (distances[f] < distances[best]) best = (int32_t)f;
    return best;
}

/* An input matrix whose rows must have `width` values; bytes after it are refused. */
static matrix load_rows(const char *path, uint32_t width, const char *field)
{
    reader r = reader_open(path);
    matrix m = reader_matrix(&r, 1, field);
    if (m.cols != width) fail(path, "%s rows have %u values, expected %u", field, m.cols, width);
    reader_finish(&r);
    return m;
}

static void write_bytes(FILE *file, const char *path, const void *data, size_t bytes)
{
    if (bytes > 0 && fwrite(data, 1, bytes, file) != bytes) fail(path, "write error");
}

static void write_u32(FILE *file, const char *path, uint32_t value)
{
    unsigned char b[4];
    b[0] = value & 255; b[1] = value >> 8 & 255; b[2] = value >> 16 & 255; b[3] = value >> 24 & 255;
    write_bytes(file, path, b, 4);
}

/* Writes the u32 `header` counts then `count` 4-byte values (float or int32) to `path`, unless "-". */
static void write_result(const char *path, const uint32_t *header, int nheader, const void *values,
                         uint64_t count)
{
    FILE *file;
    int i;
    if (strcmp(path, "-") == 0) return;
    if (!host_is_little_endian()) fail(path, "writing needs a little-endian host");
    file = fopen(path, "wb");
    if (file == NULL) fail(path, "cannot open for writing");
    for (i = 0; i < nheader; i++) write_u32(file, path, header[i]);
    write_bytes(file, path, values, (size_t)(count * 4));
    if (fclose(file) != 0) fail(path, "write error on close");
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void report_pass(int pass, double seconds, uint32_t queries)
{
    printf("pass %d seconds %.9f per_query_us %.6f\n", pass, seconds,
           queries > 0 ? 1e6 * seconds / queries : 0.0);
}

static void run_eval(const char *network_path, const char *input_path, const char *output_path, int repeats)
{
    network nn = network_load(network_path);
    matrix in = load_rows(input_path, nn.mean_in.cols, "input");
    uint32_t nout = nn.mean_out.cols, q;
    float *out = allocate(output_path, (uint64_t)in.rows * nout * 4);
    float *a = allocate(network_path, (uint64_t)nn.widest * 4), *b = allocate(network_path, (uint64_t)nn.widest * 4);
    int pass;
    for (pass = 1; pass <= (repeats > 0 ? repeats : 1); pass++) {
        double start = seconds_now();
        for (q = 0; q < in.rows; q++)
            network_evaluate(&nn, in.data + (size_t)q * in.cols, out + (size_t)q * nout, a, b);
        if (repeats > 0) report_pass(pass, seconds_now() - start, in.rows);
    }
    {
        const uint32_t header[2] = {in.rows, nout};
        write_result(output_path, header, 2, out, (uint64_t)in.rows * nout);
    }
    free(a);
    free(b);
    free(out);
    free(in.data);
    network_free(&nn);
}

static void run_nearest(const char *database_path, const char *query_path, const char *output_path, int repeats)
{
    reader r = reader_open(database_path);
    matrix database = reader_matrix(&r, 1, "database"), queries;
    uint32_t q, f, j, nframes = database.rows, n = database.cols;
    float *columns, *distances;
    int32_t *out;
    int pass;
    fclose(r.file);
    if (nframes == 0 || n == 0) fail(database_path, "database is empty");
    if (nframes > INT32_MAX) fail(database_path, "more than 2^31 - 1 frames");
    queries = load_rows(query_path, n, "queries");
    columns = allocate(database_path, (uint64_t)nframes * n * 4);
    for (f = 0; f < nframes; f++)
        for (j = 0; j < n; j++) columns[(size_t)j * nframes + f] = database.data[(size_t)f * n + j];
    distances = allocate(database_path, (uint64_t)nframes * 4);
    out = allocate(output_path, (uint64_t)queries.rows * 4 + 4);
    for (pass = 1; pass <= (repeats > 0 ? repeats : 1); pass++) {
        double start = seconds_now();
        for (q = 0; q < queries.rows; q++)
            out[q] = nearest_frame(columns, nframes, n, queries.data + (size_t)q * n, distances);
        if (repeats > 0) report_pass(pass, seconds_now() - start, queries.rows);
    }
    write_result(output_path, &queries.rows, 1, out, queries.rows);
    free(out);
    free(distances);
    free(columns);
    free(queries.data);
    free(database.data);
}

int main(int argc, char **argv)
{
    int repeats = 0;
    if (argc == 6) {
        char *end;
        long value = strtol(argv[5], &end, 10);
        if (*end != '\0' || value < 1 || value > 1000000) fail(argv[5], "REPEATS must be an integer 1..1000000");
        repeats = (int)value;
    }
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "eval") == 0) {
        run_eval(argv[2], argv[3], argv[4], repeats);
    } else if ((argc == 5 || argc == 6) && strcmp(argv[1], "nearest") == 0) {
        run_nearest(argv[2], argv[3], argv[4], repeats);
    } else {
        fprintf(stderr, "usage: nnet_eval eval NETWORK.bin INPUT.bin OUTPUT.bin [REPEATS]\n"
                        "       nnet_eval nearest DATABASE.bin QUERIES.bin OUTPUT.bin [REPEATS]\n");
        return 2;
    }
    return 0;
}
