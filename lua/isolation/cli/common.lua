-- isolation.cli.common: what every part of `isolate` shares: the one way a
-- line reaches stderr (say), the Exit value that ends isolate (raised,
-- caught by isolation.cli's main), quoting for bash and the small formats
-- (host:port, an event's line, a JSON array of strings).
local uv = require("luv")
local json = require("isolation.json")
local textmod = require("isolation.text")

local M = {}

-- Every line isolate writes to stderr goes through here: its pieces joined
-- and escaped as one line (isolation.text), so that no byte a sandbox put
-- in a path or a name (ESC, BEL, CR, LF, 0x9b) reaches the terminal or
-- starts a line of its own. The proxy's event lines are the exception:
-- the proxy escaped their fields already, where it made the event, in the
-- same format (src/proxy/proxy_event.c): escaping them again would double
-- each backslash.
local function say(...)
  io.stderr:write(textmod.escape(table.concat({ ... })), "\n")
end

local EXIT_USAGE = 2
-- isolate's own failures at run time (the proxy cannot start, bash cannot be
-- spawned): 125, as env(1) and timeout(1) do, so that they are not taken
-- for the command's own status.
local EXIT_FAILURE = 125

-- One line; the library's "isolation: " prefixes dropped (isolate says who).
local function one_line(msg)
  return (tostring(msg):gsub("^isolation: ", ""):gsub(": isolation: ", ": "):gsub("%s*\n%s*", " "))
end

-- What ends isolate: raised, caught by main() (or by the wrappers the
-- specs call), never by anything in between.
local Exit = { __name = "isolation.cli.exit" }
Exit.__tostring = function(e) return "isolate: exit " .. e.status .. (e.message and (": " .. e.message) or "") end

local function exit_with(status, msg)
  error(setmetatable({ status = status, message = msg and one_line(msg) }, Exit), 0)
end

local function die_usage(msg) exit_with(EXIT_USAGE, msg) end

local function die(msg) exit_with(EXIT_FAILURE, msg) end

-- Quotes one word for bash. Plain words stay bare so that --dry-run reads
-- well; anything else is single-quoted, where only ' itself needs care.
-- A bare word must not be a reserved word in command position, nor hold
-- `=` (an assignment), `~`, globs or any other character bash interprets.
local RESERVED = {}
for w in ([=[! case coproc do done elif else esac fi for function if in select then
  time until while { } [[ ]] ]=]):gmatch("%S+") do RESERVED[w] = true end

local function shquote(s, first)
  if s:match("^[%w@%%+:,./_-]+$") and not (first and RESERVED[s]) then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

local function command_line(words)
  local out = {}
  for i, w in ipairs(words) do out[i] = shquote(w, i == 1) end
  return table.concat(out, " ")
end

-- JSON text of an array of strings, each written by the codec policy and
-- session use (cjson would write "/" as "\/"), ", " between them as
-- isolate has always printed; nil, err for a string that is not UTF-8.
local function json_array(list, where)
  local out = {}
  for i, s in ipairs(list) do
    local text, err = json.encode(s, where .. "[" .. i .. "]")
    if not text then return nil, err end
    out[i] = text
  end
  return "[" .. table.concat(out, ", ") .. "]"
end

-- config()'s message for one pattern, told in terms of the option.
local function pattern_error(opt, pattern, err)
  local msg, n = tostring(err):gsub("^isolation: ", ""):gsub("^allow_hosts%[1%]", opt)
  if n == 0 then msg = string.format("%s %q: %s", opt, pattern, msg) end
  return msg
end

-- Where the proxy's private directory goes: $TMPDIR when it is absolute and
-- short enough for the socket's path to fit a unix address (108 bytes),
-- else /tmp, else $XDG_RUNTIME_DIR; never inside a place the sandbox can
-- write (`avoid`: the workdir and the binds, hostpaths.check's places),
-- where the sandbox would reach the socket's directory (hostpaths). nil
local function absolute(path, cwd)
  if path:sub(1, 1) == "/" or path:sub(1, 6) == "$HOME/" then return path end
  path = path:gsub("^%./+", "")
  return cwd .. "/" .. path
end
local function host_port(host, port)
  host = tostring(host or "?")
  if host:find(":", 1, true) and host:sub(1, 1) ~= "[" then host = "[" .. host .. "]" end
  return port and (host .. ":" .. tostring(port)) or host
end

local function event_line(ev)
  return string.format("%s %s %s %s (%s)%s", tostring(ev.type), tostring(ev.method or "-"),
    host_port(ev.host, ev.port), tostring(ev.status or "-"), tostring(ev.reason or ""),
    ev.via and (" via " .. tostring(ev.via)) or "")
end

-- Runs luv's loop; a callback error is reported and ends isolate instead
-- of luv's default handler exiting silently.
local function run_loop()
  local ok, err = pcall(uv.run)
  if not ok then
    if getmetatable(err) == Exit then error(err, 0) end
    die("internal error: " .. tostring(err))
  end
end


-- f(...)'s results, or nil, message, status for an Exit it raised; any
-- other error is a bug and propagates.
local function catch(f, ...)
  local r = table.pack(pcall(f, ...))
  if r[1] then return table.unpack(r, 2, r.n) end
  if getmetatable(r[2]) == Exit then return nil, r[2].message, r[2].status end
  error(r[2], 0)
end

M.say, M.EXIT_USAGE, M.EXIT_FAILURE, M.Exit = say, EXIT_USAGE, EXIT_FAILURE, Exit
M.exit_with, M.die_usage, M.die, M.catch = exit_with, die_usage, die, catch
M.shquote, M.command_line, M.json_array, M.pattern_error = shquote, command_line, json_array, pattern_error
M.absolute, M.host_port, M.event_line, M.run_loop = absolute, host_port, event_line, run_loop

return M
