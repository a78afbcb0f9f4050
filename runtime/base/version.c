/*
 * version.c - the library's version: the one of the header it was built with, for a caller
 * to compare with the GR_VERSION of the header it was compiled with.
 */
#include <graphrun.h>

const char *gr_version(void)
{
    return GR_VERSION;
}

uint32_t gr_version_number(void)
{
    return GR_VERSION_NUMBER;
}
