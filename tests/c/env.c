/*
 * Start-up and environment: MPI_Initialized/MPI_Finalized before and after, init_thread,
 * query_thread, is_thread_main, wtime/wtick, get_processor_name, get_version,
 * get_library_version, MPI_Pcontrol, MPI_Alloc_mem/MPI_Free_mem, info objects. Any
 * number of ranks.
 */
#include "check.h"
#include <unistd.h>

int main(int argc, char **argv)
{
    int flag = -1, provided = -1;
    OK(MPI_Initialized(&flag));
    CHECK(flag == 0, "initialized before MPI_Init_thread");
    OK(MPI_Finalized(&flag));
    CHECK(flag == 0, "finalized before MPI_Init_thread");
    int version, subversion;
    OK(MPI_Get_version(&version, &subversion));
    CHECK(version >= 3, "MPI version %d.%d", version, subversion);

    OK(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided));
    MPI_Comm_rank(MPI_COMM_WORLD, &check_rank);
    CHECK(provided >= MPI_THREAD_SINGLE && provided <= MPI_THREAD_MULTIPLE, "provided %d",
          provided);
    int q = -1;
    OK(MPI_Query_thread(&q));
    CHECK(q == provided, "query_thread %d, provided %d", q, provided);
    OK(MPI_Is_thread_main(&flag));
    CHECK(flag == 1, "the thread that initialized is the main thread");
    OK(MPI_Initialized(&flag));
    CHECK(flag == 1, "initialized after MPI_Init_thread");

    double t0 = MPI_Wtime(), tick = MPI_Wtick();
    CHECK(tick > 0 && tick < 1, "wtick %g", tick);
    usleep(20000);
    double t1 = MPI_Wtime();
    CHECK(t1 - t0 >= 0.015 && t1 - t0 < 5, "20 ms measured as %g s", t1 - t0);

    char name[MPI_MAX_PROCESSOR_NAME], host[256];
    int len = -1;
    OK(MPI_Get_processor_name(name, &len));
    CHECK(len > 0 && (int)strlen(name) == len, "processor name '%s' of length %d", name, len);
    gethostname(host, sizeof host);
    CHECK(strncmp(name, host, strlen(name)) == 0, "processor name '%s', host '%s'", name, host);

    char lib[MPI_MAX_LIBRARY_VERSION_STRING];
    OK(MPI_Get_library_version(lib, &len));
    CHECK(len > 0 && (int)strlen(lib) == len, "library version of length %d", len);

    OK(MPI_Pcontrol(1));

    double *mem = NULL;
    OK(MPI_Alloc_mem(1000 * sizeof(double), MPI_INFO_NULL, &mem));
    CHECK(mem != NULL, "Alloc_mem gave no memory");
    for (int i = 0; i < 1000; i++)
        mem[i] = i;
    OK(MPI_Free_mem(mem));

    MPI_Info info, copy;
    int nkeys, vlen;
    char value[MPI_MAX_INFO_VAL + 1], key[MPI_MAX_INFO_KEY + 1];
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "color", "blue"));
    OK(MPI_Info_set(info, "shape", "round"));
    OK(MPI_Info_set(info, "color", "green"));
    OK(MPI_Info_get_nkeys(info, &nkeys));
    CHECK(nkeys == 2, "%d keys", nkeys);
    OK(MPI_Info_get(info, "color", MPI_MAX_INFO_VAL, value, &flag));
    CHECK(flag && strcmp(value, "green") == 0, "color is '%s'", value);
    OK(MPI_Info_get_valuelen(info, "shape", &vlen, &flag));
    CHECK(flag && vlen == 5, "shape has %d bytes", vlen);
    OK(MPI_Info_get(info, "size", MPI_MAX_INFO_VAL, value, &flag));
    CHECK(!flag, "no size key");
    OK(MPI_Info_dup(info, &copy));
    OK(MPI_Info_delete(info, "color"));
    OK(MPI_Info_get_nkeys(info, &nkeys));
    CHECK(nkeys == 1, "%d keys after delete", nkeys);
    OK(MPI_Info_get_nthkey(copy, 1, key));
    CHECK(strcmp(key, "shape") == 0, "second key of the copy is '%s'", key);
    OK(MPI_Info_free(&info));
    OK(MPI_Info_free(&copy));
    CHECK(info == MPI_INFO_NULL, "Info_free clears the handle");

    MPI_Barrier(MPI_COMM_WORLD);
    printf("PASS env rank %d\n", check_rank);
    fflush(stdout);
    OK(MPI_Finalize());
    OK(MPI_Finalized(&flag));
    CHECK(flag == 1, "finalized after MPI_Finalize");
    return 0;
}
