-- A shell script printing everything a process in the sandbox can read
-- about the environment: its own, and every process's environ and cmdline
-- (threads included; pid 1 is bwrap's). A secret must be in none of it.
return [[
env
for p in /proc/[0-9]*; do
  cat "$p/environ" "$p/cmdline" 2>/dev/null
  for t in "$p"/task/*; do cat "$t/environ" 2>/dev/null; done
done
]]
