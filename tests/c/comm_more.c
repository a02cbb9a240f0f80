/*
 * More communicators and the info API: MPI_Comm_create_group (two disjoint groups at
 * once), MPI_Comm_idup and MPI_Comm_idup_with_info (several outstanding, attributes
 * copied, the new communicator used after the wait), MPI_Comm_dup_with_info,
 * MPI_Comm_set_info/get_info (the MPI-4 assertion hints, when returned, have the value
 * set), MPI-4's MPI_Comm_create_from_group and MPI_Intercomm_create_from_groups (on groups
 * of MPI_COMM_WORLD); the whole MPI_Info API: create, set, get, get_valuelen, get_nkeys,
 * get_nthkey, delete, dup, free, MPI_Info_get_string (truncation, the length it reports,
 * a zero buflen), MPI_Info_create_env and MPI_INFO_ENV, and the info error classes under
 * MPI_ERRORS_RETURN; MPI-4's hardware-guided and unguided MPI_Comm_split_type. Any number
 * of ranks (1-6 tested; some parts need 2).
 */
#include "check.h"

static int rank, size;

static void info_api(void)
{
    MPI_Info a, b;
    OK(MPI_Info_create(&a));
    int n = -1, flag = -1, len = -1;
    OK(MPI_Info_get_nkeys(a, &n));
    CHECK(n == 0, "a new info has %d keys", n);
    OK(MPI_Info_set(a, "alpha", "one"));
    OK(MPI_Info_set(a, "beta", "second value"));
    OK(MPI_Info_set(a, "gamma", ""));
    OK(MPI_Info_set(a, "alpha", "uno")); /* replaces */
    OK(MPI_Info_get_nkeys(a, &n));
    CHECK(n == 3, "3 keys, not %d", n);
    /* Every key once among the nth keys (their order is not defined). */
    int seen = 0;
    for (int i = 0; i < n; i++) {
        char key[MPI_MAX_INFO_KEY + 1];
        OK(MPI_Info_get_nthkey(a, i, key));
        seen |= strcmp(key, "alpha") == 0   ? 1
                : strcmp(key, "beta") == 0  ? 2
                : strcmp(key, "gamma") == 0 ? 4
                                            : 8;
    }
    CHECK(seen == 7, "nth keys seen as mask %d", seen);
    OK(MPI_Info_get_valuelen(a, "beta", &len, &flag));
    CHECK(flag && len == 12, "valuelen of beta: flag %d len %d", flag, len);
    OK(MPI_Info_get_valuelen(a, "gamma", &len, &flag));
    CHECK(flag && len == 0, "valuelen of the empty value: flag %d len %d", flag, len);
    OK(MPI_Info_get_valuelen(a, "delta", &len, &flag));
    CHECK(!flag, "valuelen of a missing key: flag %d", flag);

    /* MPI_Info_get (deprecated in MPI-4): valuelen excludes the terminator. (Too short a
     * valuelen is not tried: MPICH 4.0.2 fails there with MPI_ERR_INFO_VALUE.) */
    char v8[8];
    memset(v8, 'X', sizeof v8);
    OK(MPI_Info_get(a, "alpha", 3, v8, &flag));
    CHECK(flag && strcmp(v8, "uno") == 0, "MPI_Info_get alpha with valuelen 3: '%.8s'", v8);
    OK(MPI_Info_get(a, "alpha", 7, v8, &flag));
    CHECK(flag && strcmp(v8, "uno") == 0, "MPI_Info_get alpha: '%s'", v8);
    OK(MPI_Info_get(a, "delta", 7, v8, &flag));
    CHECK(!flag, "MPI_Info_get of a missing key: flag %d", flag);

    /* MPI_Info_get_string: buflen in is the buffer's size, out the value's size + 1. */
    char buf[32];
    int buflen = sizeof buf;
    OK(MPI_Info_get_string(a, "alpha", &buflen, buf, &flag));
    CHECK(flag && buflen == 4 && strcmp(buf, "uno") == 0, "get_string alpha: %d %d '%s'", flag,
          buflen, buf);
    buflen = 5;
    memset(buf, 'X', sizeof buf);
    OK(MPI_Info_get_string(a, "beta", &buflen, buf, &flag));
    CHECK(flag && buflen == 13 && strcmp(buf, "seco") == 0,
          "get_string truncated to 5: flag %d buflen %d '%s'", flag, buflen, buf);
    buflen = 0;
    memset(buf, 'X', sizeof buf);
    OK(MPI_Info_get_string(a, "beta", &buflen, buf, &flag));
    CHECK(flag && buflen == 13 && buf[0] == 'X', "get_string with buflen 0: flag %d buflen %d",
          flag, buflen);
    buflen = 8;
    OK(MPI_Info_get_string(a, "gamma", &buflen, buf, &flag));
    CHECK(flag && buflen == 1 && buf[0] == 0, "get_string of the empty value: %d %d", flag,
          buflen);
    buflen = 8;
    OK(MPI_Info_get_string(a, "delta", &buflen, buf, &flag));
    CHECK(!flag && buflen == 8, "get_string of a missing key: flag %d buflen %d", flag, buflen);

    /* Dup is a deep copy. */
    OK(MPI_Info_dup(a, &b));
    OK(MPI_Info_delete(a, "beta"));
    OK(MPI_Info_set(a, "alpha", "changed"));
    OK(MPI_Info_get_nkeys(a, &n));
    CHECK(n == 2, "after delete: %d keys", n);
    OK(MPI_Info_get_valuelen(a, "beta", &len, &flag));
    CHECK(!flag, "a deleted key is gone");
    buflen = sizeof buf;
    OK(MPI_Info_get_string(b, "beta", &buflen, buf, &flag));
    CHECK(flag && strcmp(buf, "second value") == 0, "the dup kept beta: '%s'", buf);
    buflen = sizeof buf;
    OK(MPI_Info_get_string(b, "alpha", &buflen, buf, &flag));
    CHECK(flag && strcmp(buf, "uno") == 0, "the dup kept the old alpha: '%s'", buf);
    OK(MPI_Info_get_nkeys(b, &n));
    CHECK(n == 3, "the dup has %d keys", n);

    /* Errors. */
    char longkey[MPI_MAX_INFO_KEY + 8], *longval = malloc(MPI_MAX_INFO_VAL + 8);
    memset(longkey, 'k', sizeof longkey);
    longkey[MPI_MAX_INFO_KEY + 4] = 0;
    memset(longval, 'v', MPI_MAX_INFO_VAL + 8);
    longval[MPI_MAX_INFO_VAL + 4] = 0;
    FAILS(MPI_ERR_INFO_KEY, MPI_Info_set(a, longkey, "v"));
    FAILS(MPI_ERR_INFO_KEY, MPI_Info_set(a, "", "v"));
    FAILS(MPI_ERR_INFO_VALUE, MPI_Info_set(a, "k", longval));
    FAILS(MPI_ERR_INFO_NOKEY, MPI_Info_delete(a, "no such key"));
    char key[MPI_MAX_INFO_KEY + 1];
    FAILS(MPI_ERR_ARG, MPI_Info_get_nthkey(a, 2, key));
    free(longval);

    OK(MPI_Info_free(&a));
    OK(MPI_Info_free(&b));
    CHECK(a == MPI_INFO_NULL && b == MPI_INFO_NULL, "freed infos are MPI_INFO_NULL");

    /* The environment's info: whatever it holds is readable. */
    MPI_Info env;
    OK(MPI_Info_create_env(0, NULL, &env));
    OK(MPI_Info_get_nkeys(env, &n));
    for (int i = 0; i < n; i++) {
        OK(MPI_Info_get_nthkey(env, i, key));
        OK(MPI_Info_get_valuelen(env, key, &len, &flag));
        CHECK(flag && len >= 0 && len <= MPI_MAX_INFO_VAL, "MPI_Info_create_env key %s", key);
    }
    OK(MPI_Info_free(&env));
    OK(MPI_Info_get_nkeys(MPI_INFO_ENV, &n));
    for (int i = 0; i < n; i++) {
        OK(MPI_Info_get_nthkey(MPI_INFO_ENV, i, key));
        OK(MPI_Info_get_valuelen(MPI_INFO_ENV, key, &len, &flag));
        CHECK(flag, "MPI_INFO_ENV key %s has no value", key);
    }
}

/* If the communicator's info reports `key`, its value is `want`. */
static void hint_is(MPI_Comm c, const char *key, const char *want, const char *what)
{
    MPI_Info got;
    OK(MPI_Comm_get_info(c, &got));
    CHECK(got != MPI_INFO_NULL, "%s: MPI_Comm_get_info gave MPI_INFO_NULL", what);
    char v[64];
    int buflen = sizeof v, flag = 0;
    OK(MPI_Info_get_string(got, key, &buflen, v, &flag));
    CHECK(!flag || strcmp(v, want) == 0, "%s: %s is '%s', expected '%s'", what, key, v, want);
    OK(MPI_Info_free(&got));
}

static int copies;
static int copy_fn(MPI_Comm c, int key, void *extra, void *in, void *out, int *flag)
{
    (void)c, (void)key, (void)extra;
    copies++;
    *(long *)out = (long)in + 1;
    *flag = 1;
    return MPI_SUCCESS;
}

/* Sum of the world ranks over c, against `want`. */
static void use(MPI_Comm c, int want, const char *what)
{
    int s = 0, n, r;
    OK(MPI_Allreduce(&rank, &s, 1, MPI_INT, MPI_SUM, c));
    CHECK(s == want, "%s: sum of world ranks %d, expected %d", what, s, want);
    OK(MPI_Comm_size(c, &n));
    OK(MPI_Comm_rank(c, &r));
    int to = (r + 1) % n, from = (r + n - 1) % n, x = -1;
    OK(MPI_Sendrecv(&r, 1, MPI_INT, to, 9, &x, 1, MPI_INT, from, 9, c, MPI_STATUS_IGNORE));
    CHECK(x == from, "%s: ring message %d, expected %d", what, x, from);
}

static void communicators(void)
{
    int all = size * (size - 1) / 2;
    /* Comm_create_group: evens and odds, only the members calling, at the same time. */
    MPI_Group world, half;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    int mine = rank % 2, cnt = (size + 1 - mine) / 2, *ranks = malloc(sizeof(int) * size);
    int want = 0;
    for (int i = 0; i < cnt; i++) {
        ranks[i] = 2 * i + mine;
        want += ranks[i];
    }
    OK(MPI_Group_incl(world, cnt, ranks, &half));
    MPI_Comm hc;
    OK(MPI_Comm_create_group(MPI_COMM_WORLD, half, 70 + mine, &hc));
    int hr, hn;
    OK(MPI_Comm_rank(hc, &hr));
    OK(MPI_Comm_size(hc, &hn));
    CHECK(hr == rank / 2 && hn == cnt, "create_group: rank %d of %d", hr, hn);
    use(hc, want, "Comm_create_group");
    OK(MPI_Comm_free(&hc));

    /* Idup: several outstanding, completed together; attributes are copied. */
    int kv;
    OK(MPI_Comm_create_keyval(copy_fn, MPI_COMM_NULL_DELETE_FN, &kv, NULL));
    MPI_Comm base;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &base));
    OK(MPI_Comm_set_attr(base, kv, (void *)40L));
    MPI_Info hints;
    OK(MPI_Info_create(&hints));
    OK(MPI_Info_set(hints, "mpi_assert_no_any_source", "true"));
    MPI_Comm d[3];
    MPI_Request q[4];
    MPI_Status st[4];
    copies = 0;
    OK(MPI_Comm_idup(base, &d[0], &q[0]));
    OK(MPI_Comm_idup_with_info(base, hints, &d[1], &q[1]));
    int b = rank == 0 ? 5 : -1;
    OK(MPI_Ibcast(&b, 1, MPI_INT, 0, base, &q[2]));
    OK(MPI_Comm_idup(MPI_COMM_WORLD, &d[2], &q[3]));
    OK(MPI_Waitall(4, q, st));
    CHECK(b == 5 && copies == 2, "bcast among idups %d, %d attribute copies", b, copies);
    for (int i = 0; i < 3; i++) {
        int cmp;
        OK(MPI_Comm_compare(d[i], MPI_COMM_WORLD, &cmp));
        CHECK(cmp == MPI_CONGRUENT, "idup %d compares %d", i, cmp);
        use(d[i], all, "Comm_idup");
        void *v = NULL;
        int flag = 0;
        OK(MPI_Comm_get_attr(d[i], kv, &v, &flag));
        CHECK(i == 2 ? !flag : flag && (long)v == 41, "idup %d attribute: flag %d value %ld", i,
              flag, (long)v);
    }
    hint_is(d[1], "mpi_assert_no_any_source", "true", "Comm_idup_with_info");

    /* Dup_with_info, set_info, get_info. */
    MPI_Comm di;
    OK(MPI_Comm_dup_with_info(base, hints, &di));
    hint_is(di, "mpi_assert_no_any_source", "true", "Comm_dup_with_info");
    use(di, all, "Comm_dup_with_info");
    void *v = NULL;
    int flag = 0;
    OK(MPI_Comm_get_attr(di, kv, &v, &flag));
    CHECK(flag && (long)v == 41, "dup_with_info copies attributes: %d %ld", flag, (long)v);
    OK(MPI_Info_set(hints, "mpi_assert_no_any_tag", "true"));
    OK(MPI_Info_set(hints, "mpi_assert_no_any_source", "false"));
    OK(MPI_Comm_set_info(di, hints));
    hint_is(di, "mpi_assert_no_any_tag", "true", "Comm_set_info");
    hint_is(di, "mpi_assert_no_any_source", "false", "Comm_set_info");
    OK(MPI_Info_free(&hints));
    MPI_Info wi;
    OK(MPI_Comm_get_info(MPI_COMM_WORLD, &wi));
    CHECK(wi != MPI_INFO_NULL, "MPI_COMM_WORLD's info is an info");
    OK(MPI_Info_free(&wi));

    for (int i = 0; i < 3; i++)
        OK(MPI_Comm_free(&d[i]));
    OK(MPI_Comm_free(&di));
    OK(MPI_Comm_free(&base));
    OK(MPI_Comm_free_keyval(&kv));

    /* MPI-4: a communicator from a group, without a parent communicator. */
    MPI_Comm fg;
    OK(MPI_Comm_create_from_group(half, mine ? "org.kestrel.test.odd" : "org.kestrel.test.even",
                                  MPI_INFO_NULL, MPI_ERRORS_RETURN, &fg));
    OK(MPI_Comm_rank(fg, &hr));
    OK(MPI_Comm_size(fg, &hn));
    CHECK(hr == rank / 2 && hn == cnt, "create_from_group: rank %d of %d", hr, hn);
    use(fg, want, "Comm_create_from_group");
    MPI_Errhandler eh;
    OK(MPI_Comm_get_errhandler(fg, &eh));
    CHECK(eh == MPI_ERRORS_RETURN, "create_from_group's error handler");
    OK(MPI_Errhandler_free(&eh));
    OK(MPI_Comm_free(&fg));

    /* MPI-4: an inter-communicator between the evens and the odds, from their groups. */
    if (size >= 2) {
        MPI_Group other;
        OK(MPI_Group_difference(world, half, &other));
        MPI_Comm ic;
        OK(MPI_Intercomm_create_from_groups(half, 0, other, 0, "org.kestrel.test.inter",
                                            MPI_INFO_NULL, MPI_ERRORS_RETURN, &ic));
        int inter = 0, rs = -1;
        OK(MPI_Comm_test_inter(ic, &inter));
        OK(MPI_Comm_remote_size(ic, &rs));
        CHECK(inter && rs == size - cnt, "intercomm from groups: inter %d remote size %d",
              inter, rs);
        /* Rank i of each side exchanges with rank i of the other, where both exist. */
        OK(MPI_Comm_rank(ic, &hr));
        if (hr < rs) {
            int x = -1;
            OK(MPI_Sendrecv(&rank, 1, MPI_INT, hr, 3, &x, 1, MPI_INT, hr, 3, ic,
                            MPI_STATUS_IGNORE));
            CHECK(x == 2 * hr + 1 - mine, "intercomm message from world rank %d", x);
        }
        int sum = 0;
        OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, ic));
        CHECK(sum == all - want, "intercomm allreduce gives the other side's sum %d", sum);
        OK(MPI_Comm_free(&ic));
        OK(MPI_Group_free(&other));
    }
    OK(MPI_Group_free(&half));
    OK(MPI_Group_free(&world));
    free(ranks);
}

/* MPI-4's hardware-guided splits: "mpi_shared_memory" is the resource every library knows
 * (the same groups as MPI_COMM_TYPE_SHARED); without the key, or with an unknown resource,
 * MPI_COMM_NULL. An unguided split gives a strictly smaller communicator with the key set
 * in the info, or MPI_COMM_NULL where there is no smaller level. */
static void hw_split(void)
{
    MPI_Comm shared, hw;
    int ssize, hsize;
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared));
    OK(MPI_Comm_size(shared, &ssize));
    MPI_Info info;
    OK(MPI_Info_create(&info));
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, rank, MPI_INFO_NULL, &hw));
    CHECK(hw == MPI_COMM_NULL, "HW_GUIDED without a resource type gave a communicator");
    OK(MPI_Info_set(info, "mpi_hw_resource_type", "no-such-resource"));
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, rank, info, &hw));
    CHECK(hw == MPI_COMM_NULL, "HW_GUIDED with an unknown resource gave a communicator");
    OK(MPI_Info_set(info, "mpi_hw_resource_type", "mpi_shared_memory"));
    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_HW_GUIDED, rank, info, &hw));
    CHECK(hw != MPI_COMM_NULL, "HW_GUIDED mpi_shared_memory gave MPI_COMM_NULL");
    OK(MPI_Comm_size(hw, &hsize));
    CHECK(hsize == ssize, "HW_GUIDED mpi_shared_memory has %d ranks, COMM_TYPE_SHARED %d",
          hsize, ssize);
    OK(MPI_Comm_free(&hw));
    OK(MPI_Info_free(&info));
    OK(MPI_Info_create(&info));
    OK(MPI_Comm_split_type(shared, MPI_COMM_TYPE_HW_UNGUIDED, rank, info, &hw));
    if (hw != MPI_COMM_NULL) {
        char v[MPI_MAX_INFO_VAL];
        int flag = 0;
        OK(MPI_Comm_size(hw, &hsize));
        OK(MPI_Info_get(info, "mpi_hw_resource_type", MPI_MAX_INFO_VAL - 1, v, &flag));
        CHECK(hsize < ssize && flag, "HW_UNGUIDED: %d of %d ranks, resource type set %d",
              hsize, ssize, flag);
        OK(MPI_Comm_free(&hw));
    }
    OK(MPI_Info_free(&info));
    OK(MPI_Comm_free(&shared));
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    info_api();
    communicators();
    hw_split();
    test_pass("comm_more");
    return 0;
}
