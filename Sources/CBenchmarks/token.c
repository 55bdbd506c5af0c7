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
