/*
 * More datatypes: MPI_Type_get_envelope/MPI_Type_get_contents for every combiner (named,
 * dup, contiguous, vector, hvector, indexed, hindexed, indexed_block, hindexed_block,
 * struct, subarray, darray, resized, f90 integer/real/complex), nested types coming back
 * as new handles; MPI_Type_create_darray (block, cyclic, block-cyclic, none; C and Fortran
 * order; every rank of a process grid larger than the job, packed and compared with a
 * layout computed here); subarrays of 3 and 4 dimensions in both orders, packed and
 * compared with a loop nest; MPI_Type_create_(h)indexed_block packed; MPI_Type_match_size and
 * MPI_Type_create_f90_integer/real/complex (MPICH 4.0.2's answers); the names of
 * predefined types (MPI_Type_get_name) and of derived ones (set_name; not copied by dup);
 * MPI_Pack_external/Unpack_external/Pack_external_size with "external32" (big-endian,
 * exact bytes); type attributes (MPI_Type_create_keyval/set_attr/get_attr/delete_attr/
 * free_keyval with copy and delete functions through dup and free). Runs on any number of
 * ranks, each doing the same (1-6 tested).
 */
#include "check.h"

/* The envelope and contents of t. Expected derived inner types are matched by combiner
 * (the handles MPI returns are new) and freed; predefined ones must be the same handle. */
static void expect(MPI_Datatype t, int comb, int ni, const int *ints, int na,
                   const MPI_Aint *aints, int nd, const MPI_Datatype *types, const char *what)
{
    int gi, ga, gd, gc;
    OK(MPI_Type_get_envelope(t, &gi, &ga, &gd, &gc));
    CHECK(gc == comb && gi == ni && ga == na && gd == nd,
          "%s: envelope %d ints %d aints %d types combiner %d, expected %d %d %d %d", what, gi,
          ga, gd, gc, ni, na, nd, comb);
    int ci[64];
    MPI_Aint ca[16];
    MPI_Datatype ct[16];
    OK(MPI_Type_get_contents(t, ni, na, nd, ci, ca, ct));
    for (int i = 0; i < ni; i++)
        CHECK(ci[i] == ints[i], "%s: integer %d is %d, expected %d", what, i, ci[i], ints[i]);
    for (int i = 0; i < na; i++)
        CHECK(ca[i] == aints[i], "%s: address %d is %ld, expected %ld", what, i, (long)ca[i],
              (long)aints[i]);
    for (int i = 0; i < nd; i++) {
        int xi, xa, xd, xc, yc;
        OK(MPI_Type_get_envelope(types[i], &xi, &xa, &xd, &yc));
        OK(MPI_Type_get_envelope(ct[i], &xi, &xa, &xd, &xc));
        CHECK(xc == yc, "%s: type %d has combiner %d, expected %d", what, i, xc, yc);
        if (yc == MPI_COMBINER_NAMED)
            CHECK(ct[i] == types[i], "%s: predefined type %d is another handle", what, i);
        else
            OK(MPI_Type_free(&ct[i]));
    }
}

static void envelopes(void)
{
    int gi, ga, gd, gc;
    OK(MPI_Type_get_envelope(MPI_INT, &gi, &ga, &gd, &gc));
    CHECK(gc == MPI_COMBINER_NAMED && gi == 0 && ga == 0 && gd == 0, "MPI_INT's envelope");
    MPI_Datatype I = MPI_INT, D = MPI_DOUBLE, t, u, v;

    OK(MPI_Type_contiguous(3, MPI_INT, &t));
    expect(t, MPI_COMBINER_CONTIGUOUS, 1, (int[]){3}, 0, NULL, 1, &I, "contiguous");
    OK(MPI_Type_dup(t, &u));
    expect(u, MPI_COMBINER_DUP, 0, NULL, 0, NULL, 1, &t, "dup");
    OK(MPI_Type_free(&u));
    OK(MPI_Type_vector(4, 2, 5, t, &v)); /* nested: the contiguous type comes back */
    expect(v, MPI_COMBINER_VECTOR, 3, (int[]){4, 2, 5}, 0, NULL, 1, &t, "vector");
    OK(MPI_Type_free(&v));
    OK(MPI_Type_create_hvector(3, 1, 40, MPI_DOUBLE, &u));
    expect(u, MPI_COMBINER_HVECTOR, 2, (int[]){3, 1}, 1, (MPI_Aint[]){40}, 1, &D, "hvector");
    OK(MPI_Type_free(&u));
    OK(MPI_Type_indexed(3, (int[]){1, 2, 3}, (int[]){0, 5, 9}, MPI_INT, &u));
    expect(u, MPI_COMBINER_INDEXED, 7, (int[]){3, 1, 2, 3, 0, 5, 9}, 0, NULL, 1, &I, "indexed");
    OK(MPI_Type_free(&u));
    OK(MPI_Type_create_hindexed(2, (int[]){2, 1}, (MPI_Aint[]){8, 64}, MPI_INT, &u));
    expect(u, MPI_COMBINER_HINDEXED, 3, (int[]){2, 2, 1}, 2, (MPI_Aint[]){8, 64}, 1, &I,
           "hindexed");
    OK(MPI_Type_free(&u));
    OK(MPI_Type_create_indexed_block(3, 2, (int[]){1, 4, 10}, MPI_INT, &u));
    expect(u, MPI_COMBINER_INDEXED_BLOCK, 5, (int[]){3, 2, 1, 4, 10}, 0, NULL, 1, &I,
           "indexed_block");
    OK(MPI_Type_free(&u));
    OK(MPI_Type_create_hindexed_block(2, 3, (MPI_Aint[]){0, 100}, MPI_DOUBLE, &u));
    expect(u, MPI_COMBINER_HINDEXED_BLOCK, 2, (int[]){2, 3}, 2, (MPI_Aint[]){0, 100}, 1, &D,
           "hindexed_block");
    OK(MPI_Type_free(&u));
    MPI_Datatype st[3] = {MPI_INT, t, MPI_DOUBLE};
    OK(MPI_Type_create_struct(3, (int[]){1, 2, 1}, (MPI_Aint[]){0, 8, 40}, st, &u));
    expect(u, MPI_COMBINER_STRUCT, 4, (int[]){3, 1, 2, 1}, 3, (MPI_Aint[]){0, 8, 40}, 3, st,
           "struct");
    OK(MPI_Type_free(&u));
    OK(MPI_Type_create_subarray(2, (int[]){6, 8}, (int[]){2, 3}, (int[]){1, 4},
                                MPI_ORDER_FORTRAN, MPI_INT, &u));
    expect(u, MPI_COMBINER_SUBARRAY, 8, (int[]){2, 6, 8, 2, 3, 1, 4, MPI_ORDER_FORTRAN}, 0,
           NULL, 1, &I, "subarray");
    OK(MPI_Type_free(&u));
    OK(MPI_Type_create_darray(
        4, 3, 2, (int[]){6, 7}, (int[]){MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC},
        (int[]){MPI_DISTRIBUTE_DFLT_DARG, 2}, (int[]){2, 2}, MPI_ORDER_C, MPI_INT, &u));
    expect(u, MPI_COMBINER_DARRAY, 12,
           (int[]){4, 3, 2, 6, 7, MPI_DISTRIBUTE_BLOCK, MPI_DISTRIBUTE_CYCLIC,
                   MPI_DISTRIBUTE_DFLT_DARG, 2, 2, 2, MPI_ORDER_C},
           0, NULL, 1, &I, "darray");
    OK(MPI_Type_free(&u));
    OK(MPI_Type_create_resized(t, -4, 20, &u));
    expect(u, MPI_COMBINER_RESIZED, 0, NULL, 2, (MPI_Aint[]){-4, 20}, 1, &t, "resized");
    OK(MPI_Type_free(&u));
    OK(MPI_Type_free(&t));
}

/* Global indices of dimension d owned by process coordinate c, ascending. */
static int owned(int g, int p, int c, int distrib, int darg, int *out)
{
    int n = 0;
    for (int i = 0; i < g; i++) {
        int mine;
        if (distrib == MPI_DISTRIBUTE_NONE) {
            mine = 1;
        } else if (distrib == MPI_DISTRIBUTE_BLOCK) {
            int b = darg == MPI_DISTRIBUTE_DFLT_DARG ? (g + p - 1) / p : darg;
            mine = i / b == c;
        } else {
            int k = darg == MPI_DISTRIBUTE_DFLT_DARG ? 1 : darg;
            mine = (i / k) % p == c;
        }
        if (mine)
            out[n++] = i;
    }
    return n;
}

/* Packs the global array (value = offset) with the darray type of every rank of the
 * process grid and compares with the owned indices, in C or Fortran order. */
static void darray_case(int ndims, const int *g, const int *dist, const int *darg, const int *p,
                        int order)
{
    int nprocs = 1, total = 1;
    for (int d = 0; d < ndims; d++) {
        nprocs *= p[d];
        total *= g[d];
    }
    int *global = malloc(sizeof(int) * total), *packed = malloc(sizeof(int) * total);
    for (int i = 0; i < total; i++)
        global[i] = i;
    for (int r = 0; r < nprocs; r++) {
        int c[3], rest = r, own[3][32], n[3], count = 1;
        for (int d = ndims - 1; d >= 0; d--) { /* the process grid is row-major */
            c[d] = rest % p[d];
            rest /= p[d];
        }
        for (int d = 0; d < ndims; d++) {
            n[d] = owned(g[d], p[d], c[d], dist[d], darg[d], own[d]);
            count *= n[d];
        }
        MPI_Datatype t;
        OK(MPI_Type_create_darray(nprocs, r, ndims, g, dist, darg, p, order, MPI_INT, &t));
        OK(MPI_Type_commit(&t));
        int size;
        MPI_Aint lb, ext;
        OK(MPI_Type_size(t, &size));
        OK(MPI_Type_get_extent(t, &lb, &ext));
        CHECK(size == count * (int)sizeof(int) && lb == 0 &&
                  ext == total * (MPI_Aint)sizeof(int),
              "darray rank %d: size %d (want %d) lb %ld extent %ld", r, size,
              count * (int)sizeof(int), (long)lb, (long)ext);
        int pos = 0;
        OK(MPI_Pack(global, 1, t, packed, total * (int)sizeof(int), &pos, MPI_COMM_SELF));
        CHECK(pos == size, "packed %d bytes", pos);
        /* The local array in the same order: C's last index, Fortran's first, fastest. */
        int k = 0, idx[3] = {0, 0, 0};
        for (int e = 0; e < count; e++) {
            int rem = e, off = 0;
            for (int q = 0; q < ndims; q++) {
                int d = order == MPI_ORDER_C ? ndims - 1 - q : q;
                idx[d] = own[d][rem % n[d]];
                rem /= n[d];
            }
            for (int q = 0; q < ndims; q++) {
                int d = order == MPI_ORDER_C ? q : ndims - 1 - q;
                off = off * g[d] + idx[d];
            }
            CHECK(packed[k] == off,
                  "darray rank %d of %d (order %d): element %d is %d, expected %d", r, nprocs,
                  order, k, packed[k], off);
            k++;
        }
        OK(MPI_Type_free(&t));
    }
    free(global);
    free(packed);
}

static void darrays(void)
{
    const int B = MPI_DISTRIBUTE_BLOCK, C = MPI_DISTRIBUTE_CYCLIC, N = MPI_DISTRIBUTE_NONE,
              F = MPI_DISTRIBUTE_DFLT_DARG;
    darray_case(2, (int[]){6, 7}, (int[]){B, B}, (int[]){F, F}, (int[]){2, 2}, MPI_ORDER_C);
    darray_case(2, (int[]){6, 7}, (int[]){B, B}, (int[]){F, F}, (int[]){2, 2},
                MPI_ORDER_FORTRAN);
    darray_case(2, (int[]){6, 7}, (int[]){C, C}, (int[]){1, F}, (int[]){2, 3},
                MPI_ORDER_FORTRAN);
    darray_case(2, (int[]){10, 5}, (int[]){C, N}, (int[]){2, F}, (int[]){3, 1}, MPI_ORDER_C);
    darray_case(1, (int[]){9}, (int[]){B}, (int[]){5}, (int[]){2}, MPI_ORDER_C);
    darray_case(1, (int[]){11}, (int[]){C}, (int[]){3}, (int[]){2}, MPI_ORDER_FORTRAN);
    darray_case(3, (int[]){4, 3, 5}, (int[]){B, N, C}, (int[]){F, F, 2}, (int[]){2, 1, 2},
                MPI_ORDER_FORTRAN);
    darray_case(3, (int[]){5, 4, 6}, (int[]){C, B, C}, (int[]){2, F, 1}, (int[]){2, 2, 3},
                MPI_ORDER_C);
}

static void blocks(void)
{
    int a[40], out[20], pos = 0;
    for (int i = 0; i < 40; i++)
        a[i] = 100 + i;
    MPI_Datatype t, h;
    OK(MPI_Type_create_indexed_block(3, 2, (int[]){7, 0, 12}, MPI_INT, &t));
    OK(MPI_Type_commit(&t));
    OK(MPI_Pack(a, 1, t, out, sizeof out, &pos, MPI_COMM_SELF));
    int want1[] = {107, 108, 100, 101, 112, 113};
    CHECK(pos == 24, "indexed_block packs %d bytes", pos);
    for (int i = 0; i < 6; i++)
        CHECK(out[i] == want1[i], "indexed_block element %d is %d, expected %d", i, out[i],
              want1[i]);
    OK(MPI_Type_create_hindexed_block(2, 3, (MPI_Aint[]){40, 4}, MPI_INT, &h));
    OK(MPI_Type_commit(&h));
    pos = 0;
    OK(MPI_Pack(a, 2, h, out, sizeof out, &pos, MPI_COMM_SELF)); /* extent 52 - 4 = 48 bytes */
    int want2[] = {110, 111, 112, 101, 102, 103, 122, 123, 124, 113, 114, 115};
    MPI_Aint lb, ext;
    OK(MPI_Type_get_extent(h, &lb, &ext));
    CHECK(lb == 4 && ext == 48 && pos == 48, "hindexed_block lb %ld extent %ld packed %d",
          (long)lb, (long)ext, pos);
    for (int i = 0; i < 12; i++)
        CHECK(out[i] == want2[i], "hindexed_block element %d is %d, expected %d", i, out[i],
              want2[i]);
    OK(MPI_Type_free(&t));
    OK(MPI_Type_free(&h));
}

static void names_and_sizes(void)
{
    const struct {
        MPI_Datatype t;
        const char *name;
    } names[] = {
        {MPI_INT, "MPI_INT"},
        {MPI_DOUBLE, "MPI_DOUBLE"},
        {MPI_FLOAT_INT, "MPI_FLOAT_INT"},
        {MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG"},
        {MPI_LONG_LONG, "MPI_LONG_LONG_INT"}, /* one handle with MPI_LONG_LONG_INT in MPICH */
        {MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX"},
        {MPI_C_FLOAT_COMPLEX, "MPI_C_COMPLEX"}, /* likewise */
        {MPI_INT64_T, "MPI_INT64_T"},
        {MPI_AINT, "MPI_AINT"},
        {MPI_COUNT, "MPI_COUNT"},
        {MPI_OFFSET, "MPI_OFFSET"},
        {MPI_BYTE, "MPI_BYTE"},
        {MPI_PACKED, "MPI_PACKED"},
        {MPI_CHAR, "MPI_CHAR"},
        {MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR"},
        {MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR"},
        {MPI_LONG_DOUBLE, "MPI_LONG_DOUBLE"},
        {MPI_WCHAR, "MPI_WCHAR"},
        {MPI_C_BOOL, "MPI_C_BOOL"},
        {MPI_2INT, "MPI_2INT"},
        {MPI_UINT8_T, "MPI_UINT8_T"},
        {MPI_SHORT_INT, "MPI_SHORT_INT"},
        {MPI_LONG_DOUBLE_INT, "MPI_LONG_DOUBLE_INT"},
        {MPI_INTEGER, "MPI_INTEGER"},
        {MPI_REAL8, "MPI_REAL8"},
        {MPI_DOUBLE_PRECISION, "MPI_DOUBLE_PRECISION"},
        {MPI_CXX_BOOL, "MPI_CXX_BOOL"},
        {MPI_UNSIGNED, "MPI_UNSIGNED"},
    };
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        OK(MPI_Type_get_name(names[i].t, name, &len));
        CHECK(strcmp(name, names[i].name) == 0 && len == (int)strlen(names[i].name),
              "type name '%s' (%d), expected '%s'", name, len, names[i].name);
    }
    MPI_Datatype t, d;
    OK(MPI_Type_contiguous(2, MPI_INT, &t));
    OK(MPI_Type_get_name(t, name, &len));
    CHECK(len == 0 && name[0] == 0, "a new type's name is '%s'", name);
    OK(MPI_Type_set_name(t, "my pair"));
    OK(MPI_Type_get_name(t, name, &len));
    CHECK(len == 7 && strcmp(name, "my pair") == 0, "set name: '%s'", name);
    OK(MPI_Type_dup(t, &d));
    OK(MPI_Type_get_name(d, name, &len));
    CHECK(len == 0, "a dup does not copy the name: '%s'", name);
    OK(MPI_Type_free(&d));
    OK(MPI_Type_free(&t));

    /* Type_match_size: MPICH 4.0.2 answers with the sized Fortran types. */
    const struct {
        int cls, size;
        MPI_Datatype want;
    } match[] = {
        {MPI_TYPECLASS_INTEGER, 1, MPI_INTEGER1}, {MPI_TYPECLASS_INTEGER, 2, MPI_INTEGER2},
        {MPI_TYPECLASS_INTEGER, 4, MPI_INTEGER4}, {MPI_TYPECLASS_INTEGER, 8, MPI_INTEGER8},
        {MPI_TYPECLASS_REAL, 4, MPI_REAL4},       {MPI_TYPECLASS_REAL, 8, MPI_REAL8},
        {MPI_TYPECLASS_COMPLEX, 8, MPI_COMPLEX8}, {MPI_TYPECLASS_COMPLEX, 16, MPI_COMPLEX16},
    };
    for (size_t i = 0; i < sizeof match / sizeof match[0]; i++) {
        OK(MPI_Type_match_size(match[i].cls, match[i].size, &t));
        int sz;
        OK(MPI_Type_size(t, &sz));
        CHECK(t == match[i].want && sz == match[i].size,
              "match_size(%d, %d) gave a type of %d bytes", match[i].cls, match[i].size, sz);
    }
    FAILS(MPI_ERR_ARG, MPI_Type_match_size(MPI_TYPECLASS_INTEGER, 16, &t));
    FAILS(MPI_ERR_ARG, MPI_Type_match_size(MPI_TYPECLASS_REAL, 2, &t));

    /* F90 types: their size for a range/precision, and their envelope. */
    const struct {
        int which, p, r, size;
    } f90[] = {
        {0, 0, 2, 1},
        {0, 0, 4, 2},
        {0, 0, 9, 4},
        {0, 0, 10, 8},
        {0, 0, 18, 8},
        {1, 6, 30, 4},
        {1, 15, 300, 8},
        {1, 3, MPI_UNDEFINED, 4},
        {1, MPI_UNDEFINED, 100, 8},
        {2, 6, 30, 8},
        {2, 15, 300, 16},
    };
    for (size_t i = 0; i < sizeof f90 / sizeof f90[0]; i++) {
        int sz, comb, ni, na, nd, c[2];
        if (f90[i].which == 0)
            OK(MPI_Type_create_f90_integer(f90[i].r, &t));
        else if (f90[i].which == 1)
            OK(MPI_Type_create_f90_real(f90[i].p, f90[i].r, &t));
        else
            OK(MPI_Type_create_f90_complex(f90[i].p, f90[i].r, &t));
        OK(MPI_Type_size(t, &sz));
        OK(MPI_Type_get_envelope(t, &ni, &na, &nd, &comb));
        int wc = f90[i].which == 0   ? MPI_COMBINER_F90_INTEGER
                 : f90[i].which == 1 ? MPI_COMBINER_F90_REAL
                                     : MPI_COMBINER_F90_COMPLEX;
        CHECK(sz == f90[i].size && comb == wc && ni == (f90[i].which ? 2 : 1) && na == 0 &&
                  nd == 0,
              "f90 type %zu: size %d combiner %d (%d %d %d)", i, sz, comb, ni, na, nd);
        OK(MPI_Type_get_contents(t, ni, 0, 0, c, NULL, NULL));
        CHECK(f90[i].which ? c[0] == f90[i].p && c[1] == f90[i].r : c[0] == f90[i].r,
              "f90 type %zu contents %d", i, c[0]);
    }
}

static void external32(void)
{
    const struct {
        MPI_Datatype t;
        MPI_Aint size;
    } sizes[] = {
        {MPI_INT, 4},          {MPI_LONG, 4},   {MPI_UNSIGNED_LONG, 4},
        {MPI_LONG_LONG, 8},    {MPI_SHORT, 2},  {MPI_CHAR, 1},
        {MPI_C_BOOL, 1},       {MPI_WCHAR, 2},  {MPI_DOUBLE, 8},
        {MPI_LONG_DOUBLE, 16}, {MPI_AINT, 8},   {MPI_OFFSET, 8},
        {MPI_COUNT, 8},        {MPI_FLOAT, 4},  {MPI_C_DOUBLE_COMPLEX, 16},
        {MPI_BYTE, 1},         {MPI_INT8_T, 1}, {MPI_UINT64_T, 8},
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        MPI_Aint s = -1;
        OK(MPI_Pack_external_size("external32", 3, sizes[i].t, &s));
        CHECK(s == 3 * sizes[i].size, "external32 size of type %zu: %ld, expected %ld", i,
              (long)s, (long)(3 * sizes[i].size));
    }
    int i4[2] = {0x01020304, -2};
    long lg = -3;
    short sh = 0x0a0b;
    double db = 1.5;
    float fl = -2.0f;
    long long ll = 0x0102030405060708LL;
    unsigned char buf[64];
    MPI_Aint pos = 0;
    OK(MPI_Pack_external("external32", i4, 2, MPI_INT, buf, sizeof buf, &pos));
    OK(MPI_Pack_external("external32", &lg, 1, MPI_LONG, buf, sizeof buf, &pos));
    OK(MPI_Pack_external("external32", &sh, 1, MPI_SHORT, buf, sizeof buf, &pos));
    OK(MPI_Pack_external("external32", &db, 1, MPI_DOUBLE, buf, sizeof buf, &pos));
    OK(MPI_Pack_external("external32", &fl, 1, MPI_FLOAT, buf, sizeof buf, &pos));
    OK(MPI_Pack_external("external32", &ll, 1, MPI_LONG_LONG, buf, sizeof buf, &pos));
    const unsigned char want[] = {0x01, 0x02, 0x03, 0x04, 0xff, 0xff, 0xff, 0xfe, /* ints */
                                  0xff, 0xff, 0xff, 0xfd,                         /* long */
                                  0x0a, 0x0b,                                     /* short */
                                  0x3f, 0xf8, 0,    0,    0,    0,    0,    0,    /* 1.5 */
                                  0xc0, 0x00, 0x00, 0x00,                         /* -2.0f */
                                  0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08};
    CHECK(pos == (MPI_Aint)sizeof want, "external32 packed %ld bytes, expected %zu", (long)pos,
          sizeof want);
    for (size_t i = 0; i < sizeof want; i++)
        CHECK(buf[i] == want[i], "external32 byte %zu is %02x, expected %02x", i, buf[i],
              want[i]);
    int j4[2];
    long lg2;
    short sh2;
    double db2;
    float fl2;
    long long ll2;
    pos = 0;
    OK(MPI_Unpack_external("external32", buf, sizeof want, &pos, j4, 2, MPI_INT));
    OK(MPI_Unpack_external("external32", buf, sizeof want, &pos, &lg2, 1, MPI_LONG));
    OK(MPI_Unpack_external("external32", buf, sizeof want, &pos, &sh2, 1, MPI_SHORT));
    OK(MPI_Unpack_external("external32", buf, sizeof want, &pos, &db2, 1, MPI_DOUBLE));
    OK(MPI_Unpack_external("external32", buf, sizeof want, &pos, &fl2, 1, MPI_FLOAT));
    OK(MPI_Unpack_external("external32", buf, sizeof want, &pos, &ll2, 1, MPI_LONG_LONG));
    CHECK(j4[0] == i4[0] && j4[1] == -2 && lg2 == -3 && sh2 == sh && db2 == 1.5 &&
              fl2 == -2.0f && ll2 == ll && pos == (MPI_Aint)sizeof want,
          "external32 round trip");
    /* A strided type: only its elements, big-endian. */
    int a[6] = {1, 2, 3, 4, 5, 6}, back[6] = {0, 0, 0, 0, 0, 0};
    MPI_Datatype v;
    OK(MPI_Type_vector(3, 1, 2, MPI_INT, &v));
    OK(MPI_Type_commit(&v));
    MPI_Aint vs;
    OK(MPI_Pack_external_size("external32", 1, v, &vs));
    pos = 0;
    OK(MPI_Pack_external("external32", a, 1, v, buf, sizeof buf, &pos));
    CHECK(vs == 12 && pos == 12 && buf[3] == 1 && buf[7] == 3 && buf[11] == 5 && buf[0] == 0,
          "external32 vector: size %ld packed %ld", (long)vs, (long)pos);
    pos = 0;
    OK(MPI_Unpack_external("external32", buf, 12, &pos, back, 1, v));
    CHECK(back[0] == 1 && back[1] == 0 && back[2] == 3 && back[4] == 5 && back[5] == 0,
          "external32 vector unpacked");
    OK(MPI_Type_free(&v));
}

static int deletes, copies;
static int t_copy(MPI_Datatype t, int key, void *extra, void *in, void *out, int *flag)
{
    (void)t, (void)key, (void)extra;
    copies++;
    *(long *)out = (long)in + 1;
    *flag = 1;
    return MPI_SUCCESS;
}
static int t_delete(MPI_Datatype t, int key, void *val, void *extra)
{
    (void)t, (void)key, (void)extra;
    deletes += (int)(long)val;
    return MPI_SUCCESS;
}

static void attributes(void)
{
    int kv, nocopy, flag = -1;
    void *v = NULL;
    OK(MPI_Type_create_keyval(t_copy, t_delete, &kv, NULL));
    OK(MPI_Type_create_keyval(MPI_TYPE_NULL_COPY_FN, t_delete, &nocopy, NULL));
    MPI_Datatype t, d;
    OK(MPI_Type_contiguous(3, MPI_INT, &t));
    OK(MPI_Type_get_attr(t, kv, &v, &flag));
    CHECK(!flag, "no attribute yet");
    OK(MPI_Type_set_attr(t, kv, (void *)10L));
    OK(MPI_Type_set_attr(t, nocopy, (void *)1000L));
    OK(MPI_Type_get_attr(t, kv, &v, &flag));
    CHECK(flag && (long)v == 10, "attribute %d %ld", flag, (long)v);
    copies = deletes = 0;
    OK(MPI_Type_dup(t, &d));
    OK(MPI_Type_get_attr(d, kv, &v, &flag));
    CHECK(copies == 1 && flag && (long)v == 11, "dup: %d copies, attribute %d %ld", copies,
          flag, (long)v);
    OK(MPI_Type_get_attr(d, nocopy, &v, &flag));
    CHECK(!flag, "MPI_TYPE_NULL_COPY_FN does not copy");
    OK(MPI_Type_set_attr(t, kv, (void *)20L)); /* replacing deletes the old value */
    CHECK(deletes == 10, "replacing an attribute deleted %d", deletes);
    OK(MPI_Type_delete_attr(t, kv));
    OK(MPI_Type_get_attr(t, kv, &v, &flag));
    CHECK(!flag && deletes == 30, "delete_attr: flag %d deleted %d", flag, deletes);
    OK(MPI_Type_free(&d)); /* deletes the copy, 11 */
    CHECK(deletes == 41, "freeing the dup deleted %d", deletes);
    OK(MPI_Type_free_keyval(&kv));
    CHECK(kv == MPI_KEYVAL_INVALID, "freed keyval");
    OK(MPI_Type_free(&t)); /* deletes the nocopy attribute, 1000 */
    CHECK(deletes == 1041, "freeing the type deleted %d", deletes);
    OK(MPI_Type_free_keyval(&nocopy));
}

/* Packs the global array (value = offset) with a subarray of `nd` (3 or 4) dimensions and
 * compares with the elements a loop nest picks, in C or Fortran order. */
static void subarray_case(int nd, const int *g, const int *sub, const int *st, int order)
{
    int total = 1, count = 1;
    for (int d = 0; d < nd; d++) {
        total *= g[d];
        count *= sub[d];
    }
    int *global = malloc(total * sizeof(int)), *packed = malloc((count + 1) * sizeof(int));
    CHECK(global && packed, "malloc");
    for (int i = 0; i < total; i++)
        global[i] = i;
    MPI_Datatype t;
    OK(MPI_Type_create_subarray(nd, g, sub, st, order, MPI_INT, &t));
    OK(MPI_Type_commit(&t));
    int size;
    MPI_Aint lb, extent;
    OK(MPI_Type_size(t, &size));
    OK(MPI_Type_get_extent(t, &lb, &extent));
    CHECK(size == count * (int)sizeof(int) && lb == 0 && extent == total * (MPI_Aint)sizeof(int),
          "subarray %dd order %d: size %d lb %ld extent %ld", nd, order, size, (long)lb,
          (long)extent);
    int pos = 0;
    OK(MPI_Pack(global, 1, t, packed, (count + 1) * sizeof(int), &pos, MPI_COMM_SELF));
    CHECK(pos == count * (int)sizeof(int), "packed %d bytes", pos);
    /* idx[d] runs over sub[d]; the fastest-varying dimension is the last in C order, the
     * first in Fortran order. */
    int idx[4] = {0, 0, 0, 0};
    for (int k = 0; k < count; k++) {
        int off = 0;
        if (order == MPI_ORDER_C)
            for (int d = 0; d < nd; d++)
                off = off * g[d] + st[d] + idx[d];
        else
            for (int d = nd - 1; d >= 0; d--)
                off = off * g[d] + st[d] + idx[d];
        CHECK(packed[k] == off, "subarray %dd order %d element %d: %d, expected %d", nd, order,
              k, packed[k], off);
        if (order == MPI_ORDER_C) {
            for (int d = nd - 1; d >= 0 && ++idx[d] == sub[d]; d--)
                idx[d] = 0;
        } else {
            for (int d = 0; d < nd && ++idx[d] == sub[d]; d++)
                idx[d] = 0;
        }
    }
    OK(MPI_Type_free(&t));
    free(global);
    free(packed);
}

/* Subarrays of 3 and 4 dimensions, C and Fortran order, packed. */
static void subarrays(void)
{
    for (int order = 0; order < 2; order++) {
        int o = order ? MPI_ORDER_FORTRAN : MPI_ORDER_C;
        subarray_case(3, (int[]){5, 6, 7}, (int[]){2, 3, 4}, (int[]){1, 2, 3}, o);
        subarray_case(3, (int[]){4, 4, 4}, (int[]){4, 1, 2}, (int[]){0, 3, 2}, o);
        subarray_case(4, (int[]){3, 4, 5, 6}, (int[]){2, 2, 3, 1}, (int[]){1, 0, 2, 5}, o);
    }
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    envelopes();
    darrays();
    subarrays();
    blocks();
    names_and_sizes();
    external32();
    attributes();
    test_pass("dtype_more");
    return 0;
}
