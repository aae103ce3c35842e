#!/usr/bin/env bash
# The postgres image runs this once, on an empty data directory (/docker-entrypoint-initdb.d):
# the roles and databases of deploy/postgres/create-roles.sql, passwords from the environment.
set -euo pipefail
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
  -v temporal_password="${TEMPORAL_DB_PASSWORD:?}" -v app_password="${APP_DB_PASSWORD:?}" -v app_db=replyonce \
  -f /deploy/postgres/create-roles.sql
