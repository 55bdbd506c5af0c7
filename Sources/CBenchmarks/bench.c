#include "CBenchmarks.h"

#include <openssl/core_names.h>
#include <openssl/kdf.h>
#include <openssl/params.h>
#include <openssl/rsa.h>

int orchard_bench_ecdh(EVP_PKEY *priv, EVP_PKEY *peer, unsigned char *out, long iterations) {
    for (long i = 0; i < iterations; i++) {
        EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, priv, NULL);
        size_t len = 32;
        int ok = ctx != NULL && EVP_PKEY_derive_init(ctx) == 1 && EVP_PKEY_derive_set_peer_ex(ctx, peer, 0) == 1 &&
                 EVP_PKEY_derive(ctx, out, &len) == 1 && len == 32;
        EVP_PKEY_CTX_free(ctx);
        if (!ok) return 0;
    }
    return 1;
}

int orchard_bench_ecdsa_verify(const EVP_MD *md, EVP_PKEY *pub, const unsigned char *sig, size_t sig_len,
                               const unsigned char *msg, size_t msg_len, long iterations) {
    for (long i = 0; i < iterations; i++) {
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        int ok = ctx != NULL && EVP_DigestVerifyInit(ctx, NULL, md, NULL, pub) == 1 &&
                 EVP_DigestVerify(ctx, sig, sig_len, msg, msg_len) == 1;
        EVP_MD_CTX_free(ctx);
        if (!ok) return 0;
    }
    return 1;
}

int orchard_bench_ecdsa_sign(const EVP_MD *md, EVP_PKEY *priv, const unsigned char *msg, size_t msg_len,
                             unsigned char *sig, size_t *sig_len, long iterations) {
    size_t capacity = *sig_len;
    for (long i = 0; i < iterations; i++) {
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        size_t len = capacity;
        int ok = ctx != NULL && EVP_DigestSignInit(ctx, NULL, md, NULL, priv) == 1 &&
                 EVP_DigestSign(ctx, sig, &len, msg, msg_len) == 1;
        EVP_MD_CTX_free(ctx);
        if (!ok) return 0;
        *sig_len = len;
    }
    return 1;
}

int orchard_bench_aes_gcm_seal(const EVP_CIPHER *cipher, const unsigned char *key, const unsigned char *iv,
                               int iv_len, const unsigned char *in, int in_len, unsigned char *out,
                               unsigned char *tag, long iterations) {
    for (long i = 0; i < iterations; i++) {
        EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
        int len = 0, tail = 0;
        int ok = ctx != NULL && EVP_EncryptInit_ex2(ctx, cipher, NULL, NULL, NULL) == 1 &&
                 EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, iv_len, NULL) == 1 &&
                 EVP_EncryptInit_ex2(ctx, NULL, key, iv, NULL) == 1 &&
                 EVP_EncryptUpdate(ctx, out, &len, in, in_len) == 1 &&
                 EVP_EncryptFinal_ex(ctx, out + len, &tail) == 1 &&
                 EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, 16, tag) == 1;
        EVP_CIPHER_CTX_free(ctx);
        if (!ok) return 0;
    }
    return 1;
}

int orchard_bench_aes_gcm_open(const EVP_CIPHER *cipher, const unsigned char *key, const unsigned char *iv,
                               int iv_len, const unsigned char *in, int in_len, const unsigned char *tag,
                               unsigned char *out, long iterations) {
    for (long i = 0; i < iterations; i++) {
        EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
        int len = 0, tail = 0;
        int ok = ctx != NULL && EVP_DecryptInit_ex2(ctx, cipher, NULL, NULL, NULL) == 1 &&
                 EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, iv_len, NULL) == 1 &&
                 EVP_DecryptInit_ex2(ctx, NULL, key, iv, NULL) == 1 &&
                 EVP_DecryptUpdate(ctx, out, &len, in, in_len) == 1 &&
                 EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, (void *)tag) == 1 &&
                 EVP_DecryptFinal_ex(ctx, out + len, &tail) == 1;
        EVP_CIPHER_CTX_free(ctx);
        if (!ok) return 0;
    }
    return 1;
}

int orchard_bench_digest(const EVP_MD *md, const unsigned char *in, size_t in_len, unsigned char *out,
                         long iterations) {
    for (long i = 0; i < iterations; i++) {
        unsigned int len = 0;
        if (EVP_Digest(in, in_len, out, &len, md, NULL) != 1) return 0;
    }
    return 1;
}

int orchard_bench_hmac(EVP_MAC *mac, const char *digest, const unsigned char *key, size_t key_len,
                       const unsigned char *in, size_t in_len, unsigned char *out, size_t out_size,
                       long iterations) {
    for (long i = 0; i < iterations; i++) {
        EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mac);
        OSSL_PARAM params[] = {
            OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)digest, 0),
            OSSL_PARAM_construct_end(),
        };
        size_t len = 0;
        int ok = ctx != NULL && EVP_MAC_init(ctx, key, key_len, params) == 1 &&
                 EVP_MAC_update(ctx, in, in_len) == 1 && EVP_MAC_final(ctx, out, &len, out_size) == 1;
        EVP_MAC_CTX_free(ctx);
        if (!ok) return 0;
    }
    return 1;
}

int orchard_bench_hkdf(EVP_KDF *kdf, const char *digest, const unsigned char *ikm, size_t ikm_len,
                       const unsigned char *salt, size_t salt_len, const unsigned char *info, size_t info_len,
                       unsigned char *out, size_t out_len, long iterations) {
    for (long i = 0; i < iterations; i++) {
        EVP_KDF_CTX *ctx = EVP_KDF_CTX_new(kdf);
        OSSL_PARAM params[] = {
            OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *)digest, 0),
            OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ikm, ikm_len),
            OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, salt_len),
            OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, info_len),
            OSSL_PARAM_construct_end(),
        };
        int ok = ctx != NULL && EVP_KDF_derive(ctx, out, out_len, params) == 1;
        EVP_KDF_CTX_free(ctx);
        if (!ok) return 0;
    }
    return 1;
}

int orchard_bench_rsa_oaep_decrypt(EVP_PKEY *priv, const EVP_MD *oaep_md, const EVP_MD *mgf1_md,
                                   const unsigned char *in, size_t in_len, unsigned char *out, size_t *out_len,
                                   long iterations) {
    size_t capacity = *out_len;
    for (long i = 0; i < iterations; i++) {
        EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, priv, NULL);
        size_t len = capacity;
        int ok = ctx != NULL && EVP_PKEY_decrypt_init(ctx) == 1 &&
                 EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING) == 1 &&
                 EVP_PKEY_CTX_set_rsa_oaep_md(ctx, oaep_md) == 1 && EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, mgf1_md) == 1 &&
                 EVP_PKEY_decrypt(ctx, out, &len, in, in_len) == 1;
        EVP_PKEY_CTX_free(ctx);
        if (!ok) return 0;
        *out_len = len;
    }
    return 1;
}
