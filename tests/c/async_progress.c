/*
 * Asynchronous progress: rank 0 starts an operation, computes COMPUTE_MS without a single MPI
 * call, then waits; every other rank starts the same operation and waits at once, timing
 * its wait. With a progress thread (Kestrel's KESTREL_ASYNC_PROGRESS=1, MPICH's
 * MPIR_CVAR_ASYNC_PROGRESS=1) the peers finish long before rank 0's computation ends.
 *
 * Operations: a 4 MiB MPI_Send from rank 1 into an MPI_Irecv rank 0 posted before computing
 * (a rendezvous: the receiver must take part), MPI_Ibcast of 1 MiB rooted at rank 2 (in a
 * binomial tree of 4 ranks rank 0 forwards to rank 1), MPI_Iallreduce of 1 MiB,
 * MPI_Ialltoall of 256 KiB per pair, MPI_Ibarrier. Every result is checked.
 *
 * Usage: async_progress expect-overlap | report. Both print, on rank 0, one line per
 * operation: "async_progress OP: slowest peer waited MS ms while rank 0 computed C ms".
 * expect-overlap also fails when a peer waited more than half of the computation.
 * Needs at least 3 ranks (4 for the forwarding in the bcast tree).
 */
#include "check.h"

#include <time.h>

#define COMPUTE_MS 200.0
#define BIG (4 << 20)
#define MID (1 << 20)

static double now_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Work without MPI calls for `ms` milliseconds. */
static volatile unsigned long sink;
static void compute(double ms) {
    double end = now_ms() + ms;
    unsigned long x = 1;
    while (now_ms() < end) {
        for (int i = 0; i < 1000; i++)
            x = x * 6364136223846793005UL + 1;
    }
    sink = x;
}

enum op { SEND, BCAST, ALLREDUCE, ALLTOALL, BARRIER, OPS };
static const char *names[OPS] = {"rendezvous send", "ibcast", "iallreduce", "ialltoall",
                                  "ibarrier"};

static char *send_buf, *recv_buf;
static int me, size;

/* Starts `o` (rank 0 then computes before waiting); returns the request to wait for (or
 * MPI_REQUEST_NULL when the operation was blocking and is already over). */
static MPI_Request start(enum op o) {
    MPI_Request r = MPI_REQUEST_NULL;
    int block = MID / size;
    switch (o) {
    case SEND:
        if (me == 0)
            OK(MPI_Irecv(recv_buf, BIG, MPI_CHAR, 1, 7, MPI_COMM_WORLD, &r));
        break;
    case BCAST:
        OK(MPI_Ibcast(me == 2 ? send_buf : recv_buf, MID, MPI_CHAR, 2, MPI_COMM_WORLD, &r));
        break;
    case ALLREDUCE:
        OK(MPI_Iallreduce(send_buf, recv_buf, MID / 4, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &r));
        break;
    case ALLTOALL:
        OK(MPI_Ialltoall(send_buf, block, MPI_CHAR, recv_buf, block, MPI_CHAR, MPI_COMM_WORLD,
                         &r));
        break;
    case BARRIER:
        OK(MPI_Ibarrier(MPI_COMM_WORLD, &r));
        break;
    default:
        break;
    }
    return r;
}

static void fill(enum op o) {
    int *ints = (int *)send_buf;
    int block = MID / size;
    memset(recv_buf, 0, BIG);
    for (int i = 0; i < BIG; i++)
        send_buf[i] = (char)(i * 7 + me);
    if (o == ALLREDUCE)
        for (int i = 0; i < MID / 4; i++)
            ints[i] = i + me;
    if (o == ALLTOALL)
        for (int p = 0; p < size; p++)
            memset(send_buf + p * block, me * 16 + p, block);
}

static void check_result(enum op o) {
    int *ints = (int *)recv_buf;
    int block = MID / size;
    switch (o) {
    case SEND:
        if (me == 0)
            for (int i = 0; i < BIG; i++)
                CHECK(recv_buf[i] == (char)(i * 7 + 1), "received byte %d is wrong", i);
        break;
    case BCAST:
        if (me != 2)
            for (int i = 0; i < MID; i++)
                CHECK(recv_buf[i] == (char)(i * 7 + 2), "bcast byte %d is wrong", i);
        break;
    case ALLREDUCE:
        for (int i = 0; i < MID / 4; i++)
            CHECK(ints[i] == size * i + size * (size - 1) / 2, "allreduce element %d is %d", i,
                  ints[i]);
        break;
    case ALLTOALL:
        for (int p = 0; p < size; p++)
            for (int i = 0; i < block; i++)
                CHECK(recv_buf[p * block + i] == (char)(p * 16 + me),
                      "alltoall byte %d from %d is wrong", i, p);
        break;
    default:
        break;
    }
}

int main(int argc, char **argv) {
    OK(MPI_Init(&argc, &argv));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = me;
    CHECK(argc == 2 && (!strcmp(argv[1], "expect-overlap") || !strcmp(argv[1], "report")),
          "usage: async_progress expect-overlap | report");
    CHECK(size >= 3, "needs at least 3 ranks, got %d", size);
    int expect = !strcmp(argv[1], "expect-overlap");
    send_buf = malloc(BIG);
    recv_buf = malloc(BIG);
    CHECK(send_buf && recv_buf, "out of memory");

    for (int o = 0; o < OPS; o++) {
        fill(o);
        /* Every rank's segment and connections set up before timing. */
        OK(MPI_Barrier(MPI_COMM_WORLD));
        OK(MPI_Barrier(MPI_COMM_WORLD));
        double t0 = now_ms();
        MPI_Request r = start(o);
        if (me == 0)
            compute(COMPUTE_MS);
        if (o == SEND && me == 1)
            OK(MPI_Send(send_buf, BIG, MPI_CHAR, 0, 7, MPI_COMM_WORLD));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        double waited = me == 0 ? 0.0 : now_ms() - t0;
        check_result(o);
        double slowest = 0;
        OK(MPI_Reduce(&waited, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD));
        if (me == 0) {
            printf("async_progress %s: slowest peer waited %.1f ms while rank 0 computed %.0f "
                   "ms\n",
                   names[o], slowest, COMPUTE_MS);
            fflush(stdout);
            if (expect)
                CHECK(slowest < COMPUTE_MS / 2,
                      "%s: a peer waited %.1f ms, held back by rank 0's computation",
                      names[o], slowest);
        }
    }
    free(send_buf);
    free(recv_buf);
    OK(MPI_Finalize());
    printf("PASS async_progress rank %d\n", me);
    return 0;
}
