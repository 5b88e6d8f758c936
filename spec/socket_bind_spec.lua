-- The proxy socket inside a real bwrap deny sandbox is the host's own
-- socket inode, bound in. The sandbox's uid is the launching user's (root
-- when root launches), the owner of that socket when the proxy runs as
-- the same user: through a read-write bind it could chmod the host's
-- socket (0777: every local user who can reach the directory may then use
-- the proxy; 0: the launcher's other sandboxes lose their route). Bound
-- read-only, chmod gets EROFS while connect() still works (it writes
-- nothing to the mount). Each bridge, root and an ordinary user.
local isolation = require("isolation")
local helpers = require("helpers")
local cli = require("support.cli")

local q = helpers.shquote

-- chmod attempts, then one CONNECT through the bridge: the route still works.
local ATTACK = [[
for m in 0777 0666 0; do chmod "$m" /run/isolation/proxy.sock 2>/dev/null && echo "chmod $m went through"; done
chown 65534 /run/isolation/proxy.sock 2>/dev/null && echo "chown went through"
touch -d @0 /run/isolation/proxy.sock 2>/dev/null && echo "touch went through"
exec 3<>/dev/tcp/127.0.0.1/3128 || exit 3
printf 'CONNECT nowhere.invalid:443 HTTP/1.1\r\nHost: nowhere.invalid:443\r\n\r\n' >&3
IFS= read -r status <&3
echo "route: ${status%%$(printf '\r')}"
]]

local function mode_of(path)
  local _, out = helpers.run("stat -c '%a %u %Y' " .. q(path))
  return out
end

describe("the proxy socket bound into a deny sandbox", function()
  local skip = helpers.skip_without_bwrap()
  local has_setpriv = helpers.run("command -v setpriv") == 0

  for _, who in ipairs({ "root", "an ordinary user" }) do
    for _, bridge in ipairs({ "pass", "builtin", "socat" }) do
      it("launched by " .. who .. ", " .. bridge .. " bridge: the sandbox cannot chmod, chown or touch the host's "
        .. "socket, and still reaches the proxy through it", function()
        if skip then return end
        if who ~= "root" and not has_setpriv then return pending("setpriv(1) is not installed") end
        local T = helpers.tmpdir()
        local ok, err = pcall(function()
          local home, work, run = T .. "/home", T .. "/work", T .. "/run"
          assert(os.execute("chmod 755 " .. q(T) .. " && mkdir -p " .. q(home) .. " " .. q(work) .. " " .. q(run)))
          local as_user = who ~= "root"
          if as_user then assert(os.execute("chown 65534:65534 " .. q(home) .. " " .. q(work) .. " " .. q(run))) end
          local sock = run .. "/proxy.sock"
          local proxy
          if as_user then
            -- the proxy as the same ordinary user: the socket is that user's
            local script = "local i = require('isolation'); local p = assert(i.proxy({ unix = "
              .. string.format("%q", sock) .. ", allow = {}, accept_listeners = 2 })); io.read('l')"
            proxy = io.popen("setpriv --reuid=65534 --regid=65534 --clear-groups env LUA_CPATH="
              .. q(package.cpath) .. " LUA_PATH=" .. q(package.path) .. " lua5.4 -e " .. q(script), "w")
            for _ = 1, 100 do
              if helpers.run("test -S " .. q(sock)) == 0 then break end
              helpers.run("sleep 0.05")
            end
          else
            proxy = assert(isolation.proxy({ unix = sock, allow = {}, accept_listeners = 2 }))
          end
          local before = mode_of(sock)
          local line = assert(isolation.wrap({ config = { mode = "bwrap", network = "deny" }, workdir = work,
            proxy_socket = sock, bridge = bridge, command = ATTACK,
            bridge_path = isolation.BRIDGE or cli.ROOT .. "/build/isolation-bridge" }))
          local prefix = as_user and "setpriv --reuid=65534 --regid=65534 --clear-groups " or ""
          local code, out, serr = helpers.run(prefix .. "env HOME=" .. q(home) .. " timeout -k 5 60 /bin/sh -c "
            .. q(line))
          local after = mode_of(sock)
          proxy:close()
          assert.are.equal(0, code, out .. serr)
          assert.is_nil(out:find("went through", 1, true), out)
          assert.truthy(out:find("route: HTTP/1.1 403", 1, true), out .. serr)
          assert.are.equal(before, after)
        end)
        helpers.rmtree(T)
        assert(ok, err)
      end)
    end
  end
end)
