#ifndef ORCHARD_CHTTPSHIMS_H
#define ORCHARD_CHTTPSHIMS_H
/* What OrchardHTTP cannot call directly from Swift: libcurl's variadic setters, composite OpenSSL
 * macros, and the one piece of code that must be async-signal-safe (the shutdown signal handler). */
#include "../../COpenSSL/shim.h"
#include "../../CCurl/shim.h"
#include "../../CLibevent/shim.h"

/* curl_easy_setopt, curl_easy_getinfo and curl_multi_setopt are variadic: one typed wrapper per argument kind. */
typedef size_t (*orchard_curl_data_callback)(char *data, size_t size, size_t count, void *context);
CURLcode orchard_curl_setopt_long(CURL *easy, CURLoption option, long value);
CURLcode orchard_curl_setopt_pointer(CURL *easy, CURLoption option, const void *value);
CURLcode orchard_curl_setopt_offset(CURL *easy, CURLoption option, curl_off_t value);
/* Points libcurl at bytes the caller keeps alive and unchanged for as long as the handle may use them. */
CURLcode orchard_curl_setopt_blob_nocopy(CURL *easy, CURLoption option, const void *data, size_t length);
CURLcode orchard_curl_setopt_callback(CURL *easy, CURLoption option, orchard_curl_data_callback callback);
CURLcode orchard_curl_getinfo_long(CURL *easy, CURLINFO info, long *value);
CURLcode orchard_curl_getinfo_pointer(CURL *easy, CURLINFO info, void **value);
CURLMcode orchard_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);
/* A share handle holding libcurl's TLS session cache (curl_share_setopt is variadic), for the easy handles of one
 * thread; NULL if libcurl refuses. Free it with curl_share_cleanup once no easy handle uses it. */
CURLSH *orchard_curl_share_tls_sessions(void);
/* Counts in *counter every request the handle is about to send (CURLOPT_PREREQFUNCTION: once per connection
 * used, fresh or reused). libcurl resends a request on a fresh connection when a reused one died before any
 * answer, and reports only the last connection's error: the count tells whether an earlier one may have
 * delivered the request. *counter must outlive the handle's transfers. */
CURLcode orchard_curl_count_requests(CURL *easy, long *counter);

/* XN_FLAG_RFC2253 and the SSL_OP_* bits are composite macros; OPENSSL_free is a function-like macro. */
unsigned long orchard_xn_flag_rfc2253(void);
uint64_t orchard_ssl_op_no_renegotiation(void);
void orchard_http_openssl_free(void *pointer);

/* Shutdown signals: the handler only writes the signal number (one byte) to a pipe, which is
 * async-signal-safe; one ordinary thread reads the pipe and does the real work.
 * orchard_signal_pipe_open creates the pipe once and returns its read end (or -1 with errno set);
 * orchard_signal_pipe_watch installs the handler for signo (0 on success). */
int orchard_signal_pipe_open(void);
int orchard_signal_pipe_watch(int signo);
int orchard_signal_pipe_restore(int signo);

/* Pins the calling thread to one CPU (the benchmark keeps the server off the load generator's core). */
int orchard_pin_current_thread(int cpu);
/// Restricts one thread of this process (`tid`, as listed in /proc/self/task) to the CPUs in `mask`; 0 or errno.
int orchard_set_task_cpus(int tid, uint64_t mask);
/// The calling thread's CPUs (the first 64) as a bit mask; 0 or an errno value.
int orchard_get_thread_cpus(uint64_t *mask);
/// Restricts the calling thread (and the threads it creates from now on) to the CPUs of `mask`; 0 or an errno value.
int orchard_set_thread_cpus(uint64_t mask);

/* TCP_NODELAY lives in <netinet/tcp.h>, which Glibc's Swift module does not export. */
int orchard_set_tcp_nodelay(int fd);

/* The user owning the socket at the other end of `fd`, an accepted TCP connection from this machine, as the kernel
 * records it (NETLINK_SOCK_DIAG, an exact look-up of the client's socket by both endpoints). 0 with *uid set; or an
 * errno value: ENOENT when no socket of this machine is that end (a remote peer, or one already gone), ENOTCONN when
 * it is no longer established (a closed socket's record carries no owner). */
int orchard_tcp_peer_uid(int fd, uint32_t *uid);

#endif
