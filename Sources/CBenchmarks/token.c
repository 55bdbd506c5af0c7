#include "CBenchmarksToken.h"
#include <openssl/core_names.h>
#include <openssl/params.h>

int orchard_bench_ecdh_import(EVP_PKEY *priv, const unsigned char *point65, unsigned char *out, long iterations) {
    for (long i = 0; i < iterations; i++) {
        EVP_PKEY_CTX *fctx = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
        EVP_PKEY *peer = NULL;
        OSSL_PARAM params[] = {
            OSSL_PARAM_construct_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0),
            OSSL_PARAM_construct_octet_string(OSSL_PKEY_PARAM_PUB_KEY, (void *)point65, 65),
            OSSL_PARAM_construct_end(),
        };
        int ok = fctx != NULL && EVP_PKEY_fromdata_init(fctx) == 1 &&
                 EVP_PKEY_fromdata(fctx, &peer, EVP_PKEY_PUBLIC_KEY, params) == 1;
        EVP_PKEY_CTX_free(fctx);
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
