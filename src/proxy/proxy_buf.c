/*
 * proxy_buf.c - the relay's read buffers: taken from the loop's pools when
 * a read happens (an idle tunnel holds none), given back when written, and
 * the pools handed back to the system after a flood (relay_pool_free).
 * 64 KiB buffers for heads and short exchanges, RELAY_BIG_SIZE ones for a
 * tunnel side that sends in bulk.
 */
#include <stdlib.h>

#include "proxy/proxy_conn.h"

struct relay_buf *relay_buf_get(struct proxy_loop *loop)
{
    struct relay_buf *b = loop->pool;
    if (b) {
        loop->pool = b->next_free;
        loop->npool--;
    } else {
        b = malloc(sizeof *b + RELAY_BUF_SIZE);
        if (!b)
            return NULL;
        b->cap = RELAY_BUF_SIZE;
    }
    b->len = 0;
    return b;
}

struct relay_buf *relay_buf_big(struct proxy_loop *loop)
{
    struct relay_buf *b = loop->bigpool;
    if (b) {
        loop->bigpool = b->next_free;
        loop->nbig--;
    } else {
        b = malloc(sizeof *b + RELAY_BIG_SIZE);
        if (!b)
            return NULL;
        b->cap = RELAY_BIG_SIZE;
    }
    b->len = 0;
    return b;
}

struct relay_buf *relay_buf_sized(size_t cap)
{
    struct relay_buf *b = malloc(sizeof *b + cap);
    if (!b)
        return NULL;
    b->cap = (uint32_t)cap;
    b->len = 0;
    return b;
}

void relay_buf_put(struct proxy_loop *loop, struct relay_buf *b)
{
    if (b->cap == RELAY_BUF_SIZE && loop->npool < RELAY_POOL_MAX) {
        b->next_free = loop->pool;
        loop->pool = b;
        loop->npool++;
        return;
    }
    if (b->cap == RELAY_BIG_SIZE && loop->nbig < RELAY_BIG_POOL_MAX) {
        b->next_free = loop->bigpool;
        loop->bigpool = b;
        loop->nbig++;
        return;
    }
    free(b);
}

void relay_pool_free(struct proxy_loop *loop)
{
    while (loop->pool) {
        struct relay_buf *b = loop->pool;
        loop->pool = b->next_free;
        free(b);
    }
    loop->npool = 0;
    while (loop->bigpool) {
        struct relay_buf *b = loop->bigpool;
        loop->bigpool = b->next_free;
        free(b);
    }
    loop->nbig = 0;
}
