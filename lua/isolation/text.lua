-- isolation.text: the one escape for what `isolate` and the session manager
-- print or hand over (stderr lines, the manager's `log` and `on_end`).
--
-- Their lines carry bytes the sandbox chose: the name of a nested
-- repository, a path below the workdir. Raw, those bytes reach the
-- operator's terminal: ESC and BEL set its title or erase a line, CR and LF
-- forge whole `isolate: protect: ...` lines, OSC 52 writes the clipboard on
-- terminals that support it, 0x9b is a one-byte CSI on some. Each byte that
-- is not printable ASCII (0x20 to 0x7e), and the backslash itself, is
-- written `\xNN` (lower-case hex): the format the proxy's events use
-- (src/proxy/proxy_event.c, copy_text), so that every line a reader sees is
-- unambiguous and one unescape reads them all. Escaping happens once, where
-- a line leaves (the writer), never where a value is put into a line, so
-- nothing is escaped twice.
--
-- Beside it, the two other ways a value is put into text here: quoted in
-- a message (show) and quoted as one word for /bin/sh (shquote).
local M = {}

local function hex(c) return string.format("\\x%02x", c:byte()) end

--- s (a string, or anything tostring takes) with every byte outside
--- 0x20-0x7e, and `\`, written `\xNN`. The result holds printable ASCII
--- only: no newline, no control byte.
function M.escape(s)
  return (tostring(s):gsub("[\0-\31\\\127-\255]", hex))
end

--- Text of several lines (a traceback, a table of checks): each line
--- escaped, the newlines between them kept.
function M.escape_lines(s)
  local out = {}
  for line in (tostring(s) .. "\n"):gmatch("([^\n]*)\n") do out[#out + 1] = M.escape(line) end
  return table.concat(out, "\n")
end

--- A value in a message: Lua's %q of tostring(s), whole, on one line
--- (a newline written \n).
function M.show(s)
  return (string.format("%q", tostring(s)):gsub("\\\n", "\\n"))
end

--- One word for /bin/sh: tostring(s) single-quoted, each ' written '\''.
function M.shquote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

return M
