/*
 * What Kestrel checks where MPICH 4.0 does not, so this one runs on Kestrel only:
 * reductions with negative counts fail with MPI_ERR_COUNT (MPICH crashes); handles that
 * are no handles at all (pseudo-random ints) give the class of the argument, never a
 * crash; a type of 2^30 separate blocks is refused instead of exhausting memory; and a
 * function Kestrel does not implement fails with MPI_ERR_UNSUPPORTED_OPERATION, its
 * message naming the function. Built with MPICH's mpicc and run on Kestrel's library, it
 * is also an MPICH-built binary calling a function missing from Kestrel's mpi.h. With the
 * argument "fatal", the unsupported call is made under MPI_ERRORS_ARE_FATAL and must stop
 * the job.
 */
#include "check.h"

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    int in = 1, out = 0;
    if (argc > 1 && strcmp(argv[1], "fatal") == 0) {
        MPIX_Comm_revoke(MPI_COMM_WORLD);
        CHECK(0, "MPIX_Comm_revoke returned under MPI_ERRORS_ARE_FATAL");
    }
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    FAILS(MPI_ERR_COUNT, MPI_Allreduce(&in, &out, -1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    FAILS(MPI_ERR_COUNT, MPI_Reduce(&in, &out, -1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
    FAILS(MPI_ERR_COUNT, MPI_Scan(&in, &out, -3, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    /* A vector of 2^30 back-to-back blocks is one contiguous run; one with 2^30 separate
     * blocks is refused (Kestrel flattens type maps) instead of exhausting memory. */
    MPI_Datatype big;
    OK(MPI_Type_vector(1 << 30, 1, 1, MPI_INT, &big));
    MPI_Count bigsize;
    int small;
    OK(MPI_Type_size_x(big, &bigsize));
    OK(MPI_Type_size(big, &small));
    CHECK(bigsize == (MPI_Count)4 << 30 && small == MPI_UNDEFINED, "size %lld / %d",
          (long long)bigsize, small);
    OK(MPI_Type_free(&big));
    FAILS(MPI_ERR_ARG, MPI_Type_vector(1 << 30, 2, 3, MPI_INT, &big));

    /* Pseudo-random ints as handles of every kind. */
    unsigned x = 12345;
    for (int i = 0; i < 20000; i++) {
        x = x * 1103515245u + 12345u;
        int h = (int)x;
        if (h == MPI_COMM_WORLD || h == MPI_COMM_SELF)
            continue;
        int n, flag;
        MPI_Aint lb, ext;
        MPI_Request req = h;
        MPI_Status st;
        void *val;
        MPI_Errhandler eh;
        FAILS(MPI_ERR_COMM, MPI_Comm_size((MPI_Comm)h, &n));
        FAILS(MPI_ERR_COMM, MPI_Send(&in, 1, MPI_INT, 0, 0, (MPI_Comm)h));
        FAILS(MPI_ERR_COMM, MPI_Comm_get_errhandler((MPI_Comm)h, &eh));
        if (MPI_Type_size((MPI_Datatype)h, &n) == MPI_SUCCESS)
            continue; /* a predefined type's handle */
        FAILS(MPI_ERR_TYPE, MPI_Type_get_extent((MPI_Datatype)h, &lb, &ext));
        FAILS(MPI_ERR_TYPE, MPI_Send(&in, 1, (MPI_Datatype)h, 0, 0, MPI_COMM_WORLD));
        if (h != MPI_REQUEST_NULL)
            FAILS(MPI_ERR_REQUEST, MPI_Wait(&req, &st));
        if (h != MPI_GROUP_EMPTY)
            FAILS(MPI_ERR_GROUP, MPI_Group_size((MPI_Group)h, &n));
        FAILS(MPI_ERR_OP, MPI_Allreduce(&in, &out, 1, MPI_INT, (MPI_Op)h, MPI_COMM_WORLD));
        if (MPI_Comm_get_attr(MPI_COMM_WORLD, h, &val, &flag) == MPI_SUCCESS)
            CHECK(flag, "keyval %#x: no error but no value", h);
    }

    /* A function MPICH's library exports and Kestrel's does not implement (a fault-tolerance
     * extension, declared in MPICH's header only): it fails naming itself. */
    int rc = MPIX_Comm_revoke(MPI_COMM_WORLD);
    int cls = -1, len = 0;
    char text[MPI_MAX_ERROR_STRING];
    MPI_Error_class(rc, &cls);
    MPI_Error_string(rc, text, &len);
    CHECK(cls == MPI_ERR_UNSUPPORTED_OPERATION, "MPIX_Comm_revoke gave class %d", cls);
    CHECK(strstr(text, "MPIX_Comm_revoke") != NULL,
          "the message does not name the function: %s", text);
    test_pass("kestrel_only");
    return 0;
}
