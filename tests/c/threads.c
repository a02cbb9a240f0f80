/*
 * MPI_THREAD_MULTIPLE: four threads on each of two ranks call MPI at the same time.
 *   1. streams: each thread exchanges 12,500 messages each way with its twin on the other
 *      rank (windows of isend/irecv), half on a communicator of their own, half on
 *      MPI_COMM_WORLD with a tag of their own: 100,000 messages, each checked for order
 *      and content;
 *   2. shared wildcard receives: rank 0's threads send, rank 1's threads all receive with
 *      MPI_ANY_SOURCE/MPI_ANY_TAG from one communicator; every message arrives exactly once,
 *      and each receiving thread sees each sender's messages in order;
 *   3. collectives on duplicated communicators, one per thread, concurrently;
 *   4. probe races: MPI_Mprobe/MPI_Mrecv with wildcards from all threads at once (each
 *      message taken once), and MPI_Probe + MPI_Recv on a tag per thread.
 * Tried at 2 ranks (the test pairs rank 0 with rank 1; more ranks only join phase 3).
 */
#include "check.h"

#include <pthread.h>
#include <stdatomic.h>

#define THREADS 4
#define STREAM 12500 /* per thread and direction */
#define WINDOW 16
#define WILD 2000 /* per sending thread */
#define COLLS 300
#define PROBES 1000 /* per sending thread */

static int rank, size;
static MPI_Comm own[THREADS], wild, coll[THREADS], probed;
static atomic_int wild_seen[THREADS][WILD];
static atomic_int probe_seen[THREADS][PROBES];

struct msg {
    int thread, seq, check;
};

static int checksum(int thread, int seq) { return thread * 1000003 + seq * 7 + 11; }

/* Phase 1: the stream of thread t with its twin. */
static void stream(int t)
{
    int peer = 1 - rank;
    MPI_Comm comm = (t % 2) ? own[t] : MPI_COMM_WORLD;
    int tag = (t % 2) ? 5 : 100 + t;
    struct msg out[WINDOW], in[WINDOW];
    MPI_Request reqs[2 * WINDOW];
    int next_expected = 0;
    for (int base = 0; base < STREAM; base += WINDOW) {
        int n = STREAM - base < WINDOW ? STREAM - base : WINDOW;
        for (int k = 0; k < n; k++) {
            OK(MPI_Irecv(&in[k], 3, MPI_INT, peer, tag, comm, &reqs[k]));
        }
        for (int k = 0; k < n; k++) {
            out[k].thread = t;
            out[k].seq = base + k;
            out[k].check = checksum(t, base + k);
            OK(MPI_Isend(&out[k], 3, MPI_INT, peer, tag, comm, &reqs[n + k]));
        }
        OK(MPI_Waitall(2 * n, reqs, MPI_STATUSES_IGNORE));
        for (int k = 0; k < n; k++) {
            CHECK(in[k].thread == t && in[k].seq == next_expected &&
                      in[k].check == checksum(t, next_expected),
                  "thread %d: got (%d, %d, %d), expected sequence %d", t, in[k].thread,
                  in[k].seq, in[k].check, next_expected);
            next_expected++;
        }
    }
}

/* Phase 2: rank 0 sends, rank 1 receives with wildcards from every thread. */
static void wildcards(int t)
{
    if (rank == 0) {
        for (int i = 0; i < WILD; i++) {
            struct msg m = {t, i, checksum(t, i)};
            OK(MPI_Send(&m, 3, MPI_INT, 1, t, wild));
        }
        return;
    }
    int last[THREADS];
    for (int s = 0; s < THREADS; s++)
        last[s] = -1;
    for (int i = 0; i < WILD; i++) {
        struct msg m;
        MPI_Status st;
        OK(MPI_Recv(&m, 3, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, wild, &st));
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == m.thread && m.thread >= 0 &&
                  m.thread < THREADS && m.seq >= 0 && m.seq < WILD &&
                  m.check == checksum(m.thread, m.seq),
              "thread %d: bad wildcard message (%d, %d, %d) tag %d", t, m.thread, m.seq,
              m.check, st.MPI_TAG);
        CHECK(m.seq > last[m.thread], "thread %d: sender %d's message %d after %d", t,
              m.thread, m.seq, last[m.thread]);
        last[m.thread] = m.seq;
        int before = atomic_fetch_add(&wild_seen[m.thread][m.seq], 1);
        CHECK(before == 0, "message (%d, %d) received twice", m.thread, m.seq);
    }
}

/* Phase 3: collectives on this thread's communicator. */
static void collectives(int t)
{
    for (int i = 0; i < COLLS; i++) {
        long v = rank + t + i, sum = 0;
        OK(MPI_Allreduce(&v, &sum, 1, MPI_LONG, MPI_SUM, coll[t]));
        long want = (long)size * (t + i) + (long)size * (size - 1) / 2;
        CHECK(sum == want, "thread %d allreduce %d: %ld, expected %ld", t, i, sum, want);
        int b = rank == i % size ? i * 3 + t : -1;
        OK(MPI_Bcast(&b, 1, MPI_INT, i % size, coll[t]));
        CHECK(b == i * 3 + t, "thread %d bcast %d: %d", t, i, b);
        if (i % 50 == 0)
            OK(MPI_Barrier(coll[t]));
    }
}

/* Phase 4: matched probes with wildcards from all threads, and probe + receive by tag. */
static void probes(int t)
{
    if (rank == 0) {
        for (int i = 0; i < PROBES; i++) {
            struct msg m = {t, i, checksum(t, i)};
            OK(MPI_Send(&m, 3, MPI_INT, 1, t, probed));
            OK(MPI_Send(&m, 3, MPI_INT, 1, 1000 + t, own[t]));
        }
        return;
    }
    for (int i = 0; i < PROBES; i++) {
        MPI_Message msg;
        MPI_Status st;
        struct msg m;
        int count = -1;
        OK(MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, probed, &msg, &st));
        OK(MPI_Get_count(&st, MPI_INT, &count));
        CHECK(count == 3, "thread %d: probed count %d", t, count);
        OK(MPI_Mrecv(&m, 3, MPI_INT, &msg, &st));
        CHECK(msg == MPI_MESSAGE_NULL, "thread %d: message handle not reset", t);
        CHECK(m.thread == st.MPI_TAG && m.check == checksum(m.thread, m.seq),
              "thread %d: bad probed message", t);
        int before = atomic_fetch_add(&probe_seen[m.thread][m.seq], 1);
        CHECK(before == 0, "probed message (%d, %d) received twice", m.thread, m.seq);

        OK(MPI_Probe(0, 1000 + t, own[t], &st));
        CHECK(st.MPI_TAG == 1000 + t, "thread %d: probe found tag %d", t, st.MPI_TAG);
        OK(MPI_Recv(&m, 3, MPI_INT, 0, 1000 + t, own[t], MPI_STATUS_IGNORE));
        CHECK(m.thread == t && m.seq == i, "thread %d: probe+recv got (%d, %d), expected %d",
              t, m.thread, m.seq, i);
    }
}

static void *run(void *arg)
{
    int t = (int)(long)arg;
    if (rank < 2) {
        stream(t);
        wildcards(t);
    }
    collectives(t);
    if (rank < 2)
        probes(t);
    return NULL;
}

int main(int argc, char **argv)
{
    int provided = -1;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    check_rank = rank;
    CHECK(provided == MPI_THREAD_MULTIPLE, "provided %d", provided);
    CHECK(size >= 2, "needs 2 ranks");
    int level = -1, is_main = 0;
    OK(MPI_Query_thread(&level));
    CHECK(level == MPI_THREAD_MULTIPLE, "MPI_Query_thread: %d", level);
    for (int t = 0; t < THREADS; t++) {
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &own[t]));
        OK(MPI_Comm_dup(MPI_COMM_WORLD, &coll[t]));
    }
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &wild));
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &probed));

    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        CHECK(pthread_create(&th[t], NULL, run, (void *)(long)t) == 0, "pthread_create");
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    OK(MPI_Is_thread_main(&is_main));
    CHECK(is_main, "the thread that initialized is the main thread");

    if (rank == 1) {
        for (int s = 0; s < THREADS; s++)
            for (int i = 0; i < WILD; i++)
                CHECK(atomic_load(&wild_seen[s][i]) == 1, "wildcard message (%d, %d) seen %d times",
                      s, i, atomic_load(&wild_seen[s][i]));
        for (int s = 0; s < THREADS; s++)
            for (int i = 0; i < PROBES; i++)
                CHECK(atomic_load(&probe_seen[s][i]) == 1, "probed message (%d, %d) seen %d times",
                      s, i, atomic_load(&probe_seen[s][i]));
    }
    for (int t = 0; t < THREADS; t++) {
        MPI_Comm_free(&own[t]);
        MPI_Comm_free(&coll[t]);
    }
    MPI_Comm_free(&wild);
    MPI_Comm_free(&probed);
    test_pass("threads");
    return 0;
}
