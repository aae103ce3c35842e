-- Separate roles and databases for Temporal and for replyonce: the app cannot read or change
-- Temporal's histories, and Temporal cannot touch the app's operation store. Run by a superuser
-- (idempotent), with psql variables temporal_password and app_password, and optionally the
-- database names temporal_db, visibility_db, app_db. `npm run stack` runs it on the project's
-- local cluster; docker-compose.yml runs it through deploy/postgres/init.sh on the first start.
\set ON_ERROR_STOP on
\if :{?temporal_db}
\else
  \set temporal_db temporal
\endif
\if :{?visibility_db}
\else
  \set visibility_db temporal_visibility
\endif
\if :{?app_db}
\else
  \set app_db replyonce
\endif

SELECT format('CREATE ROLE temporal LOGIN PASSWORD %L', :'temporal_password')
  WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'temporal') \gexec
ALTER ROLE temporal LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'temporal_password';
SELECT format('CREATE ROLE replyonce_app LOGIN PASSWORD %L', :'app_password')
  WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'replyonce_app') \gexec
ALTER ROLE replyonce_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE PASSWORD :'app_password';

SELECT format('CREATE DATABASE %I OWNER temporal', :'temporal_db')
  WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'temporal_db') \gexec
SELECT format('CREATE DATABASE %I OWNER temporal', :'visibility_db')
  WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'visibility_db') \gexec
SELECT format('CREATE DATABASE %I OWNER replyonce_app', :'app_db')
  WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = :'app_db') \gexec

-- Nobody connects to another's databases (PUBLIC may CONNECT by default).
SELECT format('REVOKE ALL ON DATABASE %I, %I, %I FROM PUBLIC', :'temporal_db', :'visibility_db', :'app_db') \gexec
SELECT format('GRANT CONNECT ON DATABASE %I, %I TO temporal', :'temporal_db', :'visibility_db') \gexec
SELECT format('GRANT CONNECT ON DATABASE %I TO replyonce_app', :'app_db') \gexec
