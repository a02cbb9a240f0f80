/*
 * The tool information interface (MPI_T): MPI_T_init_thread/finalize (counted, before
 * MPI_Init and after MPI_Finalize), control variables (names unique and found by
 * get_index, strings by MPI's length rule, every variable bound to no object readable, a
 * written one read back before MPI_Init), performance variables and sessions (handles,
 * reads, what continuous and read-only variables refuse, MPI_T_PVAR_ALL_HANDLES) and
 * categories (names, indices within range). Any number of ranks.
 *
 * With KESTREL_TEST_KESTREL set it also checks Kestrel's own variables: the `btl` parameter
 * is an MPI_CHAR control variable, `coll_shm` written 0 before MPI_Init is what the library
 * runs with (and cannot change then), bad values are refused naming the variable, booleans
 * carry an enumeration, every variable sits in exactly one category, and the counter of sent
 * messages grows after a send.
 */
#include "check.h"

static int kestrel;

/* Index of the control variable `name`. */
static int cvar_index(const char *name)
{
    int i = -1;
    OK(MPI_T_cvar_get_index(name, &i));
    return i;
}

/* A handle on control variable `name`. */
static MPI_T_cvar_handle cvar_handle(const char *name)
{
    MPI_T_cvar_handle h;
    int count = -1;
    OK(MPI_T_cvar_handle_alloc(cvar_index(name), NULL, &h, &count));
    CHECK(count >= 1, "count %d of %s", count, name);
    return h;
}

/* The int value of control variable `name`. */
static int cvar_int(const char *name)
{
    MPI_T_cvar_handle h = cvar_handle(name);
    int v = -1;
    OK(MPI_T_cvar_read(h, &v));
    OK(MPI_T_cvar_handle_free(&h));
    return v;
}

/* Every control variable: info, names found by their index, strings by MPI's rule. */
static int check_cvar_names(void)
{
    int n = -1;
    OK(MPI_T_cvar_get_num(&n));
    CHECK(n > 0, "%d control variables", n);
    for (int i = 0; i < n; i++) {
        int len = 0, verbosity, bind, scope, dl = 0;
        MPI_Datatype dt;
        MPI_T_enum e;
        OK(MPI_T_cvar_get_info(i, NULL, &len, NULL, NULL, NULL, NULL, &dl, NULL, NULL));
        CHECK(len >= 2 && dl >= 1, "variable %d: name length %d, desc length %d", i, len, dl);
        char *name = malloc(len), *desc = malloc(dl);
        int got = len, dgot = dl;
        OK(MPI_T_cvar_get_info(i, name, &got, &verbosity, &dt, &e, desc, &dgot, &bind, &scope));
        CHECK(got == len && (int)strlen(name) == len - 1, "variable %d: '%s' of %d, said %d", i,
              name, got, len);
        CHECK(dgot == dl && (int)strlen(desc) == dl - 1, "variable %s: desc length", name);
        CHECK(verbosity >= MPI_T_VERBOSITY_USER_BASIC && verbosity <= MPI_T_VERBOSITY_MPIDEV_ALL,
              "%s: verbosity %d", name, verbosity);
        CHECK(bind >= MPI_T_BIND_NO_OBJECT && bind <= MPI_T_BIND_MPI_INFO, "%s: bind %d", name,
              bind);
        CHECK(scope >= MPI_T_SCOPE_CONSTANT && scope <= MPI_T_SCOPE_ALL_EQ, "%s: scope %d", name,
              scope);
        /* get_index finds each one at its own index: the names are unique. */
        int idx = -1;
        OK(MPI_T_cvar_get_index(name, &idx));
        CHECK(idx == i, "get_index('%s') = %d, expected %d", name, idx, i);
        /* A short buffer gets the start of the name and a NUL. */
        char small[4];
        int slen = sizeof small;
        OK(MPI_T_cvar_get_info(i, small, &slen, NULL, NULL, NULL, NULL, NULL, NULL, NULL));
        CHECK(slen == 4 && strlen(small) == 3 && strncmp(small, name, 3) == 0,
              "cut name '%s' (%d) of '%s'", small, slen, name);
        free(name);
        free(desc);
    }
    CHECK(MPI_T_cvar_get_info(n, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL) ==
              MPI_T_ERR_INVALID_INDEX,
          "index %d past the last variable", n);
    int idx;
    CHECK(MPI_T_cvar_get_index("no_such_variable_anywhere", &idx) == MPI_T_ERR_INVALID_NAME,
          "an unknown name");
    return n;
}

/* Reads every control variable bound to no object. */
static void read_every_cvar(int n)
{
    for (int i = 0; i < n; i++) {
        MPI_Datatype dt;
        int bind;
        OK(MPI_T_cvar_get_info(i, NULL, NULL, NULL, &dt, NULL, NULL, NULL, &bind, NULL));
        if (bind != MPI_T_BIND_NO_OBJECT)
            continue;
        MPI_T_cvar_handle h;
        int count = -1;
        OK(MPI_T_cvar_handle_alloc(i, NULL, &h, &count));
        CHECK(count >= 1, "variable %d: count %d", i, count);
        char *buf = calloc(count, 16);
        OK(MPI_T_cvar_read(h, buf));
        if (dt == MPI_CHAR)
            CHECK(memchr(buf, 0, count) != NULL, "variable %d: text without its NUL", i);
        OK(MPI_T_cvar_handle_free(&h));
        CHECK(h == MPI_T_CVAR_HANDLE_NULL, "handle_free leaves MPI_T_CVAR_HANDLE_NULL");
        free(buf);
    }
}

/* Flips the first 0/1 int control variable that may change and reads it back, then puts it
 * back; returns its index. */
static int write_reads_back(int n)
{
    for (int i = 0; i < n; i++) {
        MPI_Datatype dt;
        int bind, scope, count;
        OK(MPI_T_cvar_get_info(i, NULL, NULL, NULL, &dt, NULL, NULL, NULL, &bind, &scope));
        if (dt != MPI_INT || bind != MPI_T_BIND_NO_OBJECT || scope == MPI_T_SCOPE_CONSTANT ||
            scope == MPI_T_SCOPE_READONLY)
            continue;
        MPI_T_cvar_handle h;
        OK(MPI_T_cvar_handle_alloc(i, NULL, &h, &count));
        int v = -1, w, back = -1;
        OK(MPI_T_cvar_read(h, &v));
        if (count != 1 || (v != 0 && v != 1)) {
            OK(MPI_T_cvar_handle_free(&h));
            continue;
        }
        w = !v;
        OK(MPI_T_cvar_write(h, &w));
        OK(MPI_T_cvar_read(h, &back));
        CHECK(back == w, "variable %d: wrote %d, read %d", i, w, back);
        OK(MPI_T_cvar_write(h, &v));
        OK(MPI_T_cvar_read(h, &back));
        CHECK(back == v, "variable %d: wrote %d back, read %d", i, v, back);
        OK(MPI_T_cvar_handle_free(&h));
        return i;
    }
    CHECK(0, "no writable 0/1 int control variable among %d", n);
    return -1;
}

/* Kestrel's control variables before MPI_Init. */
static void kestrel_before_init(void)
{
    int i = cvar_index("btl");
    MPI_Datatype dt;
    OK(MPI_T_cvar_get_info(i, NULL, NULL, NULL, &dt, NULL, NULL, NULL, NULL, NULL));
    CHECK(dt == MPI_CHAR, "btl's datatype %#x", (unsigned)dt);
    MPI_T_cvar_handle h = cvar_handle("btl");
    char btl[1024] = "";
    OK(MPI_T_cvar_read(h, btl));
    CHECK(strlen(btl) > 0, "btl reads empty");
    CHECK(MPI_T_cvar_write(h, "self,nosuch") == MPI_T_ERR_INVALID, "an unknown transport");
    OK(MPI_T_cvar_handle_free(&h));

    h = cvar_handle("coll_shm");
    int zero = 0, two = 2, v = -1;
    CHECK(MPI_T_cvar_write(h, &two) == MPI_T_ERR_INVALID, "coll_shm takes 0 or 1");
    char msg[MPI_MAX_ERROR_STRING];
    int len;
    OK(MPI_Error_string(MPI_T_ERR_INVALID, msg, &len));
    CHECK(strstr(msg, "coll_shm") != NULL, "the error names the variable: %s", msg);
    OK(MPI_T_cvar_write(h, &zero));
    OK(MPI_T_cvar_read(h, &v));
    CHECK(v == 0, "coll_shm written 0 reads %d", v);
    OK(MPI_T_cvar_handle_free(&h));

    /* Booleans carry an enumeration of their two values. */
    MPI_T_enum e = MPI_T_ENUM_NULL;
    OK(MPI_T_cvar_get_info(cvar_index("coll_shm"), NULL, NULL, NULL, &dt, &e, NULL, NULL, NULL,
                           NULL));
    CHECK(dt == MPI_INT && e != MPI_T_ENUM_NULL, "coll_shm is an enumerated int");
    int items = -1, value = -1, nlen = 16;
    char item[16];
    OK(MPI_T_enum_get_info(e, &items, NULL, NULL));
    CHECK(items == 2, "%d items", items);
    OK(MPI_T_enum_get_item(e, 1, &value, item, &nlen));
    CHECK(value == 1 && strcmp(item, "true") == 0, "item 1: %d %s", value, item);
    CHECK(MPI_T_enum_get_item(e, 2, &value, NULL, NULL) == MPI_T_ERR_INVALID_INDEX, "item 2");
}

/* Every performance variable: info, index, a handle, a read, what it refuses. */
static int check_pvars(void)
{
    int n = -1;
    OK(MPI_T_pvar_get_num(&n));
    CHECK(n >= 0, "%d performance variables", n);
    MPI_T_pvar_session s;
    OK(MPI_T_pvar_session_create(&s));
    for (int i = 0; i < n; i++) {
        char name[256];
        int len = sizeof name, verbosity, var_class, bind, readonly, continuous, atomic;
        MPI_Datatype dt;
        MPI_T_enum e;
        OK(MPI_T_pvar_get_info(i, name, &len, &verbosity, &var_class, &dt, &e, NULL, NULL, &bind,
                               &readonly, &continuous, &atomic));
        CHECK(var_class >= MPI_T_PVAR_CLASS_STATE && var_class <= MPI_T_PVAR_CLASS_GENERIC,
              "%s: class %d", name, var_class);
        int idx = -1;
        OK(MPI_T_pvar_get_index(name, var_class, &idx));
        CHECK(idx == i, "pvar get_index('%s') = %d, expected %d", name, idx, i);
        if (bind != MPI_T_BIND_NO_OBJECT)
            continue;
        MPI_T_pvar_handle h;
        int count = -1;
        OK(MPI_T_pvar_handle_alloc(s, i, NULL, &h, &count));
        CHECK(count >= 1, "%s: count %d", name, count);
        char *buf = calloc(count, 16);
        OK(MPI_T_pvar_read(s, h, buf));
        if (continuous)
            CHECK(MPI_T_pvar_start(s, h) == MPI_T_ERR_PVAR_NO_STARTSTOP, "%s is continuous",
                  name);
        if (readonly) {
            CHECK(MPI_T_pvar_write(s, h, buf) == MPI_T_ERR_PVAR_NO_WRITE, "%s is read-only", name);
            CHECK(MPI_T_pvar_reset(s, h) == MPI_T_ERR_PVAR_NO_WRITE, "%s is read-only", name);
        }
        OK(MPI_T_pvar_handle_free(s, &h));
        CHECK(h == MPI_T_PVAR_HANDLE_NULL, "handle_free leaves MPI_T_PVAR_HANDLE_NULL");
        free(buf);
    }
    OK(MPI_T_pvar_start(s, MPI_T_PVAR_ALL_HANDLES));
    OK(MPI_T_pvar_stop(s, MPI_T_PVAR_ALL_HANDLES));
    OK(MPI_T_pvar_reset(s, MPI_T_PVAR_ALL_HANDLES));
    OK(MPI_T_pvar_session_free(&s));
    CHECK(s == MPI_T_PVAR_SESSION_NULL, "session_free leaves MPI_T_PVAR_SESSION_NULL");
    return n;
}

/* Kestrel's counter of sent messages grows with a send. */
static void kestrel_counter_grows(int npvar)
{
    CHECK(npvar > 0, "Kestrel has counters");
    CHECK(MPI_T_pvar_get_info(npvar, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                              NULL, NULL) == MPI_T_ERR_INVALID_INDEX,
          "pvar index past the last");
    int i = -1, count;
    OK(MPI_T_pvar_get_index("pml_messages_sent", MPI_T_PVAR_CLASS_COUNTER, &i));
    MPI_T_pvar_session s;
    MPI_T_pvar_handle h;
    OK(MPI_T_pvar_session_create(&s));
    OK(MPI_T_pvar_handle_alloc(s, i, NULL, &h, &count));
    unsigned long long before = 0, after = 0;
    OK(MPI_T_pvar_read(s, h, &before));
    int size, x = check_rank, y = -1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    OK(MPI_Sendrecv(&x, 1, MPI_INT, (check_rank + 1) % size, 5, &y, 1, MPI_INT,
                    (check_rank + size - 1) % size, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
    OK(MPI_T_pvar_read(s, h, &after));
    CHECK(after > before, "pml_messages_sent %llu before a send, %llu after", before, after);
    CHECK(MPI_T_pvar_read(s, MPI_T_PVAR_ALL_HANDLES, &after) == MPI_T_ERR_INVALID_HANDLE,
          "MPI_T_PVAR_ALL_HANDLES is for start, stop and reset only");
    OK(MPI_T_pvar_session_free(&s));
}

/* Categories: names found by index, their variables within range. */
static void check_categories(int ncvar, int npvar)
{
    int n = -1;
    OK(MPI_T_category_get_num(&n));
    CHECK(n >= 0, "%d categories", n);
    int *cv_seen = calloc(ncvar + 1, sizeof(int)), *pv_seen = calloc(npvar + 1, sizeof(int));
    for (int c = 0; c < n; c++) {
        int len = 0, nc = -1, np = -1, nk = -1;
        OK(MPI_T_category_get_info(c, NULL, &len, NULL, NULL, &nc, &np, &nk));
        CHECK(len >= 2 && nc >= 0 && np >= 0 && nk >= 0, "category %d", c);
        char *name = malloc(len);
        OK(MPI_T_category_get_info(c, name, &len, NULL, NULL, NULL, NULL, NULL));
        int idx = -1;
        OK(MPI_T_category_get_index(name, &idx));
        CHECK(idx == c, "category get_index('%s') = %d, expected %d", name, idx, c);
        int *ids = malloc((nc + np + nk + 1) * sizeof(int));
        OK(MPI_T_category_get_cvars(c, nc, ids));
        for (int k = 0; k < nc; k++) {
            CHECK(ids[k] >= 0 && ids[k] < ncvar, "%s: cvar %d", name, ids[k]);
            cv_seen[ids[k]]++;
        }
        OK(MPI_T_category_get_pvars(c, np, ids));
        for (int k = 0; k < np; k++) {
            CHECK(ids[k] >= 0 && ids[k] < npvar, "%s: pvar %d", name, ids[k]);
            pv_seen[ids[k]]++;
        }
        OK(MPI_T_category_get_categories(c, nk, ids));
        for (int k = 0; k < nk; k++)
            CHECK(ids[k] >= 0 && ids[k] < n, "%s: category %d", name, ids[k]);
        free(ids);
        free(name);
    }
    CHECK(MPI_T_category_get_info(n, NULL, NULL, NULL, NULL, NULL, NULL, NULL) ==
              MPI_T_ERR_INVALID_INDEX,
          "category index %d past the last", n);
    int idx;
    CHECK(MPI_T_category_get_index("no such category", &idx) == MPI_T_ERR_INVALID_NAME,
          "an unknown category");
    int stamp;
    OK(MPI_T_category_changed(&stamp));
    if (kestrel) {
        for (int i = 0; i < ncvar; i++)
            CHECK(cv_seen[i] == 1, "cvar %d is in %d categories", i, cv_seen[i]);
        for (int i = 0; i < npvar; i++)
            CHECK(pv_seen[i] == 1, "pvar %d is in %d categories", i, pv_seen[i]);
        OK(MPI_T_category_get_index("shm", &idx));
    }
    free(cv_seen);
    free(pv_seen);
}

int main(int argc, char **argv)
{
    kestrel = getenv("KESTREL_TEST_KESTREL") != NULL;
    int provided = -1, n;
    CHECK(MPI_T_cvar_get_num(&n) == MPI_T_ERR_NOT_INITIALIZED, "MPI_T before init_thread");
    CHECK(MPI_T_finalize() == MPI_T_ERR_NOT_INITIALIZED, "MPI_T_finalize before init_thread");
    OK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    CHECK(provided >= MPI_THREAD_SINGLE && provided <= MPI_THREAD_MULTIPLE, "provided %d",
          provided);
    OK(MPI_T_init_thread(MPI_THREAD_FUNNELED, &provided));

    /* Before MPI_Init. */
    int ncvar = check_cvar_names();
    read_every_cvar(ncvar);
    write_reads_back(ncvar);
    if (kestrel)
        kestrel_before_init();

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &check_rank);
    int again = -1;
    OK(MPI_T_cvar_get_num(&again));
    CHECK(again == ncvar, "%d control variables before MPI_Init, %d after", ncvar, again);
    read_every_cvar(ncvar);
    if (kestrel) {
        CHECK(cvar_int("coll_shm") == 0, "coll_shm written 0 before MPI_Init");
        MPI_T_cvar_handle h = cvar_handle("coll_shm");
        int one = 1;
        CHECK(MPI_T_cvar_write(h, &one) == MPI_T_ERR_CVAR_SET_NOT_NOW,
              "parameters are fixed while MPI runs");
        OK(MPI_T_cvar_handle_free(&h));
    }
    int npvar = check_pvars();
    if (kestrel)
        kestrel_counter_grows(npvar);
    check_categories(ncvar, npvar);
    /* One of the two MPI_T_init_thread calls ends; the interface still answers. */
    OK(MPI_T_finalize());
    OK(MPI_T_cvar_get_num(&n));

    /* After MPI_Finalize the interface still works and counts again. (MPICH 4.0.2 crashes in
     * MPI_T_cvar_get_num when MPI_T_init_thread follows MPI_Finalize after the last
     * MPI_T_finalize, so the interface stays initialized across MPI_Finalize here.) */
    MPI_Barrier(MPI_COMM_WORLD);
    int rank = check_rank;
    MPI_Finalize();
    OK(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    OK(MPI_T_cvar_get_num(&n));
    CHECK(n == ncvar, "%d control variables after MPI_Finalize", n);
    if (kestrel)
        CHECK(cvar_int("coll_shm") == 0, "coll_shm after MPI_Finalize");
    OK(MPI_T_finalize());
    OK(MPI_T_finalize());
    if (MPI_T_cvar_get_num(&n) != MPI_T_ERR_NOT_INITIALIZED) {
        fprintf(stderr, "FAIL rank %d: MPI_T answers after its last MPI_T_finalize\n", rank);
        return 1;
    }
    printf("PASS mpit rank %d\n", rank);
    fflush(stdout);
    return 0;
}
