/* Test helpers: temporary folders, commands, canonical views of trace files. */
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

char *support_tempdir(void)
{
	char *dir = strdup("/tmp/pytrace-test.XXXXXX");

	if (!dir || !mkdtemp(dir)) {
		free(dir);
		return NULL;
	}
	return dir;
}

void support_rmdir(char *dir)
{
	char cmd[512];

	if (!dir)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
	free(dir);
}

char *support_run(const char *cmd, int *status)
{
	FILE *p = popen(cmd, "r");
	size_t len = 0, cap = 4096;
	char *buf = malloc(cap);
	size_t n;
	int st;

	if (!p || !buf) {
		free(buf);
		if (p)
			pclose(p);
		return NULL;
	}
	while ((n = fread(buf + len, 1, cap - len - 1, p)) > 0) {
		len += n;
		if (cap - len < 2) {
			char *grown = realloc(buf, cap * 2);

			if (!grown)
				break;
			buf = grown;
			cap *= 2;
		}
	}
	buf[len] = '\0';
	st = pclose(p);
	if (status)
		*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return buf;
}

char *support_trace_text(const char *path)
{
	char cmd[1024];
	char *text;
	int status;

	snprintf(cmd, sizeof(cmd), "python3 tests/tools/trace_text.py '%s'", path);
	text = support_run(cmd, &status);
	if (status) {
		fprintf(stderr, "trace_text.py rejected %s:\n%s\n", path, text ? text : "");
		free(text);
		return NULL;
	}
	return text;
}

bool support_has_line(const char *text, const char *line)
{
	size_t len = strlen(line);
	const char *p = text;

	while (p && *p) {
		if (!strncmp(p, line, len) && (p[len] == '\n' || !p[len]))
			return true;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return false;
}

int support_count_prefix(const char *text, const char *prefix)
{
	size_t len = strlen(prefix);
	const char *p = text;
	int n = 0;

	while (p && *p) {
		if (!strncmp(p, prefix, len))
			n++;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return n;
}

bool support_valid_utf8(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	while (*p) {
		int n = *p < 0x80 ? 0 : (*p & 0xe0) == 0xc0 ? 1 : (*p & 0xf0) == 0xe0 ? 2 : 3;

		if (*p >= 0xf8 || (*p >= 0x80 && *p < 0xc0))
			return false;
		for (p++; n--; p++) {
			if ((*p & 0xc0) != 0x80)
				return false;
		}
	}
	return true;
}

uint32_t support_rand(uint64_t *state, uint32_t n)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return (uint32_t)(*state % n);
}
