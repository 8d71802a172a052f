# pytrace-sample: `make deps && make`, then `make check` (see README.md).
VERSION := 0.1.0
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
DESTDIR ?=
CC ?= cc
CFLAGS ?= -O2 -g
BUILD := build

WARNINGS := -Wall -Wextra -Wshadow -Wformat=2 -Wstrict-prototypes -Wmissing-prototypes -Wundef
ifeq ($(WERROR),1)
WARNINGS += -Werror
endif
PKGS := zlib libdw libelf libbpf
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lz -ldw -lelf -lbpf) -pthread
BASE_CFLAGS := -std=gnu11 -D_GNU_SOURCE $(WARNINGS) -DPYTRACE_VERSION='"$(VERSION)"' -MMD -MP $(PKG_CFLAGS) \
	-I$(BUILD)/bpf
SANITIZE := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer

LIB_SRCS := $(wildcard common/*.c) $(wildcard cpython/*.c) $(wildcard trace/*.c) \
	$(wildcard analyze/*.c) \
	$(wildcard sampler/*.c) \
	$(wildcard symbolize/*.c)
CLI_SRCS := $(wildcard cli/*.c)
TEST_SRCS := $(wildcard tests/*/test_*.c)
TEST_HELPER_SRCS := tests/trace/gen_trace.c tests/sampler/sampler_dump.c tests/cpython/layout_dump.c
TEST_SUPPORT_SRCS := tests/common/support.c

LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o)
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
TLIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/tobj/%.o) $(TEST_SUPPORT_SRCS:%.c=$(BUILD)/tobj/%.o)
TEST_BINS := $(TEST_SRCS:%.c=$(BUILD)/%)
TEST_HELPERS := $(TEST_HELPER_SRCS:%.c=$(BUILD)/%)

C_FILES := $(LIB_SRCS) $(CLI_SRCS) $(TEST_SRCS) $(TEST_HELPER_SRCS) $(TEST_SUPPORT_SRCS) \
	$(wildcard */*.h tests/*/*.h)

.PHONY: all bench deps test check format format-check static install uninstall clean viewer-deps

all: pytrace-sample

pytrace-sample: $(LIB_OBJS) $(CLI_OBJS)
	$(CC) $(CFLAGS) -o $@ $^ $(PKG_LIBS) $(LDFLAGS)

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -c -o $@ $<

# Tests and everything they link are built with ASan and UBSan.
$(BUILD)/tobj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O1 -g $(SANITIZE) -c -o $@ $<

# Tests that inject failures wrap syscalls at link time.
WRAP_test_out := -Wl,--wrap=write -Wl,--wrap=ftruncate
WRAP_test_kernel_layout := -Wl,--wrap=mmap
WRAP_test_python := -Wl,--wrap=realloc

$(BUILD)/tests/%: $(BUILD)/tobj/tests/%.o $(TLIB_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(SANITIZE) $(WRAP_$(notdir $@)) -o $@ $^ -lcmocka $(PKG_LIBS)

# Kernel-side programs: vmlinux.h from the running kernel's BTF, CO-RE objects built
# with clang, skeletons with bpftool (sampler/bpf_reader.c includes the skeleton).
BTF ?= /sys/kernel/btf/vmlinux
BPF_CLANG ?= clang

$(BUILD)/bpf/vmlinux.h:
	@mkdir -p $(dir $@)
	@test -r $(BTF) || { echo "error: no kernel BTF at $(BTF): the eBPF programs need a kernel built with CONFIG_DEBUG_INFO_BTF" >&2; exit 1; }
	bpftool btf dump file $(BTF) format c > $@.tmp && mv $@.tmp $@

$(BUILD)/bpf/pytrace.bpf.o: bpf/pytrace.bpf.c bpf/values.bpf.h bpf/pytrace_bpf.h common/fingerprint.h \
		$(BUILD)/bpf/vmlinux.h
	$(BPF_CLANG) -g -O2 -target bpf -D__TARGET_ARCH_x86 -I$(BUILD)/bpf -Ibpf -c -o $@ $<

$(BUILD)/bpf/pytrace.skel.h: $(BUILD)/bpf/pytrace.bpf.o
	bpftool gen skeleton $< name pytrace_bpf > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/sampler/bpf_reader.o $(BUILD)/tobj/sampler/bpf_reader.o $(BUILD)/aobj/sampler/bpf_reader.o \
		$(BUILD)/tsobj/sampler/bpf_reader.o: $(BUILD)/bpf/pytrace.skel.h

# Fixtures for the end-to-end tests: -O2 without frame pointers, like distribution code.
FIXTURES := $(BUILD)/fixtures/tree $(BUILD)/fixtures/tree_exec_target $(BUILD)/fixtures/daemon
FIXTURE_CFLAGS := -O2 -g -fomit-frame-pointer

$(BUILD)/fixtures/tree_exec_target: tests/fixtures/tree_exec_target.c
	@mkdir -p $(dir $@)
	$(CC) $(FIXTURE_CFLAGS) -o $@ $<

$(BUILD)/fixtures/daemon: tests/fixtures/daemon.c
	@mkdir -p $(dir $@)
	$(CC) $(FIXTURE_CFLAGS) -o $@ $<

$(BUILD)/fixtures/tree: tests/fixtures/tree.c $(BUILD)/fixtures/tree_exec_target
	@mkdir -p $(dir $@)
	$(CC) $(FIXTURE_CFLAGS) -DFIXTURE_EXEC_TARGET='"$(abspath $(BUILD))/fixtures/tree_exec_target"' -o $@ $<

$(BUILD)/bench/cpu_bound: bench/cpu_bound.c
	@mkdir -p $(dir $@)
	$(CC) $(FIXTURE_CFLAGS) -o $@ $<

$(BUILD)/bench/stamp: bench/stamp.c
	@mkdir -p $(dir $@)
	$(CC) $(FIXTURE_CFLAGS) -o $@ $<

$(BUILD)/bench/btf_scan: bench/btf_scan.c $(BUILD)/obj/sampler/kernel_layout.o
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O2 -o $@ $^ $(PKG_LIBS)

bench: pytrace-sample $(BUILD)/bench/cpu_bound $(BUILD)/bench/stamp $(BUILD)/bench/btf_scan
	$(BUILD)/bench/btf_scan
	python3 bench/perf_overhead.py
	python3 bench/python_split.py
	python3 bench/kernel_walk.py
	python3 bench/startup.py
	python3 bench/pool_flows.py
	python3 bench/findings_gallery.py

# The tool itself under ASan+UBSan, for a second end-to-end pass (tests/run.sh).
ASAN_OBJS := $(LIB_SRCS:%.c=$(BUILD)/aobj/%.o) $(CLI_SRCS:%.c=$(BUILD)/aobj/%.o)

$(BUILD)/aobj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O1 -g $(SANITIZE) -c -o $@ $<

$(BUILD)/asan/pytrace-sample: $(ASAN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(SANITIZE) -o $@ $^ $(PKG_LIBS)

# The tool under ThreadSanitizer, for the e2e test that its two threads share nothing
# unguarded (tests/e2e/test_thread_safety.py).
TSAN := -fsanitize=thread -fno-omit-frame-pointer
TSAN_OBJS := $(LIB_SRCS:%.c=$(BUILD)/tsobj/%.o) $(CLI_SRCS:%.c=$(BUILD)/tsobj/%.o)

$(BUILD)/tsobj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) -O1 -g $(TSAN) -c -o $@ $<

$(BUILD)/tsan/pytrace-sample: $(TSAN_OBJS)
	@mkdir -p $(dir $@)
	$(CC) $(TSAN) -o $@ $^ $(PKG_LIBS)

deps:
	./tools/install-deps.sh

viewer-deps: tests/viewer/node_modules/.package-lock.json

tests/viewer/node_modules/.package-lock.json: tests/viewer/package.json tests/viewer/package-lock.json
	cd tests/viewer && npm ci --no-audit --no-fund

test: pytrace-sample $(BUILD)/asan/pytrace-sample $(BUILD)/tsan/pytrace-sample $(TEST_BINS) $(TEST_HELPERS) $(FIXTURES) viewer-deps
	./tests/run.sh $(BUILD)

check:
	$(MAKE) WERROR=1 all $(BUILD)/asan/pytrace-sample $(BUILD)/tsan/pytrace-sample $(TEST_BINS) \
		$(TEST_HELPERS) $(FIXTURES)
	$(MAKE) format-check static
	$(MAKE) fuzz-regress
	$(MAKE) WERROR=1 test

format:
	clang-format -i $(C_FILES)

format-check:
	clang-format --dry-run -Werror $(C_FILES)

static:
	cppcheck --quiet --error-exitcode=1 --enable=warning,portability --inline-suppr \
		--std=c11 $(LIB_SRCS) $(CLI_SRCS)

# The man page is committed (docs/pytrace-sample.1) so installing needs no Python; `make
# man` writes it again from the help in cli/main.c (tests/e2e/test_install.py checks it).
.PHONY: man
man: pytrace-sample
	python3 tools/gen-man.py ./pytrace-sample docs/pytrace-sample.1

install: pytrace-sample
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1
	install -m 0755 pytrace-sample $(DESTDIR)$(BINDIR)/pytrace-sample
	install -m 0644 docs/pytrace-sample.1 $(DESTDIR)$(MANDIR)/man1/pytrace-sample.1

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/pytrace-sample $(DESTDIR)$(MANDIR)/man1/pytrace-sample.1

clean:
	rm -rf $(BUILD) pytrace-sample

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)

# libFuzzer harnesses of the readers of untrusted bytes (tests/fuzz/README.md). `make fuzz`
# runs each for FUZZ_SECONDS on a corpus in build/fuzz/ seeded from tests/fuzz/corpus/
# (the committed one is only read); `make fuzz-regress` runs each once over its seeds and
# tests/fuzz/crashes/ (inputs that crashed it once). Both fail when a harness crashes.
.PHONY: fuzz fuzz-build fuzz-regress
FUZZ_CC ?= clang
FUZZ_SECONDS ?= 30
FUZZ_FLAGS ?=
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
	$(FUZZ_SAN_EXTRA)
FUZZ_CFLAGS := $(BASE_CFLAGS) -g -O1 $(FUZZ_SAN)
FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_BINS := $(FUZZ_NAMES:%=$(BUILD)/fuzz/fuzz_%)
FUZZ_SRCS := $(filter-out sampler/bpf_reader.c,$(LIB_SRCS))
FUZZ_OBJS := $(FUZZ_SRCS:%.c=$(BUILD)/fuzz/obj/%.o)
FUZZ_LIB := $(BUILD)/fuzz/libpytrace.a

$(BUILD)/fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c -o $@ $<

$(FUZZ_LIB): $(FUZZ_OBJS)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(wildcard tests/fuzz/*.h) $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_LIB) $(PKG_LIBS)

fuzz-build: $(FUZZ_BINS)

fuzz: $(FUZZ_BINS)
	@failed=; for n in $(FUZZ_NAMES); do \
		mkdir -p $(BUILD)/fuzz/corpus/$$n $(BUILD)/fuzz/artifacts/$$n; \
		cp -n tests/fuzz/corpus/$$n/* $(BUILD)/fuzz/corpus/$$n/ 2>/dev/null; \
		echo "fuzz: $$n for $(FUZZ_SECONDS) s"; \
		$(BUILD)/fuzz/fuzz_$$n -max_total_time=$(FUZZ_SECONDS) -timeout=10 -print_final_stats=1 \
			-artifact_prefix=$(BUILD)/fuzz/artifacts/$$n/ \
			$$(test -f tests/fuzz/$$n.dict && echo -dict=tests/fuzz/$$n.dict) $(FUZZ_FLAGS) \
			$(BUILD)/fuzz/corpus/$$n $$(test -d tests/fuzz/crashes/$$n && echo tests/fuzz/crashes/$$n) \
			> $(BUILD)/fuzz/$$n.log 2>&1 || failed="$$failed $$n"; \
		grep -E '^stat::number_of_executed_units|^stat::average_exec_per_sec|^SUMMARY' $(BUILD)/fuzz/$$n.log; \
	done; \
	if [ -n "$$failed" ]; then echo "fuzz: crashed:$$failed (logs and inputs in $(BUILD)/fuzz/)" >&2; exit 1; fi

fuzz-regress: $(FUZZ_BINS)
	@for n in $(FUZZ_NAMES); do \
		files=$$(find tests/fuzz/corpus/$$n tests/fuzz/crashes/$$n -type f 2>/dev/null); \
		test -n "$$files" || continue; \
		$(BUILD)/fuzz/fuzz_$$n -timeout=10 $$files > $(BUILD)/fuzz/$$n.regress.log 2>&1 || \
			{ tail -40 $(BUILD)/fuzz/$$n.regress.log >&2; echo "fuzz-regress: $$n crashed" >&2; exit 1; }; \
		echo "fuzz-regress: $$n: $$(echo $$files | wc -w) inputs"; \
	done

# Writes the generated seeds again (tests/fuzz/gen_seeds.c, dump_linetables.py, ELF files).
.PHONY: fuzz-seeds
$(BUILD)/fuzz/gen_seeds: tests/fuzz/gen_seeds.c $(wildcard tests/fuzz/*.h) $(FUZZ_LIB)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -o $@ $< $(FUZZ_LIB) $(PKG_LIBS)

SEED_ELF_FLAGS := -Os -nostdlib -fno-asynchronous-unwind-tables -fno-stack-protector -s \
	-Wl,--build-id=none -Wl,-z,noseparate-code -Wl,--hash-style=gnu
SEED_ELF := tests/fuzz/corpus/elf

fuzz-seeds: $(BUILD)/fuzz/gen_seeds
	$(BUILD)/fuzz/gen_seeds tests/fuzz/corpus
	mkdir -p $(SEED_ELF) $(BUILD)/fuzz/seeds
	$(CC) $(SEED_ELF_FLAGS) -shared -fPIC -o $(BUILD)/fuzz/seeds/libpython3.12.so.1.0 \
		tests/fuzz/seeds/libpython.c
	cp $(BUILD)/fuzz/seeds/libpython3.12.so.1.0 $(SEED_ELF)/libpython3.12.so
	$(CC) $(SEED_ELF_FLAGS) -fPIE -pie -o $(SEED_ELF)/python3.12-launcher tests/fuzz/seeds/launcher.c \
		-L$(BUILD)/fuzz/seeds -l:libpython3.12.so.1.0
	$(CC) $(SEED_ELF_FLAGS) -static -o $(SEED_ELF)/python3.13-static-stripped tests/fuzz/seeds/plain.c
	for py in /root/.pyenv/versions/3.*/bin/python3 /usr/bin/python3.1[0-9]; do \
		test -x $$py && $$py tests/fuzz/dump_linetables.py tests/fuzz/corpus/line_table || true; \
	done
