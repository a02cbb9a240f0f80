/*
 * MPI_MODE_NOCHECK takes no lock, as OpenCoarrays' events need. Its `event wait` holds
 * MPI_Win_lock_all(MPI_MODE_NOCHECK) on its own window and polls its counter (MPI_Win_sync,
 * a load, a MPI_Win_flush to itself for progress) while the posting image takes an exclusive
 * lock on it and adds 1 with MPI_Accumulate. By the letter of the assertion that program is
 * erroneous (the exclusive lock conflicts with the shared one of lock_all), so MPICH may
 * hang on it, and MPICH 4.0.2 does (rank 0 never leaves the MPI_Barrier before the first
 * round, the other rank polls): this test runs on Kestrel only. Kestrel opens a NOCHECK
 * epoch without taking any lock, so the post gets through; a lock taken for the assertion
 * would deadlock the two. Rank 0 posts to every other rank and waits for all their answers,
 * 20 rounds, then once more with MPI_Win_lock(MPI_LOCK_SHARED, me, MPI_MODE_NOCHECK) as the
 * waiting epoch. With the argument "create" the window comes from MPI_Win_create (on Kestrel:
 * operations as active messages; allocated windows on one node are shared memory).
 */
#include "check.h"
#include <unistd.h>

static int rank, size;

/* Adds 1 to `target`'s counter under an exclusive lock (an `event post`). */
static void post_event(MPI_Win win, int target)
{
    int one = 1;
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, target, 0, win));
    OK(MPI_Accumulate(&one, 1, MPI_INT, target, 0, 1, MPI_INT, MPI_SUM, win));
    OK(MPI_Win_unlock(target, win));
}

/* Waits until my counter is `want`, as `event wait` does, in a NOCHECK epoch opened by
 * lock_all (`all`) or by a shared lock on myself. */
static void wait_event(MPI_Win win, volatile int *counter, int want, int all)
{
    if (all)
        OK(MPI_Win_lock_all(MPI_MODE_NOCHECK, win));
    else
        OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, MPI_MODE_NOCHECK, win));
    int seen;
    for (;;) {
        OK(MPI_Win_sync(win));
        seen = *counter;
        if (seen >= want)
            break;
        usleep(10);
        OK(MPI_Win_flush(rank, win));
    }
    if (all)
        OK(MPI_Win_unlock_all(win));
    else
        OK(MPI_Win_unlock(rank, win));
    CHECK(seen == want, "event counter %d, expected %d", seen, want);
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    int create = argc > 1 && strcmp(argv[1], "create") == 0;
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    int *counter = NULL;
    MPI_Win win;
    if (create) {
        counter = calloc(1, sizeof(int));
        CHECK(counter != NULL, "calloc");
        OK(MPI_Win_create(counter, sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD,
                          &win));
    } else {
        OK(MPI_Win_allocate(sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &counter,
                            &win));
    }
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    *counter = 0;
    OK(MPI_Win_unlock(rank, win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    for (int round = 1; round <= 21; round++) {
        int all = round <= 20;
        if (rank == 0) {
            for (int r = 1; r < size; r++)
                post_event(win, r);
            wait_event(win, counter, round * (size - 1), all);
        } else {
            wait_event(win, counter, round, all);
            post_event(win, 0);
        }
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    OK(MPI_Win_free(&win));
    free(create ? counter : NULL);
    test_pass("rma_nocheck");
    return 0;
}
