#!/usr/bin/env bash
# Regenerates every file in this folder with the openssl CLI (OpenSSL 3.0, Debian 12). The tests never run
# it: they read the files it wrote. Re-running makes new keys, and known-answers.json follows them, so the
# folder stays consistent. Every expected value here comes from OpenSSL's own tools, independently of
# OrchardCrypto's code paths (SSKDF, two-key DES-EDE, single DES from the legacy provider, pkeyutl, dgst).
set -euo pipefail
cd "$(dirname "$0")"
hex() { xxd -p | tr -d '\n'; }

# P-256 in the shape `openssl ecparam -genkey` writes: an EC PARAMETERS block, then EC PRIVATE KEY (SEC1).
openssl ecparam -name prime256v1 -genkey -out p256-ecparam-genkey.pem
openssl ec -in p256-ecparam-genkey.pem -pubout -out p256-ecparam-genkey.pub.pem 2>/dev/null
# A second P-256 key in every encoding: PKCS#8 PEM, SEC1 DER, PKCS#8 DER, SubjectPublicKeyInfo DER.
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out p256-peer.pkcs8.pem
openssl ec -in p256-peer.pkcs8.pem -outform DER -out p256-peer.sec1.der 2>/dev/null
openssl pkcs8 -topk8 -nocrypt -in p256-peer.pkcs8.pem -outform DER -out p256-peer.pkcs8.der
openssl ec -in p256-peer.pkcs8.pem -pubout -outform DER -out p256-peer.pub.der 2>/dev/null
# Encrypted private keys (password "orchard"): PKCS#8 and the legacy SEC1 form with a DEK-Info header.
openssl pkcs8 -topk8 -v2 aes-256-cbc -passout pass:orchard -in p256-peer.pkcs8.pem -out p256-encrypted.pkcs8.pem
openssl ec -in p256-peer.pkcs8.pem -aes256 -passout pass:orchard -out p256-encrypted.sec1.pem 2>/dev/null
# Keys Orchard must refuse: another curve, a short RSA key.
openssl ecparam -name secp384r1 -genkey -noout -out p384.pem
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:1024 -out rsa-1024.pem
openssl pkey -in rsa-1024.pem -pubout -out rsa-1024.pub.pem
# RSA-2048: PKCS#8 and PKCS#1 ("RSA PRIVATE KEY") PEM, public key.
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out rsa-2048.pem
openssl rsa -in rsa-2048.pem -traditional -out rsa-2048.pkcs1.pem 2>/dev/null
openssl pkey -in rsa-2048.pem -pubout -out rsa-2048.pub.pem

printf 'Orchard signs this message.\n' > message.txt
openssl dgst -sha256 -sign p256-ecparam-genkey.pem -out message.p256.sig.der message.txt
openssl dgst -sha256 -sign rsa-2048.pem -out message.rsa-pkcs1.sig message.txt

secret=000102030405060708090a0b0c0d0e0f
oaep() {
    printf '%s' "$secret" | xxd -r -p | openssl pkeyutl -encrypt -pubin -inkey rsa-2048.pub.pem \
        -pkeyopt rsa_padding_mode:oaep -pkeyopt rsa_oaep_md:sha256 -pkeyopt "rsa_mgf1_md:$1" -out "$2"
}
oaep sha256 rsa-oaep-sha256-mgf1sha256.bin
oaep sha1 rsa-oaep-sha256-mgf1sha1.bin

shared=$(openssl pkeyutl -derive -inkey p256-ecparam-genkey.pem -peerkey <(openssl pkey -pubin -inform DER \
    -in p256-peer.pub.der) | hex)
scalar=$(openssl ec -in p256-ecparam-genkey.pem -text -noout 2>/dev/null \
    | awk '/^priv:/{f=1;next} /^pub:/{f=0} f' | tr -d ' :\n')
point=$(openssl ec -in p256-ecparam-genkey.pem -text -noout 2>/dev/null \
    | awk '/^pub:/{f=1;next} /^ASN1 OID/{f=0} f' | tr -d ' :\n')

sskdf() { openssl kdf -keylen "$1" -kdfopt digest:SHA256 -kdfopt "hexkey:$2" -kdfopt "hexinfo:$3" SSKDF | tr -d ':\n' | tr 'A-F' 'a-f'; }
z=$(printf '%s' "$shared")
info=0d69642d6165733235362d47434d4170706c65$(printf 'merchant.com.example' | openssl dgst -sha256 -r | cut -c1-64)
enc() { openssl enc "$@" -nopad | hex; }
zeros=0000000000000000
data=4e6f77206973207468652074696d6520666f7220616c6c20  # "Now is the time for all "
k2=0123456789abcdeffedcba9876543210
k3=0123456789abcdeffedcba987654321089abcdef01234567
iv=1234567890abcdef
mac3() {  # ISO/IEC 9797-1 MAC algorithm 3 with single DES from the legacy provider
    local k1=${1:0:16} kb=${1:16:16} last
    last=$(printf '%s' "$2" | xxd -r -p | enc -provider legacy -provider default -des-cbc -K "$k1" -iv "$zeros" | tail -c 16)
    last=$(printf '%s' "$last" | xxd -r -p | enc -provider legacy -provider default -d -des-ecb -K "$kb")
    printf '%s' "$last" | xxd -r -p | enc -provider legacy -provider default -des-ecb -K "$k1"
}
cat > known-answers.json <<JSON
{
  "about": "Written by generate.sh with the openssl CLI $(openssl version | cut -d' ' -f2); hex strings.",
  "p256": {
    "ecparamGenkeyScalar": "$scalar",
    "ecparamGenkeyPoint": "$point",
    "ecdhWithPeer": "$z"
  },
  "rsaOaepPlaintext": "$secret",
  "sskdf": [
    { "z": "$z", "otherInfo": "$info", "length": 32, "output": "$(sskdf 32 "$z" "$info")" },
    { "z": "$z", "otherInfo": "", "length": 32, "output": "$(sskdf 32 "$z" "")" },
    { "z": "00112233", "otherInfo": "abcd", "length": 100, "output": "$(sskdf 100 00112233 abcd)" },
    { "z": "$z", "otherInfo": "$info", "length": 1, "output": "$(sskdf 1 "$z" "$info")" }
  ],
  "des": {
    "singleKey": "0123456789abcdef",
    "singlePlaintext": "4e6f772069732074",
    "singleCiphertext": "$(printf 4e6f772069732074 | xxd -r -p | enc -provider legacy -provider default -des-ecb -K 0123456789abcdef)",
    "twoKey": "$k2",
    "threeKey": "$k3",
    "iv": "$iv",
    "data": "$data",
    "twoKeyECB": "$(printf '%s' "$data" | xxd -r -p | enc -des-ede -K "$k2")",
    "twoKeyCBC": "$(printf '%s' "$data" | xxd -r -p | enc -des-ede-cbc -K "$k2" -iv "$iv")",
    "threeKeyECB": "$(printf '%s' "$data" | xxd -r -p | enc -des-ede3 -K "$k3")",
    "threeKeyCBC": "$(printf '%s' "$data" | xxd -r -p | enc -des-ede3-cbc -K "$k3" -iv "$iv")",
    "twoKeyKCV": "$(printf '%s' "$zeros" | xxd -r -p | enc -des-ede -K "$k2" | cut -c1-6)",
    "threeKeyKCV": "$(printf '%s' "$zeros" | xxd -r -p | enc -des-ede3 -K "$k3" | cut -c1-6)",
    "macKey": "$k2",
    "macMethod1": "$(mac3 "$k2" "$data")",
    "macMethod2": "$(mac3 "$k2" "${data}8000000000000000")",
    "macShortData": "0102030405",
    "macShortMethod1": "$(mac3 "$k2" 0102030405000000)",
    "macShortMethod2": "$(mac3 "$k2" 0102030405800000)"
  }
}
JSON
echo "wrote $(ls | wc -l) files"
