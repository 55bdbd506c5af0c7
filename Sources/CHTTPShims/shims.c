#define _GNU_SOURCE
#include "CHTTPShims.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
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

int orchard_tcp_peer_uid(int fd, uint32_t *uid) {
    struct sockaddr_storage local, peer;
    socklen_t local_length = sizeof local, peer_length = sizeof peer;
    if (getsockname(fd, (struct sockaddr *)&local, &local_length) != 0) return errno;
    if (getpeername(fd, (struct sockaddr *)&peer, &peer_length) != 0) return errno;
    if (local.ss_family != peer.ss_family) return EAFNOSUPPORT;

    struct {
        struct nlmsghdr header;
        struct inet_diag_req_v2 request;
    } message;
    memset(&message, 0, sizeof message);
    message.header.nlmsg_len = sizeof message;
    message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    message.header.nlmsg_flags = NLM_F_REQUEST;
    message.request.sdiag_family = (uint8_t)local.ss_family;
    message.request.sdiag_protocol = IPPROTO_TCP;
    message.request.idiag_states = ~0U;
    /* The client's socket: its source is this connection's peer, its destination this connection's own end. */
    if (local.ss_family == AF_INET) {
        const struct sockaddr_in *own = (const struct sockaddr_in *)&local, *other = (const struct sockaddr_in *)&peer;
        message.request.id.idiag_sport = other->sin_port;
        message.request.id.idiag_dport = own->sin_port;
        memcpy(message.request.id.idiag_src, &other->sin_addr, sizeof other->sin_addr);
        memcpy(message.request.id.idiag_dst, &own->sin_addr, sizeof own->sin_addr);
    } else if (local.ss_family == AF_INET6) {
        const struct sockaddr_in6 *own = (const struct sockaddr_in6 *)&local, *other = (const struct sockaddr_in6 *)&peer;
        message.request.id.idiag_sport = other->sin6_port;
        message.request.id.idiag_dport = own->sin6_port;
        memcpy(message.request.id.idiag_src, &other->sin6_addr, sizeof other->sin6_addr);
        memcpy(message.request.id.idiag_dst, &own->sin6_addr, sizeof own->sin6_addr);
    } else {
        return EAFNOSUPPORT;
    }
    message.request.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
    message.request.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;

    int diag = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (diag < 0) return errno;
    struct sockaddr_nl kernel;
    memset(&kernel, 0, sizeof kernel);
    kernel.nl_family = AF_NETLINK;
    if (sendto(diag, &message, sizeof message, 0, (struct sockaddr *)&kernel, sizeof kernel) < 0) {
        int failure = errno;
        close(diag);
        return failure;
    }
    /* One answer: the socket's inet_diag_msg, or an error. Aligned for the headers it is read as. */
    union {
        struct nlmsghdr header;
        char bytes[8192];
    } answer;
    ssize_t received;
    do {
        received = recv(diag, &answer, sizeof answer, 0);
    } while (received < 0 && errno == EINTR);
    int failure = received < 0 ? errno : 0;
    close(diag);
    if (received < 0) return failure;
    const struct nlmsghdr *header = &answer.header;
    if (!NLMSG_OK(header, (size_t)received)) return EPROTO;
    if (header->nlmsg_type == NLMSG_ERROR) {
        const struct nlmsgerr *error = NLMSG_DATA(header);
        if (header->nlmsg_len < NLMSG_LENGTH(sizeof *error)) return EPROTO;
        return error->error < 0 ? -error->error : EPROTO;
    }
    if (header->nlmsg_type != SOCK_DIAG_BY_FAMILY || header->nlmsg_len < NLMSG_LENGTH(sizeof(struct inet_diag_msg)))
        return EPROTO;
    const struct inet_diag_msg *socket_record = NLMSG_DATA(header);
    if (socket_record->idiag_state != TCP_ESTABLISHED) return ENOTCONN;
    *uid = socket_record->idiag_uid;
    return 0;
}
