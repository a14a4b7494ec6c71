# The one BPF build rule, included by every BPF folder's Makefile (like xdp-tools' lib/common.mk).
# A folder's Makefile sets, then includes this file:
#   BPF_OBJS  the objects to build, $(BUILD)/<name>.bpf.o from <name>.bpf.c in the folder
#   BPF_DEPS  the headers its programs include (the folder's *_common.h)
#   TARGETS   anything else `all` builds (its own rules, after the include)
# It gets `all` (the default goal), `clean` and the clang rule: BPF target, the flags in
# bpf/clang-flags (shared with lb/emu's meson build), libbpf headers from libbpf-dev, and this
# folder on the include path for xb_stats.h.
BPF_DIR := $(dir $(lastword $(MAKEFILE_LIST)))
CLANG ?= clang
BUILD ?= build
BPF_CFLAGS := $(shell cat $(BPF_DIR)clang-flags) -I/usr/include/$(shell uname -m)-linux-gnu -I$(BPF_DIR)

all: $(BPF_OBJS) $(TARGETS)

$(BUILD)/%.bpf.o: %.bpf.c $(BPF_DEPS) $(BPF_DIR)xb_stats.h $(BPF_DIR)clang-flags
	@mkdir -p $(BUILD)
	$(CLANG) $(BPF_CFLAGS) -c $< -o $@

clean:
	rm -rf $(BUILD)

.PHONY: all clean
