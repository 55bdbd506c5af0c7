#!/usr/bin/env bash
# Regenerates the test PKI in this folder with the openssl CLI: P-256 keys, certificates valid from
# 2025-01-01 for 20 years (backdated so a machine whose clock is a little behind still accepts them).
# Test material only: the private keys are public on purpose and must never protect anything.
set -euo pipefail
cd "$(dirname "$0")"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
start=20250101000000Z
end=20450101000000Z

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1"; }

# sign CSR CA_CERT CA_KEY SERIAL EXTENSIONS OUT (CA_CERT "self" for a self-signed root)
sign() {
    local csr=$1 cacert=$2 cakey=$3 serial=$4 ext=$5 out=$6
    mkdir -p "$work/db" && : > "$work/db/index" && echo "$serial" > "$work/db/serial"
    cat > "$work/ca.cnf" <<CNF
[ca]
default_ca = test
[test]
database = $work/db/index
serial = $work/db/serial
new_certs_dir = $work/db
default_md = sha256
policy = any
unique_subject = no
copy_extensions = none
[any]
commonName = supplied
organizationName = optional
organizationalUnitName = optional
[ext]
$(printf '%b' "$ext")
CNF
    local selfsign=()
    if [ "$cacert" = self ]; then selfsign=(-selfsign); cacert=/dev/null; fi
    openssl ca -batch -notext -preserveDN -config "$work/ca.cnf" -extensions ext -startdate $start -enddate $end \
        -in "$csr" -keyfile "$cakey" "${selfsign[@]}" $( [ "$cacert" != /dev/null ] && echo -cert "$cacert" ) \
        -out "$out" 2>/dev/null
}

ca_ext='basicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\nsubjectKeyIdentifier = hash'
server_ext='basicConstraints = critical,CA:FALSE\nkeyUsage = critical,digitalSignature\nextendedKeyUsage = serverAuth\nsubjectAltName = DNS:localhost,IP:127.0.0.1\nauthorityKeyIdentifier = keyid'
client_ext='basicConstraints = critical,CA:FALSE\nkeyUsage = critical,digitalSignature\nextendedKeyUsage = clientAuth\nauthorityKeyIdentifier = keyid'

# Root CA, server certificate for localhost/127.0.0.1, client certificate.
key root-ca.key
openssl req -new -key root-ca.key -subj "/O=Orchard Test/CN=Orchard Test Root CA" -out "$work/root.csr"
sign "$work/root.csr" self root-ca.key 01 "$ca_ext" root-ca.pem
key server.key
openssl req -new -key server.key -subj "/O=Orchard Test/CN=localhost" -out "$work/server.csr"
sign "$work/server.csr" root-ca.pem root-ca.key 1001 "$server_ext" server.pem
key client.key
openssl req -new -key client.key -subj "/O=Orchard Test Merchant/OU=Payments/CN=merchant.test" -out "$work/client.csr"
sign "$work/client.csr" root-ca.pem root-ca.key 2001 "$client_ext" client.pem

# A different CA and a client certificate from it: servers that trust root-ca only must refuse it.
key other-ca.key
openssl req -new -key other-ca.key -subj "/O=Someone Else/CN=Other Test Root CA" -out "$work/other.csr"
sign "$work/other.csr" self other-ca.key 01 "$ca_ext" other-ca.pem
key other-client.key
openssl req -new -key other-client.key -subj "/O=Someone Else/CN=merchant.test" -out "$work/oclient.csr"
sign "$work/oclient.csr" other-ca.pem other-ca.key 3001 "$client_ext" other-client.pem
