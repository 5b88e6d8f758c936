-- Spec support for the documentation: the Markdown files of README.md and
-- docs/, their headings' anchors as GitHub makes them, their relative links,
-- and the prose lines outside code blocks and tables.
local uv = require("luv")
local helpers = require("helpers")

local doccheck = {}

local read = helpers.read
doccheck.read = read

--- Every *.md below `dir` (relative paths from `root`), sorted.
local function walk(root, dir, out)
  local req = uv.fs_scandir(root .. "/" .. dir)
  if not req then return out end
  while true do
    local name, kind = uv.fs_scandir_next(req)
    if not name then break end
    local rel = dir .. "/" .. name
    if kind == "directory" then
      walk(root, rel, out)
    elseif name:match("%.md$") then
      out[#out + 1] = rel
    end
  end
  return out
end

--- README.md and every docs/**/*.md, relative to `root`.
function doccheck.files(root)
  local files = walk(root, "docs", {})
  table.sort(files)
  table.insert(files, 1, "README.md")
  return files
end

--- The lines of `text`, each with `code` (inside a fenced block, the fences
--- included) and its number.
function doccheck.lines(text)
  local out, fence = {}, nil
  local n = 0
  for line in (text .. (text:sub(-1) == "\n" and "" or "\n")):gmatch("(.-)\n") do
    n = n + 1
    local f = line:match("^%s*(```+)") or line:match("^%s*(~~~+)")
    if fence then
      out[#out + 1] = { text = line, n = n, code = true }
      if f and f:sub(1, 1) == fence:sub(1, 1) and #f >= #fence then fence = nil end
    elseif f then
      fence = f
      out[#out + 1] = { text = line, n = n, code = true }
    else
      out[#out + 1] = { text = line, n = n, code = false }
    end
  end
  return out
end

-- UTF-8 punctuation GitHub drops from an anchor (the letters are kept).
local DROPPED = { "—", "–", "’", "‘", "“", "”", "…", "·", "→", "←", "↔", "×", "≤", "≥", "🔒" }

--- GitHub's anchor for a heading's text: inline markup removed (code
--- spans keep their text, links their text), lowercased, every character
--- that is not a letter, digit, space, hyphen or underscore dropped,
--- spaces made hyphens.
function doccheck.slug(heading)
  local s = heading
  s = s:gsub("!%[([^%]]*)%]%b()", "%1")
  s = s:gsub("%[([^%]]*)%]%b()", "%1")
  s = s:gsub("<[^>]+>", "")
  s = s:gsub("[`*]", "")
  for _, p in ipairs(DROPPED) do
    s = s:gsub(p, "")
  end
  s = s:lower()
  s = s:gsub("[%z\1-\127]", function(c)
    if c:match("[%w _%-]") then return c end
    return ""
  end)
  s = s:gsub(" ", "-")
  return s
end

--- The anchors of one Markdown text: each heading's slug, with GitHub's
--- -1, -2 suffixes for repeats, and every <a id=...>/<a name=...>.
function doccheck.anchors(text)
  local set, seen = {}, {}
  for _, l in ipairs(doccheck.lines(text)) do
    if not l.code then
      local h = l.text:match("^#+%s+(.-)%s*#*%s*$")
      if h and l.text:match("^#+%s") then
        local base = doccheck.slug(h)
        local slug = base
        if seen[base] then
          slug = base .. "-" .. seen[base]
          seen[base] = seen[base] + 1
        else
          seen[base] = 1
        end
        set[slug] = true
      end
      for id in l.text:gmatch("<a%s+[^>]*%f[%w]id=\"([^\"]+)\"") do set[id] = true end
      for id in l.text:gmatch("<a%s+[^>]*name=\"([^\"]+)\"") do set[id] = true end
    end
  end
  return set
end

--- The links of one Markdown text outside code: {target, n}. Code spans
--- are removed first, so a `[x](y)` written as code is no link.
function doccheck.links(text)
  local out = {}
  for _, l in ipairs(doccheck.lines(text)) do
    if not l.code then
      local s = l.text:gsub("``.-``", ""):gsub("`[^`]*`", "")
      for target in s:gmatch("%]%(([^)%s]+)[^)]*%)") do
        out[#out + 1] = { target = target, n = l.n }
      end
      local ref = s:match("^%s*%[[^%]]+%]:%s*(%S+)")
      if ref then out[#out + 1] = { target = ref, n = l.n } end
    end
  end
  return out
end

--- A path without `.` and `..` components.
function doccheck.normalize(path)
  local parts = {}
  for p in path:gmatch("[^/]+") do
    if p == ".." then
      if #parts == 0 then return nil end
      parts[#parts] = nil
    elseif p ~= "." then
      parts[#parts + 1] = p
    end
  end
  return table.concat(parts, "/")
end

--- The broken relative links of the files under `root`: an array of
--- "file:line: target: why".
function doccheck.broken_links(root, files)
  local bad, anchors = {}, {}
  local function anchors_of(rel)
    if anchors[rel] == nil then
      local t = read(root .. "/" .. rel)
      anchors[rel] = t and doccheck.anchors(t) or false
    end
    return anchors[rel]
  end
  for _, file in ipairs(files) do
    local text = assert(read(root .. "/" .. file))
    local dir = file:match("^(.*)/[^/]*$") or ""
    for _, link in ipairs(doccheck.links(text)) do
      local t = link.target
      if not t:match("^%a[%w+.-]*:") then
        local path, anchor = t:match("^([^#]*)#?(.*)$")
        local why
        local rel
        if path == "" then
          rel = file
        else
          rel = doccheck.normalize((dir ~= "" and dir .. "/" or "") .. path)
          if not rel then
            why = "leaves the repository"
          elseif not uv.fs_stat(root .. "/" .. rel) then
            why = "no such file"
          end
        end
        if not why and anchor ~= "" then
          if not rel:match("%.md$") then
            why = "an anchor into a file that is not Markdown"
          else
            local set = anchors_of(rel)
            if not set or not set[anchor] then why = "no heading makes #" .. anchor end
          end
        end
        if why then bad[#bad + 1] = ("%s:%d: %s: %s"):format(file, link.n, t, why) end
      end
    end
  end
  return bad
end

--- Prose lines (outside code blocks, not table rows, not headings, not
--- HTML) of 100 characters or more: an array of "file:line: length".
function doccheck.long_prose(root, files, limit)
  local bad = {}
  for _, file in ipairs(files) do
    local text = assert(read(root .. "/" .. file))
    for _, l in ipairs(doccheck.lines(text)) do
      local s = l.text
      if not l.code and not s:match("^%s*|") and not s:match("^#") and not s:match("^%s*<")
        and utf8.len(s) and utf8.len(s) >= limit then
        bad[#bad + 1] = ("%s:%d: %d characters"):format(file, l.n, utf8.len(s))
      end
    end
  end
  return bad
end

--- Pages whose first paragraph after the title is not a sentence saying what
--- the page is for (it must be prose, not a list, table, code or heading).
function doccheck.no_opening_sentence(root, files)
  local bad = {}
  for _, file in ipairs(files) do
    local text = assert(read(root .. "/" .. file))
    local ls = doccheck.lines(text)
    local i = 1
    while ls[i] and ls[i].text:match("^%s*$") do i = i + 1 end
    if not (ls[i] and ls[i].text:match("^# ")) then
      bad[#bad + 1] = file .. ": does not start with a # title"
    else
      i = i + 1
      while ls[i] and ls[i].text:match("^%s*$") do i = i + 1 end
      local first = ls[i] and ls[i].text or ""
      if ls[i] == nil or ls[i].code or first:match("^[#|>*-]") or first:match("^%s") or first:match("^%d+%.")
        or not first:match("^[%w`\"*(_%[]") then
        bad[#bad + 1] = file .. ": the first paragraph is not a sentence: " .. first
      end
    end
  end
  return bad
end

--- The long options `isolate --help` names (each `--word`), sorted.
function doccheck.help_options(help)
  local set, out = {}, {}
  for opt in help:gmatch("%-%-[a-z][a-z0-9-]*") do
    if not set[opt] then
      set[opt] = true
      out[#out + 1] = opt
    end
  end
  table.sort(out)
  return out
end

return doccheck
