/*
 * Errors and error handlers: with MPI_ERRORS_RETURN, invalid handles, negative counts,
 * unknown datatypes, bad ranks, tags, roots and operations return the right error class
 * instead of crashing; MPI_Error_class and MPI_Error_string; user error handlers
 * (MPI_Comm_create_errhandler, set, get, call) and MPI_Errhandler_free. Needs at least 2
 * ranks.
 */
#include "check.h"

static int handler_calls, handler_class;
static MPI_Comm handler_comm;

static void handler(MPI_Comm *comm, int *code, ...)
{
    handler_calls++;
    handler_comm = *comm;
    MPI_Error_class(*code, &handler_class);
    /* Handlers may call MPI. */
    char text[MPI_MAX_ERROR_STRING];
    int len;
    MPI_Error_string(*code, text, &len);
    CHECK(len > 0, "the handler's error has no text");
}

static void invalid_arguments(int rank, int size)
{
    int buf[4] = {0}, out[4];
    MPI_Datatype uncommitted;
    OK(MPI_Type_contiguous(2, MPI_INT, &uncommitted));

    /* Invalid communicator handles. */
    FAILS(MPI_ERR_COMM, MPI_Send(buf, 1, MPI_INT, 0, 0, MPI_COMM_NULL));
    FAILS(MPI_ERR_COMM, MPI_Send(buf, 1, MPI_INT, 0, 0, (MPI_Comm)MPI_INT));
    int n;
    FAILS(MPI_ERR_COMM, MPI_Comm_size(MPI_COMM_NULL, &n));
    FAILS(MPI_ERR_COMM, MPI_Barrier(MPI_COMM_NULL));
    FAILS(MPI_ERR_COMM, MPI_Allreduce(buf, out, 1, MPI_INT, MPI_SUM, MPI_COMM_NULL));

    /* Negative counts. */
    FAILS(MPI_ERR_COUNT, MPI_Send(buf, -1, MPI_INT, 0, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_COUNT, MPI_Recv(buf, -1, MPI_INT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    MPI_Request r;
    FAILS(MPI_ERR_COUNT, MPI_Isend(buf, -2, MPI_INT, 0, 0, MPI_COMM_WORLD, &r));
    FAILS(MPI_ERR_COUNT, MPI_Bcast(buf, -1, MPI_INT, 0, MPI_COMM_WORLD));
    /* (MPICH 4.0 crashes on reductions with negative counts, so they are tested on Kestrel
     * only, in tests/tests/abi.rs.) */
    FAILS(MPI_ERR_COUNT, MPI_Gather(buf, -1, MPI_INT, out, 1, MPI_INT, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_COUNT, MPI_Alltoall(buf, -1, MPI_INT, out, 1, MPI_INT, MPI_COMM_WORLD));
    MPI_Datatype t;
    FAILS(MPI_ERR_COUNT, MPI_Type_contiguous(-1, MPI_INT, &t));

    /* Unknown or unusable datatypes. */
    FAILS(MPI_ERR_TYPE, MPI_Send(buf, 1, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_TYPE, MPI_Send(buf, 1, (MPI_Datatype)MPI_COMM_WORLD, 0, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_TYPE, MPI_Send(buf, 1, uncommitted, 0, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_TYPE, MPI_Bcast(buf, 1, MPI_DATATYPE_NULL, 0, MPI_COMM_WORLD));
    int s;
    FAILS(MPI_ERR_TYPE, MPI_Type_size(MPI_DATATYPE_NULL, &s));
    FAILS(MPI_ERR_TYPE, MPI_Type_contiguous(2, MPI_DATATYPE_NULL, &t));

    /* Ranks, tags, roots, operations, requests. */
    FAILS(MPI_ERR_RANK, MPI_Send(buf, 1, MPI_INT, size, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_RANK, MPI_Send(buf, 1, MPI_INT, -7, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_RANK, MPI_Recv(buf, 1, MPI_INT, size + 3, 0, MPI_COMM_WORLD,
                                 MPI_STATUS_IGNORE));
    FAILS(MPI_ERR_TAG, MPI_Send(buf, 1, MPI_INT, 0, -5, MPI_COMM_WORLD));
    FAILS(MPI_ERR_ROOT, MPI_Bcast(buf, 1, MPI_INT, size, MPI_COMM_WORLD));
    FAILS(MPI_ERR_ROOT, MPI_Reduce(buf, out, 1, MPI_INT, MPI_SUM, -1, MPI_COMM_WORLD));
    FAILS(MPI_ERR_OP, MPI_Allreduce(buf, out, 1, MPI_INT, MPI_OP_NULL, MPI_COMM_WORLD));
    double d = 1, e;
    FAILS(MPI_ERR_OP, MPI_Allreduce(&d, &e, 1, MPI_DOUBLE, MPI_BAND, MPI_COMM_WORLD));
    MPI_Request bad = (MPI_Request)MPI_COMM_WORLD;
    FAILS(MPI_ERR_REQUEST, MPI_Wait(&bad, MPI_STATUS_IGNORE));
    MPI_Group g;
    int outside = size;
    FAILS(MPI_ERR_GROUP, MPI_Group_size(MPI_GROUP_NULL, &n));
    MPI_Group world;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    FAILS(MPI_ERR_RANK, MPI_Group_incl(world, 1, &outside, &g));
    OK(MPI_Group_free(&world));
    FAILS(MPI_ERR_BUFFER, MPI_Bsend(buf, 1, MPI_INT, rank, 0, MPI_COMM_WORLD));
    OK(MPI_Type_free(&uncommitted));

    /* The library still works after all that. */
    int x = rank, y = -1;
    OK(MPI_Allreduce(&x, &y, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD));
    CHECK(y == size - 1, "allreduce after the errors gave %d", y);
}

static void classes_and_strings(void)
{
    int cls = -1, len = 0;
    char text[MPI_MAX_ERROR_STRING];
    OK(MPI_Error_class(MPI_ERR_RANK, &cls));
    CHECK(cls == MPI_ERR_RANK, "class of MPI_ERR_RANK is %d", cls);
    OK(MPI_Error_class(MPI_SUCCESS, &cls));
    CHECK(cls == MPI_SUCCESS, "class of MPI_SUCCESS is %d", cls);
    OK(MPI_Error_string(MPI_ERR_TRUNCATE, text, &len));
    CHECK(len > 0 && (int)strlen(text) == len, "string of MPI_ERR_TRUNCATE");
    int x = 0;
    int rc = MPI_Send(&x, 1, MPI_INT, 0, -1, MPI_COMM_WORLD);
    OK(MPI_Error_class(rc, &cls));
    CHECK(cls == MPI_ERR_TAG, "class %d", cls);
    OK(MPI_Error_string(rc, text, &len));
    CHECK(len > 0, "the error of a failed call has a text");
}

static void handlers(int size)
{
    MPI_Errhandler eh, got;
    MPI_Comm c;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    OK(MPI_Comm_get_errhandler(c, &got));
    CHECK(got == MPI_ERRORS_RETURN, "a dup inherits the error handler");
    OK(MPI_Comm_create_errhandler(handler, &eh));
    OK(MPI_Comm_set_errhandler(c, eh));
    OK(MPI_Comm_get_errhandler(c, &got));
    CHECK(got == eh, "get_errhandler gives what was set");
    int buf = 0;
    int rc = MPI_Send(&buf, 1, MPI_INT, size + 1, 0, c);
    int cls;
    MPI_Error_class(rc, &cls);
    CHECK(handler_calls == 1 && handler_class == MPI_ERR_RANK && cls == MPI_ERR_RANK,
          "handler ran %d times with class %d; the call returned class %d", handler_calls,
          handler_class, cls);
    int same;
    OK(MPI_Comm_compare(handler_comm, c, &same));
    CHECK(same == MPI_IDENT, "the handler got the communicator of the error");
    OK(MPI_Comm_call_errhandler(c, MPI_ERR_OTHER));
    CHECK(handler_calls == 2 && handler_class == MPI_ERR_OTHER, "call_errhandler");
    OK(MPI_Errhandler_free(&eh));
    CHECK(eh == MPI_ERRHANDLER_NULL, "Errhandler_free clears the handle");
    /* The communicator keeps the freed handler. */
    rc = MPI_Send(&buf, 1, MPI_INT, size + 1, 0, c);
    CHECK(handler_calls == 3, "the freed handler still serves its communicator");
    OK(MPI_Comm_free(&c));
}

int main(int argc, char **argv)
{
    int size;
    test_start(&argc, &argv);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs at least 2 ranks");
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    invalid_arguments(check_rank, size);
    classes_and_strings();
    handlers(size);
    test_pass("errors");
    return 0;
}
