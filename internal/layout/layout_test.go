package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/inaemu/inaemu/"

// levels is the import direction: a package may import the module's
// packages of lower levels only. Every package must be listed, so a new
// one is placed deliberately. docs/internals.md's layout draws the
// same picture.
var levels = map[string]int{
	// wire formats and leaves
	"frames/wire": 0, "frames/inceptionn": 0, "contrib/wireshark": 0, "tensor": 0, "emu/commmodel": 0, "internal/units": 0, "internal/junit": 0, "internal/f16ref": 0, "internal/inceptionnref": 0, "internal/layout": 0, "internal/benchratio": 0, "internal/clock": 0, "emu/themis": 0, // emu/themis: Themis's model and schedulers (issue 37), pure functions
	"frames": 1, "emu/workload": 1, "emu/inaps/train": 1, "emu/themis/flow": 1, // emu/themis/flow: Themis's fluid executor and evaluation (issue 37)
	"roce": 2, "faults": 2, "internal/pcapio": 2, "internal/testtool": 2, "emu/themis/input": 2, // emu/themis/input: what `inaemu themis` reads (issue 37)
	"internal/vclock": 3, "internal/testvec": 3, "tap": 3,
	// the capture checker judges wire formats only, never the emulator
	"capcheck": 3, "graphs": 3,
	"emu/topo": 3,
	"emu/nic":  4, "emu/switching": 4, "internal/wallloop": 4, "internal/taptest": 4,
	"emu/fabric": 5, "faultwire": 5, "emu/nic/compress": 5, "emu/nic/nictest": 5,
	"emu/nic/dcqcn": 5, "emu/nic/dcqcn/fluid": 6, // DCQCN offload and its fluid model (issue 36)
	// switch programs: each registers itself with the pipeline (switching)
	"emu/netreduce": 5, "emu/inaps": 5, // INA-PS's aggregator pool and policies
	"emu/inaps/endpoint":   6, // INA-PS's workers and PS
	"emu/inaps/experiment": 7, // INA-PS jobs on a fabric
	"emu/ars":              6, // the AllReduce-Switch: a netreduce.RingHost
	// the runner, the algorithms it runs (each registers itself with it),
	// and the facade that links them and the programs in
	"emu/job": 7, "emu/replay": 7,
	// the TAP backend (emu/live) implements the runner's job.Devices;
	// nothing else under emu/ imports it (TestEmuImportsNoDevices)
	"emu/collective": 8, "emu/live": 8,
	"emu":          9,
	"emu/scenario": 10, "dut": 10, "emu/congestion": 10, // emu/congestion: the experiments of docs/congestion.md (issue 36)
	"conformance": 11,
	"cmd/inaemu":  12, "internal/benchtable": 12,
}

// wireOnly are the packages that judge or draw captures of any device:
// of this module they import the wire formats, the capture reader and the
// tensor element types only, never the emulator or the transport, whose
// bugs they could otherwise share.
var wireOnly = map[string]bool{"capcheck": true, "graphs": true}

var wireFormats = map[string]bool{"frames": true, "frames/wire": true, "frames/inceptionn": true, "internal/pcapio": true, "tensor": true,
	// how quantities are written (graphs labels its axes in the reports' units)
	"internal/units": true}

func TestImportDirection(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}:{{join .Imports \" \"}}", module+"...").Output()
	if err != nil {
		t.Skipf("SKIP: go list failed (%v): the import direction is not checked here", err)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, ":")
		pkg = strings.TrimPrefix(pkg, module)
		lvl, ok := levels[pkg]
		if !ok {
			t.Errorf("%s is not in the layering: give it a level in internal/layout", pkg)
			continue
		}
		seen++
		for _, imp := range strings.Fields(imports) {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			if dl, ok := levels[dep]; ok && dl >= lvl {
				t.Errorf("%s (level %d) imports %s (level %d): imports go down only", pkg, lvl, dep, dl)
			}
			if wireOnly[pkg] && !wireFormats[dep] {
				t.Errorf("%s imports %s: it may import wire formats only (%v)", pkg, dep, wireFormats)
			}
		}
	}
	if seen < 15 {
		t.Fatalf("go list saw %d of the module's packages", seen)
	}
}

// TestLayoutListsEveryPackage: docs/internals.md's layout names every
// package of the module, so that a newcomer's map has no holes.
func TestLayoutListsEveryPackage(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "internals.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, l := range strings.Split(string(doc), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			listed[f[0]] = true
		}
	}
	for pkg := range levels {
		if !listed[pkg] {
			t.Errorf("docs/internals.md's layout does not list %s", pkg)
		}
	}
}

// TestSwitchingImportsNoProgram: the pipeline knows switch programs only
// through switching.Program and its registry, so it imports no package
// that registers a program (emu/netreduce, or any that calls
// switching.RegisterProgram), directly or through another: a program is
// added as one package without editing the pipeline.
func TestSwitchingImportsNoProgram(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}}", module+"...").Output()
	if err != nil {
		t.Skipf("SKIP: go list failed (%v): the switch's imports are not checked here", err)
	}
	program := map[string]bool{"emu/netreduce": true}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.SplitN(line, "\t", 3)
		if len(f) < 3 {
			continue
		}
		for _, name := range strings.Fields(f[2]) {
			src, err := os.ReadFile(filepath.Join(f[1], name))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(src), "switching.RegisterProgram(") {
				program[strings.TrimPrefix(f[0], module)] = true
			}
		}
	}
	deps, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+"emu/switching").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range strings.Fields(string(deps)) {
		if dep := strings.TrimPrefix(d, module); program[dep] {
			t.Errorf("emu/switching imports %s, a switch program: the pipeline must know programs only through switching.Program and RegisterProgram", dep)
		}
	}
}

// TestCheckerImportsNoEmulator: the capture checker shares the tensor
// element types with the emulator through the top-level leaf tensor and
// depends, even indirectly, on no package under emu/, so that a bug in
// the emulator cannot hide in the verdict on its own captures.
func TestCheckerImportsNoEmulator(t *testing.T) {
	deps, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+"capcheck").Output()
	if err != nil {
		t.Skipf("SKIP: go list failed (%v): the checker's imports are not checked here", err)
	}
	for _, d := range strings.Fields(string(deps)) {
		if dep := strings.TrimPrefix(d, module); dep == "emu" || strings.HasPrefix(dep, "emu/") {
			t.Errorf("capcheck depends on %s: the checker judges wire formats and imports nothing of the emulator", dep)
		}
	}
}

// The layout in docs/internals.md reads "imports go one way, down this
// list": a package listed below another must not sit at a higher level,
// so the list is the levels table drawn in order.
func TestLayoutListIsInImportOrder(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "internals.md"))
	if err != nil {
		t.Fatal(err)
	}
	// The list is the fenced block after "Imports go one way".
	_, after, _ := strings.Cut(string(doc), "Imports go one way")
	_, block, _ := strings.Cut(after, "```\n")
	block, _, _ = strings.Cut(block, "```")
	var order []string
	for _, l := range strings.Split(block, "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			if _, ok := levels[f[0]]; ok {
				order = append(order, f[0])
			}
		}
	}
	if len(order) < len(levels) {
		t.Fatalf("docs/internals.md's layout lists %d of the %d packages", len(order), len(levels))
	}
	for i := 1; i < len(order); i++ {
		if levels[order[i]] > levels[order[i-1]] {
			t.Errorf("docs/internals.md lists %s (level %d) below %s (level %d): it imports down the list, so it belongs above",
				order[i], levels[order[i]], order[i-1], levels[order[i-1]])
		}
	}
}

// moduleDeps lists the module's packages pkg depends on, directly or
// through another (go list -deps, without tests), pkg itself left out.
func moduleDeps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", "-f", "{{.ImportPath}}", module+pkg).Output()
	if err != nil {
		t.Skipf("SKIP: go list failed (%v): the imports of %s are not checked here", err, pkg)
	}
	var deps []string
	for _, d := range strings.Fields(string(out)) {
		if dep, ours := strings.CutPrefix(d, module); ours && dep != pkg {
			deps = append(deps, dep)
		}
	}
	return deps
}

// TestClockImportsNoProtocol: the virtual clock implements the clock
// interfaces of the leaf internal/clock (which roce aliases as roce.Clock
// and roce.Timer) and depends on nothing else of the module, so a clock
// never drags in the transport or a wire format it times.
func TestClockImportsNoProtocol(t *testing.T) {
	for _, dep := range moduleDeps(t, "internal/vclock") {
		if dep != "internal/clock" {
			t.Errorf("internal/vclock depends on %s: the clock imports internal/clock only, never a protocol package (roce, frames, ...)", dep)
		}
	}
}

// TestWallLoopImportsNoTransport: the wall-clock loop reads frames from
// its own Device interface (tap.Device is one), so it depends on the
// virtual clock it advances and nothing else of the module: not tap, not
// a protocol. The TAP backend and the fault-injecting wire hand it their
// devices.
func TestWallLoopImportsNoTransport(t *testing.T) {
	for _, dep := range moduleDeps(t, "internal/wallloop") {
		if dep != "internal/vclock" && dep != "internal/clock" {
			t.Errorf("internal/wallloop depends on %s: the loop takes a wallloop.Device, not a tap.Device, and imports the clocks only", dep)
		}
	}
}

// TestEmuImportsNoDevices: of the packages under emu/ only the live
// backend (emu/live) depends on tap, directly or through another. The
// runner takes a live backend through job.Devices (the fabric, whose
// fabric.Backend serves it, and the start barrier) and the wall-clock
// loop through wallloop.Device, so the emulator builds and runs without
// the device layer, and another backend needs no runner change.
func TestEmuImportsNoDevices(t *testing.T) {
	out, err := exec.Command("go", "list", module+"emu/...").Output()
	if err != nil {
		t.Skipf("SKIP: go list failed (%v): the emulator's imports are not checked here", err)
	}
	seen := 0
	for _, p := range strings.Fields(string(out)) {
		pkg := strings.TrimPrefix(p, module)
		if pkg == "emu/live" {
			continue
		}
		seen++
		for _, dep := range moduleDeps(t, pkg) {
			if dep == "tap" || dep == "emu/live" {
				t.Errorf("%s depends on %s: only the live backend (emu/live) may know devices; take them through job.Devices or fabric.Backend", pkg, dep)
			}
		}
	}
	if seen < 10 {
		t.Fatalf("go list saw %d packages under emu/", seen)
	}
}
