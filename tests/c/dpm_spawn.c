/*
 * MPI_Comm_spawn through the C ABI: a parent job spawns 3 copies of this program (info keys
 * wdir and env), the children find the parent with MPI_Comm_get_parent, compute and send
 * their results back, and both sides run an inter-communicator allreduce and disconnect.
 *
 * Usage: dpm_spawn WDIR (the parent; the children get "child" as their argument). Kestrel
 * only: MPICH's Debian build cannot run dynamic processes.
 */
#include "check.h"

#include <unistd.h>

#define CHILDREN 3
#define TAG_RESULT 5

static int child_result(int rank) { return (rank + 1) * (rank + 1); }

static void child(void)
{
    MPI_Comm parent;
    int me, n, rsize, flag = 0;
    OK(MPI_Comm_get_parent(&parent));
    CHECK(parent != MPI_COMM_NULL, "a spawned child has no parent");
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &n));
    OK(MPI_Comm_remote_size(parent, &rsize));
    OK(MPI_Comm_test_inter(parent, &flag));
    CHECK(n == CHILDREN && flag == 1, "children: %d, inter %d", n, flag);
    /* The info keys reached the child. */
    const char *v = getenv("DPM_C_SPAWN");
    CHECK(v && strcmp(v, "from-the-parent") == 0, "env key: DPM_C_SPAWN=%s", v ? v : "(unset)");
    char cwd[4096], want[4096];
    CHECK(getcwd(cwd, sizeof cwd) != NULL, "getcwd");
    CHECK(realpath(getenv("DPM_C_WDIR"), want) != NULL, "realpath of DPM_C_WDIR");
    CHECK(strcmp(cwd, want) == 0, "wdir key: running in %s, not %s", cwd, want);

    int result = child_result(me);
    OK(MPI_Send(&result, 1, MPI_INT, me % rsize, TAG_RESULT, parent));
    int one = 1, parents = 0;
    OK(MPI_Allreduce(&one, &parents, 1, MPI_INT, MPI_SUM, parent));
    CHECK(parents == rsize, "allreduce over the parents: %d", parents);
    OK(MPI_Comm_disconnect(&parent));
    OK(MPI_Comm_get_parent(&parent));
    CHECK(parent == MPI_COMM_NULL, "MPI_Comm_get_parent after disconnect");
    printf("child rank %d: result sent ok\n", me);
    test_pass("dpm_spawn_child");
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    if (argc == 2 && strcmp(argv[1], "child") == 0) {
        child();
        return 0;
    }
    CHECK(argc == 2, "usage: dpm_spawn WDIR");
    MPI_Comm parent;
    OK(MPI_Comm_get_parent(&parent));
    CHECK(parent == MPI_COMM_NULL, "the parent job has a parent");
    int me, n;
    OK(MPI_Comm_rank(MPI_COMM_WORLD, &me));
    OK(MPI_Comm_size(MPI_COMM_WORLD, &n));

    MPI_Info info;
    OK(MPI_Info_create(&info));
    OK(MPI_Info_set(info, "wdir", argv[1]));
    char env[4200];
    snprintf(env, sizeof env, "DPM_C_SPAWN=from-the-parent\nDPM_C_WDIR=%s\n", argv[1]);
    OK(MPI_Info_set(info, "env", env));
    char *args[] = {"child", NULL};
    int codes[CHILDREN] = {-1, -1, -1};
    MPI_Comm children;
    /* The command and its arguments matter at the root only: rank 1 passes nonsense. */
    OK(MPI_Comm_spawn(me == 0 ? argv[0] : "no-such-program", me == 0 ? args : MPI_ARGV_NULL,
                      me == 0 ? CHILDREN : -5, me == 0 ? info : MPI_INFO_NULL, 0,
                      MPI_COMM_WORLD, &children, codes));
    OK(MPI_Info_free(&info));
    for (int i = 0; i < CHILDREN; i++)
        CHECK(codes[i] == MPI_SUCCESS, "errcode %d is %d", i, codes[i]);
    int rsize = 0;
    OK(MPI_Comm_remote_size(children, &rsize));
    CHECK(rsize == CHILDREN, "%d children", rsize);

    int got = 0;
    for (int c = me; c < CHILDREN; c += n) {
        int v = -1;
        MPI_Status st;
        OK(MPI_Recv(&v, 1, MPI_INT, MPI_ANY_SOURCE, TAG_RESULT, children, &st));
        CHECK(st.MPI_SOURCE % n == me && v == child_result(st.MPI_SOURCE),
              "result %d from child %d", v, st.MPI_SOURCE);
        got++;
    }
    int one = 1, kids = 0;
    OK(MPI_Allreduce(&one, &kids, 1, MPI_INT, MPI_SUM, children));
    CHECK(kids == CHILDREN, "allreduce over the children: %d", kids);
    OK(MPI_Comm_disconnect(&children));
    printf("parent rank %d: %d results ok\n", me, got);
    test_pass("dpm_spawn_parent");
    return 0;
}
