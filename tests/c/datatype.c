/*
 * Datatypes: sizes of the predefined C types; contiguous, vector, hvector, indexed,
 * hindexed, indexed_block, hindexed_block, struct (with MPI_BOTTOM and MPI_Get_address),
 * resized and subarray types: size, extent, true extent, envelope, names, dup, commit,
 * free; sending one type and receiving another with the same type signature;
 * MPI_Get_elements on a partial message; MPI_Pack, MPI_Unpack and MPI_Pack_size. Needs
 * at least 2 ranks (ranks 0 and 1 exchange).
 */
#include "check.h"
#include <stddef.h>
#include <stdint.h>

static int rank;

static void check_type(MPI_Datatype t, int size, MPI_Aint lb, MPI_Aint extent, MPI_Aint tlb,
                       MPI_Aint textent, const char *what)
{
    int s;
    MPI_Aint l, e, tl, te;
    OK(MPI_Type_size(t, &s));
    OK(MPI_Type_get_extent(t, &l, &e));
    OK(MPI_Type_get_true_extent(t, &tl, &te));
    CHECK(s == size && l == lb && e == extent && tl == tlb && te == textent,
          "%s: size %d lb %ld extent %ld true lb %ld true extent %ld; expected %d %ld %ld %ld "
          "%ld",
          what, s, (long)l, (long)e, (long)tl, (long)te, size, (long)lb, (long)extent,
          (long)tlb, (long)textent);
    MPI_Count sx, lx, ex;
    OK(MPI_Type_size_x(t, &sx));
    OK(MPI_Type_get_extent_x(t, &lx, &ex));
    CHECK(sx == size && lx == lb && ex == extent, "%s: _x queries", what);
}

static void predefined(void)
{
    struct {
        MPI_Datatype t;
        int size;
    } known[] = {
        {MPI_CHAR, 1},           {MPI_SIGNED_CHAR, 1},    {MPI_UNSIGNED_CHAR, 1},
        {MPI_BYTE, 1},           {MPI_SHORT, 2},          {MPI_UNSIGNED_SHORT, 2},
        {MPI_INT, 4},            {MPI_UNSIGNED, 4},       {MPI_LONG, 8},
        {MPI_UNSIGNED_LONG, 8},  {MPI_LONG_LONG, 8},      {MPI_UNSIGNED_LONG_LONG, 8},
        {MPI_FLOAT, 4},          {MPI_DOUBLE, 8},         {MPI_LONG_DOUBLE, 16},
        {MPI_WCHAR, 4},          {MPI_INT8_T, 1},         {MPI_INT16_T, 2},
        {MPI_INT32_T, 4},        {MPI_INT64_T, 8},        {MPI_UINT8_T, 1},
        {MPI_UINT16_T, 2},       {MPI_UINT32_T, 4},       {MPI_UINT64_T, 8},
        {MPI_C_BOOL, 1},         {MPI_C_FLOAT_COMPLEX, 8}, {MPI_C_DOUBLE_COMPLEX, 16},
        {MPI_AINT, 8},           {MPI_OFFSET, 8},         {MPI_COUNT, 8},
        {MPI_PACKED, 1},         {MPI_2INT, 8},
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        int s;
        MPI_Aint lb, ext;
        OK(MPI_Type_size(known[i].t, &s));
        OK(MPI_Type_get_extent(known[i].t, &lb, &ext));
        CHECK(s == known[i].size && lb == 0 && ext == known[i].size,
              "predefined type %zu: size %d extent %ld, expected %d", i, s, (long)ext,
              known[i].size);
    }
    check_type(MPI_DOUBLE_INT, 12, 0, 16, 0, 12, "MPI_DOUBLE_INT");
    check_type(MPI_FLOAT_INT, 8, 0, 8, 0, 8, "MPI_FLOAT_INT");
    check_type(MPI_SHORT_INT, 6, 0, 8, 0, 8, "MPI_SHORT_INT");
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    OK(MPI_Type_get_name(MPI_INT, name, &len));
    CHECK(strcmp(name, "MPI_INT") == 0 && len == 7, "name of MPI_INT: '%s'", name);
    int ni, na, nd, comb;
    OK(MPI_Type_get_envelope(MPI_DOUBLE, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_NAMED, "predefined types are NAMED");
}

static void constructors(void)
{
    MPI_Datatype t;
    int ni, na, nd, comb;

    OK(MPI_Type_contiguous(3, MPI_INT, &t));
    check_type(t, 12, 0, 12, 0, 12, "contiguous(3, int)");
    OK(MPI_Type_get_envelope(t, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_CONTIGUOUS && ni == 1 && na == 0 && nd == 1,
          "contiguous envelope");
    OK(MPI_Type_free(&t));
    CHECK(t == MPI_DATATYPE_NULL, "Type_free clears the handle");

    OK(MPI_Type_vector(3, 2, 4, MPI_INT, &t));
    check_type(t, 24, 0, 40, 0, 40, "vector(3, 2, 4, int)");
    OK(MPI_Type_get_envelope(t, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_VECTOR && ni == 3, "vector envelope");
    OK(MPI_Type_free(&t));

    OK(MPI_Type_create_hvector(2, 1, 20, MPI_DOUBLE, &t));
    check_type(t, 16, 0, 28, 0, 28, "hvector(2, 1, 20 bytes, double)");
    OK(MPI_Type_free(&t));

    int bl[3] = {1, 2, 1}, di[3] = {5, 0, 9};
    OK(MPI_Type_indexed(3, bl, di, MPI_INT, &t));
    check_type(t, 16, 0, 40, 0, 40, "indexed");
    OK(MPI_Type_free(&t));

    MPI_Aint hd[2] = {-8, 16};
    int hbl[2] = {1, 1};
    OK(MPI_Type_create_hindexed(2, hbl, hd, MPI_INT, &t));
    check_type(t, 8, -8, 28, -8, 28, "hindexed with a negative displacement");
    OK(MPI_Type_free(&t));

    int bd[2] = {3, 1};
    OK(MPI_Type_create_indexed_block(2, 2, bd, MPI_SHORT, &t));
    check_type(t, 8, 2, 8, 2, 8, "indexed_block");
    OK(MPI_Type_free(&t));

    MPI_Aint hbd[2] = {0, 32};
    OK(MPI_Type_create_hindexed_block(2, 3, hbd, MPI_CHAR, &t));
    check_type(t, 6, 0, 35, 0, 35, "hindexed_block");
    OK(MPI_Type_free(&t));

    /* A struct type for a C struct: its extent is the struct's size. */
    struct rec {
        double d;
        char c;
    };
    int sbl[2] = {1, 1};
    MPI_Aint sd[2] = {offsetof(struct rec, d), offsetof(struct rec, c)};
    MPI_Datatype st[2] = {MPI_DOUBLE, MPI_CHAR};
    OK(MPI_Type_create_struct(2, sbl, sd, st, &t));
    check_type(t, 9, 0, sizeof(struct rec), 0, 9, "struct {double, char}");
    OK(MPI_Type_get_envelope(t, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_STRUCT && ni == 3 && na == 2 && nd == 2, "struct envelope");
    OK(MPI_Type_free(&t));

    MPI_Datatype r;
    OK(MPI_Type_create_resized(MPI_INT, -4, 16, &r));
    check_type(r, 4, -4, 16, 0, 4, "resized(int, -4, 16)");
    MPI_Datatype d;
    OK(MPI_Type_dup(r, &d));
    check_type(d, 4, -4, 16, 0, 4, "dup of resized");
    OK(MPI_Type_get_envelope(d, &ni, &na, &nd, &comb));
    CHECK(comb == MPI_COMBINER_DUP, "dup envelope");
    OK(MPI_Type_set_name(d, "my resized int"));
    char name[MPI_MAX_OBJECT_NAME];
    int len;
    OK(MPI_Type_get_name(d, name, &len));
    CHECK(strcmp(name, "my resized int") == 0, "type name '%s'", name);
    OK(MPI_Type_free(&d));
    OK(MPI_Type_free(&r));

    int sizes[2] = {4, 6}, subs[2] = {2, 3}, starts[2] = {1, 2};
    OK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &t));
    check_type(t, 24, 0, 96, 32, 36, "subarray C order");
    OK(MPI_Type_free(&t));
    OK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_FORTRAN, MPI_INT, &t));
    check_type(t, 24, 0, 96, 36, 40, "subarray Fortran order");
    OK(MPI_Type_free(&t));
}

/* Rank 0 sends typed data, rank 1 receives it in another layout of the same signature. */
static void exchange(void)
{
    MPI_Status st;
    int count;
    /* A 4x6 int matrix; the 2x3 block at (1, 2) travels as a subarray. */
    int m[4][6], flat[6];
    MPI_Datatype block;
    int sizes[2] = {4, 6}, subs[2] = {2, 3}, starts[2] = {1, 2};
    OK(MPI_Type_create_subarray(2, sizes, subs, starts, MPI_ORDER_C, MPI_INT, &block));
    OK(MPI_Type_commit(&block));
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 6; j++)
            m[i][j] = rank == 0 ? 10 * i + j : -1;

    /* A vector of pairs received as a struct array through MPI_BOTTOM. */
    MPI_Datatype vec;
    OK(MPI_Type_vector(3, 2, 5, MPI_INT, &vec));
    OK(MPI_Type_commit(&vec));
    int v[15];
    for (int i = 0; i < 15; i++)
        v[i] = rank == 0 ? i : -1;

    if (rank == 0) {
        OK(MPI_Send(m, 1, block, 1, 1, MPI_COMM_WORLD));
        OK(MPI_Send(v, 1, vec, 1, 2, MPI_COMM_WORLD));
        OK(MPI_Send(v, 1, vec, 1, 3, MPI_COMM_WORLD));
        int nine[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
        OK(MPI_Send(nine, 9, MPI_INT, 1, 4, MPI_COMM_WORLD));
        /* Nonblocking send of a non-contiguous type. */
        MPI_Request r;
        OK(MPI_Isend(m, 1, block, 1, 5, MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, MPI_STATUS_IGNORE));
    } else if (rank == 1) {
        OK(MPI_Recv(flat, 6, MPI_INT, 0, 1, MPI_COMM_WORLD, &st));
        for (int k = 0; k < 6; k++)
            CHECK(flat[k] == 10 * (1 + k / 3) + 2 + k % 3, "subarray element %d = %d", k,
                  flat[k]);
        OK(MPI_Get_count(&st, block, &count));
        CHECK(count == 1, "count of subarray %d", count);

        int six[6];
        OK(MPI_Recv(six, 6, MPI_INT, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        int want[6] = {0, 1, 5, 6, 10, 11};
        for (int k = 0; k < 6; k++)
            CHECK(six[k] == want[k], "vector element %d = %d", k, six[k]);

        /* The same data into three separate variables, by absolute address. */
        int a[2], b[2], c[2];
        MPI_Aint addr[3];
        OK(MPI_Get_address(a, &addr[0]));
        OK(MPI_Get_address(b, &addr[1]));
        OK(MPI_Get_address(c, &addr[2]));
        CHECK(MPI_Aint_diff(addr[1], addr[0]) == (char *)b - (char *)a, "Aint_diff");
        CHECK(MPI_Aint_add(addr[0], 4) == addr[0] + 4, "Aint_add");
        int bls[3] = {2, 2, 2};
        MPI_Datatype ts[3] = {MPI_INT, MPI_INT, MPI_INT}, abs;
        OK(MPI_Type_create_struct(3, bls, addr, ts, &abs));
        OK(MPI_Type_commit(&abs));
        OK(MPI_Recv(MPI_BOTTOM, 1, abs, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE));
        CHECK(a[0] == 0 && a[1] == 1 && b[0] == 5 && b[1] == 6 && c[0] == 10 && c[1] == 11,
              "MPI_BOTTOM receive");
        OK(MPI_Type_free(&abs));

        /* Nine ints into two vectors (extent 12 ints): one and a half elements arrive. */
        int w[24];
        for (int i = 0; i < 24; i++)
            w[i] = -1;
        OK(MPI_Recv(w, 2, vec, 0, 4, MPI_COMM_WORLD, &st));
        OK(MPI_Get_count(&st, vec, &count));
        CHECK(count == MPI_UNDEFINED, "partial vector count %d", count);
        OK(MPI_Get_elements(&st, vec, &count));
        CHECK(count == 9, "partial vector elements %d", count);
        CHECK(w[0] == 1 && w[5] == 3 && w[11] == 6 && w[12] == 7 && w[17] == 9 &&
                  w[2] == -1 && w[18] == -1,
              "partial vector placement");

        int back[4][6];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 6; j++)
                back[i][j] = -1;
        MPI_Request r;
        OK(MPI_Irecv(back, 1, block, 0, 5, MPI_COMM_WORLD, &r));
        OK(MPI_Wait(&r, &st));
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 6; j++) {
                int in = i >= 1 && i < 3 && j >= 2 && j < 5;
                CHECK(back[i][j] == (in ? 10 * i + j : -1), "subarray receive [%d][%d] = %d",
                      i, j, back[i][j]);
            }
    }
    OK(MPI_Type_free(&vec));
    OK(MPI_Type_free(&block));
}

static void packing(void)
{
    MPI_Datatype vec;
    OK(MPI_Type_vector(2, 1, 3, MPI_DOUBLE, &vec));
    OK(MPI_Type_commit(&vec));
    double d[4] = {1.5, -1, -1, 2.5};
    int n = 7;
    char buf[64];
    int pos = 0, need;
    OK(MPI_Pack_size(1, vec, MPI_COMM_WORLD, &need));
    CHECK(need >= 16, "pack size %d", need);
    OK(MPI_Pack(&n, 1, MPI_INT, buf, sizeof buf, &pos, MPI_COMM_WORLD));
    OK(MPI_Pack(d, 1, vec, buf, sizeof buf, &pos, MPI_COMM_WORLD));
    int packed = pos;
    if (rank == 0)
        OK(MPI_Send(buf, packed, MPI_PACKED, 1, 9, MPI_COMM_WORLD));
    else if (rank == 1) {
        char in[64];
        MPI_Status st;
        OK(MPI_Recv(in, sizeof in, MPI_PACKED, 0, 9, MPI_COMM_WORLD, &st));
        int got;
        OK(MPI_Get_count(&st, MPI_PACKED, &got));
        CHECK(got == packed, "packed bytes %d", got);
        int m = 0;
        double e[4] = {0, 0, 0, 0};
        pos = 0;
        OK(MPI_Unpack(in, got, &pos, &m, 1, MPI_INT, MPI_COMM_WORLD));
        OK(MPI_Unpack(in, got, &pos, e, 1, vec, MPI_COMM_WORLD));
        CHECK(m == 7 && e[0] == 1.5 && e[3] == 2.5 && e[1] == 0 && pos == packed,
              "unpacked %d %g %g", m, e[0], e[3]);
    }
    OK(MPI_Type_free(&vec));
}

int main(int argc, char **argv)
{
    int size;
    test_start(&argc, &argv);
    rank = check_rank;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size >= 2, "needs at least 2 ranks");
    predefined();
    constructors();
    exchange();
    packing();
    test_pass("datatype");
    return 0;
}
