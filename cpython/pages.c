/* A walk's reads of another process, a page at a time (see pages.h). */
#include "pages.h"

#include <errno.h>
#include <string.h>

void cpython_pages_init(struct cpython_pages *c, const struct cpython_mem *under)
{
	c->under = under;
	c->n = c->next = 0;
	c->calls = 0;
}

/* The cached copy of the page at @page, read now if it is not there; NULL: unreadable. */
static const uint8_t *page_of(struct cpython_pages *c, uint64_t page)
{
	uint32_t i;

	for (i = 0; i < c->n; i++) {
		if (c->addr[i] == page)
			return c->data[i];
	}
	i = c->n < CPYTHON_PAGES ? c->n : c->next;
	c->calls++;
	if (c->under->read(c->under->ctx, page, c->data[i], CPYTHON_PAGE_SIZE))
		return NULL;
	c->addr[i] = page;
	if (c->n < CPYTHON_PAGES)
		c->n++;
	else
		c->next = (c->next + 1) % CPYTHON_PAGES;
	return c->data[i];
}

int cpython_pages_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct cpython_pages *c = ctx;
	uint64_t at = addr, end = addr + len;
	uint8_t *to = buf;

	if (!addr || end < addr)
		return -EFAULT;
	/* Long reads go straight through: they would push out the pages kept. */
	if (len > 2 * CPYTHON_PAGE_SIZE)
		goto direct;
	while (at < end) {
		uint64_t page = at & ~(uint64_t)(CPYTHON_PAGE_SIZE - 1);
		uint64_t upto = page + CPYTHON_PAGE_SIZE < end ? page + CPYTHON_PAGE_SIZE : end;
		const uint8_t *data = page_of(c, page);

		if (!data)
			goto direct;
		memcpy(to, data + (at - page), upto - at);
		to += upto - at;
		at = upto;
	}
	return 0;
direct:
	c->calls++;
	return c->under->read(c->under->ctx, addr, buf, len);
}
