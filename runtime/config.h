/*
 * config.h - checks of a runtime's configuration, and its machine-dependent defaults.
 */
#ifndef GR_CONFIG_H
#define GR_CONFIG_H

#include <graphrun.h>

/* GR_OK, or GR_ERR_INVALID_ARGUMENT with the field and the reason in err (optional). Checks
 * what the config alone says: initialization, ranges, the device list's shape; and copies
 * it into *full, a config of this version: a caller compiled against an older, shorter
 * gr_config gets the defaults of the fields it does not know. Any thread. */
gr_status gr__config_check(const gr_config *cfg, gr_config *full, gr_error_info *err);

/* Helper threads of the copy pool the config asks for. Any thread. */
unsigned gr__config_copy_threads(const gr_config *cfg);

#endif /* GR_CONFIG_H */
