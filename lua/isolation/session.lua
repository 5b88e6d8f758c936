-- isolation.session: placeholder until its issue lands.
local M = {}
return M
