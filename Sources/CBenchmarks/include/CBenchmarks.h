#ifndef ORCHARD_CBENCHMARKS_H
#define ORCHARD_CBENCHMARKS_H
/*
 * The "raw" side of `orchard bench`: the same EVP call sequences OrchardCrypto makes, written in C, each
 * run `iterations` times with a fresh context per operation, on buffers the caller owns (the same buffers
 * the Swift side uses). Every function returns 1 when all operations succeeded and 0 otherwise (the error
 * queue is then left for the caller to drain). Outputs are written so the caller can cross-check them
 * against the Swift API's results.
 */
#include <stddef.h>
#include <openssl/evp.h>
#include "CBenchmarksToken.h"

/* ECDH: derive the shared secret of `priv` and `peer` (both parsed once) into out[32]. */
int orchard_bench_ecdh(EVP_PKEY *priv, EVP_PKEY *peer, unsigned char *out, long iterations);

/* ECDSA verify with a digest (SHA-256) over `msg` and a DER signature. Returns 0 if any verification fails. */
int orchard_bench_ecdsa_verify(const EVP_MD *md, EVP_PKEY *pub, const unsigned char *sig, size_t sig_len,
                               const unsigned char *msg, size_t msg_len, long iterations);

/* ECDSA sign: the last signature (DER) is left in sig (capacity *sig_len, updated to its length). */
int orchard_bench_ecdsa_sign(const EVP_MD *md, EVP_PKEY *priv, const unsigned char *msg, size_t msg_len,
                             unsigned char *sig, size_t *sig_len, long iterations);

/* AES-GCM seal: in (in_len bytes) -> out (in_len bytes) and tag[16], no AAD. */
int orchard_bench_aes_gcm_seal(const EVP_CIPHER *cipher, const unsigned char *key, const unsigned char *iv,
                               int iv_len, const unsigned char *in, int in_len, unsigned char *out,
                               unsigned char *tag, long iterations);

/* AES-GCM open: in (in_len bytes) and tag[16] -> out (in_len bytes). Returns 0 if a tag does not match. */
int orchard_bench_aes_gcm_open(const EVP_CIPHER *cipher, const unsigned char *key, const unsigned char *iv,
                               int iv_len, const unsigned char *in, int in_len, const unsigned char *tag,
                               unsigned char *out, long iterations);

/* One-shot digest (EVP_Digest) of `in` into out (EVP_MD_get_size(md) bytes). */
int orchard_bench_digest(const EVP_MD *md, const unsigned char *in, size_t in_len, unsigned char *out,
                         long iterations);

/* HMAC through EVP_MAC with the digest named `digest` (e.g. "SHA256"); out holds out_size bytes. */
int orchard_bench_hmac(EVP_MAC *mac, const char *digest, const unsigned char *key, size_t key_len,
                       const unsigned char *in, size_t in_len, unsigned char *out, size_t out_size,
                       long iterations);

/* HKDF (extract and expand) through EVP_KDF with the digest named `digest`. */
int orchard_bench_hkdf(EVP_KDF *kdf, const char *digest, const unsigned char *ikm, size_t ikm_len,
                       const unsigned char *salt, size_t salt_len, const unsigned char *info, size_t info_len,
                       unsigned char *out, size_t out_len, long iterations);

/* RSA-OAEP decryption with the given OAEP and MGF1 digests; out has capacity *out_len (updated). */
int orchard_bench_rsa_oaep_decrypt(EVP_PKEY *priv, const EVP_MD *oaep_md, const EVP_MD *mgf1_md,
                                   const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len,
                                   long iterations);

#endif
