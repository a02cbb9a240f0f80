/*
 * A program that keeps creating and freeing communicators, as long-running codes do (a
 * communicator per time step or per solve): more creations than there are context ids
 * (65,535 in Kestrel), so freed ids must come back. Every kind of creation that reuses ids
 * runs past the end: MPI_Comm_dup, MPI_Comm_split, MPI_Comm_create, MPI_Comm_create_group.
 * Communicators created before and kept alive stay separate from the new ones: a message
 * sent on a kept communicator before a new one is made and received after is still its own.
 * With the argument "multiple" the program runs under MPI_THREAD_MULTIPLE, whose creations
 * agree on ids another way.
 */
#include "check.h"

/* More dups than ids, so the last ones reuse freed ids. */
#define DUPS 70000
/* Creations of each other kind after that, all on reused ids. */
#define AFTER 300

/* A round of traffic on `c`: an allreduce of the ranks, and a ring shift of `salt`. */
static void traffic(MPI_Comm c, int salt)
{
    int rank, size, sum = 0, got = -1;
    MPI_Comm_rank(c, &rank);
    MPI_Comm_size(c, &size);
    OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, c));
    CHECK(sum == size * (size - 1) / 2, "allreduce of ranks gave %d on %d ranks", sum, size);
    int mine = salt * 1000 + rank;
    OK(MPI_Sendrecv(&mine, 1, MPI_INT, (rank + 1) % size, 7, &got, 1, MPI_INT,
                    (rank + size - 1) % size, 7, c, MPI_STATUS_IGNORE));
    CHECK(got == salt * 1000 + (rank + size - 1) % size, "ring shift %d got %d", salt, got);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "multiple") == 0) {
        int provided = -1;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
        MPI_Comm_rank(MPI_COMM_WORLD, &check_rank);
        CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not granted: %d", provided);
    } else {
        test_start(&argc, &argv);
    }
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm kept;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &kept));
    MPI_Group world_group;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &world_group));

    /* A message on the kept communicator, in flight across every creation below. */
    int early = 4242 + rank, early_got = -1;
    MPI_Request early_send;
    OK(MPI_Isend(&early, 1, MPI_INT, (rank + 1) % size, 99, kept, &early_send));

    for (int i = 0; i < DUPS; i++) {
        MPI_Comm c;
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
        if (i % 5000 == 0 || i >= DUPS - 3)
            traffic(c, i);
        OK(MPI_Comm_free(&c));
    }
    for (int i = 0; i < AFTER; i++) {
        MPI_Comm halves, all, grouped;
        OK(MPI_Comm_split(MPI_COMM_WORLD, rank % 2, -rank, &halves));
        int hsize;
        MPI_Comm_size(halves, &hsize);
        CHECK(hsize == size / 2 + (rank % 2 == 0 ? size % 2 : 0), "split half of %d ranks", hsize);
        OK(MPI_Comm_create(MPI_COMM_WORLD, world_group, &all));
        OK(MPI_Comm_create_group(MPI_COMM_WORLD, world_group, 5, &grouped));
        if (i % 100 == 0 || i == AFTER - 1) {
            traffic(halves, i);
            traffic(all, i + 1);
            traffic(grouped, i + 2);
        }
        OK(MPI_Comm_free(&grouped));
        OK(MPI_Comm_free(&all));
        OK(MPI_Comm_free(&halves));
    }

    /* The kept communicator still works, and its early message is its own. */
    OK(MPI_Recv(&early_got, 1, MPI_INT, (rank + size - 1) % size, 99, kept, MPI_STATUS_IGNORE));
    CHECK(early_got == 4242 + (rank + size - 1) % size, "early message on the kept communicator: %d",
          early_got);
    OK(MPI_Wait(&early_send, MPI_STATUS_IGNORE));
    traffic(kept, 7);
    OK(MPI_Group_free(&world_group));
    OK(MPI_Comm_free(&kept));
    test_pass("comm_reuse");
    return 0;
}
