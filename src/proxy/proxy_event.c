/*
 * proxy_event.c - what a proxy tells its owner: one event per CONNECT and
 * per forward request (queued, bounded; given when the request ends, with
 * its bytes and duration, and copied to the audit log), counters, and the
 * allowlist that set_allow swaps while requests are in flight.
 */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/proxy_conn.h"

/*
 * Event texts carry client bytes (a TLS server name in a reason, at least)
 * to terminals and logs, and the proxy's own error replies carry hosts and
 * reasons back to the client. Each byte that is not printable ASCII, and the
 * backslash, is written as \xNN, here and only here, so that every reader
 * (events(), on_event, isolate's log, an error reply's body) gets the same
 * unambiguous text, and nothing a client sends can move a cursor, set a title
 * or start a line. Truncation drops whole escapes: the text never ends in half
 * of one.
 */
void proxy_text_escape(char *dst, size_t cap, const char *src)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *s = (const unsigned char *)(src ? src : "");
    size_t o = 0;
    for (; *s; s++) {
        unsigned char ch = *s;
        if (ch >= 0x20 && ch < 0x7f && ch != '\\') {
            if (o + 1 >= cap)
                break;
            dst[o++] = (char)ch;
            continue;
        }
        if (o + 4 >= cap)
            break;
        dst[o++] = '\\';
        dst[o++] = 'x';
        dst[o++] = hex[ch >> 4];
        dst[o++] = hex[ch & 0xf];
    }
    dst[o] = '\0';
}

void proxy_event(struct proxy *p, const struct conn *c, const char *type,
                 const char *code, int status, const char *reason)
{
    /* allowed counts at the admission (conn_admit), when the tunnel opens
     * or the response head comes, as before events waited for the end. */
    if (type[0] == 'd')
        atomic_fetch_add_explicit(&p->stats.denied, 1, memory_order_relaxed);
    else if (type[0] == 'e')
        atomic_fetch_add_explicit(&p->stats.errors, 1, memory_order_relaxed);

    static const struct conn none; /* an event of the proxy, not a request */
    if (!c)
        c = &none;
    struct proxy_event ev, *e = &ev;
    e->next = NULL;
    proxy_text_escape(e->type, sizeof e->type, type);
    e->code = code;
    proxy_text_escape(e->method, sizeof e->method, c->method);
    proxy_text_escape(e->host, sizeof e->host, c->host);
    e->port = c->port;
    e->status = status;
    e->bytes_up = c->req_bytes[DIR_UP];
    e->bytes_down = c->req_bytes[DIR_DOWN];
    uint64_t now = c->req_start ? uv_hrtime() : 0;
    e->duration_us = now > c->req_start ? (now - c->req_start) / 1000 : 0;
    proxy_text_escape(e->reason, sizeof e->reason, reason);
    proxy_text_escape(e->address, sizeof e->address, c->refused_addr);
    e->address_class = c->refused_class;
    /* A bounded copy, as snprintf "%s" made it, without its cost on every
     * request. */
    const char *via = c->via_parent ? p->opts.parent.text : "";
    size_t vn = strnlen(via, sizeof e->via - 1);
    memcpy(e->via, via, vn);
    e->via[vn] = '\0';
    /* The log gets every event, also those the queue has no room for. */
    if (p->audit)
        proxy_audit_event(p->audit, e);

    uv_mutex_lock(&p->mu);
    bool full = p->ev_count >= PROXY_MAX_EVENTS;
    uv_mutex_unlock(&p->mu);
    e = full ? NULL : malloc(sizeof *e);
    if (!e) {
        atomic_fetch_add_explicit(&p->stats.events_dropped, 1,
                                  memory_order_relaxed);
        return;
    }
    *e = ev;
    uv_mutex_lock(&p->mu);
    if (p->ev_tail)
        p->ev_tail->next = e;
    else
        p->ev_head = e;
    p->ev_tail = e;
    p->ev_count++;
    uv_mutex_unlock(&p->mu);
}

static struct proxy_event *take_events(struct proxy *p)
{
    uv_mutex_lock(&p->mu);
    struct proxy_event *e = p->ev_head;
    p->ev_head = p->ev_tail = NULL;
    p->ev_count = 0;
    uv_mutex_unlock(&p->mu);
    return e;
}

static void push_event(lua_State *L, const struct proxy_event *e)
{
    lua_createtable(L, 0, 12);
    lua_pushstring(L, e->type);
    lua_setfield(L, -2, "type");
    lua_pushstring(L, e->code);
    lua_setfield(L, -2, "code");
    lua_pushstring(L, e->method);
    lua_setfield(L, -2, "method");
    lua_pushstring(L, e->host);
    lua_setfield(L, -2, "host");
    lua_pushinteger(L, e->port);
    lua_setfield(L, -2, "port");
    lua_pushinteger(L, e->status);
    lua_setfield(L, -2, "status");
    lua_pushstring(L, e->reason);
    lua_setfield(L, -2, "reason");
    lua_pushinteger(L, (lua_Integer)e->bytes_up);
    lua_setfield(L, -2, "bytes_up");
    lua_pushinteger(L, (lua_Integer)e->bytes_down);
    lua_setfield(L, -2, "bytes_down");
    lua_pushnumber(L, (lua_Number)e->duration_us / 1e6);
    lua_setfield(L, -2, "duration");
    if (e->address[0]) {
        lua_pushstring(L, e->address);
        lua_setfield(L, -2, "address");
    }
    if (e->address_class) {
        lua_pushstring(L, e->address_class);
        lua_setfield(L, -2, "address_class");
    }
    if (e->via[0]) {
        lua_pushstring(L, e->via);
        lua_setfield(L, -2, "via");
    }
}

void proxy_events_push(lua_State *L, struct proxy *p)
{
    struct proxy_event *e = take_events(p);
    lua_newtable(L);
    lua_Integer i = 0;
    while (e) {
        struct proxy_event *next = e->next;
        /* A table per event can raise (memory): free the rest first. */
        push_event(L, e);
        lua_rawseti(L, -2, ++i);
        free(e);
        e = next;
    }
}

void proxy_events_dispatch(lua_State *L, struct proxy *p)
{
    if (p->on_event_ref == LUA_NOREF || p->on_event_ref == LUA_REFNIL)
        return;
    struct proxy_event *e = take_events(p);
    while (e) {
        struct proxy_event *next = e->next;
        lua_rawgeti(L, LUA_REGISTRYINDEX, p->on_event_ref);
        push_event(L, e);
        free(e);
        e = next;
        if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
            /* luv's default would end the process: report and go on. */
            const char *msg = lua_tostring(L, -1);
            fprintf(stderr, "isolation.proxy: on_event raised an error: %s\n",
                    msg ? msg : "(not a string)");
            fflush(stderr);
            lua_pop(L, 1);
        }
        if (p->on_event_ref == LUA_NOREF) {
            /* on_event closed the proxy: drop what is left. */
            while (e) {
                next = e->next;
                free(e);
                e = next;
            }
        }
    }
}

void proxy_events_free(struct proxy *p)
{
    struct proxy_event *e = take_events(p);
    while (e) {
        struct proxy_event *next = e->next;
        free(e);
        e = next;
    }
}

static void set_counter(lua_State *L, const char *name, atomic_ullong *v)
{
    lua_pushinteger(L,
                    (lua_Integer)atomic_load_explicit(v, memory_order_relaxed));
    lua_setfield(L, -2, name);
}

void proxy_stats_push(lua_State *L, struct proxy *p)
{
    lua_createtable(L, 0, 9);
    set_counter(L, "connections", &p->stats.connections);
    set_counter(L, "active", &p->stats.active);
    set_counter(L, "allowed", &p->stats.allowed);
    set_counter(L, "denied", &p->stats.denied);
    set_counter(L, "errors", &p->stats.errors);
    set_counter(L, "bytes_up", &p->stats.bytes_up);
    set_counter(L, "bytes_down", &p->stats.bytes_down);
    set_counter(L, "events_dropped", &p->stats.events_dropped);
    lua_pushinteger(L,
                    p->audit ? (lua_Integer)proxy_audit_dropped(p->audit) : 0);
    lua_setfield(L, -2, "log_dropped");
}

struct proxy_allow *proxy_allow_new(hostpat_list *list)
{
    struct proxy_allow *a = malloc(sizeof *a);
    if (!a)
        return NULL;
    a->list = list;
    atomic_init(&a->refs, 1);
    return a;
}

struct proxy_allow *proxy_allow_get(struct proxy *p)
{
    uv_mutex_lock(&p->mu);
    struct proxy_allow *a = p->allow;
    atomic_fetch_add_explicit(&a->refs, 1, memory_order_relaxed);
    uv_mutex_unlock(&p->mu);
    return a;
}

void proxy_allow_put(struct proxy_allow *a)
{
    if (a &&
        atomic_fetch_sub_explicit(&a->refs, 1, memory_order_acq_rel) == 1) {
        hostpat_free(a->list);
        free(a);
    }
}

void proxy_allow_set(struct proxy *p, struct proxy_allow *a)
{
    uv_mutex_lock(&p->mu);
    struct proxy_allow *old = p->allow;
    p->allow = a;
    uv_mutex_unlock(&p->mu);
    proxy_allow_put(old);
}

void proxy_unref(struct proxy *p)
{
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) != 1)
        return;
    proxy_allow_put(p->allow);
    proxy_events_free(p);
    if (p->audit)
        proxy_audit_close(p->audit);
    for (size_t i = 0; i < p->opts.nresolve; i++)
        free(p->opts.resolve[i].addrs);
    free(p->opts.resolve);
    proxy_routes_free(&p->opts); /* wipes the secrets */
    proxy_parent_free(&p->opts.parent);
    uv_mutex_destroy(&p->mu);
    free(p);
}
