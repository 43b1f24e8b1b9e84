# inaemu — the two commands a newcomer needs are `make demo` and `make test`.
GO       ?= go
BIN      := bin/inaemu
PKGS     := ./...
FUZZTIME ?= 30s

.PHONY: all build demo test vet docs bench fuzz clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/inaemu

# The main job: an 8-worker NetReduce allreduce through the aggregating
# switch under light random faults, checked bit for bit, captured for
# Wireshark (wireshark bin/demo.pcapng).
DEMO_PCAP ?= bin/demo.pcapng
demo: build
	$(BIN) run --workers 8 --tensor 1MiB --loss 0.02% --duplicate 0.05% --corrupt 0.02% --seed 42 --pcap $(DEMO_PCAP)

# Every test: unit, test vectors, properties, fuzz seed corpora, CLI, and the
# tshark/scapy interop tests (which skip with a loud reason outside CI when
# the tools are missing, and fail in CI). gotestsum (a tool in go.mod) prints
# go test's usual lines, then every skipped test with its reason and a
# one-line count.
#
# TESTTIMEOUT bounds each package's test binary (go test's own default is
# 10m, which cmd/inaemu and conformance exceeded on a busy 2-core machine:
# docs/testing.md has the measured durations). A package past it is killed
# with every goroutine's stack; what its tests made is swept by the next run.
TESTTIMEOUT ?= 45m
test: vet
	$(GO) tool gotestsum --format pkgname-and-test-fails -- -count=1 -timeout $(TESTTIMEOUT) $(PKGS)

vet:
	$(GO) vet $(PKGS)

# The CLI reference (docs/cli/*.md) and the man pages (docs/man/*.1),
# generated from the command tree by cobra's generators (spf13/cobra/doc).
# Run it after changing a command or a flag: TestCLIReference (in make
# test) fails while the checked-in pages differ from the code.
# man -l docs/man/inaemu.1 reads one without installing it.
docs:
	$(GO) test ./cmd/inaemu -count=1 -run '^TestCLIReference$$' -args -update-docs

# Benchmarks with their raw limits measured in the same run: BENCHCOUNT
# interleaved rounds, then one table of figures, raw limits and median
# ratios (internal/benchtable). The TAP and wire benchmarks run as root and skip
# otherwise; they remove their TAPs, even those a killed run left.
BENCHCOUNT ?= 5
BENCHTIME  ?= 300ms
bench:
	@mkdir -p bin
	@$(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) -benchtime $(BENCHTIME) ./frames/ ./roce/ ./tensor/ ./emu/... ./faultwire/ > bin/bench.out 2>&1; \
		status=$$?; cat bin/bench.out; echo; \
		$(GO) run ./internal/benchtable < bin/bench.out && exit $$status

# Run each fuzz target for FUZZTIME: frame parsing, capture reading, the
# --fault/--netem/--topology texts and scenario files, and small runs of
# every mode on every kind of topology (conformance's FuzzRunAnyScenario).
FUZZPKGS := ./frames/ ./internal/pcapio/ ./faults/ ./emu/topo/ ./emu/scenario/ ./conformance/
fuzz:
	@for p in $(FUZZPKGS); do \
		for t in $$($(GO) test -list 'Fuzz.*' $$p | grep ^Fuzz); do \
			echo "== $$p $$t"; $(GO) test $$p -run '^$$' -fuzz "^$$t$$" -fuzztime $(FUZZTIME) || exit 1; \
		done; \
	done

clean:
	rm -rf bin
