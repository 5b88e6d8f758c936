-- The documentation holds together: every relative link and #anchor in
-- README.md and docs/**/*.md resolves (GitHub's anchor rules), every option
-- `isolate --help` names is in the command-line reference, every page
-- opens with a sentence saying what it is for, and no prose line reaches
-- 100 characters. The checker is tried on pages made to fail first, so
-- that a checker that finds nothing cannot pass for one that works.
local helpers = require("helpers")
local cli = require("support.cli")
local doc = require("support.doccheck")

local ROOT = cli.ROOT
local REFERENCE = "docs/reference/cli.md"

local function list(items)
  return "\n  " .. table.concat(items, "\n  ")
end

describe("the documentation checker", function()
  it("makes GitHub's anchors from headings", function()
    assert.are.equal("the-command-line-isolate", doc.slug("The command line: `isolate`"))
    assert.are.equal("bridge-pass-the-proxy-accepts-in-the-sandbox",
      doc.slug("Bridge pass: the proxy accepts in the sandbox"))
    assert.are.equal("non-http-tcp-under-deny-ssh-git-databases",
      doc.slug("Non-HTTP TCP under deny (ssh, git, databases)"))
    assert.are.equal("procsys-and-friends", doc.slug("/proc/sys and friends"))
    assert.are.equal("isolationbridge_path", doc.slug("isolation.bridge_path"))
    assert.are.equal("the-diátaxis-split", doc.slug("The Diátaxis split"))
    assert.are.equal("a--b", doc.slug("a — b"))
    local set = doc.anchors("# T\n\n## Tests\n\n```\n## not a heading\n```\n## Tests\n<a id=\"x\"></a>\n")
    assert.is_true(set.tests and set["tests-1"] and set.x and true)
    assert.is_nil(set["not-a-heading"])
  end)

  it("finds a broken file, a broken anchor, a link out of the repository and a long line", function()
    local dir = helpers.tmpdir()
    helpers.write(dir .. "/README.md", table.concat({
      "# R", "", "Says what it is.", "",
      "[ok](docs/a.md#the-part) [gone](docs/none.md) [bad](docs/a.md#no-part) [out](../x.md)",
      "`[code](docs/none.md)` [web](https://example.com/x) [self](#r)", "",
      "```", "[in code](docs/none.md)", "```", "",
    }, "\n"))
    assert(os.execute("mkdir -p '" .. dir .. "/docs'"))
    helpers.write(dir .. "/docs/a.md", "# A\n\n- a list first\n\n## The part\n\n" .. ("word "):rep(25) .. "\n")
    local files = doc.files(dir)
    assert.are.same({ "README.md", "docs/a.md" }, files)
    local bad = doc.broken_links(dir, files)
    assert.are.same({
      "README.md:5: docs/none.md: no such file",
      "README.md:5: docs/a.md#no-part: no heading makes #no-part",
      "README.md:5: ../x.md: leaves the repository",
    }, bad)
    assert.are.same({ "docs/a.md:7: 125 characters" }, doc.long_prose(dir, files, 100))
    local opening = doc.no_opening_sentence(dir, files)
    assert.are.equal(1, #opening)
    assert.truthy(opening[1]:find("docs/a.md: the first paragraph is not a sentence", 1, true))
    helpers.rmtree(dir)
  end)
end)

describe("README.md and docs/", function()
  local files = doc.files(ROOT)

  it("are many pages (the checker reads them all)", function()
    assert.is_true(#files >= 20, "only " .. #files .. " pages:" .. list(files))
    for _, want in ipairs({ "docs/tutorial.md", REFERENCE, "docs/explanation/threat-model.md",
      "docs/explanation/performance.md", "docs/testing.md" }) do
      assert.is_not_nil(doc.read(ROOT .. "/" .. want), want .. " is missing")
    end
  end)

  it("have no relative link or #anchor that does not resolve", function()
    local bad = doc.broken_links(ROOT, files)
    assert.are.equal(0, #bad, #bad .. " broken links:" .. list(bad))
  end)

  it("each start with a sentence saying what the page is for", function()
    local bad = doc.no_opening_sentence(ROOT, files)
    assert.are.equal(0, #bad, list(bad))
  end)

  it("keep every prose line under 100 characters", function()
    local bad = doc.long_prose(ROOT, files, 100)
    assert.are.equal(0, #bad, #bad .. " long lines:" .. list(bad))
  end)

  it("name no file outside the repository (API.md is not in it)", function()
    local bad = {}
    for _, file in ipairs(files) do
      local text = doc.read(ROOT .. "/" .. file)
      for _, l in ipairs(doc.lines(text)) do
        if l.text:find("API.md", 1, true) then bad[#bad + 1] = file .. ":" .. l.n end
      end
    end
    assert.are.equal(0, #bad, list(bad))
  end)

  it("keep the README at about 300 lines", function()
    local n = select(2, doc.read(ROOT .. "/README.md"):gsub("\n", "\n"))
    assert.is_true(n <= 320, "README.md has " .. n .. " lines")
  end)
end)

describe("the command-line reference", function()
  it("names every option `isolate --help` names", function()
    local p = cli.spawn({ cli.ISOLATE, "--help" })
    assert.are.equal(0, p.wait(30), p.err)
    local opts = doc.help_options(p.out)
    assert.is_true(#opts >= 40, "isolate --help named only " .. #opts .. " options")
    local ref = assert(doc.read(ROOT .. "/" .. REFERENCE))
    local missing = {}
    for _, opt in ipairs(opts) do
      if not ref:find("`" .. opt:gsub("%-", "%%-") .. "[`%s=%[]") then missing[#missing + 1] = opt end
    end
    assert.are.equal(0, #missing, REFERENCE .. " does not name, as code:" .. list(missing))
  end)
end)
