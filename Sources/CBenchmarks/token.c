#include "CBenchmarksToken.h"
#include <openssl/core_names.h>
#include <openssl/params.h>

int orchard_bench_ecdh_import(EVP_PKEY *priv, const unsigned char *point65, unsigned char *out, long iterations) {
    // The cheapest import OpenSSL 3 offers (what the Swift side does too): a new key given the private key's
    // P-256 group, then the encoded point, with the same on-curve checks as EVP_PKEY_fromdata.
    for (long i = 0; i < iterations; i++) {
        EVP_PKEY *peer = EVP_PKEY_new();
        int ok = peer != NULL && EVP_PKEY_copy_parameters(peer, priv) == 1 &&
                 EVP_PKEY_set1_encoded_public_key(peer, point65, 65) == 1;
        EVP_PKEY_CTX *ctx = ok ? EVP_PKEY_CTX_new_from_pkey(NULL, priv, NULL) : NULL;
        size_t len = 32;
        ok = ok && ctx != NULL && EVP_PKEY_derive_init(ctx) == 1 && EVP_PKEY_derive_set_peer_ex(ctx, peer, 0) == 1 &&
             EVP_PKEY_derive(ctx, out, &len) == 1 && len == 32;
        EVP_PKEY_CTX_free(ctx);
        EVP_PKEY_free(peer);
        if (!ok) return 0;
    }
    return 1;
}

int orchard_bench_token_symmetric(const EVP_MD *sha256, const EVP_CIPHER *gcm, const unsigned char *content,
                                  size_t content_len, const unsigned char *z, size_t z_len,
                                  const unsigned char *other_info, size_t other_len, const unsigned char *key,
                                  const unsigned char *data, size_t data_len, unsigned char *plaintext,
                                  long iterations) {
    static const unsigned char iv[16] = {0};
    static const unsigned char counter[4] = {0, 0, 0, 1};
    if (data_len < 16) return 0;
    size_t ciphertext_len = data_len - 16;
    for (long i = 0; i < iterations; i++) {
        unsigned char digest[32], derived[32];
        unsigned int digest_len = 0;
        if (EVP_Digest(content, content_len, digest, &digest_len, sha256, NULL) != 1) return 0;
        const unsigned char *aes_key = key;
        if (z != NULL) {
            EVP_MD_CTX *md = EVP_MD_CTX_new();
            unsigned int len = 0;
            int ok = md != NULL && EVP_DigestInit_ex2(md, sha256, NULL) == 1 &&
                     EVP_DigestUpdate(md, counter, 4) == 1 && EVP_DigestUpdate(md, z, z_len) == 1 &&
                     EVP_DigestUpdate(md, other_info, other_len) == 1 && EVP_DigestFinal_ex(md, derived, &len) == 1;
            EVP_MD_CTX_free(md);
            if (!ok) return 0;
            aes_key = derived;
        }
        EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
        int out_len = 0, final_len = 0;
        int ok = ctx != NULL && EVP_DecryptInit_ex2(ctx, gcm, NULL, NULL, NULL) == 1 &&
                 EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, sizeof iv, NULL) == 1 &&
                 EVP_DecryptInit_ex2(ctx, NULL, aes_key, iv, NULL) == 1 &&
                 EVP_DecryptUpdate(ctx, plaintext, &out_len, data, (int)ciphertext_len) == 1 &&
                 EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, (void *)(data + ciphertext_len)) == 1 &&
                 EVP_DecryptFinal_ex(ctx, plaintext + out_len, &final_len) == 1;
        EVP_CIPHER_CTX_free(ctx);
        OPENSSL_cleanse(derived, sizeof derived);
        if (!ok) return 0;
    }
    return 1;
}

static EVP_PKEY *import_point(EVP_PKEY *template, const unsigned char *point, size_t len) {
    EVP_PKEY *key = EVP_PKEY_new();
    if (key == NULL) return NULL;
    if (EVP_PKEY_copy_parameters(key, template) != 1 || EVP_PKEY_set1_encoded_public_key(key, point, len) != 1) {
        EVP_PKEY_free(key);
        return NULL;
    }
    return key;
}

static EVP_PKEY *import_rsa(const unsigned char *n, size_t n_len, const unsigned char *e, size_t e_len) {
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, "RSA", NULL);
    EVP_PKEY *key = NULL;
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_BN(OSSL_PKEY_PARAM_RSA_N, (unsigned char *)n, n_len),
        OSSL_PARAM_construct_BN(OSSL_PKEY_PARAM_RSA_E, (unsigned char *)e, e_len),
        OSSL_PARAM_construct_end(),
    };
    if (ctx == NULL || EVP_PKEY_fromdata_init(ctx) != 1 || EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params) != 1)
        key = NULL;
    EVP_PKEY_CTX_free(ctx);
    return key;
}

static int verify_signature(EVP_PKEY *key, orchard_bench_cert_signature s) {
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ok = md != NULL && EVP_DigestVerifyInit(md, NULL, s.md, NULL, key) == 1 &&
             EVP_DigestVerify(md, s.signature, s.signature_len, s.tbs, s.tbs_len) == 1;
    EVP_MD_CTX_free(md);
    return ok;
}

int orchard_bench_chain(EVP_PKEY *root, EVP_PKEY *ec_template, const unsigned char *intermediate_point,
                        size_t intermediate_point_len, orchard_bench_cert_signature intermediate,
                        orchard_bench_cert_signature leaf, const unsigned char *leaf_point, size_t leaf_point_len,
                        const unsigned char *rsa_n, size_t rsa_n_len, const unsigned char *rsa_e, size_t rsa_e_len,
                        long iterations) {
    for (long i = 0; i < iterations; i++) {
        EVP_PKEY *inter = import_point(ec_template, intermediate_point, intermediate_point_len);
        int ok = inter != NULL && verify_signature(root, intermediate) && verify_signature(inter, leaf);
        EVP_PKEY *leaf_key = NULL;
        if (ok) {
            leaf_key = leaf_point != NULL ? import_point(ec_template, leaf_point, leaf_point_len)
                                          : import_rsa(rsa_n, rsa_n_len, rsa_e, rsa_e_len);
            ok = leaf_key != NULL;
        }
        EVP_PKEY_free(leaf_key);
        EVP_PKEY_free(inter);
        if (!ok) return 0;
    }
    return 1;
}
