#ifndef ORCHARD_CBENCHMARKS_TOKEN_H
#define ORCHARD_CBENCHMARKS_TOKEN_H
#include <openssl/evp.h>

/* The EC_v1 ceiling's key agreement: import the 65-byte ephemeral point (a copy of the private key's P-256
   parameters, then EVP_PKEY_set1_encoded_public_key, which checks it is on the curve) and derive the 32-byte
   secret with the merchant key, `iterations` times. */
int orchard_bench_ecdh_import(EVP_PKEY *priv, const unsigned char *point65, unsigned char *out, long iterations);

/* The symmetric work of every token, `iterations` times: SHA-256 of the signed content (the messageDigest
   check), for EC_v1 (z != NULL) the single-step KDF (SHA-256 over 00000001 || z || other_info), then AES-GCM
   open of `data` (ciphertext || 16-byte tag) with the 16-byte zero IV under the derived key, or `key` for
   RSA_v1, tag checked. `plaintext` holds data_len - 16 bytes. */
int orchard_bench_token_symmetric(const EVP_MD *sha256, const EVP_CIPHER *gcm, const unsigned char *content,
                                  size_t content_len, const unsigned char *z, size_t z_len,
                                  const unsigned char *other_info, size_t other_len, const unsigned char *key,
                                  const unsigned char *data, size_t data_len, unsigned char *plaintext,
                                  long iterations);

#endif
