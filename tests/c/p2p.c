/*
 * Point-to-point: every send mode (standard, synchronous, ready, buffered with
 * MPI_Buffer_attach/detach), blocking and nonblocking; receives with wildcards and from
 * MPI_PROC_NULL; probe, iprobe, mprobe, improbe, mrecv, imrecv; sendrecv and
 * sendrecv_replace; cancel; request_free; persistent requests; get_count/get_elements;
 * the wait and test families. Needs at least 2 ranks; ranks 0 and 1 talk, the ring runs
 * on all.
 */
#include "check.h"

#define N 1000

static void fill(int *v, int n, int seed)
{
    for (int i = 0; i < n; i++)
        v[i] = seed * 100000 + i;
}

static void expect(const int *v, int n, int seed)
{
    for (int i = 0; i < n; i++)
        CHECK(v[i] == seed * 100000 + i, "element %d is %d, expected %d", i, v[i],
              seed * 100000 + i);
}

/* Rank 0 sends with every mode to rank 1, blocking and nonblocking. */
static void modes(int rank)
{
    int buf[N];
    MPI_Status st;
    int count;
    if (rank == 0) {
        fill(buf, N, 1);
        OK(MPI_Send(buf, N, MPI_INT, 1, 11, MPI_COMM_WORLD));
        fill(buf, N, 2);
        OK(MPI_Ssend(buf, N, MPI_INT, 1, 12, MPI_COMM_WORLD));
        /* Ready mode needs the receive posted: wait for rank 1's go-ahead. */
        OK(MPI_Recv(NULL, 0, MPI_INT, 1, 13, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        fill(buf, N, 3);
        OK(MPI_Rsend(buf, N, MPI_INT, 1, 14, MPI_COMM_WORLD));

        int bsize = 2 * (N * (int)sizeof(int) + MPI_BSEND_OVERHEAD);
        char *bbuf = malloc(bsize);
        OK(MPI_Buffer_attach(bbuf, bsize));
        fill(buf, N, 4);
        OK(MPI_Bsend(buf, N, MPI_INT, 1, 15, MPI_COMM_WORLD));
        /* The data was copied: overwriting the buffer does not change the message. */
        fill(buf, N, 99);
        MPI_Request r;
        fill(buf, N, 5);
        OK(MPI_Ibsend(buf, N, MPI_INT, 1, 16, MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
        CHECK(r == MPI_REQUEST_NULL, "a completed request becomes MPI_REQUEST_NULL");
        fill(buf, N, 99);
        void *detached = NULL;
        int dsize = 0;
        OK(MPI_Buffer_detach(&detached, &dsize));
        CHECK(detached == bbuf && dsize == bsize, "detach returned %p/%d, attached %p/%d",
              detached, dsize, (void *)bbuf, bsize);
        free(bbuf);

        int b2[4][N];
        MPI_Request rs[4];
        for (int k = 0; k < 4; k++)
            fill(b2[k], N, 6 + k);
        OK(MPI_Isend(b2[0], N, MPI_INT, 1, 17, MPI_COMM_WORLD, &rs[0]));
        OK(MPI_Issend(b2[1], N, MPI_INT, 1, 18, MPI_COMM_WORLD, &rs[1]));
        OK(MPI_Recv(NULL, 0, MPI_INT, 1, 19, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        OK(MPI_Irsend(b2[2], N, MPI_INT, 1, 20, MPI_COMM_WORLD, &rs[2]));
        OK(MPI_Isend(b2[3], N, MPI_INT, 1, 21, MPI_COMM_WORLD, &rs[3]));
        OK(MPI_Waitall(4, rs, MPI_STATUSES_IGNORE));
        for (int k = 0; k < 4; k++)
            CHECK(rs[k] == MPI_REQUEST_NULL, "request %d not freed by Waitall", k);
    } else if (rank == 1) {
        OK(MPI_Recv(buf, N, MPI_INT, 0, 11, MPI_COMM_WORLD, &st));
        expect(buf, N, 1);
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 11, "status %d/%d", st.MPI_SOURCE,
              st.MPI_TAG);
        OK(MPI_Get_count(&st, MPI_INT, &count));
        CHECK(count == N, "count %d", count);
        OK(MPI_Get_count(&st, MPI_BYTE, &count));
        CHECK(count == N * (int)sizeof(int), "byte count %d", count);
        OK(MPI_Get_count(&st, MPI_DOUBLE, &count));
        CHECK(count == N * (int)sizeof(int) / 8, "double count %d", count);

        OK(MPI_Recv(buf, N, MPI_INT, 0, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        expect(buf, N, 2);

        MPI_Request r;
        OK(MPI_Irecv(buf, N, MPI_INT, 0, 14, MPI_COMM_WORLD, &r));
        OK(MPI_Send(NULL, 0, MPI_INT, 0, 13, MPI_COMM_WORLD));
        OK(MPI_Wait(&r, &st));
        expect(buf, N, 3);

        OK(MPI_Recv(buf, N, MPI_INT, 0, 15, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        expect(buf, N, 4);
        OK(MPI_Recv(buf, N, MPI_INT, 0, 16, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        expect(buf, N, 5);

        int b2[4][N];
        MPI_Request rs[4];
        /* Posted in another order than sent: matching is by tag. */
        OK(MPI_Irecv(b2[3], N, MPI_INT, 0, 21, MPI_COMM_WORLD, &rs[3]));
        OK(MPI_Irecv(b2[1], N, MPI_INT, 0, 18, MPI_COMM_WORLD, &rs[1]));
        OK(MPI_Irecv(b2[2], N, MPI_INT, 0, 20, MPI_COMM_WORLD, &rs[2]));
        OK(MPI_Irecv(b2[0], N, MPI_INT, 0, 17, MPI_COMM_WORLD, &rs[0]));
        OK(MPI_Send(NULL, 0, MPI_INT, 0, 19, MPI_COMM_WORLD));
        MPI_Status sts[4];
        OK(MPI_Waitall(4, rs, sts));
        for (int k = 0; k < 4; k++) {
            expect(b2[k], N, 6 + k);
            CHECK(sts[k].MPI_TAG == 17 + k + (k >= 2 ? 1 : 0), "tag %d", sts[k].MPI_TAG);
        }
    }
}

/* Wildcards, MPI_PROC_NULL, probes and matched probes. */
static void probes(int rank)
{
    MPI_Status st;
    int count, flag;
    if (rank == 0) {
        double d[10];
        for (int i = 0; i < 10; i++)
            d[i] = i * 0.5;
        OK(MPI_Send(d, 10, MPI_DOUBLE, 1, 30, MPI_COMM_WORLD));
        OK(MPI_Send(d, 7, MPI_DOUBLE, 1, 31, MPI_COMM_WORLD));
        OK(MPI_Send(d, 3, MPI_DOUBLE, 1, 32, MPI_COMM_WORLD));
        OK(MPI_Send(d, 5, MPI_DOUBLE, 1, 33, MPI_COMM_WORLD));
    } else if (rank == 1) {
        OK(MPI_Probe(MPI_ANY_SOURCE, 30, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count(&st, MPI_DOUBLE, &count));
        CHECK(count == 10 && st.MPI_SOURCE == 0, "probe count %d source %d", count,
              st.MPI_SOURCE);
        double d[10] = {0};
        OK(MPI_Recv(d, 10, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st));
        CHECK(st.MPI_TAG == 30 && d[9] == 4.5, "tag %d d[9] %g", st.MPI_TAG, d[9]);

        do {
            OK(MPI_Iprobe(0, 31, MPI_COMM_WORLD, &flag, &st));
        } while (!flag);
        OK(MPI_Get_count(&st, MPI_DOUBLE, &count));
        CHECK(count == 7, "iprobe count %d", count);

        MPI_Message m;
        OK(MPI_Mprobe(0, 31, MPI_COMM_WORLD, &m, &st));
        CHECK(m != MPI_MESSAGE_NULL, "mprobe gave no message");
        OK(MPI_Mrecv(d, 10, MPI_DOUBLE, &m, &st));
        CHECK(m == MPI_MESSAGE_NULL, "mrecv did not clear the message");
        OK(MPI_Get_count(&st, MPI_DOUBLE, &count));
        CHECK(count == 7 && d[6] == 3.0, "mrecv count %d", count);

        do {
            OK(MPI_Improbe(0, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m, &st));
        } while (!flag);
        CHECK(st.MPI_TAG == 32, "improbe tag %d", st.MPI_TAG);
        MPI_Request r;
        OK(MPI_Imrecv(d, 10, MPI_DOUBLE, &m, &r));
        OK(MPI_Wait(&r, &st));
        OK(MPI_Get_count(&st, MPI_DOUBLE, &count));
        CHECK(count == 3, "imrecv count %d", count);

        /* Get_elements on a basic type counts elements too. */
        OK(MPI_Recv(d, 10, MPI_DOUBLE, 0, 33, MPI_COMM_WORLD, &st));
        OK(MPI_Get_elements(&st, MPI_DOUBLE, &count));
        CHECK(count == 5, "elements %d", count);
    }

    /* MPI_PROC_NULL: completes at once, empty status. */
    int x = 42;
    OK(MPI_Send(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    OK(MPI_Recv(&x, 1, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st));
    CHECK(x == 42 && st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG,
          "proc null status %d/%d", st.MPI_SOURCE, st.MPI_TAG);
    OK(MPI_Get_count(&st, MPI_INT, &count));
    CHECK(count == 0, "proc null count %d", count);
    MPI_Message m;
    OK(MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &m, &st));
    CHECK(m == MPI_MESSAGE_NO_PROC, "mprobe(PROC_NULL) gives MPI_MESSAGE_NO_PROC");
    OK(MPI_Mrecv(&x, 1, MPI_INT, &m, &st));
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL, "mrecv no-proc source %d", st.MPI_SOURCE);
}

/* Sendrecv and sendrecv_replace around a ring of all ranks. */
static void ring(int rank, int size)
{
    int right = (rank + 1) % size, left = (rank + size - 1) % size;
    int out[N], in[N];
    MPI_Status st;
    fill(out, N, rank);
    OK(MPI_Sendrecv(out, N, MPI_INT, right, 40, in, N, MPI_INT, left, 40, MPI_COMM_WORLD,
                    &st));
    expect(in, N, left);
    CHECK(st.MPI_SOURCE == left, "sendrecv source %d", st.MPI_SOURCE);
    fill(out, N, rank + 10);
    OK(MPI_Sendrecv_replace(out, N, MPI_INT, right, 41, left, 41, MPI_COMM_WORLD, &st));
    expect(out, N, left + 10);
}

/* Cancel, request_free, persistent requests, Test/Testany/Testsome/Waitany/Waitsome. */
static void requests(int rank)
{
    MPI_Status st;
    int flag, idx, outcount, indices[4];
    int x = 0;

    /* A receive nobody sends to can be cancelled. */
    MPI_Request r;
    OK(MPI_Irecv(&x, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD, &r));
    OK(MPI_Cancel(&r));
    OK(MPI_Wait(&r, &st));
    OK(MPI_Test_cancelled(&st, &flag));
    CHECK(flag, "the receive was not cancelled");

    /* Null requests: Wait/Test return at once; Waitany/Waitsome report MPI_UNDEFINED. */
    MPI_Request nulls[3] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    OK(MPI_Wait(&nulls[0], &st));
    OK(MPI_Test(&nulls[0], &flag, &st));
    CHECK(flag, "Test of MPI_REQUEST_NULL gives flag true");
    OK(MPI_Waitany(3, nulls, &idx, &st));
    CHECK(idx == MPI_UNDEFINED, "Waitany of nulls gives %d", idx);
    OK(MPI_Waitsome(3, nulls, &outcount, indices, MPI_STATUSES_IGNORE));
    CHECK(outcount == MPI_UNDEFINED, "Waitsome of nulls gives %d", outcount);
    OK(MPI_Testall(3, nulls, &flag, MPI_STATUSES_IGNORE));
    CHECK(flag, "Testall of nulls gives flag true");

    if (rank == 0) {
        int v[3] = {7, 8, 9};
        /* Persistent sends, started three times. */
        MPI_Request p;
        OK(MPI_Send_init(v, 3, MPI_INT, 1, 50, MPI_COMM_WORLD, &p));
        for (int k = 0; k < 3; k++) {
            v[0] = 7 + k;
            OK(MPI_Start(&p));
            OK(MPI_Wait(&p, MPI_STATUS_IGNORE));
            CHECK(p != MPI_REQUEST_NULL, "a persistent request stays allocated");
        }
        OK(MPI_Request_free(&p));
        CHECK(p == MPI_REQUEST_NULL, "Request_free clears the handle");
        /* A freed send still completes. */
        OK(MPI_Isend(v, 3, MPI_INT, 1, 51, MPI_COMM_WORLD, &r));
        OK(MPI_Request_free(&r));
        /* Three messages for Waitany/Testsome on the other side. */
        for (int k = 0; k < 3; k++)
            OK(MPI_Send(&k, 1, MPI_INT, 1, 60 + k, MPI_COMM_WORLD));
        OK(MPI_Ssend(v, 1, MPI_INT, 1, 70, MPI_COMM_WORLD));
    } else if (rank == 1) {
        int v[3];
        MPI_Request p;
        OK(MPI_Recv_init(v, 3, MPI_INT, 0, 50, MPI_COMM_WORLD, &p));
        for (int k = 0; k < 3; k++) {
            OK(MPI_Start(&p));
            OK(MPI_Wait(&p, &st));
            CHECK(v[0] == 7 + k && v[2] == 9, "persistent receive %d got %d", k, v[0]);
        }
        OK(MPI_Request_free(&p));
        OK(MPI_Recv(v, 3, MPI_INT, 0, 51, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(v[0] == 9, "freed send delivered %d", v[0]);

        int got[3] = {-1, -1, -1};
        MPI_Request rs[3];
        for (int k = 0; k < 3; k++)
            OK(MPI_Irecv(&got[k], 1, MPI_INT, 0, 60 + k, MPI_COMM_WORLD, &rs[k]));
        OK(MPI_Waitany(3, rs, &idx, &st));
        CHECK(idx >= 0 && idx < 3 && rs[idx] == MPI_REQUEST_NULL && got[idx] == idx,
              "Waitany index %d", idx);
        int done = 1;
        while (done < 3) {
            OK(MPI_Testsome(3, rs, &outcount, indices, MPI_STATUSES_IGNORE));
            if (outcount != MPI_UNDEFINED)
                done += outcount;
        }
        for (int k = 0; k < 3; k++)
            CHECK(got[k] == k && rs[k] == MPI_REQUEST_NULL, "message %d got %d", k, got[k]);

        OK(MPI_Irecv(v, 1, MPI_INT, 0, 70, MPI_COMM_WORLD, &r));
        do {
            OK(MPI_Request_get_status(r, &flag, &st));
        } while (!flag);
        CHECK(r != MPI_REQUEST_NULL, "Request_get_status does not free");
        OK(MPI_Test(&r, &flag, &st));
        CHECK(flag && r == MPI_REQUEST_NULL && st.MPI_TAG == 70, "Test after completion");
    }
}

/* A message longer than the buffer: MPI_ERR_TRUNCATE through MPI_ERRORS_RETURN. */
static void truncation(int rank)
{
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    int v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    if (rank == 0) {
        OK(MPI_Send(v, 8, MPI_INT, 1, 80, MPI_COMM_WORLD));
    } else if (rank == 1) {
        int w[4] = {0};
        MPI_Status st;
        int rc = MPI_Recv(w, 4, MPI_INT, 0, 80, MPI_COMM_WORLD, &st);
        int cls = -1;
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_TRUNCATE, "truncated receive gave class %d", cls);
    }
    /* The same through MPI_Irecv + MPI_Wait and MPI_Irecv + MPI_Test: the error is
       returned, the request freed, the status filled. */
    if (rank == 0) {
        OK(MPI_Send(v, 8, MPI_INT, 1, 81, MPI_COMM_WORLD));
        OK(MPI_Send(v, 6, MPI_INT, 1, 82, MPI_COMM_WORLD));
    } else if (rank == 1) {
        int w[4] = {0}, cls = -1, flag = 0, rc;
        MPI_Status st;
        MPI_Request r;
        OK(MPI_Irecv(w, 4, MPI_INT, 0, 81, MPI_COMM_WORLD, &r));
        rc = MPI_Wait(&r, &st);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_TRUNCATE, "MPI_Wait of a truncated receive gave class %d", cls);
        CHECK(r == MPI_REQUEST_NULL && st.MPI_TAG == 81 && st.MPI_SOURCE == 0,
              "MPI_Wait of a truncated receive: request %d tag %d", (int)(r != MPI_REQUEST_NULL), st.MPI_TAG);
        OK(MPI_Irecv(w, 4, MPI_INT, 0, 82, MPI_COMM_WORLD, &r));
        do {
            rc = MPI_Test(&r, &flag, &st);
        } while (rc == MPI_SUCCESS && !flag);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_TRUNCATE, "MPI_Test of a truncated receive gave class %d", cls);
        CHECK(flag && r == MPI_REQUEST_NULL && st.MPI_TAG == 82,
              "MPI_Test of a truncated receive: flag %d tag %d", flag, st.MPI_TAG);
    }
    /* And through MPI_Waitall with MPI_STATUSES_IGNORE (Kestrel's status-free path): the
       error still surfaces, the failed request is freed, the other message arrives. */
    if (rank == 0) {
        OK(MPI_Send(v, 8, MPI_INT, 1, 83, MPI_COMM_WORLD));
        OK(MPI_Send(v, 2, MPI_INT, 1, 84, MPI_COMM_WORLD));
    } else if (rank == 1) {
        int w[4] = {0}, x[4] = {0}, cls = -1, rc;
        MPI_Request rs[2];
        OK(MPI_Irecv(w, 4, MPI_INT, 0, 83, MPI_COMM_WORLD, &rs[0]));
        OK(MPI_Irecv(x, 4, MPI_INT, 0, 84, MPI_COMM_WORLD, &rs[1]));
        rc = MPI_Waitall(2, rs, MPI_STATUSES_IGNORE);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_IN_STATUS, "MPI_Waitall of a truncated receive gave class %d", cls);
        CHECK(rs[0] == MPI_REQUEST_NULL, "MPI_Waitall left the truncated receive's request");
        /* A request after the failed one may stay pending (MPI_ERR_PENDING; MPICH does so). */
        if (rs[1] != MPI_REQUEST_NULL)
            OK(MPI_Wait(&rs[1], MPI_STATUS_IGNORE));
        CHECK(x[0] == 1 && x[1] == 2, "MPI_Waitall: the second message got %d %d", x[0], x[1]);
    }
    /* With statuses, the failed receive first: each status carries its own error, and the
       statuses of the requests that completed are filled in. */
    if (rank == 0) {
        OK(MPI_Send(v, 2, MPI_INT, 1, 85, MPI_COMM_WORLD));
        OK(MPI_Send(v, 8, MPI_INT, 1, 86, MPI_COMM_WORLD));
    } else if (rank == 1) {
        int w[4] = {0}, x[4] = {0}, cls = -1, rc, n = -1;
        MPI_Request rs[2];
        MPI_Status sts[2];
        sts[0].MPI_ERROR = sts[1].MPI_ERROR = -12345;
        OK(MPI_Irecv(w, 4, MPI_INT, 0, 85, MPI_COMM_WORLD, &rs[0]));
        OK(MPI_Irecv(x, 4, MPI_INT, 0, 86, MPI_COMM_WORLD, &rs[1]));
        rc = MPI_Waitall(2, rs, sts);
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_IN_STATUS, "MPI_Waitall with statuses of a truncated receive gave class %d",
              cls);
        CHECK(sts[0].MPI_ERROR == MPI_SUCCESS && sts[0].MPI_TAG == 85 && sts[0].MPI_SOURCE == 0,
              "MPI_Waitall: the good receive's status: error %d tag %d source %d",
              sts[0].MPI_ERROR, sts[0].MPI_TAG, sts[0].MPI_SOURCE);
        MPI_Get_count(&sts[0], MPI_INT, &n);
        CHECK(n == 2 && w[0] == 1 && w[1] == 2, "MPI_Waitall: the good receive got %d ints", n);
        MPI_Error_class(sts[1].MPI_ERROR, &cls);
        CHECK(cls == MPI_ERR_TRUNCATE && sts[1].MPI_TAG == 86,
              "MPI_Waitall: the truncated receive's status: class %d tag %d", cls, sts[1].MPI_TAG);
        CHECK(rs[0] == MPI_REQUEST_NULL && rs[1] == MPI_REQUEST_NULL,
              "MPI_Waitall left a completed request");
    }
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL));
}

int main(int argc, char **argv)
{
    int size;
    test_start(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs at least 2 ranks");
    modes(check_rank);
    probes(check_rank);
    ring(check_rank, size);
    requests(check_rank);
    truncation(check_rank);
    test_pass("p2p");
    return 0;
}
