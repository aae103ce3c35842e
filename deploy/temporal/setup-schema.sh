#!/usr/bin/env sh
# Creates or upgrades Temporal's two Postgres schemas (persistence and SQL visibility) with the
# server's own schema tool, from the schema files the server release ships. Idempotent: on a
# database already at the release's version it changes nothing, and after a server upgrade it
# applies the new versions. `npm run stack` runs it before the server; docker-compose.yml runs it
# as a one-shot job (the admin-tools image) that the server waits for.
#
#   SQL_HOST SQL_PORT SQL_USER SQL_PASSWORD    the Temporal role (owner of both databases)
#   TEMPORAL_DB (temporal) TEMPORAL_VISIBILITY_DB (temporal_visibility)
#   SCHEMA_DIR                                 …/schema/postgresql/v12 of the server release
#   SQL_TOOL (temporal-sql-tool)
set -eu
: "${SQL_HOST:?}" "${SQL_PORT:?}" "${SQL_USER:?}" "${SQL_PASSWORD:?}" "${SCHEMA_DIR:?}"
export SQL_PLUGIN=postgres12
tool=${SQL_TOOL:-temporal-sql-tool}

for pair in "${TEMPORAL_DB:-temporal}:temporal" "${TEMPORAL_VISIBILITY_DB:-temporal_visibility}:visibility"; do
  db=${pair%%:*}
  schema=${pair#*:}
  # Version 0.0 creates only the schema_version bookkeeping (a no-op when present); update-schema
  # then applies every versioned step the database does not have yet.
  "$tool" --db "$db" setup-schema -v 0.0
  "$tool" --db "$db" update-schema -d "$SCHEMA_DIR/$schema/versioned"
  echo "[schema] $db: $schema schema up to date"
done
