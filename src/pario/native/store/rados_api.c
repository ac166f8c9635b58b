/* pario store: librados loaded by dlopen, and a cluster connection (store/rados_api.h). */
#define _GNU_SOURCE
#include "store/rados_api.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "store/meta.h"

#define OSD_OP_TIMEOUT "60"       /* pario.cluster.conf.CLIENT_OP_TIMEOUT */
#define MON_TIMEOUT "10"          /* pario.store.rados.CONNECT_TIMEOUT */

pxs_rados_api pxs_rados;
static int rd_loaded;              /* 1 ok, -1 failed */
static char rd_why[300];
static pthread_once_t rd_once = PTHREAD_ONCE_INIT;

static void rd_load(void)
{
    void *h = dlopen("librados.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(rd_why, sizeof rd_why, "cannot load librados.so.2 (%s); the rados backend needs Ceph's librados "
                 "(scripts/setup.sh ceph)", e ? e : "not found");
        rd_loaded = -1;
        return;
    }
    const pxs_dlsym tab[] = {
        {"rados_create", (void **)&pxs_rados.create},
        {"rados_conf_read_file", (void **)&pxs_rados.conf_read_file},
        {"rados_conf_set", (void **)&pxs_rados.conf_set},
        {"rados_connect", (void **)&pxs_rados.connect},
        {"rados_shutdown", (void **)&pxs_rados.shutdown},
        {"rados_ioctx_create", (void **)&pxs_rados.ioctx_create},
        {"rados_ioctx_destroy", (void **)&pxs_rados.ioctx_destroy},
        {"rados_ioctx_set_namespace", (void **)&pxs_rados.ioctx_set_namespace},
        {"rados_aio_create_completion", (void **)&pxs_rados.aio_create_completion},
        {"rados_aio_wait_for_complete", (void **)&pxs_rados.aio_wait_for_complete},
        {"rados_aio_get_return_value", (void **)&pxs_rados.aio_get_return_value},
        {"rados_aio_release", (void **)&pxs_rados.aio_release},
        {"rados_aio_write", (void **)&pxs_rados.aio_write},
        {"rados_aio_read", (void **)&pxs_rados.aio_read},
        {"rados_stat", (void **)&pxs_rados.stat},
        {"rados_get_last_version", (void **)&pxs_rados.get_last_version},
        {"rados_remove", (void **)&pxs_rados.remove},
        {"rados_create_write_op", (void **)&pxs_rados.create_write_op},
        {"rados_release_write_op", (void **)&pxs_rados.release_write_op},
        {"rados_write_op_create", (void **)&pxs_rados.write_op_create},
        {"rados_write_op_assert_version", (void **)&pxs_rados.write_op_assert_version},
        {"rados_write_op_truncate", (void **)&pxs_rados.write_op_truncate},
        {"rados_write_op_write", (void **)&pxs_rados.write_op_write},
        {"rados_write_op_operate", (void **)&pxs_rados.write_op_operate},
        {"rados_aio_write_op_operate", (void **)&pxs_rados.aio_write_op_operate},
        {"rados_create_read_op", (void **)&pxs_rados.create_read_op},
        {"rados_release_read_op", (void **)&pxs_rados.release_read_op},
        {"rados_read_op_read", (void **)&pxs_rados.read_op_read},
        {"rados_aio_read_op_operate", (void **)&pxs_rados.aio_read_op_operate},
        {"rados_nobjects_list_open", (void **)&pxs_rados.nobjects_list_open},
        {"rados_nobjects_list_next", (void **)&pxs_rados.nobjects_list_next},
        {"rados_nobjects_list_close", (void **)&pxs_rados.nobjects_list_close},
        {"rados_read", (void **)&pxs_rados.read},
        {"rados_write_full", (void **)&pxs_rados.write_full},
        {"rados_write_op_write_full", (void **)&pxs_rados.write_op_write_full},
        {"rados_write_op_setxattr", (void **)&pxs_rados.write_op_setxattr},
        {"rados_write_op_append", (void **)&pxs_rados.write_op_append},
        {"rados_lock_exclusive", (void **)&pxs_rados.lock_exclusive},
        {"rados_lock_shared", (void **)&pxs_rados.lock_shared},
        {"rados_unlock", (void **)&pxs_rados.unlock},
    };
    rd_loaded = pxs_dlsym_table(h, "librados.so.2", tab, sizeof tab / sizeof tab[0], rd_why, sizeof rd_why) ? -1 : 1;
}

int pxs_rados_load(char *err, size_t errlen)
{
    pthread_once(&rd_once, rd_load);
    if (rd_loaded == 1)
        return PXS_OK;
    snprintf(err, errlen, "%s", rd_why);
    return PXS_ENOSYS;
}

int pxs_rados_connect(const char *cluster, rd_handle *out, char *err, size_t errlen)
{
    *out = NULL;
    int rc = pxs_rados_load(err, errlen);
    if (rc)
        return rc;
    char conf[PATH_MAX];
    struct stat sb;
    snprintf(conf, sizeof conf, "%s/ceph.conf", cluster);
    if (stat(conf, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(err, errlen, "cluster %s: no ceph.conf (is it down? 'pario cluster up %s')", cluster, cluster);
        return PXS_ENOENT;
    }
    rd_handle h = NULL;
    int rv = pxs_rados.create(&h, NULL);
    if (rv < 0) {
        snprintf(err, errlen, "cannot make a RADOS client for %s: %s", conf, strerror(-rv));
        return PXS_EIO;
    }
    const char *opts[][2] = {{"rados_osd_op_timeout", OSD_OP_TIMEOUT},
                             {"rados_mon_op_timeout", MON_TIMEOUT},
                             {"client_mount_timeout", MON_TIMEOUT}};
    rv = pxs_rados.conf_read_file(h, conf);
    for (size_t i = 0; rv >= 0 && i < sizeof opts / sizeof opts[0]; i++)
        rv = pxs_rados.conf_set(h, opts[i][0], opts[i][1]);
    if (rv >= 0)
        rv = pxs_rados.connect(h);
    if (rv < 0) {
        snprintf(err, errlen, "cannot connect to the cluster of %s: %s (is the cluster down? 'pario cluster status "
                 "%s')", conf, strerror(-rv), cluster);
        pxs_rados.shutdown(h);
        return PXS_EIO;
    }
    *out = h;
    return PXS_OK;
}

int pxs_rados_ioctx(rd_handle cluster, const char *pool, const char *ns, rd_handle *out, char *err, size_t errlen)
{
    int rv = pxs_rados.ioctx_create(cluster, pool, out);
    if (rv < 0) {
        *out = NULL;
        if (rv == -ENOENT)
            snprintf(err, errlen, "pool %s does not exist in the cluster", pool);
        else
            snprintf(err, errlen, "cannot open pool %s: %s", pool, strerror(-rv));
        return rv == -ENOENT ? PXS_ENOENT : PXS_EIO;
    }
    pxs_rados.ioctx_set_namespace(*out, ns);
    return PXS_OK;
}
