#define _GNU_SOURCE /* pthread_setname_np */
#include "CShims.h"
#include <openssl/crypto.h>
#include <pthread.h>
#include <sched.h>
#include <string.h>

EVP_PKEY *orchard_keygen_ec(const char *curve) { return EVP_PKEY_Q_keygen(NULL, NULL, "EC", curve); }
EVP_PKEY *orchard_keygen_rsa(size_t bits) { return EVP_PKEY_Q_keygen(NULL, NULL, "RSA", bits); }

void orchard_OPENSSL_free(void *p) { OPENSSL_free(p); }
long orchard_BIO_get_mem_data(BIO *bio, const unsigned char **out) { return BIO_get_mem_data(bio, (char **)out); }

STACK_OF(X509) *orchard_sk_X509_new_null(void) { return sk_X509_new_null(); }
int orchard_sk_X509_push(STACK_OF(X509) *stack, X509 *cert) { return sk_X509_push(stack, cert); }
int orchard_sk_X509_num(const STACK_OF(X509) *stack) { return sk_X509_num(stack); }
X509 *orchard_sk_X509_value(const STACK_OF(X509) *stack, int i) { return sk_X509_value(stack, i); }
void orchard_sk_X509_free(STACK_OF(X509) *stack) { sk_X509_free(stack); }
void orchard_sk_X509_pop_free(STACK_OF(X509) *stack) { sk_X509_pop_free(stack, X509_free); }

int orchard_sqlite3_bind_text_transient(sqlite3_stmt *stmt, int index, const char *text, int length) {
    return sqlite3_bind_text(stmt, index, text, length, SQLITE_TRANSIENT);
}
int orchard_sqlite3_bind_blob_transient(sqlite3_stmt *stmt, int index, const void *bytes, int length) {
    return sqlite3_bind_blob(stmt, index, bytes, length, SQLITE_TRANSIENT);
}
int orchard_sqlite3_no_checkpoint_on_close(sqlite3 *db, int on) {
    return sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, on, (int *)0);
}

void orchard_name_current_thread(const char *name) {
    char truncated[16];
    strncpy(truncated, name, sizeof truncated - 1);
    truncated[sizeof truncated - 1] = 0;
    (void)pthread_setname_np(pthread_self(), truncated);
}

int orchard_current_thread_batch(void) {
    struct sched_param param = {0};
    return sched_setscheduler(0, SCHED_BATCH, &param);
}
