-- bench/chart.lua - one SVG of the ratios people compare, drawn from a
-- results file of `make bench` (bench/results/bench-YYYY-MM-DD.md):
--
--   1. tunnels per second (c=32) as a fraction of direct loopback, for this
--      proxy (TCP and unix socket), tinyproxy, squid and sandbox-runtime;
--   2. the latency each adds to a tunnel's connect (p50 µs over direct);
--   3. a deny launch's time against a bare bwrap with a network namespace
--      (and sandbox-runtime's `srt true` against the same bare bwrap).
--
-- Usage: lua5.4 bench/chart.lua RESULTS.md [OUT.svg]   (OUT: RESULTS with .svg)
-- Every number drawn is read from RESULTS; a row the run did not make is
-- left out, and a panel with no rows says so. Plain Lua, no dependency.

local M = {}

--- The rows of the first Markdown table after the line that starts with
--- `heading` (a table of name -> {column -> cell}), and the column names.
function M.table_after(text, heading)
  local from = text:find("\n" .. heading, 1, true)
  if not from then return nil end
  local rows, cols = {}, nil
  local in_table = false
  for line in text:sub(from + 1):gmatch("([^\n]*)\n") do
    if line:match("^|") then
      in_table = true
      local cells = {}
      for cell in line:sub(2):gmatch("%s*([^|]-)%s*|") do cells[#cells + 1] = cell end
      if not cols then
        cols = cells
      elseif not cells[1]:match("^%-+$") and not cells[1]:match("^:?%-+:?$") then
        local row = {}
        for i, c in ipairs(cols) do row[c] = cells[i] end
        rows[cells[1]] = row
      end
    elseif in_table then
      break
    end
  end
  return rows, cols
end

local function num(s)
  return s and tonumber((s:gsub("[x*]", ""))) or nil
end

-- The rows each panel draws: {key in the results, label}.
local PROXIES = {
  { "isolation-uds", "isolation (unix socket)" },
  { "isolation", "isolation (TCP)" },
  { "tinyproxy", "tinyproxy" },
  { "squid", "squid" },
  { "asrt", "sandbox-runtime" },
}
local LAUNCHES = {
  { "deny-pass", "isolate's deny line (pass)" },
  { "deny-builtin", "deny line, built-in relay" },
  { "deny-socat", "deny line, socat relay" },
  { "srt", "sandbox-runtime: srt true" },
}

--- The numbers of the chart, read from a results file's text:
--- {title, panels = {{title, unit, log, better, bars = {{label, value, text}}}}}.
function M.numbers(text, source)
  local out = { panels = {} }
  local run = text:match("## Proxy benchmark %((.-)%)%s*\n") or "?"
  local date = text:match("Run (%d%d%d%d%-%d%d%-%d%d)") or "?"
  out.title = ("make bench of %s (%s), from %s"):format(date, run, source or "its results file")

  local abs = M.table_after(text, "### Absolute") or {}
  local ratio = M.table_after(text, "### Ratio to direct") or {}
  local direct = abs.direct or {}

  local rate = { title = "Tunnels per second (32 clients), as a fraction of direct loopback",
    unit = "x", better = "longer is better", bars = {} }
  local lat = { title = "Latency added to a tunnel's connect (p50, over direct loopback)",
    unit = " µs", better = "shorter is better", bars = {} }
  local d50 = num(direct.lat_p50_us)
  for _, p in ipairs(PROXIES) do
    local r = ratio[p[1]]
    local v = r and num(r.rate_tun_s)
    if v then rate.bars[#rate.bars + 1] = { label = p[2], value = v, text = ("%.2fx"):format(v) } end
    local a = abs[p[1]]
    local l = a and num(a.lat_p50_us)
    if l and d50 then
      lat.bars[#lat.bars + 1] = { label = p[2], value = l - d50, text = ("+%.0f µs"):format(l - d50) }
    end
  end
  out.panels[1], out.panels[2] = rate, lat

  -- the launch rows: interleaved medians when the run has them, else the
  -- hyperfine medians; sandbox-runtime's from the shared start-cost table
  local il = M.table_after(text, "## Deny launch start cost, interleaved")
  local plain = M.table_after(text, "## Deny launch start cost")
  local shared = M.table_after(text, "## Sandbox start cost") or {}
  local launch = { title = "Launch time, as a multiple of a bare bwrap with a network namespace",
    unit = "x", better = "shorter is better; log scale", log = true, bars = {} }
  local src = il or plain or {}
  local base = num((src["bwrap-net"] or {})["median ms"])
  local shared_base = num((shared["bwrap-net"] or {})["median ms"])
  for _, l in ipairs(LAUNCHES) do
    local row, b = src[l[1]], base
    if l[1] == "srt" then row, b = shared.srt, shared_base end
    local ms = row and num(row["median ms"])
    if ms and b and b > 0 then
      local v = ms / b
      launch.bars[#launch.bars + 1] = { label = l[2], value = v, text = ("%.2fx (%.1f ms)"):format(v, ms) }
    end
  end
  out.panels[3] = launch
  return out
end

local function esc(s)
  return (tostring(s):gsub("&", "&amp;"):gsub("<", "&lt;"):gsub(">", "&gt;"):gsub('"', "&quot;"))
end

--- The SVG of `numbers` (what M.numbers returns).
function M.svg(numbers)
  local W, LABEL, BARW, ROW, PAD = 800, 210, 400, 24, 16
  local parts, y = {}, 40
  local function add(s, ...) parts[#parts + 1] = s:format(...) end
  add('<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>', PAD, esc(numbers.title))
  for i, panel in ipairs(numbers.panels) do
    y = y + 14
    add('<text x="%d" y="%d" font-size="13" font-weight="bold">%d. %s</text>', PAD, y, i, esc(panel.title))
    y = y + 6
    add('<text x="%d" y="%d" font-size="11" fill="#555">%s</text>', PAD, y + 12, esc(panel.better))
    y = y + 20
    if #panel.bars == 0 then
      add('<text x="%d" y="%d" font-size="12" fill="#a00">not in this results file</text>', PAD + LABEL, y + 14)
      y = y + ROW
    end
    local max = 0
    for _, b in ipairs(panel.bars) do max = math.max(max, b.value) end
    for _, b in ipairs(panel.bars) do
      local len
      if panel.log then
        -- from 1x (no cost) to the largest, on a log scale
        local top = math.log(math.max(max, 2), 10)
        len = math.max(2, BARW * math.log(math.max(b.value, 1), 10) / top)
      else
        len = max > 0 and math.max(2, BARW * b.value / max) or 2
      end
      local ours = b.label:match("^isolation") or b.label:match("^isolate")
      add('<g class="bar" data-label="%s" data-value="%.4f">', esc(b.label), b.value)
      add('<text x="%d" y="%d" font-size="12" text-anchor="end">%s</text>', PAD + LABEL - 8, y + 15, esc(b.label))
      add('<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>', PAD + LABEL, y + 3, len, ROW - 6,
        ours and "#2b6cb0" or "#a0aec0")
      add('<text x="%.1f" y="%d" font-size="12">%s</text>', PAD + LABEL + len + 6, y + 15, esc(b.text))
      add("</g>")
      y = y + ROW
    end
  end
  y = y + 12
  return table.concat({
    ('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
      .. 'font-family="sans-serif">'):format(W, y, W, y),
    ('<rect width="%d" height="%d" fill="#fff"/>'):format(W, y),
    table.concat(parts, "\n"),
    "</svg>\n",
  }, "\n")
end

local function main(args)
  local src, out = args[1], args[2]
  if not src then
    io.stderr:write("usage: lua5.4 bench/chart.lua RESULTS.md [OUT.svg]\n")
    return 2
  end
  local f, err = io.open(src, "rb")
  if not f then
    io.stderr:write("bench/chart.lua: " .. err .. "\n")
    return 1
  end
  local text = f:read("a")
  f:close()
  out = out or src:gsub("%.md$", "") .. ".svg"
  local numbers = M.numbers(text, src:match("[^/]+$"))
  local drawn = 0
  for _, p in ipairs(numbers.panels) do drawn = drawn + #p.bars end
  if drawn == 0 then
    io.stderr:write("bench/chart.lua: " .. src .. " holds none of the rows the chart draws\n")
    return 1
  end
  local o = assert(io.open(out, "wb"))
  o:write(M.svg(numbers))
  o:close()
  print("chart: " .. out .. " (" .. drawn .. " bars from " .. src .. ")")
  return 0
end

if arg and arg[0] and arg[0]:match("chart%.lua$") then
  os.exit(main(arg))
end
return M
