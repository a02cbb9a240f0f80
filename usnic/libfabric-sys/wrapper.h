/* The libfabric headers the Kestrel usnic transport binds to. bindgen reads this file, and the
 * generated shims for the `static inline` calls include it, so both see the same declarations. */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
