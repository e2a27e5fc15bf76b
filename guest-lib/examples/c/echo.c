/*
 * c-echo: the C API of slimtcp-guest against a TCP echo server.
 *
 *   echo DEVICE IP PORT [COUNT] [SIZE]
 *   echo vhost-user:/run/slimtcp/t0.sock 10.0.0.1 7000 100 1000
 *
 * Connects to the echo server at IP:PORT through DEVICE (see slim_open), sends COUNT messages
 * (default 100) of SIZE bytes (default 1000, at most 65536) filled with a known pattern, waits
 * for each echo with slim_epoll_wait, reads it back and checks it byte for byte. Odd messages
 * go through the zero-copy send path (slim_alloc_tx/slim_send_zc), even ones through
 * slim_send; every third echo is read in place with slim_recv_zc, the others with slim_recv.
 * Prints "c-echo: ok N messages, M bytes" and exits 0, or prints what failed and exits 1.
 *
 * Build (Makefile beside this file; the library first: cargo build --release -p slimtcp-guest):
 *   make -C guest-lib/examples/c                  # static: target/release/c-echo
 *   make -C guest-lib/examples/c LINK=dynamic     # against libslimtcp_guest.so
 * or by hand, statically:
 *   cc -std=c11 -Iguest-lib/include guest-lib/examples/c/echo.c target/release/libslimtcp_guest.a \
 *      -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc -o c-echo
 */
#define _POSIX_C_SOURCE 200809L

#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "slimtcp.h"

/* How long to wait for an echo to become readable, in milliseconds. */
#define ECHO_WAIT_MS 30000

/* Prints what failed (the negative errno rc and the library's message) and exits 1. */
static void fail(const char *what, long rc) {
    fprintf(stderr, "c-echo: %s failed: %s (%s)\n", what, strerror((int)-rc), slim_last_error());
    exit(1);
}

/* Byte `off` of message `msg`: a pattern that differs between messages and positions. */
static uint8_t pattern(unsigned long msg, size_t off) {
    return (uint8_t)(msg * 131u + off * 7u + (off >> 8) + 1u);
}

static void fill(uint8_t *buf, size_t size, unsigned long msg) {
    for (size_t i = 0; i < size; i++) buf[i] = pattern(msg, i);
}

/* Checks `len` echoed bytes that belong at offset `off` of message `msg`. */
static void check(const uint8_t *got, size_t len, unsigned long msg, size_t off) {
    for (size_t i = 0; i < len; i++) {
        if (got[i] != pattern(msg, off + i)) {
            fprintf(stderr, "c-echo: message %lu came back changed at byte %zu: 0x%02x, expected 0x%02x\n",
                    msg, off + i, got[i], pattern(msg, off + i));
            exit(1);
        }
    }
}

static unsigned long number(const char *text, const char *name, unsigned long max) {
    char *end = NULL;
    errno = 0;
    unsigned long v = strtoul(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v == 0 || v > max) {
        fprintf(stderr, "c-echo: %s must be a number in 1..%lu, not \"%s\"\n", name, max, text);
        exit(2);
    }
    return v;
}

/* Sends message `msg` with copies. */
static void send_copy(struct slim_ctx *ctx, int fd, uint8_t *buf, size_t size, unsigned long msg) {
    fill(buf, size, msg);
    for (size_t sent = 0; sent < size;) {
        ssize_t n = slim_send(ctx, fd, buf + sent, size - sent);
        if (n < 0) fail("slim_send", n);
        sent += (size_t)n;
    }
}

/* Sends message `msg` from a library buffer: written in place, then handed over. */
static void send_zero_copy(struct slim_ctx *ctx, int fd, size_t size, unsigned long msg) {
    struct slim_txbuf *tx = NULL;
    int rc = slim_alloc_tx(ctx, size, &tx);
    if (rc < 0) fail("slim_alloc_tx", rc);
    fill(slim_tx_data(tx), size, msg);
    rc = slim_tx_set_len(tx, size);
    if (rc < 0) fail("slim_tx_set_len", rc);
    ssize_t n = slim_send_zc(ctx, fd, &tx);
    if (n < 0) {
        slim_tx_free(tx); /* still ours when the library did not take it (NULL: a no-op) */
        fail("slim_send_zc", n);
    }
    if (tx != NULL || (size_t)n != size) {
        fprintf(stderr, "c-echo: slim_send_zc took %zd of %zu bytes\n", n, size);
        exit(1);
    }
}

/* Waits until `fd` is readable (registered in `ep` with data = fd). */
static void wait_readable(struct slim_ctx *ctx, int ep, int fd) {
    struct slim_epoll_event ev[4];
    int n = slim_epoll_wait(ctx, ep, ev, 4, ECHO_WAIT_MS);
    if (n < 0) fail("slim_epoll_wait", n);
    if (n == 0) {
        fprintf(stderr, "c-echo: no echo within %d ms\n", ECHO_WAIT_MS);
        exit(1);
    }
    if (ev[0].data != (uint64_t)fd || !(ev[0].events & SLIM_EPOLLIN)) {
        fprintf(stderr, "c-echo: unexpected readiness 0x%x for %llu\n", ev[0].events,
                (unsigned long long)ev[0].data);
        exit(1);
    }
}

/* Reads the echo of message `msg` (`size` bytes) and checks it. */
static void receive(struct slim_ctx *ctx, int fd, uint8_t *buf, size_t size, unsigned long msg) {
    int in_place = msg % 3 == 0;
    for (size_t got = 0; got < size;) {
        if (in_place) {
            struct slim_rxbuf *rx = NULL;
            ssize_t n = slim_recv_zc(ctx, fd, &rx);
            if (n < 0) fail("slim_recv_zc", n);
            if (n == 0 || (size_t)n > size - got) {
                fprintf(stderr, "c-echo: message %lu: %zd bytes in place at %zu of %zu\n", msg, n, got, size);
                exit(1);
            }
            check(slim_rx_data(rx), slim_rx_len(rx), msg, got);
            got += slim_rx_len(rx);
            slim_rx_release(rx);
        } else {
            ssize_t n = slim_recv(ctx, fd, buf, size - got);
            if (n < 0) fail("slim_recv", n);
            if (n == 0) {
                fprintf(stderr, "c-echo: end of stream after %zu of %zu bytes of message %lu\n", got, size, msg);
                exit(1);
            }
            check(buf, (size_t)n, msg, got);
            got += (size_t)n;
        }
    }
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 6) {
        fprintf(stderr, "usage: %s DEVICE IP PORT [COUNT] [SIZE]\n", argv[0]);
        return 2;
    }
    struct sockaddr_in server = {.sin_family = AF_INET};
    if (inet_pton(AF_INET, argv[2], &server.sin_addr) != 1) {
        fprintf(stderr, "c-echo: \"%s\" is not an IPv4 address\n", argv[2]);
        return 2;
    }
    server.sin_port = htons((uint16_t)number(argv[3], "PORT", 65535));
    unsigned long count = argc > 4 ? number(argv[4], "COUNT", 1000000) : 100;
    size_t size = argc > 5 ? number(argv[5], "SIZE", 65536) : 1000;

    struct slim_ctx *ctx = slim_open(argv[1], NULL);
    if (ctx == NULL) fail("slim_open", -errno);

    int fd = slim_socket(ctx, AF_INET, SOCK_STREAM, 0);
    if (fd < 0) fail("slim_socket", fd);
    int rc = slim_connect(ctx, fd, &server);
    if (rc < 0) fail("slim_connect", rc);

    int ep = slim_epoll_create(ctx);
    if (ep < 0) fail("slim_epoll_create", ep);
    struct slim_epoll_event interest = {.events = SLIM_EPOLLIN, .data = (uint64_t)fd};
    rc = slim_epoll_ctl(ctx, ep, SLIM_EPOLL_CTL_ADD, fd, &interest);
    if (rc < 0) fail("slim_epoll_ctl", rc);

    uint8_t *buf = malloc(size);
    if (buf == NULL) {
        fprintf(stderr, "c-echo: out of memory\n");
        return 1;
    }
    for (unsigned long msg = 0; msg < count; msg++) {
        if (msg % 2 == 1) {
            send_zero_copy(ctx, fd, size, msg);
        } else {
            send_copy(ctx, fd, buf, size, msg);
        }
        wait_readable(ctx, ep, fd);
        receive(ctx, fd, buf, size, msg);
    }

    /* Half-close: the echo server answers with its end of stream. */
    rc = slim_shutdown(ctx, fd, SHUT_WR);
    if (rc < 0) fail("slim_shutdown", rc);
    ssize_t end = slim_recv(ctx, fd, buf, size);
    if (end != 0) {
        if (end < 0) fail("slim_recv (end of stream)", end);
        fprintf(stderr, "c-echo: %zd unexpected bytes instead of the end of stream\n", end);
        return 1;
    }
    free(buf);
    rc = slim_epoll_close(ctx, ep);
    if (rc < 0) fail("slim_epoll_close", rc);
    rc = slim_close(ctx, fd);
    if (rc < 0) fail("slim_close", rc);
    slim_ctx_close(ctx);

    printf("c-echo: ok %lu messages, %llu bytes\n", count, (unsigned long long)count * size);
    return 0;
}
