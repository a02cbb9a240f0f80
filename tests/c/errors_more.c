/*
 * User error classes, codes and strings, and user error handlers: MPI_Add_error_class,
 * MPI_Add_error_code, MPI_Add_error_string (replacing too), MPI_Error_class and
 * MPI_Error_string on them (empty until a string is added) and on predefined classes, the
 * MPI_LASTUSEDCODE attribute of MPI_COMM_WORLD, MPI_Comm_create_errhandler,
 * MPI_Comm_call_errhandler with a user handler (called with the communicator and the code,
 * returning MPI_SUCCESS), the same handler called by a real error (whose code the call then
 * returns), inherited by MPI_Comm_dup, and freed while in use. Any number of ranks (1-6
 * tested). On MPICH (found by MPI_Get_library_version), whose 4.0.2 does not raise
 * MPI_LASTUSEDCODE for added codes (only for classes), that one check is skipped.
 */
#include "check.h"

static int calls, last_code;
static MPI_Comm last_comm;

static void handler(MPI_Comm *comm, int *code, ...)
{
    calls++;
    last_code = *code;
    last_comm = *comm;
}

static int lastused(void)
{
    int *v = NULL, flag = 0;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &v, &flag));
    CHECK(flag && v != NULL, "MPI_LASTUSEDCODE is not set");
    return *v;
}

static void string_is(int code, const char *want)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = -1;
    OK(MPI_Error_string(code, s, &len));
    CHECK(strcmp(s, want) == 0 && len == (int)strlen(want),
          "string of %d is '%s' (%d), expected '%s'", code, s, len, want);
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    char version[MPI_MAX_LIBRARY_VERSION_STRING];
    int vlen = 0;
    OK(MPI_Get_library_version(version, &vlen));
    int mpich = strncmp(version, "MPICH", 5) == 0;

    int first = lastused();
    CHECK(first >= MPI_ERR_LASTCODE, "MPI_LASTUSEDCODE %d is below MPI_ERR_LASTCODE %d", first,
          MPI_ERR_LASTCODE);
    /* Predefined classes are their own class and have distinct, non-empty strings. */
    int cls = -1;
    OK(MPI_Error_class(MPI_ERR_RANK, &cls));
    CHECK(cls == MPI_ERR_RANK, "class of MPI_ERR_RANK is %d", cls);
    char s1[MPI_MAX_ERROR_STRING], s2[MPI_MAX_ERROR_STRING];
    int l1, l2;
    OK(MPI_Error_string(MPI_ERR_RANK, s1, &l1));
    OK(MPI_Error_string(MPI_ERR_TAG, s2, &l2));
    CHECK(l1 > 0 && l2 > 0 && strcmp(s1, s2) != 0, "predefined strings '%s' and '%s'", s1, s2);
    OK(MPI_Error_string(MPI_SUCCESS, s1, &l1));
    CHECK(l1 > 0, "MPI_SUCCESS has no string");

    /* New classes and codes. */
    int c1, c2, e1, e2, e3;
    OK(MPI_Add_error_class(&c1));
    OK(MPI_Add_error_class(&c2));
    CHECK(c1 > MPI_ERR_LASTCODE && c2 > MPI_ERR_LASTCODE && c1 != c2, "new classes %d %d", c1,
          c2);
    int lu = lastused();
    CHECK(lu >= c1 && lu >= c2 && lu > first, "MPI_LASTUSEDCODE %d after classes %d %d", lu, c1,
          c2);
    OK(MPI_Add_error_code(c1, &e1));
    OK(MPI_Add_error_code(c1, &e2));
    OK(MPI_Add_error_code(c2, &e3));
    int all[5] = {c1, c2, e1, e2, e3};
    for (int i = 0; i < 5; i++)
        for (int j = i + 1; j < 5; j++)
            CHECK(all[i] != all[j], "added values %d and %d are both %d", i, j, all[i]);
    lu = lastused();
    for (int i = 0; i < 5; i++)
        CHECK(mpich || lu >= all[i], "MPI_LASTUSEDCODE %d is below added value %d", lu, all[i]);
    int want_cls[5] = {c1, c2, c1, c1, c2};
    for (int i = 0; i < 5; i++) {
        OK(MPI_Error_class(all[i], &cls));
        CHECK(cls == want_cls[i], "class of added value %d is %d, expected %d", all[i], cls,
              want_cls[i]);
    }
    /* Strings: empty until added, per class and per code, and replaceable. */
    string_is(c1, "");
    string_is(e1, "");
    OK(MPI_Add_error_string(c1, "kestrel test class one"));
    OK(MPI_Add_error_string(e1, "kestrel test code one"));
    OK(MPI_Add_error_string(e3, "kestrel test code three"));
    string_is(c1, "kestrel test class one");
    string_is(e1, "kestrel test code one");
    string_is(e2, "");
    string_is(c2, "");
    string_is(e3, "kestrel test code three");
    OK(MPI_Add_error_string(e1, "kestrel test code one, again"));
    string_is(e1, "kestrel test code one, again");

    /* A user error handler, called explicitly and by a real error. */
    MPI_Errhandler eh, got;
    OK(MPI_Comm_create_errhandler(handler, &eh));
    MPI_Comm c;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    OK(MPI_Comm_set_errhandler(c, eh));
    OK(MPI_Comm_get_errhandler(c, &got));
    CHECK(got == eh, "get_errhandler gave another handler");
    OK(MPI_Errhandler_free(&got));
    calls = 0;
    OK(MPI_Comm_call_errhandler(c, e3));
    CHECK(calls == 1 && last_code == e3 && last_comm == c, "call_errhandler: %d calls, code %d",
          calls, last_code);
    OK(MPI_Comm_call_errhandler(c, MPI_ERR_OTHER));
    CHECK(calls == 2 && last_code == MPI_ERR_OTHER, "call_errhandler with a class: code %d",
          last_code);
    int x = 0, rc = MPI_Send(&x, 1, MPI_INT, 1 << 20, 0, c);
    OK(MPI_Error_class(rc, &cls));
    CHECK(calls == 3 && cls == MPI_ERR_RANK && rc == last_code,
          "a send to a bad rank: %d calls, returned %d (class %d), handler saw %d", calls, rc,
          cls, last_code);
    /* Inherited by a dup; still in use after MPI_Errhandler_free. */
    MPI_Comm d;
    OK(MPI_Comm_dup(c, &d));
    OK(MPI_Errhandler_free(&eh));
    CHECK(eh == MPI_ERRHANDLER_NULL, "freed handler is MPI_ERRHANDLER_NULL");
    OK(MPI_Comm_call_errhandler(d, e2));
    CHECK(calls == 4 && last_code == e2 && last_comm == d, "the dup's handler: %d calls",
          calls);
    OK(MPI_Comm_free(&d));
    OK(MPI_Comm_call_errhandler(c, e1));
    CHECK(calls == 5 && last_code == e1, "after free: %d calls", calls);
    OK(MPI_Comm_free(&c));

    test_pass("errors_more");
    return 0;
}
