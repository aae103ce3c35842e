#!/usr/bin/env sh
# A throwaway certificate authority and the certificates for mTLS between replyonce and Temporal:
#   ca.pem / ca.key          the CA every party trusts (the server checks clients against it, clients the server)
#   server.pem / server.key  the Temporal frontend (names: localhost, 127.0.0.1, temporal — the compose service)
#   client.pem / client.key  replyonce's API, worker and scripts (CN replyonce)
#   ui.pem / ui.key          the Web UI server (CN temporal-ui)
#   admin.pem / admin.key    the schema job and operators' `temporal` CLI (CN temporal-admin)
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

if [ ! -f ca.pem ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$days" \
    -subj "/CN=replyonce local CA" -keyout ca.key -out ca.pem \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
fi

issue() { # name cn extended-key-usage [subjectAltName]
  name=$1 cn=$2 eku=$3 san=${4:-}
  if [ -f "$name.pem" ]; then return 0; fi
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$cn" \
    -keyout "$name.key" -out "$name.csr" 2>/dev/null
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$eku"
    if [ -n "$san" ]; then echo "subjectAltName=$san"; fi
  } >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days "$days" \
    -extfile "$name.ext" -out "$name.pem" 2>/dev/null
  rm -f "$name.csr" "$name.ext"
}

issue server temporal serverAuth,clientAuth "DNS:localhost,DNS:temporal,IP:127.0.0.1"
issue client replyonce clientAuth
issue ui temporal-ui clientAuth
issue admin temporal-admin clientAuth
# Readable by the containers' unprivileged users (the compose file mounts this folder read-only);
# the CA's key stays private to whoever generated it.
chmod 0644 ./*.pem server.key client.key ui.key admin.key
rm -f ca.srl
