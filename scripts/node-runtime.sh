# Sourced by scripts/setup.sh and scripts/node: where Node.js 24 lives, and which binary to run.
# Pinned: the version every script, test and benchmark runs on (the Dockerfile pins the same line).
NODE24_VERSION="24.22.3"
NODE_RUNTIME_MAJOR=24
NODE24_CACHE="${REPLYONCE_CACHE:-$HOME/.cache/replyonce}"
NODE24_DIR="$NODE24_CACHE/node-v$NODE24_VERSION"

# The machine's node when it is new enough, else the cached one; fails when neither is there.
node24_bin() {
  local system major
  if system=$(command -v node 2>/dev/null); then
    major=$("$system" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
    if (( major >= NODE_RUNTIME_MAJOR )); then
      echo "$system"
      return 0
    fi
  fi
  [[ -x "$NODE24_DIR/bin/node" ]] || return 1
  echo "$NODE24_DIR/bin/node"
}
