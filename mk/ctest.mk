# C-level unit tests of the parsers (tests/c/), run by `make test`: once
# against the normal objects and once under ASan+UBSan. The test binary
# links the module's objects through an archive, so it pulls in only what
# the parsers use (host_parse, wherever it lives) plus liblua for the rest.
CTEST_SRC  = $(wildcard tests/c/*.c)
CTEST_LIBS = -llua5.4 -luv -lpthread -lm -ldl

.PHONY: ctest ctest-asan

$(BUILD)/ctest/module.a: $(MODULE_OBJ) | $(BUILD)/ctest
	rm -f $@ && ar rcs $@ $^

$(BUILD)/ctest/asan-module.a: $(ASAN_OBJ) | $(BUILD)/ctest
	rm -f $@ && ar rcs $@ $^

$(BUILD)/ctest/parsers_test: $(CTEST_SRC) tests/c/*.h $(BUILD)/ctest/module.a
	$(CC) $(ALL_CFLAGS) -Itests/c -Wno-format-truncation -Wno-stringop-overflow -o $@ $(CTEST_SRC) $(BUILD)/ctest/module.a $(CTEST_LIBS)

$(BUILD)/ctest/parsers_test_asan: $(CTEST_SRC) tests/c/*.h $(BUILD)/ctest/asan-module.a
	$(CC) $(ALL_CFLAGS) $(SAN_FLAGS) -Itests/c -Wno-format-truncation -Wno-stringop-overflow -o $@ $(CTEST_SRC) $(BUILD)/ctest/asan-module.a $(CTEST_LIBS)

$(BUILD)/ctest:
	mkdir -p $@

ctest: $(BUILD)/ctest/parsers_test
	$(BUILD)/ctest/parsers_test

ctest-asan: $(BUILD)/ctest/parsers_test_asan
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(BUILD)/ctest/parsers_test_asan

TEST_STEPS += ctest ctest-asan

# spec/proxy_sni_spec.lua drives a real TLS client (openssl s_client).
EXTRA_DEBS += openssl
