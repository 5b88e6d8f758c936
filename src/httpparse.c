/* httpparse.c - placeholder until its issue lands. */
#include "httpparse.h"

int http_parse_request(const char *buf, size_t len, size_t max_head,
                       struct http_request *req, const char **why)
{
    (void)buf, (void)len, (void)max_head, (void)req;
    if (why)
        *why = "not implemented";
    return -400;
}
