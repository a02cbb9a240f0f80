/*
 * Every rank gets the same bits from a floating-point allreduce. A sum of doubles depends on
 * how its terms are grouped ((x0 + x1) + x2 is not x0 + (x1 + x2) in the last bits), and MPI
 * leaves the grouping to the library, but a program that branches on the result (a solver's
 * convergence test, a pivot choice) needs every rank to see the same value: BAGEL's CASSCF
 * on 3 ranks took different branches on different ranks and stopped in mismatched
 * collectives when Kestrel's one-round nonblocking allreduce grouped by rank.
 *
 * Checks MPI_Allreduce, MPI_Iallreduce and the persistent MPI_Allreduce_init, in place and
 * not, for MPI_DOUBLE, MPI_FLOAT and MPI_C_DOUBLE_COMPLEX sums and a few sizes (the one-round
 * small path, the recursive doubling and the ring), by gathering every rank's result and
 * comparing bytes. Argument "multiple" initializes with MPI_THREAD_MULTIPLE (where Kestrel's
 * blocking collectives run as schedules too), anything else with MPI_Init. Passed on MPICH
 * 4.0.2 and Kestrel at 3, 4 and 5 ranks, both levels.
 */
#include <complex.h>

#include "check.h"

static int rank, size;

/* Terms of very different magnitudes and signs, so that the grouping shows in the result. */
static void fill(unsigned char *buf, int n, MPI_Datatype dt, int salt)
{
    unsigned s = 2654435761u * (unsigned)(rank + 1) + (unsigned)salt;
    for (int i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        double mag = 1.0;
        for (int k = (int)((s >> 8) % 9); k > 0; k--)
            mag *= (rank % 2) ? 37.0 : 0.029;
        double v = ((double)((s >> 4) % 100000) / 100000.0 - 0.5) * mag + 1.0 / (3 + i + rank);
        if (dt == MPI_DOUBLE)
            ((double *)buf)[i] = v;
        else if (dt == MPI_FLOAT)
            ((float *)buf)[i] = (float)v;
        else
            ((double complex *)buf)[i] = v - I * (v / 7.0);
    }
}

/* Every rank's `bytes` of `result` are the same as rank 0's. */
static void same_everywhere(const unsigned char *result, size_t bytes, const char *what, int n,
                            const char *type, int in_place)
{
    unsigned char *all = malloc(bytes * size);
    CHECK(all != NULL, "out of memory");
    OK(MPI_Allgather(result, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD));
    for (int r = 1; r < size; r++)
        CHECK(memcmp(all, all + bytes * r, bytes) == 0,
              "%s of %d %s (%s): rank %d's result differs from rank 0's in its bits", what, n,
              type, in_place ? "in place" : "separate buffers", r);
    free(all);
}

int main(int argc, char **argv)
{
    int multiple = argc > 1 && strcmp(argv[1], "multiple") == 0;
    if (multiple) {
        int provided = 0;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        MPI_Comm_rank(MPI_COMM_WORLD, &check_rank);
        CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not granted (%d)", provided);
    } else {
        test_start(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    const int counts[] = {1, 7, 72, 100, 224, 500, 1000, 4096, 70000};
    const MPI_Datatype types[] = {MPI_DOUBLE, MPI_FLOAT, MPI_C_DOUBLE_COMPLEX};
    const char *type_names[] = {"MPI_DOUBLE", "MPI_FLOAT", "MPI_C_DOUBLE_COMPLEX"};
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        int es = 0;
        OK(MPI_Type_size(types[t], &es));
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            int n = counts[c];
            size_t bytes = (size_t)n * es;
            unsigned char *in = malloc(bytes), *out = malloc(bytes);
            CHECK(in && out, "out of memory");
            for (int in_place = 0; in_place < 2; in_place++) {
                for (int how = 0; how < 3; how++) {
                    fill(in, n, types[t], (int)(c * 16 + how));
                    const void *send = in;
                    if (in_place) {
                        memcpy(out, in, bytes);
                        send = MPI_IN_PLACE;
                    }
                    const char *what = "MPI_Allreduce";
                    if (how == 0) {
                        OK(MPI_Allreduce(send, out, n, types[t], MPI_SUM, MPI_COMM_WORLD));
                    } else if (how == 1) {
                        MPI_Request req;
                        what = "MPI_Iallreduce";
                        OK(MPI_Iallreduce(send, out, n, types[t], MPI_SUM, MPI_COMM_WORLD, &req));
                        OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
                    } else {
                        MPI_Request req;
                        what = "MPI_Allreduce_init";
                        OK(MPI_Allreduce_init(send, out, n, types[t], MPI_SUM, MPI_COMM_WORLD,
                                              MPI_INFO_NULL, &req));
                        OK(MPI_Start(&req));
                        OK(MPI_Wait(&req, MPI_STATUS_IGNORE));
                        OK(MPI_Request_free(&req));
                    }
                    same_everywhere(out, bytes, what, n, type_names[t], in_place);
                }
            }
            free(in);
            free(out);
        }
    }
    test_pass("reduce_bits");
    return 0;
}
