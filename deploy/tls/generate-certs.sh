#!/usr/bin/env sh
# A throwaway certificate authority and the certificates for mTLS between replyonce and Temporal,
# one directory per holder, each with only that holder's certificate, its key and the CA it checks
# its peers against (docker-compose.yml mounts each directory into its service alone):
#   temporal/  server.pem/.key    the Temporal frontend (names: localhost, 127.0.0.1, temporal — the compose service)
#              internode.pem/.key the server's services to each other (history, matching, worker, frontend),
#              internode-ca.pem   signed by a CA of their own: no client certificate opens an internode port
#              ca.pem             the CA clients of the frontend must be signed by
#   app/       client.pem/.key    replyonce's API, worker, set-up job and scripts (CN replyonce), ca.pem
#   ui/        ui.pem/.key        the Web UI server (CN temporal-ui), ca.pem
#   admin/     admin.pem/.key     operators' `temporal` CLI only (CN temporal-admin), ca.pem: no container mounts it
#   ca.key, internode-ca.key      stay here, private to whoever generated them (no container mounts the top level)
# Every private key is 0600. Run as root with TLS_OWNER_<HOLDER>=uid[:gid] (TLS_OWNER_TEMPORAL, TLS_OWNER_APP,
# TLS_OWNER_UI), a holder's directory and files are chowned to the user its container runs as.
# For local stacks and the compose file only: a production cluster takes its certificates from its own PKI.
#
#   deploy/tls/generate-certs.sh OUT_DIR     (idempotent: keeps what OUT_DIR already holds)
#
# POSIX sh and openssl only: `npm run stack` runs it on this machine, docker-compose.yml in a one-shot container.
set -eu
out=${1:?usage: generate-certs.sh OUT_DIR}
mkdir -p "$out"
cd "$out"
umask 077
days=825 # under the 825-day ceiling clients such as macOS enforce for server certificates

ca() { # name cn
  if [ -f "$1.pem" ]; then return 0; fi
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$days" \
    -subj "/CN=$2" -keyout "$1.key" -out "$1.pem" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
}
ca ca "replyonce local CA"
ca internode-ca "replyonce local Temporal internode CA"

issue() { # holder name cn extended-key-usage signing-ca [subjectAltName]
  holder=$1 name=$2 cn=$3 eku=$4 signer=$5 san=${6:-}
  mkdir -p "$holder"
  if [ -f "$holder/$name.pem" ]; then return 0; fi
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$cn" \
    -keyout "$holder/$name.key" -out "$holder/$name.csr" 2>/dev/null
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    if [ -n "$san" ]; then echo "subjectAltName=$san"; fi
  } >"$holder/$name.ext"
  openssl x509 -req -in "$holder/$name.csr" -CA "$signer.pem" -CAkey "$signer.key" -CAcreateserial -days "$days" \
    -extfile "$holder/$name.ext" -out "$holder/$name.pem" 2>/dev/null
  rm -f "$holder/$name.csr" "$holder/$name.ext"
}

issue temporal server temporal serverAuth,clientAuth ca "DNS:localhost,DNS:temporal,IP:127.0.0.1"
# Internode: each service is the others' server and client, with one certificate (Temporal's internode TLS).
issue temporal internode temporal-internode serverAuth,clientAuth internode-ca \
  "DNS:temporal-internode,DNS:localhost,DNS:temporal,IP:127.0.0.1"
issue app client replyonce clientAuth ca
issue ui ui temporal-ui clientAuth ca
issue admin admin temporal-admin clientAuth ca
for holder in temporal app ui admin; do cp ca.pem "$holder/ca.pem"; done
cp internode-ca.pem temporal/internode-ca.pem
rm -f ./*.srl

# Certificates are public, keys are not: 0600, and each holder's directory is its own.
chmod 0755 temporal app ui admin
chmod 0644 ./*.pem ./*/*.pem
chmod 0600 ./*.key ./*/*.key
owner() { # holder uid[:gid]
  if [ -n "$2" ] && [ "$(id -u)" = 0 ]; then
    chown -R "$2" "$1"
    chmod 0700 "$1"
  fi
}
owner temporal "${TLS_OWNER_TEMPORAL:-}"
owner app "${TLS_OWNER_APP:-}"
owner ui "${TLS_OWNER_UI:-}"
