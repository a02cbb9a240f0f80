/*
 * Dynamic-process errors through the C ABI, under MPI_ERRORS_RETURN: malformed port names
 * are MPI_ERR_PORT (naming the port) from connect, accept, close and publish, never a crash;
 * a closed port is MPI_ERR_PORT; an unknown service is MPI_ERR_NAME; inter-communicator
 * calls on an intra-communicator are MPI_ERR_COMM. Kestrel only.
 */
#include "check.h"

/* The error string of `rc` mentions `what`. */
static void says(int rc, const char *what)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    CHECK(strstr(msg, what) != NULL, "error string '%s' does not mention '%s'", msg, what);
}

int main(int argc, char **argv)
{
    test_start(&argc, &argv);
    int me;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    OK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_Comm c = MPI_COMM_NULL;

    static const char *bad[] = {
        "not-a-port",
        "",
        "kestrel-port:v1:",
        "kestrel-port:v1:127.0.0.1:99999999:1",
        "kestrel-port:v9:127.0.0.1:4000:1",
        "kestrel-port:v1:127.0.0.1:4000:-1",
        "kestrel-port:v1:127.0.0.1:4000:1:extra",
        "kestrel-port:v1:300.1.2.3:4000:1",
    };
    for (unsigned i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        /* Only the root's port matters: the other ranks pass NULL. */
        const char *port = me == 0 ? bad[i] : NULL;
        FAILS(MPI_ERR_PORT, MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &c));
        CHECK(c == MPI_COMM_NULL, "a failed connect returned a communicator");
        FAILS(MPI_ERR_PORT, MPI_Comm_accept(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &c));
        FAILS(MPI_ERR_PORT, MPI_Close_port(bad[i]));
        FAILS(MPI_ERR_PORT, MPI_Publish_name("dpm-errors-svc", MPI_INFO_NULL, bad[i]));
    }
    int rc = MPI_Comm_connect(me == 0 ? "not-a-port" : NULL, MPI_INFO_NULL, 0, MPI_COMM_WORLD,
                              &c);
    if (me == 0)
        says(rc, "not-a-port");
    says(rc, "MPI_Comm_connect");

    /* A port too long for any buffer, at rank 0 only. */
    char longport[4096];
    memset(longport, 'x', sizeof longport - 1);
    longport[sizeof longport - 1] = 0;
    FAILS(MPI_ERR_PORT, MPI_Comm_connect(me == 0 ? longport : NULL, MPI_INFO_NULL, 0,
                                         MPI_COMM_WORLD, &c));

    /* A port that was open and is closed: refused (or unreachable), a port error. */
    char port[MPI_MAX_PORT_NAME] = "";
    if (me == 0) {
        OK(MPI_Open_port(MPI_INFO_NULL, port));
        OK(MPI_Close_port(port));
        FAILS(MPI_ERR_PORT, MPI_Close_port(port));
    }
    rc = MPI_Comm_connect(port, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &c);
    int class = -1;
    MPI_Error_class(rc, &class);
    CHECK(class == MPI_ERR_PORT, "connecting to a closed port: class %d", class);

    FAILS(MPI_ERR_NAME, MPI_Lookup_name("dpm-errors-never-published", MPI_INFO_NULL, port));
    FAILS(MPI_ERR_ROOT, MPI_Comm_connect(port, MPI_INFO_NULL, 7, MPI_COMM_WORLD, &c));
    FAILS(MPI_ERR_COMM, MPI_Intercomm_merge(MPI_COMM_WORLD, 0, &c));
    int size = -1;
    OK(MPI_Comm_set_errhandler(MPI_COMM_SELF, MPI_ERRORS_RETURN));
    FAILS(MPI_ERR_COMM, MPI_Comm_remote_size(MPI_COMM_SELF, &size));
    FAILS(MPI_ERR_COMM, MPI_Comm_disconnect(&(MPI_Comm){MPI_COMM_WORLD}));
    test_pass("dpm_errors");
    return 0;
}
