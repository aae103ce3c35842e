#!/usr/bin/env bash
# The one set-up step in front of `npm run dev` and `npm test`: installs what is missing and
# returns in well under a second when nothing is. Bash, because it runs before node_modules exists.
#
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
NODE_MIN_MAJOR=20
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

check_node() {
  command -v node >/dev/null 2>&1 || die "Node.js is not installed; install Node ${NODE_MIN_MAJOR}.3 or later (https://nodejs.org)."
  local major
  major=$(node -p 'process.versions.node.split(".")[0]')
  (( major >= NODE_MIN_MAJOR )) || die "Node $(node -v) is too old; install Node ${NODE_MIN_MAJOR}.3 or later."
}

# --- npm dependencies --------------------------------------------------------------------
# The stamp is written only after a successful install, so an interrupted `npm ci` reinstalls.
NPM_STAMP="$ROOT/node_modules/.replyonce-package-lock.sha256"

node_modules_current() {
  [[ -f "$NPM_STAMP" ]] && [[ "$(<"$NPM_STAMP")" == "$(sha256_of "$ROOT/package-lock.json")" ]]
}

install_node_modules() {
  node_modules_current && return 0
  say "installing npm dependencies (npm ci)…"
  local lock_hash
  lock_hash=$(sha256_of "$ROOT/package-lock.json")
  (cd "$ROOT" && npm ci --no-audit --no-fund)
  printf '%s\n' "$lock_hash" >"$NPM_STAMP"
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
check_node
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

