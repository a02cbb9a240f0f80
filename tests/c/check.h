/*
 * Helpers of the self-checking C tests in tests/c/. Each test exercises one group of MPI
 * functions and runs unchanged on MPICH (to prove the test right) and on Kestrel's
 * libmpich.so.12 (tests/tests/abi.rs runs both). A failed check prints where and why and
 * aborts the whole job; a passing rank prints "PASS <test> rank <r>" last.
 */
#ifndef KESTREL_C_TEST_CHECK_H
#define KESTREL_C_TEST_CHECK_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_rank = -1;

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "FAIL rank %d %s:%d: %s: ", check_rank, __FILE__, __LINE__,   \
                    #cond);                                                               \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, "\n");                                                        \
            fflush(stderr);                                                               \
            MPI_Abort(MPI_COMM_WORLD, 3);                                                 \
        }                                                                                 \
    } while (0)

/* An MPI call that must succeed. */
#define OK(call)                                                                          \
    do {                                                                                  \
        int ok_rc_ = (call);                                                              \
        if (ok_rc_ != MPI_SUCCESS) {                                                      \
            char ok_msg_[MPI_MAX_ERROR_STRING];                                           \
            int ok_len_ = 0;                                                              \
            MPI_Error_string(ok_rc_, ok_msg_, &ok_len_);                                  \
            CHECK(ok_rc_ == MPI_SUCCESS, "%s returned %d: %s", #call, ok_rc_, ok_msg_);   \
        }                                                                                 \
    } while (0)

/* An MPI call that must fail with error class `class` (under MPI_ERRORS_RETURN). */
#define FAILS(class, call)                                                                \
    do {                                                                                  \
        int f_rc_ = (call);                                                               \
        int f_class_ = -1;                                                                \
        CHECK(f_rc_ != MPI_SUCCESS, "%s succeeded but must fail with class %d", #call,   \
              (class));                                                                   \
        MPI_Error_class(f_rc_, &f_class_);                                                \
        CHECK(f_class_ == (class), "%s failed with class %d, expected %d", #call,         \
              f_class_, (class));                                                         \
    } while (0)

__attribute__((unused)) static void test_start(int *argc, char ***argv)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &check_rank);
}

__attribute__((unused)) static void test_pass(const char *name)
{
    MPI_Barrier(MPI_COMM_WORLD);
    printf("PASS %s rank %d\n", name, check_rank);
    fflush(stdout);
    MPI_Finalize();
}

#endif
