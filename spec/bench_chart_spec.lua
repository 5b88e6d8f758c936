-- `make chart` (bench/chart.lua) draws its SVG from a results file of
-- `make bench`: every bar is a number of that file. Tried on the committed
-- results of the last full run, and on a results file whose numbers are
-- changed, so that a chart drawn from anything else would fail.
local helpers = require("helpers")
local cli = require("support.cli")

local RESULTS = "bench/results/bench-2026-12-02.md"

local function run_chart(src, out)
  local p = cli.spawn({ cli.LUA, "bench/chart.lua", src, out }, { cwd = cli.ROOT })
  return p.wait(60), p.out, p.err
end

-- The bars of an SVG, parsed: {label = {value, text}} and their order.
local function bars(svg)
  local out, order = {}, {}
  for g in svg:gmatch('<g class="bar"(.-)</g>') do
    local label, value = g:match('data%-label="([^"]*)" data%-value="([^"]*)"')
    local texts = {}
    for t in g:gmatch(">([^<]+)</text>") do texts[#texts + 1] = t end
    order[#order + 1] = label
    out[label] = out[label] or {}
    table.insert(out[label], { value = tonumber(value), label_text = texts[1], value_text = texts[2],
      width = tonumber(g:match('<rect[^>]* width="([%d.]+)"')) })
  end
  return out, order
end

describe("bench/chart.lua", function()
  it("draws the committed chart from the last full run's results file", function()
    local dir = helpers.tmpdir()
    local status, out, err = run_chart(RESULTS, dir .. "/chart.svg")
    assert.are.equal(0, status, out .. err)
    local svg = assert(helpers.read(dir .. "/chart.svg"))
    assert.truthy(svg:match("^<svg "), svg:sub(1, 80))
    assert.truthy(svg:find("</svg>", 1, true))
    assert.truthy(svg:find(">make bench of 2026-12-02 (full, 1 round(s), median per cell), from bench-2026-12-02.md<",
      1, true), svg:sub(1, 400))
    local b = bars(svg)
    -- tunnels/s c=32 / direct, from the ratio table; added p50 from the absolute one
    assert.are.equal(0.70, b["isolation (unix socket)"][1].value)
    assert.are.equal("0.70x", b["isolation (unix socket)"][1].value_text)
    assert.are.equal(0.29, b.tinyproxy[1].value)
    assert.are.equal(0.25, b.squid[1].value)
    assert.are.equal(0.08, b["sandbox-runtime"][1].value)
    assert.are.equal("+78 µs", b["isolation (TCP)"][2].value_text)     -- 126.5 - 48.0
    assert.are.equal("+460 µs", b["sandbox-runtime"][2].value_text)    -- 507.9 - 48.0
    -- launch / bare bwrap + netns: 10.61 / 5.55 interleaved; srt 860.49 / 4.79
    assert.are.equal("1.91x (10.6 ms)", b["isolate's deny line (pass)"][1].value_text)
    assert.are.equal("179.64x (860.5 ms)", b["sandbox-runtime: srt true"][1].value_text)
    -- bars are drawn to scale: 0.70 against 0.29 on a linear axis
    local r = b["isolation (unix socket)"][1].width / b.tinyproxy[1].width
    assert.is_true(math.abs(r - 0.70 / 0.29) < 0.01, tostring(r))
    -- the committed SVG is this one
    assert.are.equal(svg, helpers.read(cli.ROOT .. "/" .. RESULTS:gsub("%.md$", ".svg")),
      "the committed chart differs from what make chart draws: run make chart")
    helpers.rmtree(dir)
  end)

  it("follows the results file: changed numbers change the bars; missing rows are left out", function()
    local dir = helpers.tmpdir()
    local text = assert(helpers.read(cli.ROOT .. "/" .. RESULTS))
    -- tinyproxy's tunnels/s ratio 0.29 -> 0.93; squid's rows removed
    text = text:gsub("\n| tinyproxy | 2%.94 | 2%.31 | 2%.84 | 0%.39 | 0%.29 |",
      "\n| tinyproxy | 2.94 | 2.31 | 2.84 | 0.39 | 0.93 |")
    text = text:gsub("\n| squid |[^\n]*", "")
    helpers.write(dir .. "/bench-x.md", text)
    local status, out, err = run_chart(dir .. "/bench-x.md")
    assert.are.equal(0, status, out .. err)
    local svg = assert(helpers.read(dir .. "/bench-x.svg"))
    local b = bars(svg)
    assert.are.equal(0.93, b.tinyproxy[1].value)
    assert.is_nil(b.squid)
    helpers.rmtree(dir)
  end)

  it("refuses a file that holds none of its rows, and names it", function()
    local dir = helpers.tmpdir()
    helpers.write(dir .. "/empty.md", "# nothing here\n")
    local status, _, err = run_chart(dir .. "/empty.md", dir .. "/out.svg")
    assert.are.equal(1, status)
    assert.truthy(err:find("empty.md holds none of the rows", 1, true), err)
    assert.is_nil(helpers.read(dir .. "/out.svg"))
    helpers.rmtree(dir)
  end)
end)
