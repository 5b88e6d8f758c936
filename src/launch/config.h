/*
 * config.h - config normalization, shared by isolation.config, the argv
 * builders and validate_for_target.
 */
#ifndef ISOLATION_CONFIG_H
#define ISOLATION_CONFIG_H

#include <lua.h>

/*
 * Normalizes the config at idx (nil or none: all defaults; raw or already
 * normalized). On success pushes a new normalized table and returns 1. On
 * bad data pushes the error message ("isolation: <field> ...") and returns 0.
 * Never changes the table at idx. Raises only for a non-table, non-nil value.
 */
int config_normalize(lua_State *L, int idx);

#endif
