/*
 * Dynamic processes through the C ABI: a server job and a client job, started by two
 * separate kestrel-run invocations, meet through the name service (MPI_Publish_name /
 * MPI_Lookup_name), connect, exchange messages both ways on the inter-communicator, run
 * its collectives (barrier, bcast with MPI_ROOT / MPI_PROC_NULL, allreduce, allgather,
 * reduce to the server's rank 0),
 * merge into one intra-communicator and allreduce there, then disconnect and go on alone.
 *
 * Usage: dpm_connect server|client SERVICE. Any sizes work (the acceptance test runs a
 * server of 2 and a client of 3). Kestrel only: MPICH's Debian build cannot run dynamic
 * processes, so this test is not first proven on MPICH.
 */
#include "check.h"

#include <time.h>

#define TAG_TO_CLIENT 7
#define TAG_TO_SERVER 8

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The client's root looks the name up until the server has published it (60 s at most). */
static void lookup_port(const char *service, char *port)
{
    double deadline = now() + 60.0;
    for (;;) {
        int rc = MPI_Lookup_name(service, MPI_INFO_NULL, port);
        if (rc == MPI_SUCCESS)
            return;
        int class = -1;
        MPI_Error_class(rc, &class);
        CHECK(class == MPI_ERR_NAME, "MPI_Lookup_name failed with class %d, not MPI_ERR_NAME",
              class);
        CHECK(now() < deadline, "service '%s' was not published within 60 s", service);
        struct timespec pause = {0, 50 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    CHECK(argc == 3, "usage: dpm_connect server|client SERVICE");
    int server = strcmp(argv[1], "server") == 0;
    const char *service = argv[2];
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    /* Lookups that fail must return, not stop the job. */
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));

    char port[MPI_MAX_PORT_NAME] = "";
    MPI_Comm inter = MPI_COMM_NULL;
    if (server) {
        if (me == 0) {
            OK(MPI_Open_port(MPI_INFO_NULL, port));
            CHECK(strncmp(port, "kestrel-port:", 13) == 0, "port name '%s'", port);
            OK(MPI_Publish_name(service, MPI_INFO_NULL, port));
        }
        OK(MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter));
    } else {
        if (me == 0)
            lookup_port(service, port);
        OK(MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &inter));
    }
    CHECK(inter != MPI_COMM_NULL, "no inter-communicator");
    OK(MPI_Comm_set_errhandler(inter, MPI_ERRORS_RETURN));

    int flag = 0, lsize = 0, lrank = -1, rsize = 0, gsize = 0;
    OK(MPI_Comm_test_inter(inter, &flag));
    CHECK(flag == 1, "MPI_Comm_test_inter says %d on the inter-communicator", flag);
    OK(MPI_Comm_test_inter(MPI_COMM_WORLD, &flag));
    CHECK(flag == 0, "MPI_Comm_test_inter says %d on MPI_COMM_WORLD", flag);
    OK(MPI_Comm_size(inter, &lsize));
    OK(MPI_Comm_rank(inter, &lrank));
    OK(MPI_Comm_remote_size(inter, &rsize));
    CHECK(lsize == n && lrank == me, "local group: rank %d of %d", lrank, lsize);
    CHECK(rsize >= 1, "remote size %d", rsize);
    MPI_Group remote;
    OK(MPI_Comm_remote_group(inter, &remote));
    OK(MPI_Group_size(remote, &gsize));
    CHECK(gsize == rsize, "remote group of %d, remote size %d", gsize, rsize);
    OK(MPI_Group_free(&remote));
    FAILS(MPI_ERR_COMM, MPI_Comm_remote_size(MPI_COMM_WORLD, &rsize));
    OK(MPI_Comm_remote_size(inter, &rsize));
    /* Ranks on an inter-communicator name the remote group. */
    FAILS(MPI_ERR_RANK, MPI_Send(&me, 1, MPI_INT, rsize, TAG_TO_CLIENT, inter));

    int nserver = server ? lsize : rsize, nclient = server ? rsize : lsize;

    /* Server rank s sends 1000*s + c to every client rank c. */
    if (server) {
        for (int c = 0; c < nclient; c++) {
            int v = 1000 * me + c;
            OK(MPI_Send(&v, 1, MPI_INT, c, TAG_TO_CLIENT, inter));
        }
    } else {
        for (int s = 0; s < nserver; s++) {
            int v = -1;
            MPI_Status st;
            OK(MPI_Recv(&v, 1, MPI_INT, s, TAG_TO_CLIENT, inter, &st));
            CHECK(v == 1000 * s + me && st.MPI_SOURCE == s, "got %d from %d", v, st.MPI_SOURCE);
        }
    }
    /* Client rank c sends 2000 + c to server rank c % nserver (received from any source). */
    if (server) {
        int expected = 0, seen = 0;
        for (int c = 0; c < nclient; c++)
            expected += c % nserver == me;
        for (int i = 0; i < expected; i++) {
            int v = -1;
            MPI_Status st;
            OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, TAG_TO_SERVER, inter, &st));
            CHECK(st.MPI_SOURCE >= 0 && st.MPI_SOURCE < nclient &&
                      st.MPI_SOURCE % nserver == me && v == 2000 + st.MPI_SOURCE,
                  "got %d from client %d", v, st.MPI_SOURCE);
            seen |= 1 << st.MPI_SOURCE;
        }
        CHECK(__builtin_popcount(seen) == expected, "clients seen %#x", seen);
    } else {
        int v = 2000 + me;
        MPI_Request rq;
        OK(MPI_Isend(&v, 1, MPI_INT, me % nserver, TAG_TO_SERVER, inter, &rq));
        OK(MPI_Wait(&rq, MPI_STATUS_IGNORE));
    }

    OK(MPI_Barrier(inter));

    /* Bcast from server rank 0, then from client rank nclient - 1. */
    int b = server && me == 0 ? 42 : -1;
    int root = server ? (me == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    OK(MPI_Bcast(&b, 1, MPI_INT, root, inter));
    CHECK(server ? b == (me == 0 ? 42 : -1) : b == 42, "bcast from the server: %d", b);
    double d[2] = {-1, -1};
    if (!server && me == nclient - 1) {
        d[0] = 0.5;
        d[1] = 77;
    }
    root = server ? nclient - 1 : (me == nclient - 1 ? MPI_ROOT : MPI_PROC_NULL);
    OK(MPI_Bcast(d, 2, MPI_DOUBLE, root, inter));
    if (server)
        CHECK(d[0] == 0.5 && d[1] == 77, "bcast from the client: %g %g", d[0], d[1]);
    FAILS(MPI_ERR_ROOT, MPI_Bcast(&b, 1, MPI_INT, -7, inter));

    /* Allreduce: each group gets the sum over the other group of (rank + 1). */
    int mine = me + 1, sum = -1;
    OK(MPI_Allreduce(&mine, &sum, 1, MPI_INT, MPI_SUM, inter));
    CHECK(sum == rsize * (rsize + 1) / 2, "inter allreduce %d with a remote group of %d", sum,
          rsize);

    /* Allgather: each group gets the other group's rank * 10, in remote rank order. */
    int tens = me * 10, got[64];
    CHECK(rsize <= 64, "remote size %d", rsize);
    OK(MPI_Allgather(&tens, 1, MPI_INT, got, 1, MPI_INT, inter));
    for (int r = 0; r < rsize; r++)
        CHECK(got[r] == 10 * r, "inter allgather block %d is %d", r, got[r]);

    /* Reduce: the server's rank 0 gets the sum of the client's contributions. */
    root = server ? (me == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0;
    sum = -1;
    OK(MPI_Reduce(&mine, &sum, 1, MPI_INT, MPI_SUM, root, inter));
    if (server && me == 0)
        CHECK(sum == rsize * (rsize + 1) / 2, "inter reduce %d with a remote group of %d", sum,
              rsize);

    /* Merge: the server first (high = 0), then the client. */
    MPI_Comm merged;
    OK(MPI_Intercomm_merge(inter, server ? 0 : 1, &merged));
    int mrank = -1, msize = 0;
    OK(MPI_Comm_rank(merged, &mrank));
    OK(MPI_Comm_size(merged, &msize));
    CHECK(msize == nserver + nclient, "merged size %d", msize);
    CHECK(mrank == (server ? me : nserver + me), "merged rank %d", mrank);
    OK(MPI_Comm_test_inter(merged, &flag));
    CHECK(flag == 0, "the merged communicator is an inter-communicator");
    int total = -1;
    OK(MPI_Allreduce(&mrank, &total, 1, MPI_INT, MPI_SUM, merged));
    CHECK(total == msize * (msize - 1) / 2, "merged allreduce %d", total);
    printf("%s merged rank %d of %d: allreduce %d ok\n", server ? "server" : "client", mrank,
           msize, total);
    OK(MPI_Comm_free(&merged));

    OK(MPI_Comm_disconnect(&inter));
    CHECK(inter == MPI_COMM_NULL, "MPI_Comm_disconnect did not reset the handle");
    if (server && me == 0) {
        OK(MPI_Unpublish_name(service, MPI_INFO_NULL, port));
        OK(MPI_Close_port(port));
        FAILS(MPI_ERR_NAME, MPI_Lookup_name(service, MPI_INFO_NULL, port));
    }
    test_pass(server ? "dpm_server" : "dpm_client");
    return 0;
}
