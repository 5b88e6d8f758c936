# spec/wrap_spec.lua types wrap() lines into real tmux panes (bash -i and
# dash -i on a private server socket); dash is essential in Debian.
EXTRA_DEBS += tmux
