#ifndef ORCHARD_CBENCHMARKS_TOKEN_H
#define ORCHARD_CBENCHMARKS_TOKEN_H
#include <openssl/evp.h>

/* The EC_v1 ceiling's key agreement: import the 65-byte ephemeral point (EVP_PKEY_fromdata, which checks
   it is on the curve) and derive the 32-byte secret with the merchant key, `iterations` times. */
int orchard_bench_ecdh_import(EVP_PKEY *priv, const unsigned char *point65, unsigned char *out, long iterations);

#endif
