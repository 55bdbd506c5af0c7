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

/* One certificate signature of a chain: the signed bytes (tbsCertificate), the signature and its digest. */
typedef struct {
    const unsigned char *tbs;
    size_t tbs_len;
    const unsigned char *signature;
    size_t signature_len;
    const EVP_MD *md;
} orchard_bench_cert_signature;

/* The chain's share of a token whose chain is verified every time, `iterations` times: import the intermediate's
   EC point (a copy of `ec_template`'s group, then the encoded point), verify the intermediate's signature under
   the trust root's key (imported once: roots are configuration), import the leaf's key (an EC point the same way,
   or RSA n and e, native byte order, through EVP_PKEY_fromdata) and verify the leaf's signature under the
   intermediate's key. */
int orchard_bench_chain(EVP_PKEY *root, EVP_PKEY *ec_template, const unsigned char *intermediate_point,
                        size_t intermediate_point_len, orchard_bench_cert_signature intermediate,
                        orchard_bench_cert_signature leaf, const unsigned char *leaf_point, size_t leaf_point_len,
                        const unsigned char *rsa_n, size_t rsa_n_len, const unsigned char *rsa_e, size_t rsa_e_len,
                        long iterations);

#endif
