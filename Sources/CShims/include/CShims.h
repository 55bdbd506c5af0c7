#ifndef ORCHARD_CSHIMS_H
#define ORCHARD_CSHIMS_H
/* One-line wrappers for what Swift cannot call directly: variadic functions and function-like macros. */
#include <stddef.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <sqlite3.h>

/* EVP_PKEY_Q_keygen is variadic. */
EVP_PKEY *orchard_keygen_ec(const char *curve);
EVP_PKEY *orchard_keygen_rsa(size_t bits);

/* OPENSSL_free and BIO_get_mem_data are macros. */
void orchard_OPENSSL_free(void *p);
long orchard_BIO_get_mem_data(BIO *bio, const unsigned char **out);

/* STACK_OF(X509) helpers are macros over inline functions. */
STACK_OF(X509) *orchard_sk_X509_new_null(void);
int orchard_sk_X509_push(STACK_OF(X509) *stack, X509 *cert);
int orchard_sk_X509_num(const STACK_OF(X509) *stack);
X509 *orchard_sk_X509_value(const STACK_OF(X509) *stack, int i);
void orchard_sk_X509_free(STACK_OF(X509) *stack);
void orchard_sk_X509_pop_free(STACK_OF(X509) *stack);

/* SQLITE_TRANSIENT is a cast macro. */
int orchard_sqlite3_bind_text_transient(sqlite3_stmt *stmt, int index, const char *text, int length);
int orchard_sqlite3_bind_blob_transient(sqlite3_stmt *stmt, int index, const void *bytes, int length);
/// sqlite3_db_config(SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, on): whether closing the last connection skips the
/// checkpoint (and keeps the write-ahead log). Variadic in C.
int orchard_sqlite3_no_checkpoint_on_close(sqlite3 *db, int on);

/* Names the calling thread (shown by top -H, perf and gdb; at most 15 bytes are kept). Without it a thread
 * inherits the name of whichever thread created it. */
void orchard_name_current_thread(const char *name);

/* Puts the calling thread under SCHED_BATCH (its nice value kept): it no longer preempts the running thread
 * when it wakes; it runs when that thread sleeps or its time slice ends. 0, or -1 with errno. */
int orchard_current_thread_batch(void);

#endif
