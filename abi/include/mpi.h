/*
 * mpi.h for Kestrel's libmpich.so.12.
 *
 * Programs compiled against this header, and programs compiled against MPICH's own mpi.h
 * (Intel MPI and MVAPICH use the same binary interface), run on Kestrel's library: every
 * handle is a C int laid out the way MPICH lays it out, MPI_Status is five ints, and the
 * sentinel values below are MPICH's. abi/tests/abi_values (run by tests/tests/abi.rs)
 * checks each value against the installed MPICH header.
 *
 * Handle layout (32-bit int): bits 31-30 the kind (0 null, 1 predefined, 2 direct,
 * 3 indirect), bits 29-26 the object type, bits 25-0 an index. Predefined datatypes carry
 * their size in bytes in bits 15-8.
 *
 * Every function exists twice, as MPI_name and PMPI_name, so that profiling tools can
 * define MPI_name themselves and call through to PMPI_name.
 *
 * Functions of the MPI standard that Kestrel does not implement are not declared here; a
 * binary built elsewhere that calls one of them gets MPI_ERR_UNSUPPORTED_OPERATION through
 * the communicator's error handler (by default: the job stops, naming the function).
 */
#ifndef KESTREL_MPI_H
#define KESTREL_MPI_H

#include <stddef.h>
#include <stdint.h>

#if defined(__cplusplus)
extern "C" {
#endif

#define KESTREL_MPI 1
#define KESTREL_MPI_ABI "libmpich.so.12"

/* The MPI standard version this library implements, as MPICH 4.0 (whose ABI it has) does:
 * MPI 4.0 but one-sided communication, MPI-IO and the MPI_T events, which are declared
 * unavailable at the end of this header. */
#define MPI_VERSION 4
#define MPI_SUBVERSION 0

/* ---- Integer types ------------------------------------------------------------------ */

typedef long MPI_Aint;
typedef long MPI_Count;
typedef long MPI_Offset;
typedef int MPI_Fint;

/* ---- Handle types: all plain ints ---------------------------------------------------- */

typedef int MPI_Comm;
typedef int MPI_Group;
typedef int MPI_Datatype;
typedef int MPI_Op;
typedef int MPI_Request;
typedef int MPI_Message;
typedef int MPI_Errhandler;
typedef int MPI_Info;
typedef int MPI_Win;
typedef int MPI_Session;
typedef struct ADIOI_FileD *MPI_File;

/* ---- Status: five ints; the byte count is 63 bits over the first two --------------- */

typedef struct MPI_Status {
    int count_lo;
    int count_hi_and_cancelled; /* bit 0: cancelled; bits 31-1: count bits 62-32 */
    int MPI_SOURCE;
    int MPI_TAG;
    int MPI_ERROR;
} MPI_Status;

#define MPI_STATUS_IGNORE ((MPI_Status *)1)
#define MPI_STATUSES_IGNORE ((MPI_Status *)1)
#define MPI_ERRCODES_IGNORE ((int *)0)
#define MPI_F_STATUS_SIZE 5
#define MPI_F_SOURCE 2
#define MPI_F_TAG 3
#define MPI_F_ERROR 4
extern MPI_Fint *MPI_F_STATUS_IGNORE;
extern MPI_Fint *MPI_F_STATUSES_IGNORE;

/* Sentinel weight arrays of the distributed graph calls. */
extern int *const MPI_UNWEIGHTED;
extern int *const MPI_WEIGHTS_EMPTY;

/* ---- Null and predefined handles ------------------------------------------------------ */

#define MPI_COMM_NULL ((MPI_Comm)0x04000000)
#define MPI_COMM_WORLD ((MPI_Comm)0x44000000)
#define MPI_COMM_SELF ((MPI_Comm)0x44000001)

#define MPI_GROUP_NULL ((MPI_Group)0x08000000)
#define MPI_GROUP_EMPTY ((MPI_Group)0x48000000)

#define MPI_REQUEST_NULL ((MPI_Request)0x2c000000)
#define MPI_MESSAGE_NULL ((MPI_Message)0x2c000000)
#define MPI_MESSAGE_NO_PROC ((MPI_Message)0x6c000000)

#define MPI_OP_NULL ((MPI_Op)0x18000000)
#define MPI_ERRHANDLER_NULL ((MPI_Errhandler)0x14000000)
#define MPI_INFO_NULL ((MPI_Info)0x1c000000)
#define MPI_INFO_ENV ((MPI_Info)0x5c000001)
#define MPI_WIN_NULL ((MPI_Win)0x20000000)
#define MPI_SESSION_NULL ((MPI_Session)0x38000000)
#define MPI_MAX_PSET_NAME_LEN 256
#define MPI_MAX_STRINGTAG_LEN 256
#define MPI_FILE_NULL ((MPI_File)0)

/* ---- Datatypes: 0x4c00SSII = predefined, size SS bytes, index II ---------------------- */

#define MPI_DATATYPE_NULL ((MPI_Datatype)0x0c000000)

#define MPI_CHAR ((MPI_Datatype)0x4c000101)
#define MPI_SIGNED_CHAR ((MPI_Datatype)0x4c000118)
#define MPI_UNSIGNED_CHAR ((MPI_Datatype)0x4c000102)
#define MPI_BYTE ((MPI_Datatype)0x4c00010d)
#define MPI_WCHAR ((MPI_Datatype)0x4c00040e)
#define MPI_SHORT ((MPI_Datatype)0x4c000203)
#define MPI_UNSIGNED_SHORT ((MPI_Datatype)0x4c000204)
#define MPI_INT ((MPI_Datatype)0x4c000405)
#define MPI_UNSIGNED ((MPI_Datatype)0x4c000406)
#define MPI_LONG ((MPI_Datatype)0x4c000807)
#define MPI_UNSIGNED_LONG ((MPI_Datatype)0x4c000808)
#define MPI_LONG_LONG_INT ((MPI_Datatype)0x4c000809)
#define MPI_LONG_LONG MPI_LONG_LONG_INT
#define MPI_UNSIGNED_LONG_LONG ((MPI_Datatype)0x4c000819)
#define MPI_FLOAT ((MPI_Datatype)0x4c00040a)
#define MPI_DOUBLE ((MPI_Datatype)0x4c00080b)
#define MPI_LONG_DOUBLE ((MPI_Datatype)0x4c00100c)
#define MPI_PACKED ((MPI_Datatype)0x4c00010f)

#define MPI_INT8_T ((MPI_Datatype)0x4c000137)
#define MPI_INT16_T ((MPI_Datatype)0x4c000238)
#define MPI_INT32_T ((MPI_Datatype)0x4c000439)
#define MPI_INT64_T ((MPI_Datatype)0x4c00083a)
#define MPI_UINT8_T ((MPI_Datatype)0x4c00013b)
#define MPI_UINT16_T ((MPI_Datatype)0x4c00023c)
#define MPI_UINT32_T ((MPI_Datatype)0x4c00043d)
#define MPI_UINT64_T ((MPI_Datatype)0x4c00083e)

#define MPI_C_BOOL ((MPI_Datatype)0x4c00013f)
#define MPI_C_FLOAT_COMPLEX ((MPI_Datatype)0x4c000840)
#define MPI_C_COMPLEX MPI_C_FLOAT_COMPLEX
#define MPI_C_DOUBLE_COMPLEX ((MPI_Datatype)0x4c001041)
#define MPI_C_LONG_DOUBLE_COMPLEX ((MPI_Datatype)0x4c002042)

#define MPI_AINT ((MPI_Datatype)0x4c000843)
#define MPI_OFFSET ((MPI_Datatype)0x4c000844)
#define MPI_COUNT ((MPI_Datatype)0x4c000845)

/* Value/index pairs for MPI_MINLOC and MPI_MAXLOC: struct { value; int index; }. */
#define MPI_FLOAT_INT ((MPI_Datatype)0x8c000000)
#define MPI_DOUBLE_INT ((MPI_Datatype)0x8c000001)
#define MPI_LONG_INT ((MPI_Datatype)0x8c000002)
#define MPI_SHORT_INT ((MPI_Datatype)0x8c000003)
#define MPI_LONG_DOUBLE_INT ((MPI_Datatype)0x8c000004)
#define MPI_2INT ((MPI_Datatype)0x4c000816)

/* Fortran types, for C code that exchanges data with Fortran ranks. */
#define MPI_CHARACTER ((MPI_Datatype)0x4c00011a)
#define MPI_INTEGER ((MPI_Datatype)0x4c00041b)
#define MPI_REAL ((MPI_Datatype)0x4c00041c)
#define MPI_LOGICAL ((MPI_Datatype)0x4c00041d)
#define MPI_COMPLEX ((MPI_Datatype)0x4c00081e)
#define MPI_DOUBLE_PRECISION ((MPI_Datatype)0x4c00081f)
#define MPI_2INTEGER ((MPI_Datatype)0x4c000820)
#define MPI_2REAL ((MPI_Datatype)0x4c000821)
#define MPI_DOUBLE_COMPLEX ((MPI_Datatype)0x4c001022)
#define MPI_2DOUBLE_PRECISION ((MPI_Datatype)0x4c001023)
#define MPI_REAL4 ((MPI_Datatype)0x4c000427)
#define MPI_COMPLEX8 ((MPI_Datatype)0x4c000828)
#define MPI_REAL8 ((MPI_Datatype)0x4c000829)
#define MPI_COMPLEX16 ((MPI_Datatype)0x4c00102a)
#define MPI_REAL16 ((MPI_Datatype)0x4c00102b)
#define MPI_COMPLEX32 ((MPI_Datatype)0x4c00202c)
#define MPI_INTEGER1 ((MPI_Datatype)0x4c00012d)
#define MPI_INTEGER2 ((MPI_Datatype)0x4c00022f)
#define MPI_INTEGER4 ((MPI_Datatype)0x4c000430)
#define MPI_INTEGER8 ((MPI_Datatype)0x4c000831)

/* C++ types. */
#define MPI_CXX_BOOL ((MPI_Datatype)0x4c000133)
#define MPI_CXX_FLOAT_COMPLEX ((MPI_Datatype)0x4c000834)
#define MPI_CXX_DOUBLE_COMPLEX ((MPI_Datatype)0x4c001035)
#define MPI_CXX_LONG_DOUBLE_COMPLEX ((MPI_Datatype)0x4c002036)

/* Type-constructor kinds reported by MPI_Type_get_envelope. */
#define MPI_COMBINER_NAMED 1
#define MPI_COMBINER_DUP 2
#define MPI_COMBINER_CONTIGUOUS 3
#define MPI_COMBINER_VECTOR 4
#define MPI_COMBINER_HVECTOR 6
#define MPI_COMBINER_INDEXED 7
#define MPI_COMBINER_HINDEXED 9
#define MPI_COMBINER_INDEXED_BLOCK 10
#define MPI_COMBINER_STRUCT 12
#define MPI_COMBINER_SUBARRAY 13
#define MPI_COMBINER_DARRAY 14
#define MPI_COMBINER_F90_REAL 15
#define MPI_COMBINER_F90_COMPLEX 16
#define MPI_COMBINER_F90_INTEGER 17
#define MPI_COMBINER_RESIZED 18
#define MPI_COMBINER_HINDEXED_BLOCK 19

#define MPI_ORDER_C 56
#define MPI_ORDER_FORTRAN 57
#define MPI_DISTRIBUTE_BLOCK 121
#define MPI_DISTRIBUTE_CYCLIC 122
#define MPI_DISTRIBUTE_NONE 123
#define MPI_DISTRIBUTE_DFLT_DARG (-49767)
#define MPI_TYPECLASS_REAL 1
#define MPI_TYPECLASS_INTEGER 2
#define MPI_TYPECLASS_COMPLEX 3

/* ---- Reduction operations ------------------------------------------------------------ */

#define MPI_MAX ((MPI_Op)0x58000001)
#define MPI_MIN ((MPI_Op)0x58000002)
#define MPI_SUM ((MPI_Op)0x58000003)
#define MPI_PROD ((MPI_Op)0x58000004)
#define MPI_LAND ((MPI_Op)0x58000005)
#define MPI_BAND ((MPI_Op)0x58000006)
#define MPI_LOR ((MPI_Op)0x58000007)
#define MPI_BOR ((MPI_Op)0x58000008)
#define MPI_LXOR ((MPI_Op)0x58000009)
#define MPI_BXOR ((MPI_Op)0x5800000a)
#define MPI_MINLOC ((MPI_Op)0x5800000b)
#define MPI_MAXLOC ((MPI_Op)0x5800000c)
#define MPI_REPLACE ((MPI_Op)0x5800000d)
#define MPI_NO_OP ((MPI_Op)0x5800000e)

typedef void(MPI_User_function)(void *invec, void *inoutvec, int *len, MPI_Datatype *datatype);
typedef void(MPI_User_function_c)(void *invec, void *inoutvec, MPI_Count *len,
                                  MPI_Datatype *datatype);

/* ---- Error handlers -------------------------------------------------------------------- */

#define MPI_ERRORS_ARE_FATAL ((MPI_Errhandler)0x54000000)
#define MPI_ERRORS_RETURN ((MPI_Errhandler)0x54000001)
#define MPI_ERRORS_ABORT ((MPI_Errhandler)0x54000003)

typedef void(MPI_Comm_errhandler_function)(MPI_Comm *comm, int *errcode, ...);
typedef MPI_Comm_errhandler_function MPI_Comm_errhandler_fn;
typedef void(MPI_Session_errhandler_function)(MPI_Session *session, int *errcode, ...);
typedef int(MPI_Grequest_query_function)(void *extra_state, MPI_Status *status);
typedef int(MPI_Grequest_free_function)(void *extra_state);
typedef int(MPI_Grequest_cancel_function)(void *extra_state, int complete);
typedef void(MPI_Handler_function)(MPI_Comm *comm, int *errcode, ...);

/* ---- Attributes ------------------------------------------------------------------------- */

/* Predefined attribute keys of every communicator (C values; Fortran's are one higher). */
#define MPI_TAG_UB 0x64400001
#define MPI_HOST 0x64400003
#define MPI_IO 0x64400005
#define MPI_WTIME_IS_GLOBAL 0x64400007
#define MPI_UNIVERSE_SIZE 0x64400009
#define MPI_LASTUSEDCODE 0x6440000b
#define MPI_APPNUM 0x6440000d
#define MPI_KEYVAL_INVALID 0x24000000

typedef int(MPI_Comm_copy_attr_function)(MPI_Comm oldcomm, int keyval, void *extra_state,
                                          void *attribute_val_in, void *attribute_val_out,
                                          int *flag);
typedef int(MPI_Comm_delete_attr_function)(MPI_Comm comm, int keyval, void *attribute_val,
                                            void *extra_state);
typedef int(MPI_Copy_function)(MPI_Comm oldcomm, int keyval, void *extra_state,
                               void *attribute_val_in, void *attribute_val_out, int *flag);
typedef int(MPI_Delete_function)(MPI_Comm comm, int keyval, void *attribute_val,
                                 void *extra_state);

/* The copy callback that shares the attribute value with the new communicator. */
int MPIR_Dup_fn(MPI_Comm oldcomm, int keyval, void *extra_state, void *attribute_val_in,
                void *attribute_val_out, int *flag);
#define MPI_NULL_COPY_FN ((MPI_Copy_function *)0)
#define MPI_NULL_DELETE_FN ((MPI_Delete_function *)0)
#define MPI_DUP_FN MPIR_Dup_fn
#define MPI_COMM_NULL_COPY_FN ((MPI_Comm_copy_attr_function *)0)
#define MPI_COMM_NULL_DELETE_FN ((MPI_Comm_delete_attr_function *)0)
#define MPI_COMM_DUP_FN ((MPI_Comm_copy_attr_function *)MPI_DUP_FN)

typedef int(MPI_Type_copy_attr_function)(MPI_Datatype oldtype, int keyval, void *extra_state,
                                          void *attribute_val_in, void *attribute_val_out,
                                          int *flag);
typedef int(MPI_Type_delete_attr_function)(MPI_Datatype datatype, int keyval,
                                            void *attribute_val, void *extra_state);
#define MPI_TYPE_NULL_COPY_FN ((MPI_Type_copy_attr_function *)0)
#define MPI_TYPE_NULL_DELETE_FN ((MPI_Type_delete_attr_function *)0)
#define MPI_TYPE_DUP_FN ((MPI_Type_copy_attr_function *)MPI_DUP_FN)

/* ---- Sentinels and limits ----------------------------------------------------------- */

#define MPI_PROC_NULL (-1)
#define MPI_ANY_SOURCE (-2)
#define MPI_ROOT (-3)
#define MPI_ANY_TAG (-1)
#define MPI_UNDEFINED (-32766)
#define MPI_BOTTOM ((void *)0)
#define MPI_IN_PLACE ((void *)-1)
#define MPI_ARGV_NULL ((char **)0)
#define MPI_ARGVS_NULL ((char ***)0)

#define MPI_BSEND_OVERHEAD 96

#define MPI_MAX_PROCESSOR_NAME 128
#define MPI_MAX_ERROR_STRING 512
#define MPI_MAX_OBJECT_NAME 128
#define MPI_MAX_LIBRARY_VERSION_STRING 8192
#define MPI_MAX_INFO_KEY 255
#define MPI_MAX_INFO_VAL 1024
#define MPI_MAX_PORT_NAME 256

/* Results of MPI_Comm_compare and MPI_Group_compare. */
#define MPI_IDENT 0
#define MPI_CONGRUENT 1
#define MPI_SIMILAR 2
#define MPI_UNEQUAL 3

/* Thread support levels. */
#define MPI_THREAD_SINGLE 0
#define MPI_THREAD_FUNNELED 1
#define MPI_THREAD_SERIALIZED 2
#define MPI_THREAD_MULTIPLE 3

/* MPI_Comm_split_type. */
#define MPI_COMM_TYPE_SHARED 1
#define MPI_COMM_TYPE_HW_GUIDED 2
#define MPI_COMM_TYPE_HW_UNGUIDED 3

/* Topology kinds (MPI_Topo_test reports MPI_UNDEFINED: Kestrel has no topologies). */
#define MPI_GRAPH 1
#define MPI_CART 2
#define MPI_DIST_GRAPH 3

/* ---- Error classes (error codes are a class in bits 6-0 plus a message index above) ---- */

#define MPI_SUCCESS 0
#define MPI_ERR_BUFFER 1
#define MPI_ERR_COUNT 2
#define MPI_ERR_TYPE 3
#define MPI_ERR_TAG 4
#define MPI_ERR_COMM 5
#define MPI_ERR_RANK 6
#define MPI_ERR_ROOT 7
#define MPI_ERR_GROUP 8
#define MPI_ERR_OP 9
#define MPI_ERR_TOPOLOGY 10
#define MPI_ERR_DIMS 11
#define MPI_ERR_ARG 12
#define MPI_ERR_UNKNOWN 13
#define MPI_ERR_TRUNCATE 14
#define MPI_ERR_OTHER 15
#define MPI_ERR_INTERN 16
#define MPI_ERR_IN_STATUS 17
#define MPI_ERR_PENDING 18
#define MPI_ERR_REQUEST 19
#define MPI_ERR_ACCESS 20
#define MPI_ERR_AMODE 21
#define MPI_ERR_BAD_FILE 22
#define MPI_ERR_CONVERSION 23
#define MPI_ERR_DUP_DATAREP 24
#define MPI_ERR_FILE_EXISTS 25
#define MPI_ERR_FILE_IN_USE 26
#define MPI_ERR_FILE 27
#define MPI_ERR_INFO 28
#define MPI_ERR_INFO_KEY 29
#define MPI_ERR_INFO_VALUE 30
#define MPI_ERR_INFO_NOKEY 31
#define MPI_ERR_IO 32
#define MPI_ERR_NAME 33
#define MPI_ERR_NO_MEM 34
#define MPI_ERR_NOT_SAME 35
#define MPI_ERR_NO_SPACE 36
#define MPI_ERR_NO_SUCH_FILE 37
#define MPI_ERR_PORT 38
#define MPI_ERR_QUOTA 39
#define MPI_ERR_READ_ONLY 40
#define MPI_ERR_SERVICE 41
#define MPI_ERR_SPAWN 42
#define MPI_ERR_UNSUPPORTED_DATAREP 43
#define MPI_ERR_UNSUPPORTED_OPERATION 44
#define MPI_ERR_WIN 45
#define MPI_ERR_BASE 46
#define MPI_ERR_LOCKTYPE 47
#define MPI_ERR_KEYVAL 48
#define MPI_ERR_RMA_CONFLICT 49
#define MPI_ERR_RMA_SYNC 50
#define MPI_ERR_SIZE 51
#define MPI_ERR_DISP 52
#define MPI_ERR_ASSERT 53
#define MPI_ERR_RMA_RANGE 55
#define MPI_ERR_RMA_ATTACH 56
#define MPI_ERR_RMA_SHARED 57
#define MPI_ERR_RMA_FLAVOR 58
#define MPI_ERR_SESSION 75
#define MPI_ERR_PROC_ABORTED 76
#define MPI_ERR_VALUE_TOO_LARGE 77
#define MPI_ERR_LASTCODE 0x3fffffff

/* Error classes of the tool interface: MPI_T calls return them as they are. */
#define MPI_T_ERR_MEMORY 59
#define MPI_T_ERR_NOT_INITIALIZED 60
#define MPI_T_ERR_CANNOT_INIT 61
#define MPI_T_ERR_INVALID_INDEX 62
#define MPI_T_ERR_INVALID_ITEM 63
#define MPI_T_ERR_INVALID_HANDLE 64
#define MPI_T_ERR_OUT_OF_HANDLES 65
#define MPI_T_ERR_OUT_OF_SESSIONS 66
#define MPI_T_ERR_INVALID_SESSION 67
#define MPI_T_ERR_CVAR_SET_NOT_NOW 68
#define MPI_T_ERR_CVAR_SET_NEVER 69
#define MPI_T_ERR_PVAR_NO_STARTSTOP 70
#define MPI_T_ERR_PVAR_NO_WRITE 71
#define MPI_T_ERR_PVAR_NO_ATOMIC 72
#define MPI_T_ERR_INVALID_NAME 73
#define MPI_T_ERR_INVALID 74
#define MPI_T_ERR_NOT_SUPPORTED 78

/* MPICH's extension classes, numbered as in MPICH's ABI. Kestrel reports
 * MPIX_ERR_PROC_FAILED for an operation that ended because a process it needed failed (the
 * other side of a connected or spawned job). */
#define MPIX_ERR_PROC_FAILED 101
#define MPIX_ERR_PROC_FAILED_PENDING 102
#define MPIX_ERR_REVOKED 103
#define MPIX_ERR_EAGAIN 104
#define MPIX_ERR_NOREQ 105

/* ---- Tool information interface (MPI_T) ----------------------------------------------- */

/* Control variables are Kestrel's parameters (kestrel-info lists them), performance
 * variables its counters; handles are pointers to structs the program never sees. */
struct MPIR_T_enum_s;
struct MPIR_T_cvar_handle_s;
struct MPIR_T_pvar_handle_s;
struct MPIR_T_pvar_session_s;
typedef struct MPIR_T_enum_s *MPI_T_enum;
typedef struct MPIR_T_cvar_handle_s *MPI_T_cvar_handle;
typedef struct MPIR_T_pvar_handle_s *MPI_T_pvar_handle;
typedef struct MPIR_T_pvar_session_s *MPI_T_pvar_session;

extern struct MPIR_T_pvar_handle_s *const MPI_T_PVAR_ALL_HANDLES;

#define MPI_T_ENUM_NULL ((MPI_T_enum)NULL)
#define MPI_T_CVAR_HANDLE_NULL ((MPI_T_cvar_handle)NULL)
#define MPI_T_PVAR_HANDLE_NULL ((MPI_T_pvar_handle)NULL)
#define MPI_T_PVAR_SESSION_NULL ((MPI_T_pvar_session)NULL)

typedef enum MPIR_T_verbosity_t {
    MPI_T_VERBOSITY_INVALID = 0,
    MPI_T_VERBOSITY_USER_BASIC = 221,
    MPI_T_VERBOSITY_USER_DETAIL,
    MPI_T_VERBOSITY_USER_ALL,
    MPI_T_VERBOSITY_TUNER_BASIC,
    MPI_T_VERBOSITY_TUNER_DETAIL,
    MPI_T_VERBOSITY_TUNER_ALL,
    MPI_T_VERBOSITY_MPIDEV_BASIC,
    MPI_T_VERBOSITY_MPIDEV_DETAIL,
    MPI_T_VERBOSITY_MPIDEV_ALL
} MPIR_T_verbosity_t;

typedef enum MPIR_T_bind_t {
    MPI_T_BIND_INVALID = 0,
    MPI_T_BIND_NO_OBJECT = 9700,
    MPI_T_BIND_MPI_COMM,
    MPI_T_BIND_MPI_DATATYPE,
    MPI_T_BIND_MPI_ERRHANDLER,
    MPI_T_BIND_MPI_FILE,
    MPI_T_BIND_MPI_GROUP,
    MPI_T_BIND_MPI_OP,
    MPI_T_BIND_MPI_REQUEST,
    MPI_T_BIND_MPI_WIN,
    MPI_T_BIND_MPI_MESSAGE,
    MPI_T_BIND_MPI_INFO
} MPIR_T_bind_t;

typedef enum MPIR_T_scope_t {
    MPI_T_SCOPE_INVALID = 0,
    MPI_T_SCOPE_CONSTANT = 60438,
    MPI_T_SCOPE_READONLY,
    MPI_T_SCOPE_LOCAL,
    MPI_T_SCOPE_GROUP,
    MPI_T_SCOPE_GROUP_EQ,
    MPI_T_SCOPE_ALL,
    MPI_T_SCOPE_ALL_EQ
} MPIR_T_scope_t;

typedef enum MPIR_T_pvar_class_t {
    MPI_T_PVAR_CLASS_INVALID = 0,
    MPIR_T_PVAR_CLASS_FIRST = 240,
    MPI_T_PVAR_CLASS_STATE = MPIR_T_PVAR_CLASS_FIRST,
    MPI_T_PVAR_CLASS_LEVEL,
    MPI_T_PVAR_CLASS_SIZE,
    MPI_T_PVAR_CLASS_PERCENTAGE,
    MPI_T_PVAR_CLASS_HIGHWATERMARK,
    MPI_T_PVAR_CLASS_LOWWATERMARK,
    MPI_T_PVAR_CLASS_COUNTER,
    MPI_T_PVAR_CLASS_AGGREGATE,
    MPI_T_PVAR_CLASS_TIMER,
    MPI_T_PVAR_CLASS_GENERIC,
    MPIR_T_PVAR_CLASS_LAST,
    MPIR_T_PVAR_CLASS_NUMBER = MPIR_T_PVAR_CLASS_LAST - MPIR_T_PVAR_CLASS_FIRST
} MPIR_T_pvar_class_t;

/* ---- Handle conversion (handles are the same in C and Fortran) ------------------------ */

#define MPI_Comm_c2f(h) ((MPI_Fint)(h))
#define MPI_Comm_f2c(h) ((MPI_Comm)(h))
#define MPI_Type_c2f(h) ((MPI_Fint)(h))
#define MPI_Type_f2c(h) ((MPI_Datatype)(h))
#define MPI_Group_c2f(h) ((MPI_Fint)(h))
#define MPI_Group_f2c(h) ((MPI_Group)(h))
#define MPI_Request_c2f(h) ((MPI_Fint)(h))
#define MPI_Request_f2c(h) ((MPI_Request)(h))
#define MPI_Op_c2f(h) ((MPI_Fint)(h))
#define MPI_Op_f2c(h) ((MPI_Op)(h))
#define MPI_Errhandler_c2f(h) ((MPI_Fint)(h))
#define MPI_Errhandler_f2c(h) ((MPI_Errhandler)(h))
#define MPI_Info_c2f(h) ((MPI_Fint)(h))
#define MPI_Info_f2c(h) ((MPI_Info)(h))
#define MPI_Message_c2f(h) ((MPI_Fint)(h))
#define MPI_Message_f2c(h) ((MPI_Message)(h))

/* ---- Functions ------------------------------------------------------------------------ */

/* Declares MPI_<name> and its profiling twin PMPI_<name>. */
#define KESTREL_MPI_FN(ret, name, params) \
    ret MPI_##name params;                \
    ret PMPI_##name params

/* Start-up, shut-down, environment. */
KESTREL_MPI_FN(int, Init, (int *argc, char ***argv));
KESTREL_MPI_FN(int, Init_thread, (int *argc, char ***argv, int required, int *provided));
KESTREL_MPI_FN(int, Initialized, (int *flag));
KESTREL_MPI_FN(int, Finalized, (int *flag));
KESTREL_MPI_FN(int, Finalize, (void));
KESTREL_MPI_FN(int, Abort, (MPI_Comm comm, int errorcode));
KESTREL_MPI_FN(int, Query_thread, (int *provided));
KESTREL_MPI_FN(int, Is_thread_main, (int *flag));
KESTREL_MPI_FN(int, Get_version, (int *version, int *subversion));
KESTREL_MPI_FN(int, Get_library_version, (char *version, int *resultlen));
KESTREL_MPI_FN(int, Get_processor_name, (char *name, int *resultlen));
KESTREL_MPI_FN(double, Wtime, (void));
KESTREL_MPI_FN(double, Wtick, (void));
KESTREL_MPI_FN(int, Pcontrol, (const int level, ...));
KESTREL_MPI_FN(int, Alloc_mem, (MPI_Aint size, MPI_Info info, void *baseptr));
KESTREL_MPI_FN(int, Free_mem, (void *base));

/* Errors and error handlers. */
KESTREL_MPI_FN(int, Error_string, (int errorcode, char *string, int *resultlen));
KESTREL_MPI_FN(int, Error_class, (int errorcode, int *errorclass));
KESTREL_MPI_FN(int, Comm_create_errhandler,
               (MPI_Comm_errhandler_function * comm_errhandler_fn, MPI_Errhandler *errhandler));
KESTREL_MPI_FN(int, Comm_set_errhandler, (MPI_Comm comm, MPI_Errhandler errhandler));
KESTREL_MPI_FN(int, Comm_get_errhandler, (MPI_Comm comm, MPI_Errhandler *errhandler));
KESTREL_MPI_FN(int, Comm_call_errhandler, (MPI_Comm comm, int errorcode));
KESTREL_MPI_FN(int, Errhandler_free, (MPI_Errhandler * errhandler));

/* Communicators. */
KESTREL_MPI_FN(int, Comm_rank, (MPI_Comm comm, int *rank));
KESTREL_MPI_FN(int, Comm_size, (MPI_Comm comm, int *size));
KESTREL_MPI_FN(int, Comm_dup, (MPI_Comm comm, MPI_Comm *newcomm));
KESTREL_MPI_FN(int, Comm_dup_with_info, (MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm));
KESTREL_MPI_FN(int, Comm_split, (MPI_Comm comm, int color, int key, MPI_Comm *newcomm));
KESTREL_MPI_FN(int, Comm_split_type,
               (MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm *newcomm));
KESTREL_MPI_FN(int, Comm_create, (MPI_Comm comm, MPI_Group group, MPI_Comm *newcomm));
KESTREL_MPI_FN(int, Comm_free, (MPI_Comm * comm));
KESTREL_MPI_FN(int, Comm_compare, (MPI_Comm comm1, MPI_Comm comm2, int *result));
KESTREL_MPI_FN(int, Comm_group, (MPI_Comm comm, MPI_Group *group));
KESTREL_MPI_FN(int, Comm_set_name, (MPI_Comm comm, const char *comm_name));
KESTREL_MPI_FN(int, Comm_get_name, (MPI_Comm comm, char *comm_name, int *resultlen));
KESTREL_MPI_FN(int, Comm_test_inter, (MPI_Comm comm, int *flag));
KESTREL_MPI_FN(int, Comm_get_parent, (MPI_Comm * parent));
KESTREL_MPI_FN(int, Topo_test, (MPI_Comm comm, int *status));

/* Dynamic processes and inter-communicators (Kestrel only: MPICH's Debian build cannot run
 * them). Port names are at most MPI_MAX_PORT_NAME bytes, NUL included. */
KESTREL_MPI_FN(int, Comm_remote_size, (MPI_Comm comm, int *size));
KESTREL_MPI_FN(int, Comm_remote_group, (MPI_Comm comm, MPI_Group *group));
KESTREL_MPI_FN(int, Intercomm_create,
               (MPI_Comm local_comm, int local_leader, MPI_Comm peer_comm, int remote_leader,
                int tag, MPI_Comm *newintercomm));
KESTREL_MPI_FN(int, Intercomm_merge, (MPI_Comm intercomm, int high, MPI_Comm *newintracomm));
KESTREL_MPI_FN(int, Open_port, (MPI_Info info, char *port_name));
KESTREL_MPI_FN(int, Close_port, (const char *port_name));
KESTREL_MPI_FN(int, Comm_accept,
               (const char *port_name, MPI_Info info, int root, MPI_Comm comm,
                MPI_Comm *newcomm));
KESTREL_MPI_FN(int, Comm_connect,
               (const char *port_name, MPI_Info info, int root, MPI_Comm comm,
                MPI_Comm *newcomm));
KESTREL_MPI_FN(int, Comm_disconnect, (MPI_Comm * comm));
KESTREL_MPI_FN(int, Publish_name, (const char *service_name, MPI_Info info, const char *port_name));
KESTREL_MPI_FN(int, Lookup_name, (const char *service_name, MPI_Info info, char *port_name));
KESTREL_MPI_FN(int, Unpublish_name,
               (const char *service_name, MPI_Info info, const char *port_name));
KESTREL_MPI_FN(int, Comm_spawn,
               (const char *command, char *argv[], int maxprocs, MPI_Info info, int root,
                MPI_Comm comm, MPI_Comm *intercomm, int array_of_errcodes[]));
KESTREL_MPI_FN(int, Comm_spawn_multiple,
               (int count, char *array_of_commands[], char **array_of_argv[],
                const int array_of_maxprocs[], const MPI_Info array_of_info[], int root,
                MPI_Comm comm, MPI_Comm *intercomm, int array_of_errcodes[]));

/* Groups. */
KESTREL_MPI_FN(int, Group_size, (MPI_Group group, int *size));
KESTREL_MPI_FN(int, Group_rank, (MPI_Group group, int *rank));
KESTREL_MPI_FN(int, Group_incl, (MPI_Group group, int n, const int ranks[], MPI_Group *newgroup));
KESTREL_MPI_FN(int, Group_excl, (MPI_Group group, int n, const int ranks[], MPI_Group *newgroup));
KESTREL_MPI_FN(int, Group_range_incl,
               (MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup));
KESTREL_MPI_FN(int, Group_range_excl,
               (MPI_Group group, int n, int ranges[][3], MPI_Group *newgroup));
KESTREL_MPI_FN(int, Group_translate_ranks,
               (MPI_Group group1, int n, const int ranks1[], MPI_Group group2, int ranks2[]));
KESTREL_MPI_FN(int, Group_compare, (MPI_Group group1, MPI_Group group2, int *result));
KESTREL_MPI_FN(int, Group_union, (MPI_Group group1, MPI_Group group2, MPI_Group *newgroup));
KESTREL_MPI_FN(int, Group_intersection,
               (MPI_Group group1, MPI_Group group2, MPI_Group *newgroup));
KESTREL_MPI_FN(int, Group_difference, (MPI_Group group1, MPI_Group group2, MPI_Group *newgroup));
KESTREL_MPI_FN(int, Group_free, (MPI_Group * group));

/* Attributes. */
KESTREL_MPI_FN(int, Comm_create_keyval,
               (MPI_Comm_copy_attr_function * comm_copy_attr_fn,
                MPI_Comm_delete_attr_function *comm_delete_attr_fn, int *comm_keyval,
                void *extra_state));
KESTREL_MPI_FN(int, Comm_free_keyval, (int *comm_keyval));
KESTREL_MPI_FN(int, Comm_set_attr, (MPI_Comm comm, int comm_keyval, void *attribute_val));
KESTREL_MPI_FN(int, Comm_get_attr,
               (MPI_Comm comm, int comm_keyval, void *attribute_val, int *flag));
KESTREL_MPI_FN(int, Comm_delete_attr, (MPI_Comm comm, int comm_keyval));
KESTREL_MPI_FN(int, Keyval_create,
               (MPI_Copy_function * copy_fn, MPI_Delete_function *delete_fn, int *keyval,
                void *extra_state));
KESTREL_MPI_FN(int, Keyval_free, (int *keyval));
KESTREL_MPI_FN(int, Attr_put, (MPI_Comm comm, int keyval, void *attribute_val));
KESTREL_MPI_FN(int, Attr_get, (MPI_Comm comm, int keyval, void *attribute_val, int *flag));
KESTREL_MPI_FN(int, Attr_delete, (MPI_Comm comm, int keyval));

/* Info objects. */
KESTREL_MPI_FN(int, Info_create, (MPI_Info * info));
KESTREL_MPI_FN(int, Info_set, (MPI_Info info, const char *key, const char *value));
KESTREL_MPI_FN(int, Info_get,
               (MPI_Info info, const char *key, int valuelen, char *value, int *flag));
KESTREL_MPI_FN(int, Info_get_valuelen, (MPI_Info info, const char *key, int *valuelen, int *flag));
KESTREL_MPI_FN(int, Info_delete, (MPI_Info info, const char *key));
KESTREL_MPI_FN(int, Info_get_nkeys, (MPI_Info info, int *nkeys));
KESTREL_MPI_FN(int, Info_get_nthkey, (MPI_Info info, int n, char *key));
KESTREL_MPI_FN(int, Info_dup, (MPI_Info info, MPI_Info *newinfo));
KESTREL_MPI_FN(int, Info_free, (MPI_Info * info));

/* Point-to-point. */
KESTREL_MPI_FN(int, Send, (const void *buf, int count, MPI_Datatype datatype, int dest, int tag,
                           MPI_Comm comm));
KESTREL_MPI_FN(int, Ssend, (const void *buf, int count, MPI_Datatype datatype, int dest,
                            int tag, MPI_Comm comm));
KESTREL_MPI_FN(int, Rsend, (const void *buf, int count, MPI_Datatype datatype, int dest,
                            int tag, MPI_Comm comm));
KESTREL_MPI_FN(int, Bsend, (const void *buf, int count, MPI_Datatype datatype, int dest,
                            int tag, MPI_Comm comm));
KESTREL_MPI_FN(int, Recv, (void *buf, int count, MPI_Datatype datatype, int source, int tag,
                           MPI_Comm comm, MPI_Status *status));
KESTREL_MPI_FN(int, Isend, (const void *buf, int count, MPI_Datatype datatype, int dest,
                            int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Issend, (const void *buf, int count, MPI_Datatype datatype, int dest,
                             int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Irsend, (const void *buf, int count, MPI_Datatype datatype, int dest,
                             int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ibsend, (const void *buf, int count, MPI_Datatype datatype, int dest,
                             int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Irecv, (void *buf, int count, MPI_Datatype datatype, int source, int tag,
                            MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Send_init, (const void *buf, int count, MPI_Datatype datatype, int dest,
                                int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ssend_init, (const void *buf, int count, MPI_Datatype datatype, int dest,
                                 int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Rsend_init, (const void *buf, int count, MPI_Datatype datatype, int dest,
                                 int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Bsend_init, (const void *buf, int count, MPI_Datatype datatype, int dest,
                                 int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Recv_init, (void *buf, int count, MPI_Datatype datatype, int source,
                                int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Start, (MPI_Request * request));
KESTREL_MPI_FN(int, Startall, (int count, MPI_Request array_of_requests[]));
KESTREL_MPI_FN(int, Buffer_attach, (void *buffer, int size));
KESTREL_MPI_FN(int, Buffer_detach, (void *buffer_addr, int *size));
KESTREL_MPI_FN(int, Sendrecv,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag,
                void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag,
                MPI_Comm comm, MPI_Status *status));
KESTREL_MPI_FN(int, Sendrecv_replace,
               (void *buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source,
                int recvtag, MPI_Comm comm, MPI_Status *status));
KESTREL_MPI_FN(int, Probe, (int source, int tag, MPI_Comm comm, MPI_Status *status));
KESTREL_MPI_FN(int, Iprobe, (int source, int tag, MPI_Comm comm, int *flag, MPI_Status *status));
KESTREL_MPI_FN(int, Mprobe,
               (int source, int tag, MPI_Comm comm, MPI_Message *message, MPI_Status *status));
KESTREL_MPI_FN(int, Improbe, (int source, int tag, MPI_Comm comm, int *flag,
                              MPI_Message *message, MPI_Status *status));
KESTREL_MPI_FN(int, Mrecv, (void *buf, int count, MPI_Datatype datatype, MPI_Message *message,
                            MPI_Status *status));
KESTREL_MPI_FN(int, Imrecv, (void *buf, int count, MPI_Datatype datatype, MPI_Message *message,
                             MPI_Request *request));
KESTREL_MPI_FN(int, Cancel, (MPI_Request * request));
KESTREL_MPI_FN(int, Request_free, (MPI_Request * request));
KESTREL_MPI_FN(int, Request_get_status, (MPI_Request request, int *flag, MPI_Status *status));
KESTREL_MPI_FN(int, Test_cancelled, (const MPI_Status *status, int *flag));
KESTREL_MPI_FN(int, Get_count, (const MPI_Status *status, MPI_Datatype datatype, int *count));
KESTREL_MPI_FN(int, Get_elements,
               (const MPI_Status *status, MPI_Datatype datatype, int *count));
KESTREL_MPI_FN(int, Get_elements_x,
               (const MPI_Status *status, MPI_Datatype datatype, MPI_Count *count));
KESTREL_MPI_FN(int, Status_set_elements, (MPI_Status * status, MPI_Datatype datatype, int count));
KESTREL_MPI_FN(int, Status_set_cancelled, (MPI_Status * status, int flag));

/* Completion. */
KESTREL_MPI_FN(int, Wait, (MPI_Request * request, MPI_Status *status));
KESTREL_MPI_FN(int, Waitall,
               (int count, MPI_Request array_of_requests[], MPI_Status array_of_statuses[]));
KESTREL_MPI_FN(int, Waitany, (int count, MPI_Request array_of_requests[], int *indx,
                              MPI_Status *status));
KESTREL_MPI_FN(int, Waitsome, (int incount, MPI_Request array_of_requests[], int *outcount,
                               int array_of_indices[], MPI_Status array_of_statuses[]));
KESTREL_MPI_FN(int, Test, (MPI_Request * request, int *flag, MPI_Status *status));
KESTREL_MPI_FN(int, Testall, (int count, MPI_Request array_of_requests[], int *flag,
                              MPI_Status array_of_statuses[]));
KESTREL_MPI_FN(int, Testany, (int count, MPI_Request array_of_requests[], int *indx, int *flag,
                              MPI_Status *status));
KESTREL_MPI_FN(int, Testsome, (int incount, MPI_Request array_of_requests[], int *outcount,
                               int array_of_indices[], MPI_Status array_of_statuses[]));

/* Collectives. */
KESTREL_MPI_FN(int, Barrier, (MPI_Comm comm));
KESTREL_MPI_FN(int, Bcast,
               (void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm));
KESTREL_MPI_FN(int, Reduce, (const void *sendbuf, void *recvbuf, int count,
                             MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm));
KESTREL_MPI_FN(int, Allreduce, (const void *sendbuf, void *recvbuf, int count,
                                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm));
KESTREL_MPI_FN(int, Gather,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm));
KESTREL_MPI_FN(int, Gatherv,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root,
                MPI_Comm comm));
KESTREL_MPI_FN(int, Scatter,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm));
KESTREL_MPI_FN(int, Scatterv,
               (const void *sendbuf, const int sendcounts[], const int displs[],
                MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype,
                int root, MPI_Comm comm));
KESTREL_MPI_FN(int, Allgather,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, MPI_Comm comm));
KESTREL_MPI_FN(int, Allgatherv,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                const int recvcounts[], const int displs[], MPI_Datatype recvtype,
                MPI_Comm comm));
KESTREL_MPI_FN(int, Alltoall,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf,
                int recvcount, MPI_Datatype recvtype, MPI_Comm comm));
KESTREL_MPI_FN(int, Alltoallv,
               (const void *sendbuf, const int sendcounts[], const int sdispls[],
                MPI_Datatype sendtype, void *recvbuf, const int recvcounts[],
                const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm));
KESTREL_MPI_FN(int, Reduce_scatter,
               (const void *sendbuf, void *recvbuf, const int recvcounts[],
                MPI_Datatype datatype, MPI_Op op, MPI_Comm comm));
KESTREL_MPI_FN(int, Reduce_scatter_block, (const void *sendbuf, void *recvbuf, int recvcount,
                                           MPI_Datatype datatype, MPI_Op op, MPI_Comm comm));
KESTREL_MPI_FN(int, Scan, (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype,
                           MPI_Op op, MPI_Comm comm));
KESTREL_MPI_FN(int, Exscan, (const void *sendbuf, void *recvbuf, int count,
                             MPI_Datatype datatype, MPI_Op op, MPI_Comm comm));
KESTREL_MPI_FN(int, Reduce_local, (const void *inbuf, void *inoutbuf, int count,
                                   MPI_Datatype datatype, MPI_Op op));
KESTREL_MPI_FN(int, Op_create, (MPI_User_function * user_fn, int commute, MPI_Op *op));
KESTREL_MPI_FN(int, Op_free, (MPI_Op * op));
KESTREL_MPI_FN(int, Op_commutative, (MPI_Op op, int *commute));

/* Datatypes. */
KESTREL_MPI_FN(int, Type_contiguous, (int count, MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_vector, (int count, int blocklength, int stride, MPI_Datatype oldtype,
                                  MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_hvector, (int count, int blocklength, MPI_Aint stride,
                                          MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_indexed,
               (int count, const int array_of_blocklengths[], const int array_of_displacements[],
                MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_hindexed,
               (int count, const int array_of_blocklengths[],
                const MPI_Aint array_of_displacements[], MPI_Datatype oldtype,
                MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_indexed_block,
               (int count, int blocklength, const int array_of_displacements[],
                MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_hindexed_block,
               (int count, int blocklength, const MPI_Aint array_of_displacements[],
                MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_struct,
               (int count, const int array_of_blocklengths[],
                const MPI_Aint array_of_displacements[], const MPI_Datatype array_of_types[],
                MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_subarray,
               (int ndims, const int array_of_sizes[], const int array_of_subsizes[],
                const int array_of_starts[], int order, MPI_Datatype oldtype,
                MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_resized,
               (MPI_Datatype oldtype, MPI_Aint lb, MPI_Aint extent, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_dup, (MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_commit, (MPI_Datatype * datatype));
KESTREL_MPI_FN(int, Type_free, (MPI_Datatype * datatype));
KESTREL_MPI_FN(int, Type_size, (MPI_Datatype datatype, int *size));
KESTREL_MPI_FN(int, Type_size_x, (MPI_Datatype datatype, MPI_Count *size));
KESTREL_MPI_FN(int, Type_get_extent, (MPI_Datatype datatype, MPI_Aint *lb, MPI_Aint *extent));
KESTREL_MPI_FN(int, Type_get_extent_x,
               (MPI_Datatype datatype, MPI_Count *lb, MPI_Count *extent));
KESTREL_MPI_FN(int, Type_get_true_extent,
               (MPI_Datatype datatype, MPI_Aint *true_lb, MPI_Aint *true_extent));
KESTREL_MPI_FN(int, Type_get_true_extent_x,
               (MPI_Datatype datatype, MPI_Count *true_lb, MPI_Count *true_extent));
KESTREL_MPI_FN(int, Type_get_envelope, (MPI_Datatype datatype, int *num_integers,
                                        int *num_addresses, int *num_datatypes, int *combiner));
KESTREL_MPI_FN(int, Type_set_name, (MPI_Datatype datatype, const char *type_name));
KESTREL_MPI_FN(int, Type_get_name, (MPI_Datatype datatype, char *type_name, int *resultlen));
KESTREL_MPI_FN(int, Pack, (const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf,
                           int outsize, int *position, MPI_Comm comm));
KESTREL_MPI_FN(int, Unpack, (const void *inbuf, int insize, int *position, void *outbuf,
                             int outcount, MPI_Datatype datatype, MPI_Comm comm));
KESTREL_MPI_FN(int, Pack_size, (int incount, MPI_Datatype datatype, MPI_Comm comm, int *size));
KESTREL_MPI_FN(int, Get_address, (const void *location, MPI_Aint *address));
KESTREL_MPI_FN(MPI_Aint, Aint_add, (MPI_Aint base, MPI_Aint disp));
KESTREL_MPI_FN(MPI_Aint, Aint_diff, (MPI_Aint addr1, MPI_Aint addr2));

/* MPI-4 large-count bindings: counts are MPI_Count, displacements MPI_Aint. */
KESTREL_MPI_FN(int, Allgather_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm));
KESTREL_MPI_FN(int, Allgatherv_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm));
KESTREL_MPI_FN(int, Allreduce_c,
               (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm));
KESTREL_MPI_FN(int, Alltoall_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm));
KESTREL_MPI_FN(int, Alltoallv_c,
               (const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm));
KESTREL_MPI_FN(int, Bcast_c,
               (void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm));
KESTREL_MPI_FN(int, Bsend_c,
               (const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm));
KESTREL_MPI_FN(int, Bsend_init_c,
               (const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Buffer_attach_c, (void *buffer, MPI_Count size));
KESTREL_MPI_FN(int, Buffer_detach_c, (void *buffer_addr, MPI_Count *size));
KESTREL_MPI_FN(int, Exscan_c,
               (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm));
KESTREL_MPI_FN(int, Gather_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm));
KESTREL_MPI_FN(int, Gatherv_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root, MPI_Comm comm));
KESTREL_MPI_FN(int, Get_count_c,
               (const MPI_Status *status, MPI_Datatype datatype, MPI_Count *count));
KESTREL_MPI_FN(int, Get_elements_c,
               (const MPI_Status *status, MPI_Datatype datatype, MPI_Count *count));
KESTREL_MPI_FN(int, Ibsend_c,
               (const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Imrecv_c,
               (void *buf, MPI_Count count, MPI_Datatype datatype, MPI_Message *message, MPI_Request *request));
KESTREL_MPI_FN(int, Irecv_c,
               (void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Irsend_c,
               (const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Isend_c,
               (const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Issend_c,
               (const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Mrecv_c,
               (void *buf, MPI_Count count, MPI_Datatype datatype, MPI_Message *message, MPI_Status *status));
KESTREL_MPI_FN(int, Op_create_c, (MPI_User_function_c *user_fn, int commute, MPI_Op *op));
KESTREL_MPI_FN(int, Pack_c,
               (const void *inbuf, MPI_Count incount, MPI_Datatype datatype, void *outbuf, MPI_Count outsize, MPI_Count *position, MPI_Comm comm));
KESTREL_MPI_FN(int, Pack_size_c,
               (MPI_Count incount, MPI_Datatype datatype, MPI_Comm comm, MPI_Count *size));
KESTREL_MPI_FN(int, Recv_c,
               (void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Status *status));
KESTREL_MPI_FN(int, Recv_init_c,
               (void *buf, MPI_Count count, MPI_Datatype datatype, int source, int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Reduce_c,
               (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm));
KESTREL_MPI_FN(int, Reduce_local_c,
               (const void *inbuf, void *inoutbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op));
KESTREL_MPI_FN(int, Reduce_scatter_block_c,
               (const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm));
KESTREL_MPI_FN(int, Reduce_scatter_c,
               (const void *sendbuf, void *recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm));
KESTREL_MPI_FN(int, Rsend_c,
               (const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm));
KESTREL_MPI_FN(int, Rsend_init_c,
               (const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Scan_c,
               (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm));
KESTREL_MPI_FN(int, Scatter_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm));
KESTREL_MPI_FN(int, Scatterv_c,
               (const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[], MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm));
KESTREL_MPI_FN(int, Send_c,
               (const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm));
KESTREL_MPI_FN(int, Send_init_c,
               (const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Sendrecv_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status *status));
KESTREL_MPI_FN(int, Sendrecv_replace_c,
               (void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int sendtag, int source, int recvtag, MPI_Comm comm, MPI_Status *status));
KESTREL_MPI_FN(int, Ssend_c,
               (const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm));
KESTREL_MPI_FN(int, Ssend_init_c,
               (const void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Type_contiguous_c,
               (MPI_Count count, MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_hindexed_block_c,
               (MPI_Count count, MPI_Count blocklength, const MPI_Count array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_hindexed_c,
               (MPI_Count count, const MPI_Count array_of_blocklengths[], const MPI_Count array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_hvector_c,
               (MPI_Count count, MPI_Count blocklength, MPI_Count stride, MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_indexed_block_c,
               (MPI_Count count, MPI_Count blocklength, const MPI_Count array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_resized_c,
               (MPI_Datatype oldtype, MPI_Count lb, MPI_Count extent, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_struct_c,
               (MPI_Count count, const MPI_Count array_of_blocklengths[], const MPI_Count array_of_displacements[], const MPI_Datatype array_of_types[], MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_subarray_c,
               (int ndims, const MPI_Count array_of_sizes[], const MPI_Count array_of_subsizes[], const MPI_Count array_of_starts[], int order, MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_get_envelope_c,
               (MPI_Datatype datatype, MPI_Count *num_integers, MPI_Count *num_addresses, MPI_Count *num_large_counts, MPI_Count *num_datatypes, int *combiner));
KESTREL_MPI_FN(int, Type_get_extent_c,
               (MPI_Datatype datatype, MPI_Count *lb, MPI_Count *extent));
KESTREL_MPI_FN(int, Type_get_true_extent_c,
               (MPI_Datatype datatype, MPI_Count *true_lb, MPI_Count *true_extent));
KESTREL_MPI_FN(int, Type_indexed_c,
               (MPI_Count count, const MPI_Count array_of_blocklengths[], const MPI_Count array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_size_c, (MPI_Datatype datatype, MPI_Count *size));
KESTREL_MPI_FN(int, Type_vector_c,
               (MPI_Count count, MPI_Count blocklength, MPI_Count stride, MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Unpack_c,
               (const void *inbuf, MPI_Count insize, MPI_Count *position, void *outbuf, MPI_Count outcount, MPI_Datatype datatype, MPI_Comm comm));

/* Nonblocking collectives (MPI-3) and persistent collectives (MPI-4). */
KESTREL_MPI_FN(int, Allgather_init,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Allgather_init_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Allgatherv_init,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Allgatherv_init_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Allreduce_init,
               (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Allreduce_init_c,
               (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Alltoall_init,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Alltoall_init_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Alltoallv_init,
               (const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Alltoallv_init_c,
               (const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Alltoallw,
               (const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm));
KESTREL_MPI_FN(int, Alltoallw_c,
               (const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm));
KESTREL_MPI_FN(int, Alltoallw_init,
               (const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Alltoallw_init_c,
               (const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Barrier_init, (MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Bcast_init,
               (void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Bcast_init_c,
               (void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Exscan_init,
               (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Exscan_init_c,
               (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Gather_init,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Gather_init_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Gatherv_init,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Gatherv_init_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Iallgather,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Iallgather_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Iallgatherv,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Iallgatherv_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Iallreduce,
               (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Iallreduce_c,
               (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ialltoall,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ialltoall_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ialltoallv,
               (const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ialltoallv_c,
               (const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ialltoallw,
               (const void *sendbuf, const int sendcounts[], const int sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const int rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ialltoallw_c,
               (const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ibarrier, (MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ibcast,
               (void *buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ibcast_c,
               (void *buffer, MPI_Count count, MPI_Datatype datatype, int root, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Iexscan,
               (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Iexscan_c,
               (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Igather,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Igather_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Igatherv,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Igatherv_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ireduce,
               (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ireduce_c,
               (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ireduce_scatter,
               (const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ireduce_scatter_block,
               (const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ireduce_scatter_block_c,
               (const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ireduce_scatter_c,
               (const void *sendbuf, void *recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Iscan,
               (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Iscan_c,
               (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Iscatter,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Iscatter_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Iscatterv,
               (const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Iscatterv_c,
               (const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[], MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Reduce_init,
               (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Reduce_init_c,
               (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Reduce_scatter_block_init,
               (const void *sendbuf, void *recvbuf, int recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Reduce_scatter_block_init_c,
               (const void *sendbuf, void *recvbuf, MPI_Count recvcount, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Reduce_scatter_init,
               (const void *sendbuf, void *recvbuf, const int recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Reduce_scatter_init_c,
               (const void *sendbuf, void *recvbuf, const MPI_Count recvcounts[], MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Scan_init,
               (const void *sendbuf, void *recvbuf, int count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Scan_init_c,
               (const void *sendbuf, void *recvbuf, MPI_Count count, MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Scatter_init,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Scatter_init_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Scatterv_init,
               (const void *sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Scatterv_init_c,
               (const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint displs[], MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Info info, MPI_Request *request));

/* MPI-3.1 completeness and MPI-4 additions. */
KESTREL_MPI_FN(int, Comm_join, (int fd, MPI_Comm *intercomm));
KESTREL_MPI_FN(int, Parrived, (MPI_Request request, int partition, int *flag));
KESTREL_MPI_FN(int, Pready, (int partition, MPI_Request request));
KESTREL_MPI_FN(int, Pready_list, (int length, int array_of_partitions[], MPI_Request request));
KESTREL_MPI_FN(int, Pready_range, (int partition_low, int partition_high, MPI_Request request));
KESTREL_MPI_FN(int, Precv_init,
               (void *buf, int partitions, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Psend_init,
               (const void *buf, int partitions, MPI_Count count, MPI_Datatype datatype, int dest, int tag, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Status_c2f, (const MPI_Status *c_status, MPI_Fint *f_status));
KESTREL_MPI_FN(int, Status_f2c, (const MPI_Fint *f_status, MPI_Status *c_status));
KESTREL_MPI_FN(int, Type_create_keyval,
               (MPI_Type_copy_attr_function *type_copy_attr_fn, MPI_Type_delete_attr_function *type_delete_attr_fn, int *type_keyval, void *extra_state));
KESTREL_MPI_FN(int, Type_delete_attr, (MPI_Datatype datatype, int type_keyval));
KESTREL_MPI_FN(int, Type_free_keyval, (int *type_keyval));
KESTREL_MPI_FN(int, Type_get_attr,
               (MPI_Datatype datatype, int type_keyval, void *attribute_val, int *flag));
KESTREL_MPI_FN(int, Type_set_attr,
               (MPI_Datatype datatype, int type_keyval, void *attribute_val));
KESTREL_MPI_FN(int, Cart_coords, (MPI_Comm comm, int rank, int maxdims, int coords[]));
KESTREL_MPI_FN(int, Cart_create,
               (MPI_Comm comm_old, int ndims, const int dims[], const int periods[], int reorder, MPI_Comm *comm_cart));
KESTREL_MPI_FN(int, Cart_get,
               (MPI_Comm comm, int maxdims, int dims[], int periods[], int coords[]));
KESTREL_MPI_FN(int, Cart_map,
               (MPI_Comm comm, int ndims, const int dims[], const int periods[], int *newrank));
KESTREL_MPI_FN(int, Cart_rank, (MPI_Comm comm, const int coords[], int *rank));
KESTREL_MPI_FN(int, Cart_shift,
               (MPI_Comm comm, int direction, int disp, int *rank_source, int *rank_dest));
KESTREL_MPI_FN(int, Cart_sub, (MPI_Comm comm, const int remain_dims[], MPI_Comm *newcomm));
KESTREL_MPI_FN(int, Cartdim_get, (MPI_Comm comm, int *ndims));
KESTREL_MPI_FN(int, Dims_create, (int nnodes, int ndims, int dims[]));
KESTREL_MPI_FN(int, Dist_graph_create,
               (MPI_Comm comm_old, int n, const int sources[], const int degrees[], const int destinations[], const int weights[], MPI_Info info, int reorder, MPI_Comm *comm_dist_graph));
KESTREL_MPI_FN(int, Dist_graph_create_adjacent,
               (MPI_Comm comm_old, int indegree, const int sources[], const int sourceweights[], int outdegree, const int destinations[], const int destweights[], MPI_Info info, int reorder, MPI_Comm *comm_dist_graph));
KESTREL_MPI_FN(int, Dist_graph_neighbors,
               (MPI_Comm comm, int maxindegree, int sources[], int sourceweights[], int maxoutdegree, int destinations[], int destweights[]));
KESTREL_MPI_FN(int, Dist_graph_neighbors_count,
               (MPI_Comm comm, int *indegree, int *outdegree, int *weighted));
KESTREL_MPI_FN(int, Graph_create,
               (MPI_Comm comm_old, int nnodes, const int indx[], const int edges[], int reorder, MPI_Comm *comm_graph));
KESTREL_MPI_FN(int, Graph_get,
               (MPI_Comm comm, int maxindex, int maxedges, int indx[], int edges[]));
KESTREL_MPI_FN(int, Graph_map,
               (MPI_Comm comm, int nnodes, const int indx[], const int edges[], int *newrank));
KESTREL_MPI_FN(int, Graph_neighbors,
               (MPI_Comm comm, int rank, int maxneighbors, int neighbors[]));
KESTREL_MPI_FN(int, Graph_neighbors_count, (MPI_Comm comm, int rank, int *nneighbors));
KESTREL_MPI_FN(int, Graphdims_get, (MPI_Comm comm, int *nnodes, int *nedges));
KESTREL_MPI_FN(int, Ineighbor_allgather,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ineighbor_allgather_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ineighbor_allgatherv,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ineighbor_allgatherv_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ineighbor_alltoall,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ineighbor_alltoall_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ineighbor_alltoallv,
               (const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ineighbor_alltoallv_c,
               (const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ineighbor_alltoallw,
               (const void *sendbuf, const int sendcounts[], const MPI_Aint sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Ineighbor_alltoallw_c,
               (const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Neighbor_allgather,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm));
KESTREL_MPI_FN(int, Neighbor_allgather_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm));
KESTREL_MPI_FN(int, Neighbor_allgather_init,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Neighbor_allgather_init_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Neighbor_allgatherv,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm));
KESTREL_MPI_FN(int, Neighbor_allgatherv_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm));
KESTREL_MPI_FN(int, Neighbor_allgatherv_init,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Neighbor_allgatherv_init_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Neighbor_alltoall,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm));
KESTREL_MPI_FN(int, Neighbor_alltoall_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm));
KESTREL_MPI_FN(int, Neighbor_alltoall_init,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, void *recvbuf, int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Neighbor_alltoall_init_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Neighbor_alltoallv,
               (const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm));
KESTREL_MPI_FN(int, Neighbor_alltoallv_c,
               (const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm));
KESTREL_MPI_FN(int, Neighbor_alltoallv_init,
               (const void *sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype, void *recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Neighbor_alltoallv_init_c,
               (const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], MPI_Datatype sendtype, void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Neighbor_alltoallw,
               (const void *sendbuf, const int sendcounts[], const MPI_Aint sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm));
KESTREL_MPI_FN(int, Neighbor_alltoallw_c,
               (const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm));
KESTREL_MPI_FN(int, Neighbor_alltoallw_init,
               (const void *sendbuf, const int sendcounts[], const MPI_Aint sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const int recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Neighbor_alltoallw_init_c,
               (const void *sendbuf, const MPI_Count sendcounts[], const MPI_Aint sdispls[], const MPI_Datatype sendtypes[], void *recvbuf, const MPI_Count recvcounts[], const MPI_Aint rdispls[], const MPI_Datatype recvtypes[], MPI_Comm comm, MPI_Info info, MPI_Request *request));
KESTREL_MPI_FN(int, Add_error_class, (int *errorclass));
KESTREL_MPI_FN(int, Add_error_code, (int errorclass, int *errorcode));
KESTREL_MPI_FN(int, Add_error_string, (int errorcode, const char *string));
KESTREL_MPI_FN(int, Comm_create_from_group,
               (MPI_Group group, const char *stringtag, MPI_Info info, MPI_Errhandler errhandler, MPI_Comm *newcomm));
KESTREL_MPI_FN(int, Comm_create_group,
               (MPI_Comm comm, MPI_Group group, int tag, MPI_Comm *newcomm));
KESTREL_MPI_FN(int, Comm_get_info, (MPI_Comm comm, MPI_Info *info_used));
KESTREL_MPI_FN(int, Comm_idup, (MPI_Comm comm, MPI_Comm *newcomm, MPI_Request *request));
KESTREL_MPI_FN(int, Comm_idup_with_info,
               (MPI_Comm comm, MPI_Info info, MPI_Comm *newcomm, MPI_Request *request));
KESTREL_MPI_FN(int, Comm_set_info, (MPI_Comm comm, MPI_Info info));
KESTREL_MPI_FN(int, Grequest_complete, (MPI_Request request));
KESTREL_MPI_FN(int, Grequest_start,
               (MPI_Grequest_query_function *query_fn, MPI_Grequest_free_function *free_fn, MPI_Grequest_cancel_function *cancel_fn, void *extra_state, MPI_Request *request));
KESTREL_MPI_FN(int, Group_from_session_pset,
               (MPI_Session session, const char *pset_name, MPI_Group *newgroup));
KESTREL_MPI_FN(int, Info_create_env, (int argc, char *argv[], MPI_Info *info));
KESTREL_MPI_FN(int, Info_get_string,
               (MPI_Info info, const char *key, int *buflen, char *value, int *flag));
KESTREL_MPI_FN(int, Intercomm_create_from_groups,
               (MPI_Group local_group, int local_leader, MPI_Group remote_group, int remote_leader, const char *stringtag, MPI_Info info, MPI_Errhandler errhandler, MPI_Comm *newintercomm));
KESTREL_MPI_FN(int, Isendrecv,
               (const void *sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf, int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Isendrecv_c,
               (const void *sendbuf, MPI_Count sendcount, MPI_Datatype sendtype, int dest, int sendtag, void *recvbuf, MPI_Count recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Isendrecv_replace,
               (void *buf, int count, MPI_Datatype datatype, int dest, int sendtag, int source, int recvtag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Isendrecv_replace_c,
               (void *buf, MPI_Count count, MPI_Datatype datatype, int dest, int sendtag, int source, int recvtag, MPI_Comm comm, MPI_Request *request));
KESTREL_MPI_FN(int, Session_call_errhandler, (MPI_Session session, int errorcode));
KESTREL_MPI_FN(int, Session_create_errhandler,
               (MPI_Session_errhandler_function *session_errhandler_fn, MPI_Errhandler *errhandler));
KESTREL_MPI_FN(int, Session_finalize, (MPI_Session *session));
KESTREL_MPI_FN(int, Session_get_errhandler, (MPI_Session session, MPI_Errhandler *errhandler));
KESTREL_MPI_FN(int, Session_get_info, (MPI_Session session, MPI_Info *info_used));
KESTREL_MPI_FN(int, Session_get_nth_pset,
               (MPI_Session session, MPI_Info info, int n, int *pset_len, char *pset_name));
KESTREL_MPI_FN(int, Session_get_num_psets,
               (MPI_Session session, MPI_Info info, int *npset_names));
KESTREL_MPI_FN(int, Session_get_pset_info,
               (MPI_Session session, const char *pset_name, MPI_Info *info));
KESTREL_MPI_FN(int, Session_init,
               (MPI_Info info, MPI_Errhandler errhandler, MPI_Session *session));
KESTREL_MPI_FN(int, Session_set_errhandler, (MPI_Session session, MPI_Errhandler errhandler));
KESTREL_MPI_FN(int, Address, (void *location, MPI_Aint *address));
KESTREL_MPI_FN(int, Errhandler_create,
               (MPI_Comm_errhandler_function *comm_errhandler_fn, MPI_Errhandler *errhandler));
KESTREL_MPI_FN(int, Errhandler_get, (MPI_Comm comm, MPI_Errhandler *errhandler));
KESTREL_MPI_FN(int, Errhandler_set, (MPI_Comm comm, MPI_Errhandler errhandler));
KESTREL_MPI_FN(int, Pack_external,
               (const char *datarep, const void *inbuf, int incount, MPI_Datatype datatype, void *outbuf, MPI_Aint outsize, MPI_Aint *position));
KESTREL_MPI_FN(int, Pack_external_c,
               (const char *datarep, const void *inbuf, MPI_Count incount, MPI_Datatype datatype, void *outbuf, MPI_Count outsize, MPI_Count *position));
KESTREL_MPI_FN(int, Pack_external_size,
               (const char *datarep, int incount, MPI_Datatype datatype, MPI_Aint *size));
KESTREL_MPI_FN(int, Pack_external_size_c,
               (const char *datarep, MPI_Count incount, MPI_Datatype datatype, MPI_Count *size));
KESTREL_MPI_FN(int, Status_set_elements_x,
               (MPI_Status *status, MPI_Datatype datatype, MPI_Count count));
KESTREL_MPI_FN(int, Type_create_darray,
               (int size, int rank, int ndims, const int array_of_gsizes[], const int array_of_distribs[], const int array_of_dargs[], const int array_of_psizes[], int order, MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_darray_c,
               (int size, int rank, int ndims, const MPI_Count array_of_gsizes[], const int array_of_distribs[], const int array_of_dargs[], const int array_of_psizes[], int order, MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_f90_complex, (int p, int r, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_f90_integer, (int r, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_create_f90_real, (int p, int r, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_extent, (MPI_Datatype datatype, MPI_Aint *extent));
KESTREL_MPI_FN(int, Type_get_contents,
               (MPI_Datatype datatype, int max_integers, int max_addresses, int max_datatypes, int array_of_integers[], MPI_Aint array_of_addresses[], MPI_Datatype array_of_datatypes[]));
KESTREL_MPI_FN(int, Type_get_contents_c,
               (MPI_Datatype datatype, MPI_Count max_integers, MPI_Count max_addresses, MPI_Count max_large_counts, MPI_Count max_datatypes, int array_of_integers[], MPI_Aint array_of_addresses[], MPI_Count array_of_large_counts[], MPI_Datatype array_of_datatypes[]));
KESTREL_MPI_FN(int, Type_hindexed,
               (int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[], MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_hvector,
               (int count, int blocklength, MPI_Aint stride, MPI_Datatype oldtype, MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_lb, (MPI_Datatype datatype, MPI_Aint *displacement));
KESTREL_MPI_FN(int, Type_match_size, (int typeclass, int size, MPI_Datatype *datatype));
KESTREL_MPI_FN(int, Type_struct,
               (int count, int array_of_blocklengths[], MPI_Aint array_of_displacements[], MPI_Datatype array_of_types[], MPI_Datatype *newtype));
KESTREL_MPI_FN(int, Type_ub, (MPI_Datatype datatype, MPI_Aint *displacement));
KESTREL_MPI_FN(int, Unpack_external,
               (const char datarep[], const void *inbuf, MPI_Aint insize, MPI_Aint *position, void *outbuf, int outcount, MPI_Datatype datatype));
KESTREL_MPI_FN(int, Unpack_external_c,
               (const char datarep[], const void *inbuf, MPI_Count insize, MPI_Count *position, void *outbuf, MPI_Count outcount, MPI_Datatype datatype));

/* The tool information interface (MPI_T). */
KESTREL_MPI_FN(int, T_init_thread, (int required, int *provided));
KESTREL_MPI_FN(int, T_finalize, (void));
KESTREL_MPI_FN(int, T_cvar_get_num, (int *num_cvar));
KESTREL_MPI_FN(int, T_cvar_get_info,
               (int cvar_index, char *name, int *name_len, int *verbosity, MPI_Datatype *datatype, MPI_T_enum *enumtype, char *desc, int *desc_len, int *bind, int *scope));
KESTREL_MPI_FN(int, T_cvar_get_index, (const char *name, int *cvar_index));
KESTREL_MPI_FN(int, T_cvar_handle_alloc,
               (int cvar_index, void *obj_handle, MPI_T_cvar_handle *handle, int *count));
KESTREL_MPI_FN(int, T_cvar_handle_free, (MPI_T_cvar_handle *handle));
KESTREL_MPI_FN(int, T_cvar_read, (MPI_T_cvar_handle handle, void *buf));
KESTREL_MPI_FN(int, T_cvar_write, (MPI_T_cvar_handle handle, const void *buf));
KESTREL_MPI_FN(int, T_enum_get_info, (MPI_T_enum enumtype, int *num, char *name, int *name_len));
KESTREL_MPI_FN(int, T_enum_get_item,
               (MPI_T_enum enumtype, int indx, int *value, char *name, int *name_len));
KESTREL_MPI_FN(int, T_pvar_get_num, (int *num_pvar));
KESTREL_MPI_FN(int, T_pvar_get_info,
               (int pvar_index, char *name, int *name_len, int *verbosity, int *var_class, MPI_Datatype *datatype, MPI_T_enum *enumtype, char *desc, int *desc_len, int *bind, int *readonly, int *continuous, int *atomic));
KESTREL_MPI_FN(int, T_pvar_get_index, (const char *name, int var_class, int *pvar_index));
KESTREL_MPI_FN(int, T_pvar_session_create, (MPI_T_pvar_session *session));
KESTREL_MPI_FN(int, T_pvar_session_free, (MPI_T_pvar_session *session));
KESTREL_MPI_FN(int, T_pvar_handle_alloc,
               (MPI_T_pvar_session session, int pvar_index, void *obj_handle, MPI_T_pvar_handle *handle, int *count));
KESTREL_MPI_FN(int, T_pvar_handle_free, (MPI_T_pvar_session session, MPI_T_pvar_handle *handle));
KESTREL_MPI_FN(int, T_pvar_start, (MPI_T_pvar_session session, MPI_T_pvar_handle handle));
KESTREL_MPI_FN(int, T_pvar_stop, (MPI_T_pvar_session session, MPI_T_pvar_handle handle));
KESTREL_MPI_FN(int, T_pvar_read, (MPI_T_pvar_session session, MPI_T_pvar_handle handle, void *buf));
KESTREL_MPI_FN(int, T_pvar_readreset,
               (MPI_T_pvar_session session, MPI_T_pvar_handle handle, void *buf));
KESTREL_MPI_FN(int, T_pvar_reset, (MPI_T_pvar_session session, MPI_T_pvar_handle handle));
KESTREL_MPI_FN(int, T_pvar_write,
               (MPI_T_pvar_session session, MPI_T_pvar_handle handle, const void *buf));
KESTREL_MPI_FN(int, T_category_get_num, (int *num_cat));
KESTREL_MPI_FN(int, T_category_get_info,
               (int cat_index, char *name, int *name_len, char *desc, int *desc_len, int *num_cvars, int *num_pvars, int *num_categories));
KESTREL_MPI_FN(int, T_category_get_index, (const char *name, int *cat_index));
KESTREL_MPI_FN(int, T_category_get_cvars, (int cat_index, int len, int indices[]));
KESTREL_MPI_FN(int, T_category_get_pvars, (int cat_index, int len, int indices[]));
KESTREL_MPI_FN(int, T_category_get_categories, (int cat_index, int len, int indices[]));
KESTREL_MPI_FN(int, T_category_changed, (int *update_number));

/* ---- Not implemented ------------------------------------------------------------------ */

/* One-sided communication. */
#define MPI_WIN_BASE 0x66000001
#define MPI_WIN_SIZE 0x66000003
#define MPI_WIN_DISP_UNIT 0x66000005
#define MPI_WIN_CREATE_FLAVOR 0x66000007
#define MPI_WIN_MODEL 0x66000009
enum MPI_Win_create_flavor {
    MPI_WIN_FLAVOR_CREATE = 1,
    MPI_WIN_FLAVOR_ALLOCATE = 2,
    MPI_WIN_FLAVOR_DYNAMIC = 3,
    MPI_WIN_FLAVOR_SHARED = 4
};
enum MPI_Win_model { MPI_WIN_SEPARATE = 1, MPI_WIN_UNIFIED = 2 };
#define MPI_LOCK_EXCLUSIVE 234
#define MPI_LOCK_SHARED 235
#define MPI_MODE_NOCHECK 1024
#define MPI_MODE_NOSTORE 2048
#define MPI_MODE_NOPUT 4096
#define MPI_MODE_NOPRECEDE 8192
#define MPI_MODE_NOSUCCEED 16384
typedef int(MPI_Win_copy_attr_function)(MPI_Win oldwin, int win_keyval, void *extra_state,
                                         void *attribute_val_in, void *attribute_val_out,
                                         int *flag);
typedef int(MPI_Win_delete_attr_function)(MPI_Win win, int win_keyval, void *attribute_val,
                                           void *extra_state);
typedef void(MPI_Win_errhandler_function)(MPI_Win *win, int *errcode, ...);
typedef MPI_Win_errhandler_function MPI_Win_errhandler_fn;
#define MPI_WIN_NULL_COPY_FN ((MPI_Win_copy_attr_function *)0)
#define MPI_WIN_NULL_DELETE_FN ((MPI_Win_delete_attr_function *)0)
#define MPI_WIN_DUP_FN ((MPI_Win_copy_attr_function *)MPI_DUP_FN)

KESTREL_MPI_FN(int, Win_create,
               (void *base, MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win));
KESTREL_MPI_FN(int, Win_create_c,
               (void *base, MPI_Aint size, MPI_Aint disp_unit, MPI_Info info, MPI_Comm comm, MPI_Win *win));
KESTREL_MPI_FN(int, Win_allocate,
               (MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win));
KESTREL_MPI_FN(int, Win_allocate_c,
               (MPI_Aint size, MPI_Aint disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win));
KESTREL_MPI_FN(int, Win_allocate_shared,
               (MPI_Aint size, int disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win));
KESTREL_MPI_FN(int, Win_allocate_shared_c,
               (MPI_Aint size, MPI_Aint disp_unit, MPI_Info info, MPI_Comm comm, void *baseptr, MPI_Win *win));
KESTREL_MPI_FN(int, Win_shared_query,
               (MPI_Win win, int rank, MPI_Aint *size, int *disp_unit, void *baseptr));
KESTREL_MPI_FN(int, Win_shared_query_c,
               (MPI_Win win, int rank, MPI_Aint *size, MPI_Aint *disp_unit, void *baseptr));
KESTREL_MPI_FN(int, Win_create_dynamic, (MPI_Info info, MPI_Comm comm, MPI_Win *win));
KESTREL_MPI_FN(int, Win_attach, (MPI_Win win, void *base, MPI_Aint size));
KESTREL_MPI_FN(int, Win_detach, (MPI_Win win, const void *base));
KESTREL_MPI_FN(int, Win_free, (MPI_Win *win));
KESTREL_MPI_FN(int, Put,
               (const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win));
KESTREL_MPI_FN(int, Put_c,
               (const void *origin_addr, MPI_Count origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, MPI_Count target_count, MPI_Datatype target_datatype, MPI_Win win));
KESTREL_MPI_FN(int, Get,
               (void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win));
KESTREL_MPI_FN(int, Get_c,
               (void *origin_addr, MPI_Count origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, MPI_Count target_count, MPI_Datatype target_datatype, MPI_Win win));
KESTREL_MPI_FN(int, Accumulate,
               (const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win));
KESTREL_MPI_FN(int, Accumulate_c,
               (const void *origin_addr, MPI_Count origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, MPI_Count target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win));
KESTREL_MPI_FN(int, Get_accumulate,
               (const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, void *result_addr, int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win));
KESTREL_MPI_FN(int, Get_accumulate_c,
               (const void *origin_addr, MPI_Count origin_count, MPI_Datatype origin_datatype, void *result_addr, MPI_Count result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp, MPI_Count target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win));
KESTREL_MPI_FN(int, Fetch_and_op,
               (const void *origin_addr, void *result_addr, MPI_Datatype datatype, int target_rank, MPI_Aint target_disp, MPI_Op op, MPI_Win win));
KESTREL_MPI_FN(int, Compare_and_swap,
               (const void *origin_addr, const void *compare_addr, void *result_addr, MPI_Datatype datatype, int target_rank, MPI_Aint target_disp, MPI_Win win));
KESTREL_MPI_FN(int, Rput,
               (const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win, MPI_Request *request));
KESTREL_MPI_FN(int, Rput_c,
               (const void *origin_addr, MPI_Count origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, MPI_Count target_count, MPI_Datatype target_datatype, MPI_Win win, MPI_Request *request));
KESTREL_MPI_FN(int, Rget,
               (void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Win win, MPI_Request *request));
KESTREL_MPI_FN(int, Rget_c,
               (void *origin_addr, MPI_Count origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, MPI_Count target_count, MPI_Datatype target_datatype, MPI_Win win, MPI_Request *request));
KESTREL_MPI_FN(int, Raccumulate,
               (const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win, MPI_Request *request));
KESTREL_MPI_FN(int, Raccumulate_c,
               (const void *origin_addr, MPI_Count origin_count, MPI_Datatype origin_datatype, int target_rank, MPI_Aint target_disp, MPI_Count target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win, MPI_Request *request));
KESTREL_MPI_FN(int, Rget_accumulate,
               (const void *origin_addr, int origin_count, MPI_Datatype origin_datatype, void *result_addr, int result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp, int target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win, MPI_Request *request));
KESTREL_MPI_FN(int, Rget_accumulate_c,
               (const void *origin_addr, MPI_Count origin_count, MPI_Datatype origin_datatype, void *result_addr, MPI_Count result_count, MPI_Datatype result_datatype, int target_rank, MPI_Aint target_disp, MPI_Count target_count, MPI_Datatype target_datatype, MPI_Op op, MPI_Win win, MPI_Request *request));
KESTREL_MPI_FN(int, Win_fence, (int assert, MPI_Win win));
KESTREL_MPI_FN(int, Win_post, (MPI_Group group, int assert, MPI_Win win));
KESTREL_MPI_FN(int, Win_start, (MPI_Group group, int assert, MPI_Win win));
KESTREL_MPI_FN(int, Win_complete, (MPI_Win win));
KESTREL_MPI_FN(int, Win_wait, (MPI_Win win));
KESTREL_MPI_FN(int, Win_test, (MPI_Win win, int *flag));
KESTREL_MPI_FN(int, Win_lock, (int lock_type, int rank, int assert, MPI_Win win));
KESTREL_MPI_FN(int, Win_unlock, (int rank, MPI_Win win));
KESTREL_MPI_FN(int, Win_lock_all, (int assert, MPI_Win win));
KESTREL_MPI_FN(int, Win_unlock_all, (MPI_Win win));
KESTREL_MPI_FN(int, Win_flush, (int rank, MPI_Win win));
KESTREL_MPI_FN(int, Win_flush_all, (MPI_Win win));
KESTREL_MPI_FN(int, Win_flush_local, (int rank, MPI_Win win));
KESTREL_MPI_FN(int, Win_flush_local_all, (MPI_Win win));
KESTREL_MPI_FN(int, Win_sync, (MPI_Win win));
KESTREL_MPI_FN(int, Win_get_group, (MPI_Win win, MPI_Group *group));
KESTREL_MPI_FN(int, Win_set_name, (MPI_Win win, const char *win_name));
KESTREL_MPI_FN(int, Win_get_name, (MPI_Win win, char *win_name, int *resultlen));
KESTREL_MPI_FN(int, Win_create_errhandler,
               (MPI_Win_errhandler_function * win_errhandler_fn, MPI_Errhandler *errhandler));
KESTREL_MPI_FN(int, Win_set_errhandler, (MPI_Win win, MPI_Errhandler errhandler));
KESTREL_MPI_FN(int, Win_get_errhandler, (MPI_Win win, MPI_Errhandler *errhandler));
KESTREL_MPI_FN(int, Win_call_errhandler, (MPI_Win win, int errorcode));
KESTREL_MPI_FN(int, Win_set_info, (MPI_Win win, MPI_Info info));
KESTREL_MPI_FN(int, Win_get_info, (MPI_Win win, MPI_Info *info_used));
KESTREL_MPI_FN(int, Win_create_keyval,
               (MPI_Win_copy_attr_function * win_copy_attr_fn, MPI_Win_delete_attr_function *win_delete_attr_fn, int *win_keyval, void *extra_state));
KESTREL_MPI_FN(int, Win_free_keyval, (int *win_keyval));
KESTREL_MPI_FN(int, Win_set_attr, (MPI_Win win, int win_keyval, void *attribute_val));
KESTREL_MPI_FN(int, Win_get_attr, (MPI_Win win, int win_keyval, void *attribute_val, int *flag));
KESTREL_MPI_FN(int, Win_delete_attr, (MPI_Win win, int win_keyval));

/* Exported by libmpich.so.12 for binary compatibility with MPICH (a binary built elsewhere
 * loads, and fails with MPI_ERR_UNSUPPORTED_OPERATION naming the function when it calls
 * one), but not implemented: a program compiled against this header that calls one stops
 * at compile time with the reason, and configure scripts that probe for them find them
 * missing. Compilers without the `unavailable` attribute see no declaration. */
#if defined(__has_attribute)
#  if __has_attribute(unavailable)
#    define KESTREL_UNIMPLEMENTED(ret, name, why)                       \
         ret MPI_##name() __attribute__((unavailable(why)));            \
         ret PMPI_##name() __attribute__((unavailable(why)))
#  endif
#endif
#ifndef KESTREL_UNIMPLEMENTED
#  define KESTREL_UNIMPLEMENTED(ret, name, why) struct kestrel_unimplemented_##name
#endif
#define KESTREL_NO_IO "Kestrel does not implement MPI-IO yet"
#define KESTREL_NO_T_EVENTS "Kestrel does not implement the MPI_T events and sources yet"

/* MPI-IO. */
KESTREL_UNIMPLEMENTED(MPI_Fint, File_c2f, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_call_errhandler, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_close, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_create_errhandler, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_delete, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(MPI_File, File_f2c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_get_amode, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_get_atomicity, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_get_byte_offset, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_get_errhandler, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_get_group, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_get_info, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_get_position, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_get_position_shared, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_get_size, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_get_type_extent, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_get_type_extent_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_get_view, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iread, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iread_all, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iread_all_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iread_at, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iread_at_all, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iread_at_all_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iread_at_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iread_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iread_shared, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iread_shared_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iwrite, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iwrite_all, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iwrite_all_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iwrite_at, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iwrite_at_all, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iwrite_at_all_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iwrite_at_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iwrite_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iwrite_shared, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_iwrite_shared_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_open, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_preallocate, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_all, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_all_begin, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_all_begin_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_all_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_all_end, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_at, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_at_all, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_at_all_begin, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_at_all_begin_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_at_all_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_at_all_end, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_at_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_ordered, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_ordered_begin, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_ordered_begin_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_ordered_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_ordered_end, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_shared, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_read_shared_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_seek, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_seek_shared, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_set_atomicity, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_set_errhandler, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_set_info, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_set_size, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_set_view, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_sync, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_all, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_all_begin, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_all_begin_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_all_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_all_end, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_at, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_at_all, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_at_all_begin, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_at_all_begin_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_at_all_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_at_all_end, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_at_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_ordered, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_ordered_begin, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_ordered_begin_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_ordered_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_ordered_end, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_shared, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, File_write_shared_c, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, Register_datarep, KESTREL_NO_IO);
KESTREL_UNIMPLEMENTED(int, Register_datarep_c, KESTREL_NO_IO);

/* Tool interface events and sources. */
KESTREL_UNIMPLEMENTED(int, T_category_get_events, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_category_get_num_events, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_event_callback_get_info, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_event_callback_set_info, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_event_copy, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_event_get_index, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_event_get_info, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_event_get_num, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_event_get_source, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_event_get_timestamp, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_event_handle_alloc, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_event_handle_free, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_event_handle_get_info, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_event_handle_set_info, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_event_read, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_event_register_callback, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_event_set_dropped_handler, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_source_get_info, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_source_get_num, KESTREL_NO_T_EVENTS);
KESTREL_UNIMPLEMENTED(int, T_source_get_timestamp, KESTREL_NO_T_EVENTS);

#if defined(__cplusplus)
}
#endif

#endif /* KESTREL_MPI_H */
