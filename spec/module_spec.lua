local isolation = require("isolation")

describe("require('isolation')", function()
  it("loads the C module with its version and the sandbox socket path", function()
    assert.matches("^%d+%.%d+%.%d+$", isolation.version)
    assert.are.equal("/run/isolation/proxy.sock", isolation.SANDBOX_PROXY_SOCKET)
  end)
end)
