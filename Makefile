# inaemu — the two commands a newcomer needs are `make demo` and `make test`.
GO       ?= go
BIN      := bin/inaemu
PKGS     := ./...
FUZZTIME ?= 30s

.PHONY: all build demo test vet bench fuzz clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/inaemu

# The main job. Until the emulator lands (issue 4) this decodes the bundled
# RoCE captures: RoCEv2/IPv4 of every RC opcode family, then RoCEv2/IPv6 and
# RoCEv1 frames.
demo: build
	$(BIN) decode testdata/vectors/rc_opcodes_v2_ipv4.pcap
	$(BIN) decode testdata/vectors/sample_v2_ipv6_and_v1.pcap

# Every test: unit, test vectors, properties, fuzz seed corpora, CLI, and the
# tshark/scapy interop tests (which skip with a loud reason outside CI when
# the tools are missing, and fail in CI).
test: vet
	$(GO) test -count=1 $(PKGS)

vet:
	$(GO) vet $(PKGS)

# Benchmarks with their raw limits measured in the same run (ratio columns).
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./frames/ ./roce/

# Run each fuzz target for FUZZTIME.
fuzz:
	@for t in $$($(GO) test -list 'Fuzz.*' ./frames/ | grep ^Fuzz); do \
		echo "== $$t"; $(GO) test ./frames/ -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) || exit 1; \
	done

clean:
	rm -rf bin
