/*
 * A spawned child that dies is an error in the parent through the C ABI, not a success and
 * not a hang: under MPI_ERRORS_RETURN, the parent's receives and synchronous send pending
 * on the inter-communicator when the child dies complete with MPIX_ERR_PROC_FAILED (MPI_Wait
 * returns it; MPI_Waitall returns MPI_ERR_IN_STATUS with it in each status, and without
 * statuses too), and later blocking sends and receives on it fail with the same class,
 * their strings saying why.
 *
 * Usage: dpm_crash MARK (the parent; the children get "child" and MARK). Kestrel only:
 * MPICH's Debian build cannot run dynamic processes.
 */
#include "check.h"

#include <unistd.h>

#define CHILDREN 2
#define TAG_PENDING 7
#define TAG_NEVER 8
#define TAG_DIE 9

/* The error class of `rc`, which must be an error whose string mentions `what`. */
static int class_saying(int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0, class = -1;
    CHECK(rc != MPI_SUCCESS, "an operation on a failed child succeeded");
    MPI_Error_string(rc, msg, &len);
    MPI_Error_class(rc, &class);
    CHECK(strstr(msg, what) != NULL, "error string '%s' does not mention '%s'", msg, what);
    return class;
}

static void child(void)
{
    MPI_Comm parent;
    int me, v = 0;
    OK(MPI_Comm_get_parent(&parent));
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    if (me == 1) {
        /* Dies without disconnecting once the parent has its operations pending. */
        OK(MPI_Recv(&v, 1, MPI_INT, 0, TAG_DIE, parent, MPI_STATUS_IGNORE));
        fflush(stdout);
        _exit(42);
    }
    /* Waits for a message that never comes: the child job's launcher stops this rank
     * when rank 1 dies. */
    OK(MPI_Recv(&v, 1, MPI_INT, 0, TAG_NEVER, parent, MPI_STATUS_IGNORE));
    CHECK(0, "child 0 received a message nobody sent");
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    if (argc == 3 && strcmp(argv[1], "child") == 0) {
        child();
        return 0;
    }
    CHECK(argc == 2, "usage: dpm_crash MARK");
    char *args[] = {"child", argv[1], NULL};
    int codes[CHILDREN] = {-1, -1};
    MPI_Comm kids;
    OK(MPI_Comm_spawn(argv[0], args, CHILDREN, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &kids,
                      codes));
    OK(MPI_Comm_set_errhandler(kids, MPI_ERRORS_RETURN));

    /* Pending when the child dies: receives from either child, a synchronous send. */
    int from1 = -1, from0 = -1, quiet = -1, out = 5;
    MPI_Request r1, rest[2], rq;
    OK(MPI_Irecv(&from1, 1, MPI_INT, 1, TAG_PENDING, kids, &r1));
    OK(MPI_Irecv(&quiet, 1, MPI_INT, 0, TAG_NEVER, kids, &rq));
    OK(MPI_Irecv(&from0, 1, MPI_INT, 0, TAG_PENDING, kids, &rest[0]));
    OK(MPI_Issend(&out, 1, MPI_INT, 1, TAG_NEVER, kids, &rest[1]));
    OK(MPI_Send(&out, 1, MPI_INT, 1, TAG_DIE, kids));

    MPI_Status st;
    int rc = MPI_Wait(&r1, &st);
    int class = class_saying(rc, "ended without disconnecting");
    CHECK(class == MPIX_ERR_PROC_FAILED, "MPI_Wait: class %d", class);
    CHECK(r1 == MPI_REQUEST_NULL, "a failed request was not freed");

    MPI_Status sts[2];
    rc = MPI_Waitall(2, rest, sts);
    CHECK(rc == MPI_ERR_IN_STATUS, "MPI_Waitall returned %d", rc);
    for (int i = 0; i < 2; i++) {
        class = class_saying(sts[i].MPI_ERROR, "ended without disconnecting");
        CHECK(class == MPIX_ERR_PROC_FAILED, "MPI_Waitall status %d: class %d", i, class);
        CHECK(rest[i] == MPI_REQUEST_NULL, "failed request %d was not freed", i);
    }

    /* Without statuses, MPI_Waitall still says that something failed. */
    rc = MPI_Waitall(1, &rq, MPI_STATUSES_IGNORE);
    CHECK(rc == MPI_ERR_IN_STATUS, "MPI_Waitall without statuses returned %d", rc);
    CHECK(rq == MPI_REQUEST_NULL && quiet == -1, "the quiet failed receive: %d", quiet);

    /* Later operations on the broken inter-communicator fail at once. */
    class = class_saying(MPI_Send(&out, 1, MPI_INT, 0, TAG_NEVER, kids), "ended without disconnecting");
    CHECK(class == MPIX_ERR_PROC_FAILED, "MPI_Send: class %d", class);
    class = class_saying(MPI_Recv(&from0, 1, MPI_INT, 0, TAG_PENDING, kids, &st), "ended without disconnecting");
    CHECK(class == MPIX_ERR_PROC_FAILED, "MPI_Recv: class %d", class);
    CHECK(from0 == -1 && from1 == -1, "failed receives wrote %d and %d", from0, from1);

    printf("parent: child failure reported as MPIX_ERR_PROC_FAILED\n");
    test_pass("dpm_crash_parent");
    return 0;
}
