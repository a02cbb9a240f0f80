/*
 * Communicators, groups and attributes: rank, size, dup, split, split_type, create, free,
 * compare, group, set/get name, test_inter; group size, rank, incl, excl, range incl/excl,
 * translate_ranks, compare, union, intersection, difference, free; the predefined
 * attributes (MPI_TAG_UB, MPI_WTIME_IS_GLOBAL, ...) and keyvals with copy and delete
 * functions through dup and free. Any number of ranks (at least 2 for some parts).
 */
#include "check.h"

static int rank, size;

static void communicators(void)
{
    MPI_Comm dup, split, rev, shared, sub, empty;
    int r, n, res;

    OK(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
    OK(MPI_Comm_rank(dup, &r));
    OK(MPI_Comm_size(dup, &n));
    CHECK(r == rank && n == size, "dup rank %d size %d", r, n);
    OK(MPI_Comm_compare(MPI_COMM_WORLD, MPI_COMM_WORLD, &res));
    CHECK(res == MPI_IDENT, "world vs world %d", res);
    OK(MPI_Comm_compare(MPI_COMM_WORLD, dup, &res));
    CHECK(res == MPI_CONGRUENT, "world vs dup %d", res);
    /* Traffic on the dup does not match receives on the world. */
    int x = rank, y = -1;
    OK(MPI_Sendrecv(&x, 1, MPI_INT, (rank + 1) % size, 0, &y, 1, MPI_INT,
                    (rank + size - 1) % size, 0, dup, MPI_STATUS_IGNORE));
    CHECK(y == (rank + size - 1) % size, "sendrecv on dup got %d", y);

    OK(MPI_Comm_split(MPI_COMM_WORLD, 0, size - rank, &rev));
    OK(MPI_Comm_rank(rev, &r));
    CHECK(r == size - 1 - rank, "reversed split rank %d", r);
    OK(MPI_Comm_compare(MPI_COMM_WORLD, rev, &res));
    CHECK(res == (size > 1 ? MPI_SIMILAR : MPI_CONGRUENT), "world vs reversed %d", res);

    OK(MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? MPI_UNDEFINED : rank % 2, rank, &split));
    if (rank == 0) {
        CHECK(split == MPI_COMM_NULL, "MPI_UNDEFINED gives MPI_COMM_NULL");
    } else {
        OK(MPI_Comm_size(split, &n));
        int want = 0;
        for (int k = 1; k < size; k++)
            want += k % 2 == rank % 2;
        CHECK(n == want, "split size %d want %d", n, want);
        OK(MPI_Comm_compare(MPI_COMM_WORLD, split, &res));
        CHECK(res == MPI_UNEQUAL || size == 2, "world vs split %d", res);
        OK(MPI_Comm_free(&split));
        CHECK(split == MPI_COMM_NULL, "Comm_free clears the handle");
    }

    OK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared));
    OK(MPI_Comm_size(shared, &n));
    CHECK(n >= 1 && n <= size, "shared communicator of %d", n);
    OK(MPI_Comm_free(&shared));

    /* Comm_create from the even ranks. */
    MPI_Group world, evens;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    int ranges[1][3] = {{0, size - 1, 2}};
    OK(MPI_Group_range_incl(world, 1, ranges, &evens));
    OK(MPI_Comm_create(MPI_COMM_WORLD, evens, &sub));
    if (rank % 2 == 0) {
        OK(MPI_Comm_rank(sub, &r));
        CHECK(r == rank / 2, "rank %d in the evens communicator", r);
        int sum = 0;
        OK(MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, sub));
        int want = 0;
        for (int k = 0; k < size; k += 2)
            want += k;
        CHECK(sum == want, "allreduce over evens %d", sum);
        OK(MPI_Comm_free(&sub));
    } else {
        CHECK(sub == MPI_COMM_NULL, "odd ranks are not in the evens communicator");
    }
    OK(MPI_Comm_create(MPI_COMM_WORLD, MPI_GROUP_EMPTY, &empty));
    CHECK(empty == MPI_COMM_NULL, "the empty group gives MPI_COMM_NULL");
    OK(MPI_Group_free(&evens));
    OK(MPI_Group_free(&world));

    char name[MPI_MAX_OBJECT_NAME];
    int len;
    OK(MPI_Comm_get_name(MPI_COMM_WORLD, name, &len));
    CHECK(strcmp(name, "MPI_COMM_WORLD") == 0, "world's name '%s'", name);
    OK(MPI_Comm_set_name(dup, "my duplicate"));
    OK(MPI_Comm_get_name(dup, name, &len));
    CHECK(strcmp(name, "my duplicate") == 0 && len == 12, "dup's name '%s'", name);
    int inter = -1;
    OK(MPI_Comm_test_inter(dup, &inter));
    CHECK(inter == 0, "intracommunicator");
    OK(MPI_Comm_free(&dup));
    OK(MPI_Comm_free(&rev));
}

static void groups(void)
{
    MPI_Group world, g1, g2, u, in, diff, ex;
    int n, r, res;
    OK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    OK(MPI_Group_size(world, &n));
    OK(MPI_Group_rank(world, &r));
    CHECK(n == size && r == rank, "world group %d/%d", r, n);

    /* g1 = the first half reversed, g2 = ranks from the middle on. */
    int half = (size + 1) / 2;
    int *ranks = malloc(sizeof(int) * size);
    for (int i = 0; i < half; i++)
        ranks[i] = half - 1 - i;
    OK(MPI_Group_incl(world, half, ranks, &g1));
    OK(MPI_Group_size(g1, &n));
    CHECK(n == half, "incl size %d", n);
    OK(MPI_Group_rank(g1, &r));
    CHECK(r == (rank < half ? half - 1 - rank : MPI_UNDEFINED), "incl rank %d", r);
    int mid = size / 2;
    int exclude[1] = {0};
    OK(MPI_Group_range_excl(world, 0, NULL, &ex));
    OK(MPI_Group_compare(world, ex, &res));
    CHECK(res == MPI_IDENT, "excluding nothing gives the same group");
    OK(MPI_Group_free(&ex));
    int ranges[1][3] = {{mid, size - 1, 1}};
    OK(MPI_Group_range_incl(world, 1, ranges, &g2));

    OK(MPI_Group_union(g1, g2, &u));
    OK(MPI_Group_size(u, &n));
    CHECK(n == size, "union size %d", n);
    OK(MPI_Group_compare(u, world, &res));
    CHECK(res == (size > 2 ? MPI_SIMILAR : MPI_IDENT) || size == 1, "union vs world %d", res);
    OK(MPI_Group_intersection(g1, g2, &in));
    OK(MPI_Group_size(in, &n));
    CHECK(n == half - mid, "intersection size %d", n);
    OK(MPI_Group_difference(world, g2, &diff));
    OK(MPI_Group_size(diff, &n));
    CHECK(n == mid, "difference size %d", n);

    /* Translate every world rank into g1. */
    int *out = malloc(sizeof(int) * size);
    for (int i = 0; i < size; i++)
        ranks[i] = i;
    OK(MPI_Group_translate_ranks(world, size, ranks, g1, out));
    for (int i = 0; i < size; i++)
        CHECK(out[i] == (i < half ? half - 1 - i : MPI_UNDEFINED), "translate %d -> %d", i,
              out[i]);
    int pn = MPI_PROC_NULL, pout = 0;
    OK(MPI_Group_translate_ranks(world, 1, &pn, g1, &pout));
    CHECK(pout == MPI_PROC_NULL, "MPI_PROC_NULL translates to itself");

    if (size > 1) {
        OK(MPI_Group_excl(world, 1, exclude, &ex));
        OK(MPI_Group_size(ex, &n));
        OK(MPI_Group_rank(ex, &r));
        CHECK(n == size - 1 && r == (rank == 0 ? MPI_UNDEFINED : rank - 1), "excl %d/%d", r,
              n);
        OK(MPI_Group_free(&ex));
    }
    OK(MPI_Group_size(MPI_GROUP_EMPTY, &n));
    CHECK(n == 0, "the empty group has %d members", n);

    MPI_Group *all[] = {&g1, &g2, &u, &in, &diff, &world};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        OK(MPI_Group_free(all[i]));
        CHECK(*all[i] == MPI_GROUP_NULL, "Group_free clears the handle");
    }
    free(ranks);
    free(out);
}

static int copies, deletes;

static int copy_fn(MPI_Comm comm, int keyval, void *extra, void *in, void *out, int *flag)
{
    (void)comm;
    (void)keyval;
    CHECK(extra == &copies, "extra_state passed to the copy function");
    copies++;
    *(void **)out = (char *)in + 1;
    *flag = 1;
    return MPI_SUCCESS;
}

static int delete_fn(MPI_Comm comm, int keyval, void *value, void *extra)
{
    (void)comm;
    (void)keyval;
    (void)value;
    (void)extra;
    deletes++;
    return MPI_SUCCESS;
}

static void attributes(void)
{
    int *v, flag;
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag));
    CHECK(flag && *v >= 32767, "MPI_TAG_UB %d", flag ? *v : -1);
    /* The largest tag is usable. */
    int big = *v, got = -1;
    OK(MPI_Sendrecv(&rank, 1, MPI_INT, rank, big, &got, 1, MPI_INT, rank, big, MPI_COMM_WORLD,
                    MPI_STATUS_IGNORE));
    CHECK(got == rank, "send to self with tag MPI_TAG_UB");
    OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_WTIME_IS_GLOBAL, &v, &flag));
    CHECK(!flag || *v == 0 || *v == 1, "MPI_WTIME_IS_GLOBAL is a boolean");
    OK(MPI_Attr_get(MPI_COMM_WORLD, MPI_TAG_UB, &v, &flag));
    CHECK(flag && *v == big, "MPI_Attr_get of MPI_TAG_UB");

    int key, key2;
    char base[4];
    OK(MPI_Comm_create_keyval(copy_fn, delete_fn, &key, &copies));
    OK(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key2, NULL));
    MPI_Comm c;
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    void *val;
    OK(MPI_Comm_get_attr(c, key, &val, &flag));
    CHECK(!flag, "no attribute before it is set");
    OK(MPI_Comm_set_attr(c, key, base));
    OK(MPI_Comm_set_attr(c, key2, base + 2));
    OK(MPI_Comm_get_attr(c, key, &val, &flag));
    CHECK(flag && val == base, "attribute value %p, set %p", val, (void *)base);

    MPI_Comm d;
    OK(MPI_Comm_dup(c, &d));
    CHECK(copies == 1, "the copy function ran %d times", copies);
    OK(MPI_Comm_get_attr(d, key, &val, &flag));
    CHECK(flag && val == base + 1, "copied attribute %p", val);
    OK(MPI_Comm_get_attr(d, key2, &val, &flag));
    CHECK(!flag, "MPI_COMM_NULL_COPY_FN does not copy");

    /* Replacing an attribute deletes the old value. */
    OK(MPI_Comm_set_attr(c, key, base + 3));
    CHECK(deletes == 1, "replacing ran the delete function %d times", deletes);
    OK(MPI_Comm_delete_attr(c, key));
    CHECK(deletes == 2, "delete_attr ran it %d times", deletes);
    OK(MPI_Comm_get_attr(c, key, &val, &flag));
    CHECK(!flag, "deleted attribute still set");
    OK(MPI_Comm_delete_attr(c, key));
    CHECK(deletes == 2, "deleting an unset attribute ran the delete function");
    OK(MPI_Comm_free(&d));
    CHECK(deletes == 3, "freeing the dup ran the delete function %d times", deletes);

    /* A freed keyval stays usable by the attributes already set with it. */
    OK(MPI_Comm_set_attr(c, key, base));
    OK(MPI_Comm_free_keyval(&key));
    CHECK(key == MPI_KEYVAL_INVALID, "Comm_free_keyval clears the handle");
    OK(MPI_Comm_free(&c));
    CHECK(deletes == 4, "freeing the communicator deleted the last attribute (%d)", deletes);
    OK(MPI_Comm_free_keyval(&key2));

    /* MPI_COMM_DUP_FN shares the value. */
    int k3;
    OK(MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &k3, NULL));
    OK(MPI_Comm_dup(MPI_COMM_WORLD, &c));
    OK(MPI_Comm_set_attr(c, k3, base));
    OK(MPI_Comm_dup(c, &d));
    OK(MPI_Comm_get_attr(d, k3, &val, &flag));
    CHECK(flag && val == base, "MPI_COMM_DUP_FN shares the value");
    OK(MPI_Comm_free(&d));
    OK(MPI_Comm_free(&c));
    OK(MPI_Comm_free_keyval(&k3));
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    rank = check_rank;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    communicators();
    groups();
    attributes();
    test_pass("comm");
    return 0;
}
