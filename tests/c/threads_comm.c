/*
 * Communicator creation from several threads at once under MPI_THREAD_MULTIPLE: THREADS
 * threads per rank, each with a parent communicator of its own (duplicated serially first),
 * create communicators from it ROUNDS times (MPI_Comm_dup, MPI_Comm_dup_with_info,
 * MPI_Comm_split, MPI_Comm_create, MPI_Cart_create, MPI_Cart_sub), check each with an allreduce and free it. The threads
 * start in opposite orders on even and odd ranks, so that the creations on different parents
 * interleave differently on every rank: a library that holds one lock across a creation's
 * exchanges deadlocks here. Every new communicator must also get a context of its own: the
 * allreduces on the communicators of different threads would otherwise mix.
 */
#include "check.h"

#include <pthread.h>
#include <unistd.h>

#define THREADS 4
#define ROUNDS 20

static int rank, size;
static MPI_Comm parents[THREADS];

/* The sum of (rank + 1) * (t + 1) over the members of `c`, checked against `expect`. */
static void check_sum(MPI_Comm c, int t, long expect, const char *what, int round) {
    long mine = (long)(rank + 1) * (t + 1), sum = 0;
    OK(MPI_Allreduce(&mine, &sum, 1, MPI_LONG, MPI_SUM, c));
    CHECK(sum == expect, "thread %d round %d %s: sum %ld, expected %ld", t, round, what, sum,
          expect);
}

static void *creator(void *arg) {
    int t = (int)(long)arg;
    MPI_Comm parent = parents[t];
    long all = 0, even = 0, same_parity = 0;
    for (int r = 0; r < size; r++) {
        all += (long)(r + 1) * (t + 1);
        if (r % 2 == 0)
            even += (long)(r + 1) * (t + 1);
        if (r % 2 == rank % 2)
            same_parity += (long)(r + 1) * (t + 1);
    }
    MPI_Group world_group, even_group;
    OK(MPI_Comm_group(parent, &world_group));
    int nevens = (size + 1) / 2, evens[64];
    for (int i = 0; i < nevens; i++)
        evens[i] = 2 * i;
    OK(MPI_Group_incl(world_group, nevens, evens, &even_group));
    for (int round = 0; round < ROUNDS; round++) {
        MPI_Comm dup, dup_info, split, created;
        OK(MPI_Comm_dup(parent, &dup));
        check_sum(dup, t, all, "dup", round);
        OK(MPI_Comm_dup_with_info(parent, MPI_INFO_NULL, &dup_info));
        check_sum(dup_info, t, all, "dup_with_info", round);
        OK(MPI_Comm_split(parent, rank % 2, rank, &split));
        check_sum(split, t, same_parity, "split", round);
        OK(MPI_Comm_create(parent, even_group, &created));
        if (rank % 2 == 0)
            check_sum(created, t, even, "create", round);
        else
            CHECK(created == MPI_COMM_NULL, "thread %d: an odd rank got a communicator", t);
        /* The topology constructors split too. */
        MPI_Comm cart, row;
        int dims[2] = {size, 1}, periods[2] = {1, 0}, keep[2] = {1, 0};
        OK(MPI_Cart_create(parent, 2, dims, periods, 0, &cart));
        check_sum(cart, t, all, "cart_create", round);
        OK(MPI_Cart_sub(cart, keep, &row));
        check_sum(row, t, all, "cart_sub", round);
        OK(MPI_Comm_free(&row));
        OK(MPI_Comm_free(&cart));
        OK(MPI_Comm_free(&dup));
        OK(MPI_Comm_free(&dup_info));
        OK(MPI_Comm_free(&split));
        if (created != MPI_COMM_NULL)
            OK(MPI_Comm_free(&created));
    }
    OK(MPI_Group_free(&even_group));
    OK(MPI_Group_free(&world_group));
    return NULL;
}

int main(int argc, char **argv) {
    int provided;
    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    check_rank = rank;
    CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not granted (%d)", provided);
    CHECK(size <= 64, "at most 64 ranks");
    for (int t = 0; t < THREADS; t++)
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &parents[t]));
    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++) {
        /* Opposite start orders on even and odd ranks, a little apart. */
        int t = rank % 2 ? THREADS - 1 - i : i;
        CHECK(pthread_create(&threads[t], NULL, creator, (void *)(long)t) == 0,
              "pthread_create");
        usleep(2000);
    }
    for (int t = 0; t < THREADS; t++)
        CHECK(pthread_join(threads[t], NULL) == 0, "pthread_join");
    for (int t = 0; t < THREADS; t++)
        OK(MPI_Comm_free(&parents[t]));
    OK(MPI_Finalize());
    printf("PASS threads_comm rank %d\n", rank);
    return 0;
}
