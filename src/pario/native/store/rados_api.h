/* pario store: librados, loaded once by dlopen("librados.so.2") for everything of a store that
 * lives in RADOS (the rados data plane, store/planes/rados.c), so that libpario_trace.so builds
 * without Ceph's headers and gains no link dependency.  The few functions used are declared
 * here by hand, with the signatures of librados' C API (https://docs.ceph.com/en/pacific/rados/api/librados/).
 *
 * Connection (pxs_rados_connect): a cluster handle reads <cluster>/ceph.conf and has its
 * operation timeouts set explicitly (as pario.cluster.client.connect: rados_osd_op_timeout,
 * rados_mon_op_timeout, client_mount_timeout), so that a down OSD or monitor is an error,
 * never a hang. */
#ifndef PARIO_STORE_RADOS_API_H
#define PARIO_STORE_RADOS_API_H

#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>
#include <time.h>

#include "store/meta.h"

#define PXS_RADOS_CREATE_EXCLUSIVE 1        /* LIBRADOS_CREATE_EXCLUSIVE */
#define PXS_RADOS_CREATE_IDEMPOTENT 0       /* LIBRADOS_CREATE_IDEMPOTENT */

typedef void *rd_handle;           /* rados_t, rados_ioctx_t, rados_completion_t, ops, list ctx */
typedef void (*rd_callback)(rd_handle, void *);

typedef struct pxs_rados_api {
    int (*create)(rd_handle *, const char *);
    int (*conf_read_file)(rd_handle, const char *);
    int (*conf_set)(rd_handle, const char *, const char *);
    int (*connect)(rd_handle);
    void (*shutdown)(rd_handle);
    int (*ioctx_create)(rd_handle, const char *, rd_handle *);
    void (*ioctx_destroy)(rd_handle);
    void (*ioctx_set_namespace)(rd_handle, const char *);
    int (*aio_create_completion)(void *, rd_callback, rd_callback, rd_handle *);
    int (*aio_wait_for_complete)(rd_handle);
    int (*aio_get_return_value)(rd_handle);
    void (*aio_release)(rd_handle);
    int (*aio_write)(rd_handle, const char *, rd_handle, const char *, size_t, uint64_t);
    int (*aio_read)(rd_handle, const char *, rd_handle, char *, size_t, uint64_t);
    int (*stat)(rd_handle, const char *, uint64_t *, time_t *);
    uint64_t (*get_last_version)(rd_handle);
    int (*remove)(rd_handle, const char *);
    rd_handle (*create_write_op)(void);
    void (*release_write_op)(rd_handle);
    void (*write_op_create)(rd_handle, int, const char *);
    void (*write_op_assert_version)(rd_handle, uint64_t);
    void (*write_op_truncate)(rd_handle, uint64_t);
    void (*write_op_write)(rd_handle, const char *, size_t, uint64_t);
    int (*write_op_operate)(rd_handle, rd_handle, const char *, time_t *, int);
    int (*aio_write_op_operate)(rd_handle, rd_handle, rd_handle, const char *, time_t *, int);
    rd_handle (*create_read_op)(void);
    void (*release_read_op)(rd_handle);
    void (*read_op_read)(rd_handle, uint64_t, size_t, char *, size_t *, int *);
    int (*aio_read_op_operate)(rd_handle, rd_handle, rd_handle, const char *, int);
    int (*nobjects_list_open)(rd_handle, rd_handle *);
    int (*nobjects_list_next)(rd_handle, const char **, const char **, const char **);
    void (*nobjects_list_close)(rd_handle);
    /* the coordination member (store/coord/rados.c): synchronous object I/O and cls_lock leases */
    int (*read)(rd_handle, const char *, char *, size_t, uint64_t);
    int (*write_full)(rd_handle, const char *, const char *, size_t);
    void (*write_op_write_full)(rd_handle, const char *, size_t);
    void (*write_op_setxattr)(rd_handle, const char *, const char *, size_t);
    void (*write_op_append)(rd_handle, const char *, size_t);
    int (*lock_exclusive)(rd_handle, const char *, const char *, const char *, const char *, struct timeval *,
                          uint8_t);
    int (*lock_shared)(rd_handle, const char *, const char *, const char *, const char *, const char *,
                       struct timeval *, uint8_t);
    int (*unlock)(rd_handle, const char *, const char *, const char *);
} pxs_rados_api;

#define PXS_RADOS_LOCK_MUST_RENEW 2         /* LIBRADOS_LOCK_FLAG_MUST_RENEW: renewed only while still held */

/* the functions, valid after pxs_rados_load returned PXS_OK */
extern pxs_rados_api pxs_rados;

/* load librados once (every caller after the first gets the first's result): PXS_OK, or
 * PXS_ENOSYS with the reason in err */
int pxs_rados_load(char *err, size_t errlen);
/* a connected cluster handle for the cluster directory cluster (its ceph.conf): PXS_OK,
 * PXS_ENOENT (no ceph.conf: the cluster is down), PXS_EIO; err: one line */
int pxs_rados_connect(const char *cluster, rd_handle *out, char *err, size_t errlen);

/* an I/O context of cluster on pool, in namespace ns: PXS_OK, PXS_ENOENT (no such pool), PXS_EIO */
int pxs_rados_ioctx(rd_handle cluster, const char *pool, const char *ns, rd_handle *out, char *err, size_t errlen);
/* the cluster directory of a store on the rados data plane (store.json "cluster"; planes/rados.c),
 * NULL for another plane */
const char *pxs_rados_cluster_of(const pxs_config *cfg);

#endif
