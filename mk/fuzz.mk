# libFuzzer targets for the parsers (fuzz/*.c), built with clang under
# ASan+UBSan. `make fuzz` runs each for FUZZ_SECONDS on a working copy of
# the committed seed corpus (fuzz/corpus/<target>/) and reports; new inputs
# and crashes stay under $(BUILD)/fuzz/. `make test` replays the committed
# corpus once through every target (fuzz-replay), which takes seconds. The
# corpus: named, hand-written seeds (`make fuzz-corpus` writes them) plus the
# hash-named inputs of the minimized corpus the fuzz campaigns reached
# (libFuzzer -merge=1), so that the replay covers what they covered.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 60
FUZZ_TARGETS  = $(patsubst fuzz/%.c,%,$(filter-out fuzz/gen_%.c,$(wildcard fuzz/fuzz_*.c)))
FUZZ_FLAGS    = -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
                -fno-omit-frame-pointer
# Only the wire parsers (src/wire/: pure, no Lua, no libuv; `make layers`
# keeps them so), so that a clang-only warning elsewhere in the module
# cannot break the fuzz build.
FUZZ_SRC      = $(wildcard src/wire/*.c)
FUZZ_OBJ      = $(FUZZ_SRC:src/%.c=$(BUILD)/fuzz/obj/%.o)
FUZZ_LIBS     =

EXTRA_DEBS += clang libclang-rt-14-dev

.PHONY: fuzz fuzz-build fuzz-replay fuzz-corpus

$(BUILD)/fuzz/obj/%.o: src/%.c | $(BUILD)/fuzz/obj
	@mkdir -p $(@D)
	$(FUZZ_CC) $(ALL_CFLAGS) $(DEPFLAGS) -fsanitize=fuzzer-no-link,address,undefined \
	  -fno-sanitize-recover=all -fno-omit-frame-pointer -c -o $@ $<

-include $(FUZZ_OBJ:.o=.d)

$(BUILD)/fuzz/module.a: $(FUZZ_OBJ)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/fuzz/fuzz_%: fuzz/fuzz_%.c $(BUILD)/fuzz/module.a
	$(FUZZ_CC) $(ALL_CFLAGS) $(FUZZ_FLAGS) -o $@ $< $(BUILD)/fuzz/module.a $(FUZZ_LIBS)

$(BUILD)/fuzz/obj:
	mkdir -p $@

fuzz-build: $(FUZZ_TARGETS:%=$(BUILD)/fuzz/%)

# Every committed seed through every target, once.
fuzz-replay: fuzz-build
	@for t in $(FUZZ_TARGETS); do \
	  $(BUILD)/fuzz/$$t -runs=0 fuzz/corpus/$$t >$(BUILD)/fuzz/$$t.replay.log 2>&1 \
	    || { cat $(BUILD)/fuzz/$$t.replay.log; echo "fuzz-replay: $$t FAILED"; exit 1; }; \
	  echo "fuzz-replay: $$t: $$(ls fuzz/corpus/$$t | wc -l) seeds ok"; \
	done

fuzz: fuzz-build
	@fail=0; for t in $(FUZZ_TARGETS); do \
	  work=$(BUILD)/fuzz/corpus/$$t; art=$(BUILD)/fuzz/artifacts/$$t/; \
	  mkdir -p $$work $$art; \
	  dict=; [ -f fuzz/$$t.dict ] && dict=-dict=fuzz/$$t.dict; \
	  $(BUILD)/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	    -max_len=20000 $$dict -artifact_prefix=$$art $$work fuzz/corpus/$$t \
	    >$(BUILD)/fuzz/$$t.log 2>&1; \
	  rc=$$?; \
	  execs=$$(grep -o 'stat::number_of_executed_units: *[0-9]*' $(BUILD)/fuzz/$$t.log | grep -o '[0-9]*$$'); \
	  if [ $$rc -eq 0 ]; then \
	    echo "fuzz: $$t: $(FUZZ_SECONDS)s, $${execs:-?} runs, corpus $$(ls $$work | wc -l), no crash"; \
	  else \
	    fail=1; echo "fuzz: $$t: CRASH (exit $$rc), see $(BUILD)/fuzz/$$t.log and $$art"; \
	    tail -40 $(BUILD)/fuzz/$$t.log; \
	  fi; \
	done; exit $$fail

# Regenerates the committed seed corpus (real ClientHellos from the test
# byte builder, request and response heads, chunked bodies).
fuzz-corpus: $(BUILD)/fuzz/gen_corpus
	$(BUILD)/fuzz/gen_corpus fuzz/corpus

$(BUILD)/fuzz/gen_corpus: fuzz/gen_corpus.c tests/c/hello_builder.h | $(BUILD)/fuzz/obj
	$(CC) $(ALL_CFLAGS) -Wno-stringop-overflow -Itests/c -o $@ $<

TEST_STEPS += fuzz-replay
