/*
 * status.c - static texts for status codes and backend names.
 */
#include <graphrun.h>

static const char *const status_text[GR_STATUS_COUNT_] = {
    [GR_OK] = "ok",
    [GR_ERR_INVALID_ARGUMENT] = "invalid argument",
    [GR_ERR_INVALID_USAGE] = "invalid usage",
    [GR_ERR_OUT_OF_MEMORY] = "out of host memory",
    [GR_ERR_OVER_BUDGET] = "request exceeds the device memory budget",
    [GR_ERR_CUDA] = "CUDA error",
    [GR_ERR_DEVICE_LOST] = "device lost",
    [GR_ERR_TIMEOUT] = "deadline passed",
    [GR_ERR_CANCELED] = "canceled",
    [GR_ERR_SHUTDOWN] = "runtime is shutting down",
    [GR_ERR_UNAVAILABLE] = "backend or device not available",
    [GR_ERR_INTERNAL] = "internal error (a bug in graphrun)",
};

const char *gr_status_str(gr_status s)
{
    if ((unsigned)s >= GR_STATUS_COUNT_ || status_text[s] == NULL)
        return "unknown status";
    return status_text[s];
}

const char *gr_backend_name(gr_backend b)
{
    switch (b) {
    case GR_BACKEND_AUTO:
        return "auto";
    case GR_BACKEND_HOST:
        return "host";
    case GR_BACKEND_CUDA:
        return "cuda";
    }
    return "unknown";
}
