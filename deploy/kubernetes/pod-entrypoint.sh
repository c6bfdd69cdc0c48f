#!/bin/sh
# The container's command under tini: makes bashexec's private runtime
# directory, then becomes bashexec (exec: same pid, so the server's own-command
# check still sees every command it runs as its descendant).
#
# Why: bashexec keeps its spill files and session directories in
# $XDG_RUNTIME_DIR when that is a directory of its user alone (0700), else in
# /var/tmp, which must then be writable and sticky. Under
# readOnlyRootFilesystem neither exists: /var/tmp is read-only, and an emptyDir
# is mode 0777 without the sticky bit, owned by root, which bashexec rightly
# refuses as a shared parent. A directory made here, inside an emptyDir, is
# this user's alone. It lies outside /workspace and /tmp, the only places a
# workspace-write command may write, so no command can touch the spill files.
set -eu
runtime="${XDG_RUNTIME_DIR:-/run/bashexec/runtime}"
mkdir -p "$runtime"
chmod 0700 "$runtime"
export XDG_RUNTIME_DIR="$runtime"
exec /usr/local/bin/bashexec "$@"
