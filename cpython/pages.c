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
		if (c->addr[i] == page) {
			c->used[i] = true;
			return c->data[i];
		}
	}
	i = c->n < CPYTHON_PAGES ? c->n : c->next;
	c->calls++;
	if (c->under->read(c->under->ctx, page, c->data[i], CPYTHON_PAGE_SIZE))
		return NULL;
	c->addr[i] = page;
	c->used[i] = true;
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

void cpython_pages_prefetch(struct cpython_pages *c, const uint64_t *pages, uint32_t n)
{
	uint32_t got, k;

	if (!c->under->read_blocks || c->n || !n)
		return;
	n = n < CPYTHON_HOT_PAGES ? n : CPYTHON_HOT_PAGES;
	c->calls++;
	got = c->under->read_blocks(c->under->ctx, pages, n, c->data[0], CPYTHON_PAGE_SIZE);
	for (k = 0; k < got && k < n; k++) {
		c->addr[k] = pages[k];
		c->used[k] = false;
	}
	c->n = k;
	c->next = 0;
}

uint32_t cpython_pages_used(const struct cpython_pages *c, uint64_t *pages, uint32_t max)
{
	uint32_t i, n = 0;

	/* Slots fill in order until the cache is full; then the oldest is replaced. */
	for (i = 0; i < c->n && n < max; i++) {
		uint32_t slot = c->n < CPYTHON_PAGES ? i : (c->next + i) % CPYTHON_PAGES;

		if (c->used[slot])
			pages[n++] = c->addr[slot];
	}
	return n;
}
