/* Tests of the terminal escaping of target-controlled text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../common/term.h"
#include "support.h"

static void test_term__escapes_controls(void **state)
{
	char out[TERM_ESCAPED(64)];

	(void)state;
	/* ESC ] 0 ; title BEL: a terminal would retitle its window */
	assert_string_equal(term_escape(out, sizeof(out), "a\x1b]0;x\x07z", 64),
			    "a\\x1b]0;x\\x07z");
	assert_string_equal(term_escape(out, sizeof(out), "tab\there\nnl\x7f", 64),
			    "tab\\x09here\\x0anl\\x7f");
	assert_string_equal(term_escape(out, sizeof(out), "back\\slash", 64), "back\\\\slash");
	/* U+009B is CSI in its C1 form; U+00A0 and up are text */
	assert_string_equal(term_escape(out, sizeof(out),
					"\xc2\x9b"
					"2J \xc2\xa0\xc3\xa9",
					64),
			    "\\xc2\\x9b2J \xc2\xa0\xc3\xa9");
	/* not UTF-8: a lone continuation byte, an overlong slash, a surrogate */
	assert_string_equal(term_escape(out, sizeof(out), "\x80\xc0\xaf\xed\xa0\x80", 64),
			    "\\x80\\xc0\\xaf\\xed\\xa0\\x80");
	assert_string_equal(term_escape(out, sizeof(out), NULL, 64), "");
}

static void test_term__cuts_on_characters(void **state)
{
	char out[TERM_ESCAPED(64)], small[8];

	(void)state;
	/* "é" is two bytes: a cut at 2 keeps "a" rather than half of it */
	assert_string_equal(term_escape(out, sizeof(out), "a\xc3\xa9z", 2), "a");
	assert_string_equal(term_escape(out, sizeof(out), "a\xc3\xa9z", 3), "a\xc3\xa9");
	/* a small output never overflows, and never ends inside an escape */
	assert_string_equal(term_escape(small, sizeof(small), "abc\x01\x02", 64), "abc\\x01");
	assert_true(support_valid_utf8(
		term_escape(small, sizeof(small), "\xe2\x82\xac\xe2\x82\xac\xe2\x82\xac", 64)));
	assert_string_equal(small, "\xe2\x82\xac\xe2\x82\xac");
}

static void test_term__keeps_tail(void **state)
{
	static const char name[] = "/usr/bin/python3.14 /tmp/a/very/long/path/to/the/script.py "
				   "--with many arguments (pid 1 in its namespace)";
	char out[TERM_ESCAPED(128)];

	(void)state;
	term_escape_keep_tail(out, sizeof(out), name, 64);
	assert_int_equal(strlen(out), 64);
	assert_non_null(strstr(out, "...(pid 1 in its namespace)"));
	assert_int_equal(strncmp(out, "/usr/bin/python3.14 ", 20), 0);
	/* short enough: as is; no trailing note: a plain cut */
	assert_string_equal(term_escape_keep_tail(out, sizeof(out),
						  "python3 x.py (pid 7 in its namespace)", 64),
			    "python3 x.py (pid 7 in its namespace)");
	assert_string_equal(term_escape_keep_tail(out, sizeof(out), "abcdefghij", 4), "abcd");
	/* the tail is escaped too */
	assert_non_null(strstr(
		term_escape_keep_tail(out, sizeof(out), "xxxxxxxxxxxxxxxxxxxxxxxx(\x1b[2J)", 20),
		"(\\x1b[2J)"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_term__escapes_controls),
		cmocka_unit_test(test_term__cuts_on_characters),
		cmocka_unit_test(test_term__keeps_tail),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
