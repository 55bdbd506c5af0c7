#define _GNU_SOURCE
#include "CHTTPShims.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

CURLcode orchard_curl_setopt_long(CURL *easy, CURLoption option, long value) {
    return curl_easy_setopt(easy, option, value);
}

CURLcode orchard_curl_setopt_pointer(CURL *easy, CURLoption option, const void *value) {
    return curl_easy_setopt(easy, option, value);
}

CURLcode orchard_curl_setopt_offset(CURL *easy, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(easy, option, value);
}

CURLcode orchard_curl_setopt_blob_nocopy(CURL *easy, CURLoption option, const void *data, size_t length) {
    struct curl_blob blob;
    blob.data = (void *)data;
    blob.len = length;
    blob.flags = CURL_BLOB_NOCOPY;
    return curl_easy_setopt(easy, option, &blob);
}

CURLcode orchard_curl_setopt_callback(CURL *easy, CURLoption option, orchard_curl_data_callback callback) {
    return curl_easy_setopt(easy, option, callback);
}

static int orchard_count_request(void *counter, char *primary_ip, char *local_ip, int primary_port, int local_port) {
    (void)primary_ip;
    (void)local_ip;
    (void)primary_port;
    (void)local_port;
    *(long *)counter += 1;
    return CURL_PREREQFUNC_OK;
}

CURLcode orchard_curl_count_requests(CURL *easy, long *counter) {
    CURLcode code = curl_easy_setopt(easy, CURLOPT_PREREQDATA, counter);
    if (code != CURLE_OK) return code;
    return curl_easy_setopt(easy, CURLOPT_PREREQFUNCTION, orchard_count_request);
}

CURLcode orchard_curl_getinfo_long(CURL *easy, CURLINFO info, long *value) {
    return curl_easy_getinfo(easy, info, value);
}

CURLcode orchard_curl_getinfo_pointer(CURL *easy, CURLINFO info, void **value) {
    return curl_easy_getinfo(easy, info, value);
}

CURLSH *orchard_curl_share_tls_sessions(void) {
    CURLSH *share = curl_share_init();
    if (share == NULL) return NULL;
    if (curl_share_setopt(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION) != CURLSHE_OK) {
        curl_share_cleanup(share);
        return NULL;
    }
    return share;
}

CURLMcode orchard_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

unsigned long orchard_xn_flag_rfc2253(void) { return XN_FLAG_RFC2253; }

uint64_t orchard_ssl_op_no_renegotiation(void) { return SSL_OP_NO_RENEGOTIATION; }

void orchard_http_openssl_free(void *pointer) { OPENSSL_free(pointer); }

static int signal_pipe[2] = {-1, -1};
static pthread_mutex_t signal_pipe_lock = PTHREAD_MUTEX_INITIALIZER;

static void signal_pipe_handler(int signo) {
    int saved = errno;
    unsigned char byte = (unsigned char)signo;
    ssize_t ignored = write(signal_pipe[1], &byte, 1); /* non-blocking: a full pipe already wakes the reader */
    (void)ignored;
    errno = saved;
}

int orchard_signal_pipe_open(void) {
    pthread_mutex_lock(&signal_pipe_lock);
    if (signal_pipe[0] < 0) {
        int fds[2];
        if (pipe2(fds, O_CLOEXEC) != 0) {
            pthread_mutex_unlock(&signal_pipe_lock);
            return -1;
        }
        int flags = fcntl(fds[1], F_GETFL);
        if (flags < 0 || fcntl(fds[1], F_SETFL, flags | O_NONBLOCK) != 0) {
            int saved = errno;
            close(fds[0]);
            close(fds[1]);
            pthread_mutex_unlock(&signal_pipe_lock);
            errno = saved;
            return -1;
        }
        signal_pipe[0] = fds[0];
        signal_pipe[1] = fds[1];
    }
    int fd = signal_pipe[0];
    pthread_mutex_unlock(&signal_pipe_lock);
    return fd;
}

int orchard_signal_pipe_watch(int signo) {
    if (signal_pipe[1] < 0) {
        errno = EBADF;
        return -1;
    }
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = signal_pipe_handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    return sigaction(signo, &action, NULL);
}

int orchard_signal_pipe_restore(int signo) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = SIG_DFL;
    sigemptyset(&action.sa_mask);
    return sigaction(signo, &action, NULL);
}

int orchard_pin_current_thread(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

int orchard_get_thread_cpus(uint64_t *mask) {
    cpu_set_t set;
    CPU_ZERO(&set);
    int rc = pthread_getaffinity_np(pthread_self(), sizeof set, &set);
    if (rc != 0) return rc;
    *mask = 0;
    for (int cpu = 0; cpu < 64; cpu++) {
        if (CPU_ISSET(cpu, &set)) *mask |= (uint64_t)1 << cpu;
    }
    return 0;
}

int orchard_set_thread_cpus(uint64_t mask) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu = 0; cpu < 64; cpu++) {
        if (mask & ((uint64_t)1 << cpu)) CPU_SET(cpu, &set);
    }
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

int orchard_set_task_cpus(int tid, uint64_t mask) {
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int cpu = 0; cpu < 64; cpu++) {
        if (mask & ((uint64_t)1 << cpu)) CPU_SET(cpu, &set);
    }
    return sched_setaffinity((pid_t)tid, sizeof set, &set) == 0 ? 0 : errno;
}

int orchard_set_tcp_nodelay(int fd) {
    int one = 1;
    return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}
