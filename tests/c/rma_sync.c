/*
 * One-sided communication, synchronization. Active target: MPI_Win_fence with assertions
 * (MPI_MODE_NOPRECEDE first, MPI_MODE_NOSTORE, MPI_MODE_NOPUT before a get-only epoch,
 * MPI_MODE_NOSUCCEED last) over n epochs of a ring shift where each epoch puts what the
 * previous one delivered; post/start/complete/wait where each rank exposes its window to
 * its left neighbour and accesses its right one (groups from MPI_Group_incl), several
 * dependent rounds, one completed by polling MPI_Win_test, one get-only round posted with
 * MPI_MODE_NOPUT | MPI_MODE_NOSTORE. Passive target: MPI_Win_lock(EXCLUSIVE)/unlock with
 * puts checked by the target after a barrier, an exclusive lock guarding a get+flush+put
 * increment (no lost updates), MPI_Win_lock(SHARED) with gets; in a lock_all epoch
 * MPI_Win_flush, MPI_Win_flush_all, MPI_Win_flush_local (origin buffer reusable at once),
 * MPI_Win_flush_local_all, each followed by a get that must see the put, and MPI_Win_sync
 * publishing a local store; a compare-and-swap spin lock on rank 0 (10,000 acquisitions in
 * all, released by MPI_Fetch_and_op(REPLACE)) protecting a counter incremented by get+put
 * under lock_all + flush; passive epochs to rank 0 while rank 0 waits in MPI_Barrier
 * (must not hang); locks on the own rank with put/get, flush_local and accumulate. Any
 * number of ranks (1-6 tested); with one rank every neighbour is the rank itself. Where
 * ranks wait for others' passive-target work they wait in a barrier that sleeps (see
 * sleepy_barrier), and CAS spinners back off, so that oversubscribed runs stay fast.
 * With the argument "create" the passive-target windows come from MPI_Win_create; with
 * "acquisitions=N" the spin lock is taken N times in all instead of 10,000.
 */
#include "check.h"
#include <unistd.h>

static int rank, size, left, right;

/* Argument "create": the passive-target windows come from MPI_Win_create on malloc'd memory
 * instead of MPI_Win_allocate (on Kestrel: operations as active messages, where allocated
 * windows on one node are shared memory). The memory is freed at the end. */
static int use_create;
static void *created[16];
static int ncreated;

/* Argument "acquisitions=N": the CAS spin lock's acquisitions in all. Where rank 0's
 * window is reached by active messages (created windows, other hosts), every operation on
 * the lock word waits for rank 0 to call MPI, and a rank backing off sleeps up to 512 us:
 * about 1 ms per acquisition, so runs there take fewer. */
static int cas_total = 10000;

static void alloc_window(int bytes, int disp_unit, void *baseptr, MPI_Win *win)
{
    if (!use_create) {
        OK(MPI_Win_allocate(bytes, disp_unit, MPI_INFO_NULL, MPI_COMM_WORLD, baseptr, win));
        return;
    }
    CHECK(ncreated < 16, "too many windows");
    void *mem = calloc(1, bytes);
    CHECK(mem != NULL, "calloc");
    created[ncreated++] = mem;
    *(void **)baseptr = mem;
    OK(MPI_Win_create(mem, bytes, disp_unit, MPI_INFO_NULL, MPI_COMM_WORLD, win));
}

/* A barrier that sleeps while it waits. Passive-target operations (MPICH does atomics and
 * locks with active messages) need the target's CPU; with more ranks than cores, ranks
 * that busy-wait in MPI_Barrier for a slow peer take it away and a run of this test
 * took 10-20 s instead of 1 s. MPI_Barrier itself is used where it is the point. */
static void sleepy_barrier(void)
{
    MPI_Request r;
    int flag = 0;
    OK(MPI_Ibarrier(MPI_COMM_WORLD, &r));
    for (;;) {
        OK(MPI_Test(&r, &flag, MPI_STATUS_IGNORE));
        if (flag)
            break;
        usleep(100);
    }
}

/* ---------------------------------------------------------------- fence */

static void fences(void)
{
    int *w = malloc(2 * sizeof(int));
    long *val = malloc(size * sizeof(long)), *nv = malloc(size * sizeof(long));
    CHECK(w && val && nv, "malloc");
    for (int r = 0; r < size; r++)
        val[r] = 1000 * (r + 1);
    w[0] = 1000 * (rank + 1);
    w[1] = -1;
    MPI_Win win;
    OK(MPI_Win_create(w, 2 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    OK(MPI_Win_fence(MPI_MODE_NOPRECEDE, win));
    /* Epoch k: put (what arrived in epoch k-1) + my rank into the right neighbour's other
     * slot. No local stores to the window after the first fence: MPI_MODE_NOSTORE. */
    for (int k = 0; k < size; k++) {
        int cur = k % 2, next = (k + 1) % 2;
        int out = w[cur] + rank;
        OK(MPI_Put(&out, 1, MPI_INT, right, next, 1, MPI_INT, win));
        int last = k == size - 1;
        OK(MPI_Win_fence(MPI_MODE_NOSTORE | (last ? MPI_MODE_NOPUT : 0), win));
        for (int r = 0; r < size; r++)
            nv[(r + 1) % size] = val[r] + r;
        long *t = val;
        val = nv;
        nv = t;
        CHECK(w[next] == val[rank], "fence ring epoch %d: received %d, expected %ld", k,
              w[next], val[rank]);
    }
    /* A get-only epoch (announced by MPI_MODE_NOPUT), closed with MPI_MODE_NOSUCCEED. */
    int in = -1;
    OK(MPI_Get(&in, 1, MPI_INT, right, size % 2, 1, MPI_INT, win));
    OK(MPI_Win_fence(MPI_MODE_NOSUCCEED, win));
    CHECK(in == val[right], "get after the ring: %d, expected %ld", in, val[right]);
    /* The value went once around the ring collecting every rank. */
    CHECK(val[rank] == 1000 * (rank + 1) + (long)size * (size - 1) / 2,
          "serial model broken: %ld", val[rank]);
    OK(MPI_Win_free(&win));
    free(w);
    free(val);
    free(nv);
}

/* ---------------------------------------------------------------- PSCW */

static void pscw(void)
{
    enum { ROUNDS = 5, TESTED = 2 };
    MPI_Group world, gl, gr;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    OK(MPI_Group_incl(world, 1, &left, &gl));
    OK(MPI_Group_incl(world, 1, &right, &gr));
    int *w = malloc(8 * sizeof(int));
    long *val = malloc(size * sizeof(long)), *nv = malloc(size * sizeof(long));
    CHECK(w && val && nv, "malloc");
    for (int i = 0; i < 8; i++)
        w[i] = rank * 10 + i;
    for (int r = 0; r < size; r++)
        val[r] = r * 100;
    MPI_Win win;
    OK(MPI_Win_create(w, 8 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    int v = rank * 100, rslot[4]; /* rslot: what the right neighbour's slots hold */
    for (int i = 0; i < 4; i++)
        rslot[i] = right * 10 + i;
    for (int k = 0; k < ROUNDS; k++) {
        int g = -1;
        OK(MPI_Win_post(gl, 0, win));
        OK(MPI_Win_start(gr, 0, win));
        OK(MPI_Put(&v, 1, MPI_INT, right, k % 4, 1, MPI_INT, win));
        OK(MPI_Get(&g, 1, MPI_INT, right, 4 + k % 4, 1, MPI_INT, win));
        OK(MPI_Win_complete(win));
        CHECK(g == right * 10 + 4 + k % 4, "PSCW round %d: get gave %d, expected %d", k, g,
              right * 10 + 4 + k % 4);
        if (k == TESTED) {
            int flag = 0;
            for (long spins = 0; !flag; spins++) {
                OK(MPI_Win_test(win, &flag));
                CHECK(spins < 100000000L, "MPI_Win_test never reports the exposure done");
            }
        } else {
            OK(MPI_Win_wait(win));
        }
        for (int r = 0; r < size; r++)
            nv[r] = val[(r + size - 1) % size] + 1;
        long *t = val;
        val = nv;
        nv = t;
        CHECK(w[k % 4] + 1 == val[rank], "PSCW round %d: received %d from %d, expected %ld", k,
              w[k % 4], left, val[rank] - 1);
        v = w[k % 4] + 1; /* the next round sends what this one received */
        rslot[k % 4] = (int)val[right] - 1;
    }
    /* A get-only round: the exposure promises no puts and no local stores. */
    int g[4] = {-1, -1, -1, -1};
    OK(MPI_Win_post(gl, MPI_MODE_NOPUT | MPI_MODE_NOSTORE, win));
    OK(MPI_Win_start(gr, 0, win));
    OK(MPI_Get(g, 4, MPI_INT, right, 0, 4, MPI_INT, win));
    OK(MPI_Win_complete(win));
    OK(MPI_Win_wait(win));
    for (int i = 0; i < 4; i++)
        CHECK(g[i] == rslot[i], "PSCW get-only round: right neighbour's slot %d = %d, "
              "expected %d", i, g[i], rslot[i]);
    OK(MPI_Win_free(&win));
    OK(MPI_Group_free(&gl));
    OK(MPI_Group_free(&gr));
    OK(MPI_Group_free(&world));
    free(w);
    free(val);
    free(nv);
}

/* ---------------------------------------------------------------- passive target */

/* A window of n ints (disp_unit sizeof(int)) from MPI_Win_allocate, element i set to
 * rank * 100 + i under an exclusive lock on myself, visible to all after the barrier. */
static MPI_Win passive_window(int n, int **w)
{
    MPI_Win win;
    alloc_window(n * sizeof(int), sizeof(int), w, &win);
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    for (int i = 0; i < n; i++)
        (*w)[i] = rank * 100 + i;
    OK(MPI_Win_unlock(rank, win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    return win;
}

/* Element i of my window, read under a shared lock on myself. */
static int local(MPI_Win win, const int *w, int i)
{
    OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    int v = w[i];
    OK(MPI_Win_unlock(rank, win));
    return v;
}

static void locks(void)
{
    enum { N = 16, INCS = 10 };
    int *w = NULL;
    MPI_Win win = passive_window(N, &w);
    /* 0..2: exclusive-lock puts from the left; 3: exclusive-lock counter on rank 0;
     * 4..7: read with shared locks. */
    int out[3] = {-1 - rank, -1000 - rank, -2000 - rank};
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, right, 0, win));
    OK(MPI_Put(out, 3, MPI_INT, right, 0, 3, MPI_INT, win));
    OK(MPI_Win_unlock(right, win));
    /* Exclusive locks make get + flush + put an atomic increment. */
    for (int k = 0; k < INCS; k++) {
        int c = -1;
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        OK(MPI_Get(&c, 1, MPI_INT, 0, 3, 1, MPI_INT, win));
        OK(MPI_Win_flush(0, win));
        c++;
        OK(MPI_Put(&c, 1, MPI_INT, 0, 3, 1, MPI_INT, win));
        OK(MPI_Win_unlock(0, win));
    }
    /* Shared locks, gets from the right and from rank 0 at once. */
    int in[4] = {-1, -1, -1, -1}, in0 = -1;
    OK(MPI_Win_lock(MPI_LOCK_SHARED, right, 0, win));
    if (right != 0)
        OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
    OK(MPI_Get(in, 4, MPI_INT, right, 4, 4, MPI_INT, win));
    OK(MPI_Get(&in0, 1, MPI_INT, 0, 7, 1, MPI_INT, win));
    if (right != 0)
        OK(MPI_Win_unlock(0, win));
    OK(MPI_Win_unlock(right, win));
    for (int i = 0; i < 4; i++)
        CHECK(in[i] == right * 100 + 4 + i, "shared-lock get element %d = %d, expected %d", i,
              in[i], right * 100 + 4 + i);
    CHECK(in0 == 7, "shared-lock get from rank 0 = %d, expected 7", in0);
    sleepy_barrier();
    int e0 = local(win, w, 0), e1 = local(win, w, 1), e2 = local(win, w, 2);
    CHECK(e0 == -1 - left && e1 == -1000 - left && e2 == -2000 - left,
          "exclusive-lock puts from %d: %d %d %d, expected %d %d %d", left, e0, e1, e2,
          -1 - left, -1000 - left, -2000 - left);
    if (rank == 0) {
        int c = local(win, w, 3);
        CHECK(c == 3 + INCS * size, "exclusive-lock counter %d, expected %d (lost updates)", c,
              3 + INCS * size);
    }
    OK(MPI_Win_free(&win));
}

static void flushes(void)
{
    enum { N = 16 };
    int *w = NULL;
    MPI_Win win = passive_window(N, &w);
    /* 0..3: put by the left neighbour, flushed four ways; 4: read after flush_local;
     * 5: stored locally and published with MPI_Win_sync. */
    int a = 11 + rank, b = 22 + rank, c, d, g;
    OK(MPI_Win_lock_all(0, win));

    OK(MPI_Put(&a, 1, MPI_INT, right, 0, 1, MPI_INT, win));
    OK(MPI_Win_flush(right, win));
    g = -1;
    OK(MPI_Get(&g, 1, MPI_INT, right, 0, 1, MPI_INT, win));
    OK(MPI_Win_flush(right, win));
    CHECK(g == a, "get after put + MPI_Win_flush: %d, expected %d", g, a);

    OK(MPI_Put(&b, 1, MPI_INT, right, 1, 1, MPI_INT, win));
    OK(MPI_Win_flush_all(win));
    g = -1;
    OK(MPI_Get(&g, 1, MPI_INT, right, 1, 1, MPI_INT, win));
    OK(MPI_Win_flush_all(win));
    CHECK(g == b, "get after put + MPI_Win_flush_all: %d, expected %d", g, b);

    /* After flush_local the origin buffer may be reused: the target keeps the old value. */
    c = 33 + rank;
    OK(MPI_Put(&c, 1, MPI_INT, right, 2, 1, MPI_INT, win));
    OK(MPI_Win_flush_local(right, win));
    c = -999;
    OK(MPI_Win_flush(right, win));
    g = -1;
    OK(MPI_Get(&g, 1, MPI_INT, right, 2, 1, MPI_INT, win));
    OK(MPI_Win_flush(right, win));
    CHECK(g == 33 + rank, "get after put + MPI_Win_flush_local: %d, expected %d", g, 33 + rank);

    d = 44 + rank;
    OK(MPI_Put(&d, 1, MPI_INT, right, 3, 1, MPI_INT, win));
    OK(MPI_Win_flush_local_all(win));
    d = -999;
    OK(MPI_Win_flush_all(win));
    g = -1;
    OK(MPI_Get(&g, 1, MPI_INT, right, 3, 1, MPI_INT, win));
    OK(MPI_Win_flush_all(win));
    CHECK(g == 44 + rank, "get after put + MPI_Win_flush_local_all: %d, expected %d", g,
          44 + rank);

    /* flush_local completes a get at the origin. */
    g = -1;
    OK(MPI_Get(&g, 1, MPI_INT, right, 4, 1, MPI_INT, win));
    OK(MPI_Win_flush_local(right, win));
    CHECK(g == right * 100 + 4, "get + MPI_Win_flush_local: %d, expected %d", g,
          right * 100 + 4);

    /* A local store published with MPI_Win_sync, read by the left neighbour. */
    w[5] = -5 - rank;
    OK(MPI_Win_sync(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    g = -1;
    OK(MPI_Get(&g, 1, MPI_INT, right, 5, 1, MPI_INT, win));
    OK(MPI_Win_flush(right, win));
    CHECK(g == -5 - right, "get of a store published with MPI_Win_sync: %d, expected %d", g,
          -5 - right);
    OK(MPI_Win_unlock_all(win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    int exp[4] = {11 + left, 22 + left, 33 + left, 44 + left};
    for (int i = 0; i < 4; i++) {
        int v = local(win, w, i);
        CHECK(v == exp[i], "flushed put %d from %d: %d, expected %d", i, left, v, exp[i]);
    }
    OK(MPI_Win_free(&win));
}

/* A spin lock made of MPI_Compare_and_swap on rank 0's element 0, protecting a counter
 * (element 1) incremented with get + put; 10,000 acquisitions in all. */
static void cas_lock(void)
{
    const int TOTAL = cas_total;
    int *w = NULL;
    MPI_Win win;
    alloc_window(2 * sizeof(int), sizeof(int), &w, &win);
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    w[0] = w[1] = 0;
    OK(MPI_Win_unlock(rank, win));
    OK(MPI_Barrier(MPI_COMM_WORLD));
    int mine = TOTAL / size + (rank < TOTAL % size), me = rank + 1, zero = 0;
    OK(MPI_Win_lock_all(0, win));
    for (int k = 0; k < mine; k++) {
        int old = -1;
        useconds_t backoff = 1;
        do {
            OK(MPI_Compare_and_swap(&me, &zero, &old, MPI_INT, 0, 0, win));
            OK(MPI_Win_flush(0, win));
            CHECK(old >= 0 && old <= size && old != me,
                  "CAS lock: lock word %d (I am %d and do not hold it)", old, me);
            if (old != 0) { /* back off: let the holder and rank 0 run */
                usleep(backoff);
                backoff = backoff < 512 ? 2 * backoff : backoff;
            }
        } while (old != 0);
        int c = -1;
        OK(MPI_Get(&c, 1, MPI_INT, 0, 1, 1, MPI_INT, win));
        OK(MPI_Win_flush(0, win));
        c++;
        OK(MPI_Put(&c, 1, MPI_INT, 0, 1, 1, MPI_INT, win));
        OK(MPI_Win_flush(0, win));
        OK(MPI_Fetch_and_op(&zero, &old, MPI_INT, 0, 0, MPI_REPLACE, win));
        OK(MPI_Win_flush(0, win));
        CHECK(old == me, "CAS lock: released a lock word holding %d, I am %d", old, me);
    }
    OK(MPI_Win_unlock_all(win));
    sleepy_barrier();
    if (rank == 0) {
        int l = local(win, w, 0), c = local(win, w, 1);
        CHECK(c == TOTAL && l == 0, "CAS lock: counter %d (expected %d), lock word %d", c,
              TOTAL, l);
    }
    OK(MPI_Win_free(&win));
}

/* Passive epochs to rank 0 while rank 0 sits in MPI_Barrier: they must complete (the
 * barrier has to make one-sided progress) and not hang. */
static void target_in_barrier(void)
{
    int n = 8 + size;
    int *w = NULL;
    MPI_Win win = passive_window(n, &w);
    if (rank != 0) {
        int v = -rank, g = -1;
        OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, 0, 0, win));
        OK(MPI_Put(&v, 1, MPI_INT, 0, 8 + rank, 1, MPI_INT, win));
        OK(MPI_Get(&g, 1, MPI_INT, 0, 1, 1, MPI_INT, win));
        OK(MPI_Win_unlock(0, win));
        CHECK(g == 1, "get from rank 0 while it is in the barrier: %d, expected 1", g);
        /* And once more with a shared lock and an accumulate. */
        OK(MPI_Win_lock(MPI_LOCK_SHARED, 0, 0, win));
        OK(MPI_Accumulate(&v, 1, MPI_INT, 0, 2, 1, MPI_INT, MPI_SUM, win));
        OK(MPI_Win_unlock(0, win));
    }
    OK(MPI_Barrier(MPI_COMM_WORLD));
    if (rank == 0) {
        for (int r = 1; r < size; r++) {
            int v = local(win, w, 8 + r);
            CHECK(v == -r, "put by %d while rank 0 was in the barrier: %d", r, v);
        }
        int s = local(win, w, 2);
        CHECK(s == 2 - size * (size - 1) / 2, "accumulates while rank 0 was in the barrier: "
              "%d, expected %d", s, 2 - size * (size - 1) / 2);
    }
    OK(MPI_Win_free(&win));
}

/* Locks on my own rank. */
static void self_lock(void)
{
    int *w = malloc(8 * sizeof(int));
    CHECK(w != NULL, "malloc");
    for (int i = 0; i < 8; i++)
        w[i] = rank * 100 + i;
    MPI_Win win;
    OK(MPI_Win_create(w, 8 * sizeof(int), sizeof(int), MPI_INFO_NULL, MPI_COMM_WORLD, &win));
    int out[2] = {-1 - rank, -2 - rank}, in[3] = {-1, -1, -1};
    OK(MPI_Win_lock(MPI_LOCK_EXCLUSIVE, rank, 0, win));
    OK(MPI_Put(out, 2, MPI_INT, rank, 1, 2, MPI_INT, win));
    OK(MPI_Get(in, 3, MPI_INT, rank, 5, 3, MPI_INT, win));
    OK(MPI_Win_unlock(rank, win));
    CHECK(w[0] == rank * 100 && w[1] == -1 - rank && w[2] == -2 - rank && w[3] == rank * 100 + 3,
          "put to myself under an exclusive lock: %d %d %d %d", w[0], w[1], w[2], w[3]);
    for (int i = 0; i < 3; i++)
        CHECK(in[i] == rank * 100 + 5 + i, "get from myself element %d = %d, expected %d", i,
              in[i], rank * 100 + 5 + i);
    OK(MPI_Win_lock(MPI_LOCK_SHARED, rank, 0, win));
    OK(MPI_Get(in, 2, MPI_INT, rank, 1, 2, MPI_INT, win));
    OK(MPI_Win_flush_local(rank, win));
    CHECK(in[0] == -1 - rank && in[1] == -2 - rank,
          "get of my own put under a shared lock: %d %d", in[0], in[1]);
    int acc = 1000;
    OK(MPI_Accumulate(&acc, 1, MPI_INT, rank, 4, 1, MPI_INT, MPI_SUM, win));
    OK(MPI_Win_unlock(rank, win));
    CHECK(w[4] == rank * 100 + 4 + 1000, "accumulate to myself: %d, expected %d", w[4],
          rank * 100 + 1004);
    OK(MPI_Win_free(&win));
    free(w);
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "create") == 0)
            use_create = 1;
        else if (strncmp(argv[i], "acquisitions=", 13) == 0)
            cas_total = atoi(argv[i] + 13);
    }
    CHECK(cas_total > 0, "acquisitions=%d: must be positive", cas_total);
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &size));
    right = (rank + 1) % size;
    left = (rank + size - 1) % size;
    fences();
    pscw();
    locks();
    flushes();
    cas_lock();
    target_in_barrier();
    self_lock();
    for (int i = 0; i < ncreated; i++)
        free(created[i]);
    test_pass("rma_sync");
    return 0;
}
